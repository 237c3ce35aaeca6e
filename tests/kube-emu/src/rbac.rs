//! Optional RBAC enforcement (`--authorize`): Roles, ClusterRoles and their bindings decide what
//! a service account may do, so least-privilege roles can be tested.

use serde_json::Value;

use crate::cluster::{Cluster, Identity};
use crate::status::ApiError;

/// One request, as RBAC sees it.
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: &'a str,
    /// API group.
    pub group: &'a str,
    /// `plural` or `plural/subresource`.
    pub resource: &'a str,
    /// Namespace, if namespaced.
    pub namespace: Option<&'a str>,
    /// Object name, if one.
    pub name: Option<&'a str>,
}

fn strings(v: &Value, k: &str) -> Vec<String> {
    v[k].as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

fn subject_matches(subject: &Value, who: &Identity, binding_ns: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str().unwrap_or_default() {
        "ServiceAccount" => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            who.user == format!("system:serviceaccount:{ns}:{name}")
        }
        "User" => who.user == name,
        "Group" => who.groups.iter().any(|g| g == name),
        _ => false,
    }
}

fn rule_allows(rule: &Value, a: &Attributes<'_>) -> bool {
    let any = |list: &[String], want: &str| list.iter().any(|x| x == "*" || x == want);
    let verbs = strings(rule, "verbs");
    let groups = strings(rule, "apiGroups");
    let resources = strings(rule, "resources");
    let names = strings(rule, "resourceNames");
    let resource_ok = resources.iter().any(|r| {
        r == "*"
            || r == a.resource
            || a.resource
                .split_once('/')
                .is_some_and(|(_, sub)| r == &format!("*/{sub}"))
    });
    let name_ok = names.is_empty() || a.name.is_some_and(|n| names.iter().any(|x| x == n));
    any(&verbs, a.verb) && any(&groups, a.group) && resource_ok && name_ok
}

fn role_rules(cluster: &Cluster, kind: &str, ns: &str, name: &str) -> Vec<Value> {
    let key = match kind {
        "ClusterRole" => {
            crate::store::ObjKey::new("clusterroles.rbac.authorization.k8s.io", "", name)
        }
        _ => crate::store::ObjKey::new("roles.rbac.authorization.k8s.io", ns, name),
    };
    cluster
        .store
        .get(&key)
        .and_then(|r| r["rules"].as_array().cloned())
        .unwrap_or_default()
}

/// Whether the identity may make the request.
pub fn allowed(cluster: &Cluster, who: &Identity, a: &Attributes<'_>) -> bool {
    if who.groups.iter().any(|g| g == "system:masters") {
        return true;
    }
    let bindings = cluster
        .store
        .list("clusterrolebindings.rbac.authorization.k8s.io", None)
        .0
        .into_iter()
        .chain(
            a.namespace
                .map(|ns| {
                    cluster
                        .store
                        .list("rolebindings.rbac.authorization.k8s.io", Some(ns))
                        .0
                })
                .unwrap_or_default(),
        );
    for (k, b) in bindings {
        if !b["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| subject_matches(s, who, &k.ns))
        {
            continue;
        }
        let kind = b
            .pointer("/roleRef/kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = b
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if role_rules(cluster, kind, &k.ns, name)
            .iter()
            .any(|r| rule_allows(r, a))
        {
            return true;
        }
    }
    false
}

/// The 403 Kubernetes returns for a denied request.
pub fn forbidden(who: &Identity, a: &Attributes<'_>) -> ApiError {
    let plural = a.resource.split('/').next().unwrap_or(a.resource);
    let gr = if a.group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{}", a.group)
    };
    let subject = match a.name {
        Some(n) => format!("{gr} \"{n}\""),
        None => gr,
    };
    let scope = match a.namespace {
        Some(ns) => format!(" in the namespace \"{ns}\""),
        None => " at the cluster scope".to_string(),
    };
    ApiError::forbidden(format!(
        "{subject} is forbidden: User \"{}\" cannot {} resource \"{}\" in API group \"{}\"{scope}",
        who.user, a.verb, a.resource, a.group
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let a = Attributes {
            verb: "patch",
            group: "dcs.dev",
            resource: "dorischangelogsyncs/status",
            namespace: Some("n"),
            name: Some("x"),
        };
        assert!(rule_allows(
            &json!({"verbs": ["patch"], "apiGroups": ["dcs.dev"], "resources": ["dorischangelogsyncs/status"]}),
            &a
        ));
        assert!(rule_allows(
            &json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/status"]}),
            &a
        ));
        assert!(!rule_allows(
            &json!({"verbs": ["patch"], "apiGroups": ["dcs.dev"], "resources": ["dorischangelogsyncs"]}),
            &a
        ));
        assert!(!rule_allows(
            &json!({"verbs": ["patch"], "apiGroups": ["dcs.dev"], "resources": ["dorischangelogsyncs/status"], "resourceNames": ["y"]}),
            &a
        ));
    }
}

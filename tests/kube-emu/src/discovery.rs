//! Discovery documents: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/{group}[/{version}]`.

use serde_json::{Value, json};

use crate::kinds::{Registry, ResourceInfo};
use crate::status::{ApiError, ApiResult};

/// The Kubernetes version the server claims.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-kube-emu", "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24.0",
        "compiler": "gc", "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn core_versions(address: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]})
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs[0]})
}

/// `/apis`.
pub fn groups(registry: &Registry) -> Value {
    let gs: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(g, vs)| group_entry(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/{group}`.
pub fn group(registry: &Registry, group: &str) -> ApiResult<Value> {
    let (g, vs) = registry
        .groups()
        .into_iter()
        .find(|(g, _)| g == group)
        .ok_or_else(ApiError::path_not_found)?;
    let mut e = group_entry(&g, &vs);
    e["kind"] = json!("APIGroup");
    e["apiVersion"] = json!("v1");
    Ok(e)
}

fn verbs() -> Vec<&'static str> {
    vec![
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
}

/// `/api/v1` and `/apis/{group}/{version}`.
pub fn resources(registry: &Registry, group: &str, version: &str) -> ApiResult<Value> {
    let mut out = Vec::new();
    for r in registry
        .all()
        .iter()
        .filter(|r| r.group == group && r.versions.iter().any(|v| v == version))
    {
        let mut e = json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
            "verbs": verbs(),
        });
        if !r.short_names.is_empty() {
            e["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            e["categories"] = json!(r.categories);
        }
        out.push(e);
        if r.has_status(version) {
            out.push(json!({"name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]}));
        }
        if crate::scale::paths(r, version).is_some() {
            out.push(json!({"name": format!("{}/scale", r.plural), "singularName": "", "namespaced": r.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
        if r.group.is_empty() && r.kind == "Pod" {
            out.push(json!({"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]}));
        }
        if r.group.is_empty() && r.kind == "ServiceAccount" {
            out.push(json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true, "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]}));
        }
    }
    if out.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}))
}

/// The Content-Type of aggregated discovery responses.
pub const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an Accept header asks for aggregated discovery (v2).
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|a| {
        let a = a.replace(' ', "");
        a.contains("g=apidiscovery.k8s.io")
            && a.contains("v=v2")
            && !a.contains("v=v2beta1")
            && a.contains("as=APIGroupDiscoveryList")
    })
}

fn resource_discovery(r: &ResourceInfo, version: &str) -> Value {
    let kind = json!({"group": r.group, "version": version, "kind": r.kind});
    let mut subresources = Vec::new();
    if r.has_status(version) {
        subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
    }
    if crate::scale::paths(r, version).is_some() {
        subresources.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
    }
    if r.group.is_empty() && r.kind == "Pod" {
        subresources.push(json!({"subresource": "log", "responseKind": {"group": "", "version": "", "kind": ""}, "verbs": ["get"]}));
    }
    let mut e = json!({
        "resource": r.plural, "responseKind": kind, "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular, "verbs": verbs(),
    });
    if !r.short_names.is_empty() {
        e["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        e["categories"] = json!(r.categories);
    }
    if !subresources.is_empty() {
        e["subresources"] = json!(subresources);
    }
    e
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2`) for `/api` (core) or `/apis` (groups).
pub fn aggregated(registry: &Registry, core: bool) -> Value {
    let all = registry.all();
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        registry.groups()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|(g, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = all
                        .iter()
                        .filter(|r| r.group == *g && r.versions.iter().any(|x| x == v))
                        .map(|r| resource_discovery(r, v))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": vs})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

//! The `/scale` subresource (`autoscaling/v1 Scale`) of Deployments, StatefulSets and custom
//! resources that declare `subresources.scale`.

use serde_json::{Value, json};

use crate::cluster::{Cluster, Target, WriteOpts};
use crate::kinds::ResourceInfo;
use crate::patch::{self, PatchType};
use crate::status::{ApiError, ApiResult};

/// Where replicas and the selector live in an object.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    /// `.spec.replicas`
    pub spec_replicas: String,
    /// `.status.replicas`
    pub status_replicas: String,
    /// `.status.selector`, if any.
    pub label_selector: Option<String>,
}

/// The scale paths of a resource at a version, if it has the subresource.
pub fn paths(info: &ResourceInfo, version: &str) -> Option<ScalePaths> {
    if let Some(crd) = &info.crd {
        let s = crd.get(version)?.scale.as_ref()?;
        return Some(ScalePaths {
            spec_replicas: s["specReplicasPath"].as_str()?.to_string(),
            status_replicas: s["statusReplicasPath"]
                .as_str()
                .unwrap_or(".status.replicas")
                .to_string(),
            label_selector: s["labelSelectorPath"].as_str().map(String::from),
        });
    }
    (info.group == "apps" && matches!(info.kind.as_str(), "Deployment" | "StatefulSet")).then(
        || ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        },
    )
}

fn pointer(path: &str) -> String {
    path.replace('.', "/")
}

fn selector_string(obj: &Value, p: &ScalePaths) -> String {
    if let Some(lp) = &p.label_selector {
        return obj
            .pointer(&pointer(lp))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
    }
    let mut parts: Vec<String> = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    parts.sort();
    parts.join(",")
}

/// The Scale view of an object.
pub fn scale_of(obj: &Value, p: &ScalePaths) -> Value {
    let m = &obj["metadata"];
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"], "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"]},
        "spec": {"replicas": obj.pointer(&pointer(&p.spec_replicas)).cloned().unwrap_or(json!(0))},
        "status": {"replicas": obj.pointer(&pointer(&p.status_replicas)).cloned().unwrap_or(json!(0)), "selector": selector_string(obj, p)},
    })
}

fn set_replicas(p: &ScalePaths, replicas: &Value, rv: Option<&Value>) -> Value {
    let mut patch = json!({});
    let mut cur = &mut patch;
    let parts: Vec<&str> = p.spec_replicas.trim_start_matches('.').split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            cur[*part] = replicas.clone();
        } else {
            cur = &mut cur[*part];
        }
    }
    if let Some(rv) = rv.filter(|r| r.as_str().is_some_and(|s| !s.is_empty())) {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    patch
}

/// Serves GET, PUT and PATCH of `/scale`.
pub fn handle(
    cluster: &Cluster,
    t: Target<'_>,
    method: &http::Method,
    body: &[u8],
    content_type: &str,
    opts: &WriteOpts,
) -> ApiResult<(u16, Value)> {
    let p = paths(t.info, t.version).ok_or_else(ApiError::path_not_found)?;
    let obj = cluster.get(t)?;
    let current = scale_of(&obj, &p);
    let desired = match *method {
        http::Method::GET => return Ok((200, current)),
        http::Method::PUT => serde_json::from_slice::<Value>(body)
            .map_err(|e| ApiError::bad_request(e.to_string()))?,
        http::Method::PATCH => {
            let patch: Value =
                serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let mut s = current.clone();
            match PatchType::from_content_type(content_type)? {
                PatchType::Json => patch::json_patch(&mut s, &patch)?,
                PatchType::Merge | PatchType::Apply => patch::merge_patch(&mut s, &patch)?,
                PatchType::Strategic => patch::strategic_merge(&mut s, &patch)?,
            }
            s
        }
        _ => {
            return Err(ApiError::method_not_allowed(
                "scale supports get, update and patch",
            ));
        }
    };
    let replicas = desired
        .pointer("/spec/replicas")
        .cloned()
        .unwrap_or(json!(0));
    if replicas.as_i64().is_none_or(|r| r < 0) {
        return Err(ApiError::invalid(
            "Scale.autoscaling",
            t.name,
            vec![crate::status::Cause {
                reason: "FieldValueInvalid",
                field: "spec.replicas".into(),
                message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            }],
        ));
    }
    let rv = (*method == http::Method::PUT)
        .then(|| desired.pointer("/metadata/resourceVersion"))
        .flatten();
    let patch = set_replicas(&p, &replicas, rv);
    let main = WriteOpts {
        subresource: None,
        ..opts.clone()
    };
    let updated = cluster.patch(t, PatchType::Merge, &patch, &main)?;
    Ok((200, scale_of(&updated, &p)))
}

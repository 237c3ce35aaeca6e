//! Patch types: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.

use serde_json::{Map, Value};

use crate::status::{ApiError, ApiResult};

/// The patch formats the server accepts, by content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml`
    Apply,
}

impl PatchType {
    /// The patch type of a request's Content-Type.
    pub fn from_content_type(ct: &str) -> ApiResult<Self> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/json-patch+json" => Ok(Self::Json),
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {other}"
            ))),
        }
    }
}

/// Applies an RFC 6902 JSON patch.
pub fn json_patch(doc: &mut Value, patch: &Value) -> ApiResult<()> {
    let p: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "the server rejected our request due to an error in our request: {e}"
        ))
    })?;
    // Like the API server (evanphx/json-patch), a `test` of a missing path against `null`
    // passes: kube-rs's finalizer() guards the first finalizer with exactly that.
    let mut original = doc.clone();
    for op in &p.0 {
        if let json_patch::PatchOperation::Test(t) = op
            && t.value.is_null()
            && doc.pointer(t.path.as_str()).is_none()
        {
            continue;
        }
        if let Err(e) = json_patch::patch(doc, std::slice::from_ref(op)) {
            // A patch applies whole or not at all.
            std::mem::swap(doc, &mut original);
            return Err(ApiError::invalid_patch(e.to_string()));
        }
    }
    Ok(())
}

/// Applies an RFC 7386 merge patch.
pub fn merge_patch(doc: &mut Value, patch: &Value) -> ApiResult<()> {
    if !patch.is_object() {
        return Err(ApiError::bad_request("merge patch must be a JSON object"));
    }
    json_patch::merge(doc, patch);
    Ok(())
}

impl ApiError {
    /// 422 for a JSON patch that cannot be applied (as the API server reports it).
    pub fn invalid_patch(message: String) -> Self {
        ApiError {
            code: 422,
            reason: "Invalid",
            message,
            details: None,
        }
    }
}

/// Merge keys of the lists Kubernetes merges by key, in the order tried.
const MERGE_KEYS: &[&str] = &[
    "name",
    "containerPort",
    "mountPath",
    "type",
    "uid",
    "ip",
    "devicePath",
];

/// The key a list of objects is merged on, if the patch's items all carry one.
pub fn merge_key(items: &[Value]) -> Option<&'static str> {
    if items.is_empty() || !items.iter().all(Value::is_object) {
        return None;
    }
    MERGE_KEYS
        .iter()
        .copied()
        .find(|k| items.iter().all(|i| i.get(*k).is_some()))
}

/// Applies a strategic merge patch: a merge patch where lists of objects merge by their key,
/// `finalizers` merges as a set, and the `$patch`, `$setElementOrder`, `$retainKeys` and
/// `$deleteFromPrimitiveList` directives kubectl sends are honoured.
pub fn strategic_merge(doc: &mut Value, patch: &Value) -> ApiResult<()> {
    if !patch.is_object() {
        return Err(ApiError::bad_request(
            "strategic merge patch must be a JSON object",
        ));
    }
    merge_object(doc, patch);
    Ok(())
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn merge_object(target: &mut Value, patch: &Value) {
    let Some(pm) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if pm.get("$patch").and_then(Value::as_str) == Some("replace") {
        *target = strip_directives(patch);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    for (k, v) in pm {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(remove)) = (
                target.get_mut(field).and_then(Value::as_array_mut),
                v.as_array(),
            ) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let t = target.as_object_mut().expect("made an object above");
        match v {
            Value::Null => {
                t.remove(k);
            }
            Value::Object(o) if o.get("$patch").and_then(Value::as_str) == Some("delete") => {
                t.remove(k);
            }
            Value::Object(_) => merge_object(t.entry(k.clone()).or_insert(Value::Null), v),
            Value::Array(items) => {
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                merge_list(k, slot, items);
            }
            other => {
                t.insert(k.clone(), other.clone());
            }
        }
    }
}

fn merge_list(field: &str, target: &mut Value, items: &[Value]) {
    if field == "finalizers" {
        let mut list = target.as_array().cloned().unwrap_or_default();
        for i in items {
            if !list.contains(i) {
                list.push(i.clone());
            }
        }
        *target = Value::Array(list);
        return;
    }
    let Some(key) = merge_key(items) else {
        *target = Value::Array(items.iter().map(strip_directives).collect());
        return;
    };
    let mut list = target.as_array().cloned().unwrap_or_default();
    for item in items {
        let id = &item[key];
        let pos = list.iter().position(|x| &x[key] == id);
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(p), true) => {
                list.remove(p);
            }
            (None, true) => {}
            (Some(p), false) => merge_object(&mut list[p], item),
            (None, false) => list.push(strip_directives(item)),
        }
    }
    *target = Value::Array(list);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let mut doc = json!({"spec": {"containers": [
            {"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}]},
            {"name": "b", "image": "y"}]}});
        strategic_merge(
            &mut doc,
            &json!({"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}], "containers": [
                {"name": "a", "env": [{"name": "F", "value": "2"}]},
                {"name": "b", "$patch": "delete"}]}}),
        )
        .unwrap();
        assert_eq!(
            doc,
            json!({"spec": {"containers": [{"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]}]}})
        );
    }

    #[test]
    fn json_patch_failure_is_invalid() {
        let mut doc = json!({"a": 1});
        let e =
            json_patch(&mut doc, &json!([{"op": "test", "path": "/a", "value": 2}])).unwrap_err();
        assert_eq!(e.code, 422);
        json_patch(
            &mut doc,
            &json!([{"op": "replace", "path": "/a", "value": 3}]),
        )
        .unwrap();
        assert_eq!(doc, json!({"a": 3}));
        // A failing op leaves the document as it was.
        let e = json_patch(
            &mut doc,
            &json!([{"op": "replace", "path": "/a", "value": 4}, {"op": "test", "path": "/a", "value": 9}]),
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(doc, json!({"a": 3}));
    }

    #[test]
    fn testing_a_missing_path_against_null_passes() {
        let mut doc = json!({"metadata": {}});
        json_patch(
            &mut doc,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["dcs.dev/cleanup"]}
            ]),
        )
        .unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"finalizers": ["dcs.dev/cleanup"]}})
        );
    }
}

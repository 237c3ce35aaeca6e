//! CustomResourceDefinitions: turning one into a served resource, and the structural schema
//! work done on custom resources (pruning, defaults, validation).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::kinds::{CrdVersion, ResourceInfo};
use crate::status::{ApiError, ApiResult, Cause};

/// Orders versions as Kubernetes prefers them: GA over beta over alpha, higher numbers first.
fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stage, n) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stage, major, n)
}

/// Checks a CRD and derives the resource it serves.
pub fn resource_of(crd: &Value) -> ApiResult<ResourceInfo> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let spec = &crd["spec"];
    let s = |p: &str| {
        spec.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (group, plural, kind) = (s("/group"), s("/names/plural"), s("/names/kind"));
    let mut causes = Vec::new();
    let mut cause = |field: &str, message: String| {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message,
        })
    };
    if group.is_empty() {
        cause("spec.group", "Required value".into());
    }
    if plural.is_empty() {
        cause("spec.names.plural", "Required value".into());
    }
    if kind.is_empty() {
        cause("spec.names.kind", "Required value".into());
    }
    if name != format!("{plural}.{group}") {
        cause(
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        );
    }
    let scope = s("/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        cause(
            "spec.scope",
            format!(
                "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        );
    }
    let mut versions = BTreeMap::new();
    let mut served = Vec::new();
    let mut storage = 0;
    for v in spec["versions"].as_array().into_iter().flatten() {
        let vname = v["name"].as_str().unwrap_or_default().to_string();
        if v["storage"].as_bool() == Some(true) {
            storage += 1;
        }
        if v["served"].as_bool() != Some(false) {
            served.push(vname.clone());
        }
        versions.insert(
            vname,
            CrdVersion {
                schema: v.pointer("/schema/openAPIV3Schema").cloned(),
                printer_columns: v["additionalPrinterColumns"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                status_subresource: v.pointer("/subresources/status").is_some(),
                scale: v.pointer("/subresources/scale").cloned(),
            },
        );
    }
    if storage != 1 {
        cause(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version".into(),
        );
    }
    if served.is_empty() {
        cause(
            "spec.versions",
            "Required value: must have at least one served version".into(),
        );
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "CustomResourceDefinition.apiextensions.k8s.io",
            name,
            causes,
        ));
    }
    served.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    let strings = |p: &str| -> Vec<String> {
        spec.pointer(p)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect()
    };
    Ok(ResourceInfo {
        group,
        versions: served,
        singular: {
            let x = s("/names/singular");
            if x.is_empty() { kind.to_lowercase() } else { x }
        },
        kind,
        plural,
        namespaced: scope == "Namespaced",
        short_names: strings("/names/shortNames"),
        categories: strings("/names/categories"),
        status_subresource: false,
        has_generation: true,
        crd: Some(Arc::new(versions)),
    })
}

/// The status a CRD gets once it is served.
pub fn established_status(crd: &Value, now: &str) -> Value {
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .map(|v| v["name"].clone())
        .collect();
    let cond = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg});
    json!({
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": crd["spec"]["names"],
        "storedVersions": storage,
    })
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// Drops fields the schema does not know (unless it preserves unknown fields).
pub fn prune(schema: &Value, v: &mut Value) {
    prune_reporting(schema, v, "", &mut Vec::new());
}

/// Like [`prune`], collecting the paths of the dropped fields.
pub fn prune_reporting(schema: &Value, v: &mut Value, path: &str, removed: &mut Vec<String>) {
    let preserve = schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
    if preserve && schema.get("properties").is_none() {
        return;
    }
    match v {
        Value::Object(m) => {
            if let Some(props) = schema["properties"].as_object() {
                if !preserve {
                    let unknown: Vec<String> = m
                        .keys()
                        .filter(|k| !props.contains_key(*k))
                        .cloned()
                        .collect();
                    for k in unknown {
                        m.remove(&k);
                        removed.push(join(path, &k));
                    }
                }
                // Nulls of non-nullable fields are dropped before defaulting, as Kubernetes does.
                m.retain(|k, v| {
                    !(v.is_null()
                        && props
                            .get(k)
                            .is_some_and(|s| s["nullable"].as_bool() != Some(true)))
                });
                for (k, child) in m.iter_mut() {
                    if let Some(s) = props.get(k) {
                        prune_reporting(s, child, &join(path, k), removed);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in m.iter_mut() {
                    prune_reporting(ap, child, &join(path, k), removed);
                }
            } else if !preserve
                && schema["type"].as_str() == Some("object")
                && schema.get("additionalProperties").is_none()
            {
                removed.extend(m.keys().map(|k| join(path, k)));
                m.clear();
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_reporting(s, item, &format!("{path}[{i}]"), removed);
                }
            }
        }
        _ => {}
    }
}

/// Fills in schema defaults for absent fields.
pub fn default(schema: &Value, v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = schema["properties"].as_object() {
                for (k, s) in props {
                    if !m.contains_key(k)
                        && let Some(d) = s.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = m.get_mut(k) {
                        default(s, child);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for child in m.values_mut() {
                    default(ap, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for i in items {
                    default(s, i);
                }
            }
        }
        _ => {}
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

/// Validates a value against a structural schema, collecting causes.
pub fn validate(schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    let invalid = |causes: &mut Vec<Cause>, msg: String| {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: path.to_string(),
            message: format!("Invalid value: {}: {msg}", shown(v)),
        })
    };
    if v.is_null() {
        if schema["nullable"].as_bool() != Some(true) && schema.get("type").is_some() {
            invalid(
                causes,
                format!(
                    "{path} in body must be of type {}: \"null\"",
                    schema["type"].as_str().unwrap_or("object")
                ),
            );
        }
        return;
    }
    let int_or_string = schema["x-kubernetes-int-or-string"].as_bool() == Some(true);
    if let Some(t) = schema["type"].as_str() {
        let actual = type_of(v);
        let ok = actual == t
            || (t == "number" && actual == "integer")
            || (int_or_string && (actual == "integer" || actual == "string"));
        if !ok {
            causes.push(Cause {
                reason: "FieldValueTypeInvalid",
                field: path.to_string(),
                message: format!(
                    "Invalid value: {}: {path} in body must be of type {t}: \"{actual}\"",
                    shown(v)
                ),
            });
            return;
        }
    }
    if let Some(e) = schema["enum"].as_array()
        && !e.contains(v)
    {
        let allowed: Vec<String> = e.iter().map(shown).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: path.to_string(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                shown(v),
                allowed.join(", ")
            ),
        });
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = schema["minimum"].as_f64()
            && n < min
        {
            invalid(
                causes,
                format!(
                    "{path} in body should be greater than or equal to {}",
                    schema["minimum"]
                ),
            );
        }
        if let Some(max) = schema["maximum"].as_f64()
            && n > max
        {
            invalid(
                causes,
                format!(
                    "{path} in body should be less than or equal to {}",
                    schema["maximum"]
                ),
            );
        }
    }
    if let Some(s) = v.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema["minLength"].as_u64()
            && len < min
        {
            invalid(
                causes,
                format!("{path} in body should be at least {min} chars long"),
            );
        }
        if let Some(max) = schema["maxLength"].as_u64()
            && len > max
        {
            causes.push(Cause {
                reason: "FieldValueTooLong",
                field: path.into(),
                message: format!("Too long: may not be more than {max} bytes"),
            });
        }
        if let Some(p) = schema["pattern"].as_str()
            && let Ok(re) = regex::Regex::new(p)
            && !re.is_match(s)
        {
            invalid(causes, format!("{path} in body should match '{p}'"));
        }
    }
    for rule in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(expr) = rule["rule"].as_str() else {
            continue;
        };
        if crate::cel::check(expr, v) == crate::cel::Outcome::Fail {
            let message = rule["message"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| format!("failed rule: {expr}"));
            let mut field = path.to_string();
            if let Some(fp) = rule["fieldPath"].as_str() {
                field.push_str(fp);
            }
            let shown_value = if v.is_object() {
                "\"object\"".to_string()
            } else if v.is_array() {
                "\"array\"".to_string()
            } else {
                shown(v)
            };
            causes.push(Cause {
                reason: "FieldValueInvalid",
                field,
                message: format!("Invalid value: {shown_value}: {message}"),
            });
        }
    }
    match v {
        Value::Object(m) => {
            for r in schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !m.contains_key(r) {
                    causes.push(Cause {
                        reason: "FieldValueRequired",
                        field: join(path, r),
                        message: "Required value".into(),
                    });
                }
            }
            if let Some(props) = schema["properties"].as_object() {
                for (k, child) in m {
                    if let Some(s) = props.get(k) {
                        validate(s, child, &join(path, k), causes);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in m {
                    validate(ap, child, &join(path, k), causes);
                }
            }
        }
        Value::Array(items) => {
            if let Some(min) = schema["minItems"].as_u64()
                && (items.len() as u64) < min
            {
                invalid(
                    causes,
                    format!("{path} in body should have at least {min} items"),
                );
            }
            if let Some(max) = schema["maxItems"].as_u64()
                && items.len() as u64 > max
            {
                causes.push(Cause {
                    reason: "FieldValueTooMany",
                    field: path.into(),
                    message: format!("Too many: {}: must have at most {max} items", items.len()),
                });
            }
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate(s, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

/// Prunes, defaults and validates a custom resource against its version's schema. Metadata is
/// left alone (the schema cannot constrain it beyond name and generateName).
pub fn admit(info: &ResourceInfo, version: &str, obj: &mut Value, strict: bool) -> ApiResult<()> {
    let Some(schema) = info
        .crd
        .as_ref()
        .and_then(|c| c.get(version))
        .and_then(|v| v.schema.clone())
    else {
        return Ok(());
    };
    let metadata = obj.get("metadata").cloned();
    let (api_version, kind) = (obj["apiVersion"].clone(), obj["kind"].clone());
    let mut schema_no_meta = schema.clone();
    if let Some(p) = schema_no_meta["properties"].as_object_mut() {
        p.insert(
            "metadata".into(),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
        p.insert("apiVersion".into(), json!({}));
        p.insert("kind".into(), json!({}));
    }
    let mut removed = Vec::new();
    prune_reporting(&schema_no_meta, obj, "", &mut removed);
    if strict && !removed.is_empty() {
        let list: Vec<String> = removed
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{} in version \"{version}\" cannot be handled as a {}: strict decoding error: {}",
            info.kind,
            info.kind,
            list.join(", ")
        )));
    }
    default(&schema_no_meta, obj);
    if let Some(m) = metadata {
        obj["metadata"] = m;
    }
    if !api_version.is_null() {
        obj["apiVersion"] = api_version;
    }
    if !kind.is_null() {
        obj["kind"] = kind;
    }
    let mut causes = Vec::new();
    validate(&schema_no_meta, obj, "", &mut causes);
    if causes.is_empty() {
        Ok(())
    } else {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Err(ApiError::invalid(&info.kind_group(), &name, causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ResourceInfo {
        resource_of(&json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "required": ["size"], "properties": {
                            "size": {"type": "integer", "minimum": 1},
                            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"}}},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}))
        .unwrap()
    }

    #[test]
    fn defaults_and_pruning_apply() {
        let mut o = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2, "junk": 1}});
        admit(&info(), "v1", &mut o, false).unwrap();
        assert_eq!(o["spec"], json!({"size": 2, "mode": "a"}));
    }

    #[test]
    fn invalid_values_report_causes() {
        let mut o = json!({"metadata": {"name": "w"}, "spec": {"size": 0, "mode": "c"}});
        let e = admit(&info(), "v1", &mut o, false).unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        let fields: Vec<&str> = e.details.as_ref().unwrap()["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap())
            .collect();
        assert_eq!(fields, vec!["spec.mode", "spec.size"]);
    }

    #[test]
    fn nulls_of_non_nullable_fields_are_dropped_then_defaulted() {
        let mut o =
            json!({"metadata": {"name": "w"}, "spec": {"size": 2, "mode": null}, "status": null});
        admit(&info(), "v1", &mut o, true).unwrap();
        assert_eq!(o["spec"]["mode"], "a");
        assert!(o.get("status").is_none());
    }

    #[test]
    fn strict_field_validation_names_unknown_fields() {
        let mut o = json!({"metadata": {"name": "w"}, "spec": {"size": 2, "junk": 1}});
        let e = admit(&info(), "v1", &mut o, true).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains("unknown field \"spec.junk\""),
            "{}",
            e.message
        );
    }

    #[test]
    fn crd_name_must_match_names() {
        let e = resource_of(&json!({"metadata": {"name": "x"}, "spec": {"group": "g.io", "scope": "Namespaced", "names": {"plural": "ps", "kind": "P"}, "versions": [{"name": "v1", "served": true, "storage": true}]}})).unwrap_err();
        assert_eq!(e.code, 422);
    }
}

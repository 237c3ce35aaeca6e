//! `meta.k8s.io/v1 Table` responses, as kubectl asks for them in `kubectl get`.

use serde_json::{Value, json};

use crate::kinds::ResourceInfo;

/// Renders an age as kubectl shows it (`42s`, `5m`, `3h`, `2d`).
pub fn age(timestamp: &str) -> String {
    let Ok(t) = timestamp.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = (jiff::Timestamp::now().as_second() - t.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Evaluates the JSONPath subset printer columns use: `.a.b`, `.a[0]`, `.a[?(@.k=="v")].b`.
pub fn json_path(obj: &Value, path: &str) -> Option<Value> {
    let mut cur = obj.clone();
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}');
    rest = rest.strip_prefix('$').unwrap_or(rest);
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?.clone();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, v) = filter.split_once("==")?;
                let want = v.trim().trim_matches(|c| c == '"' || c == '\'');
                cur = cur
                    .as_array()?
                    .iter()
                    .find(|i| i.get(k.trim()).and_then(Value::as_str) == Some(want))?
                    .clone();
            } else {
                cur = cur.get(inner.parse::<usize>().ok()?)?.clone();
            }
        } else {
            return None;
        }
    }
    Some(cur)
}

fn cell(v: Option<Value>, ty: &str) -> Value {
    match v {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if ty == "date" => json!(age(&s)),
        Some(v) => v,
    }
}

fn column(name: &str, ty: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

/// A column definition and how to compute its cell.
type Column = (Value, fn(&Value) -> Value);

fn builtin_columns(kind: &str) -> Vec<Column> {
    let string = |n: &str| column(n, "string", "", "", 0);
    match kind {
        "Pod" => vec![
            (string("Ready"), |o| {
                let cs = o
                    .pointer("/status/containerStatuses")
                    .and_then(Value::as_array);
                let total = o
                    .pointer("/spec/containers")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let ready = cs.map_or(0, |c| {
                    c.iter().filter(|c| c["ready"] == json!(true)).count()
                });
                json!(format!("{ready}/{total}"))
            }),
            (string("Status"), |o| {
                if o.pointer("/metadata/deletionTimestamp").is_some() {
                    return json!("Terminating");
                }
                let waiting = o
                    .pointer("/status/containerStatuses/0/state/waiting/reason")
                    .or_else(|| o.pointer("/status/containerStatuses/0/state/terminated/reason"));
                json!(
                    waiting
                        .or(o.pointer("/status/phase"))
                        .and_then(Value::as_str)
                        .unwrap_or("Pending")
                )
            }),
            (column("Restarts", "integer", "", "", 0), |o| {
                let cs = o
                    .pointer("/status/containerStatuses")
                    .and_then(Value::as_array);
                json!(cs.map_or(0, |c| {
                    c.iter()
                        .map(|c| c["restartCount"].as_i64().unwrap_or(0))
                        .sum::<i64>()
                }))
            }),
        ],
        "Deployment" | "StatefulSet" => vec![(string("Ready"), |o| {
            json!(format!(
                "{}/{}",
                o.pointer("/status/readyReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
                o.pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1)
            ))
        })],
        "Job" => vec![(string("Completions"), |o| {
            json!(format!(
                "{}/{}",
                o.pointer("/status/succeeded")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
                o.pointer("/spec/completions")
                    .and_then(Value::as_i64)
                    .unwrap_or(1)
            ))
        })],
        "Namespace" => vec![(string("Status"), |o| {
            o.pointer("/status/phase")
                .cloned()
                .unwrap_or(json!("Active"))
        })],
        "CustomResourceDefinition" => vec![(column("Created At", "date", "", "", 0), |o| {
            o.pointer("/metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null)
        })],
        _ => vec![],
    }
}

/// Builds a Table of objects for a resource at a version.
pub fn render(info: &ResourceInfo, version: &str, objects: &[Value], list_meta: Value) -> Value {
    let mut columns = vec![column(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace.",
        0,
    )];
    let printer = info
        .crd
        .as_ref()
        .and_then(|c| c.get(version))
        .map(|v| v.printer_columns.clone())
        .unwrap_or_default();
    let builtin = builtin_columns(&info.kind);
    let custom_age = info.is_custom() && printer.is_empty();
    for p in &printer {
        columns.push(column(
            p["name"].as_str().unwrap_or_default(),
            p["type"].as_str().unwrap_or("string"),
            p["format"].as_str().unwrap_or_default(),
            p["description"].as_str().unwrap_or_default(),
            p["priority"].as_i64().unwrap_or(0),
        ));
    }
    for (c, _) in &builtin {
        columns.push(c.clone());
    }
    let age_column = (!info.is_custom() || custom_age) && info.kind != "CustomResourceDefinition";
    if age_column {
        columns.push(column("Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0));
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![o.pointer("/metadata/name").cloned().unwrap_or(Value::Null)];
            for p in &printer {
                let ty = p["type"].as_str().unwrap_or("string");
                cells.push(cell(json_path(o, p["jsonPath"].as_str().unwrap_or_default()), ty));
            }
            for (_, f) in &builtin {
                cells.push(f(o));
            }
            if age_column {
                cells.push(json!(age(o.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or_default())));
            }
            json!({
                "cells": cells,
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]},
            })
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": columns, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_subset() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}, "spec": {"n": [5]}});
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(json_path(&o, ".spec.n[0]"), Some(json!(5)));
        assert_eq!(json_path(&o, ".spec.missing"), None);
    }
}

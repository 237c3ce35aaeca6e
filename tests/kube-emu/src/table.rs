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

fn str_of<'a>(o: &'a Value, pointer: &str) -> &'a str {
    o.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The columns of `kubectl get events` (core and events.k8s.io alike): the ones kubectl shows by
/// default, then the `-o wide` ones (priority 1), with the name last.
fn event_columns() -> Vec<Column> {
    let string = |n: &str, priority: i64| column(n, "string", "", "", priority);
    // The first time an event was seen, as the API server's printer computes it.
    fn first_seen(o: &Value) -> &str {
        match str_of(o, "/firstTimestamp") {
            "" => str_of(o, "/eventTime"),
            t => t,
        }
    }
    vec![
        (string("Last Seen", 0), |o| {
            let last = match (
                str_of(o, "/series/lastObservedTime"),
                str_of(o, "/lastTimestamp"),
            ) {
                ("", "") => first_seen(o),
                ("", t) | (t, _) => t,
            };
            json!(age(last))
        }),
        (string("Type", 0), |o| json!(str_of(o, "/type"))),
        (string("Reason", 0), |o| json!(str_of(o, "/reason"))),
        (string("Object", 0), |o| {
            let kind = str_of(o, "/involvedObject/kind").to_lowercase();
            json!(match str_of(o, "/involvedObject/name") {
                "" => kind,
                name => format!("{kind}/{name}"),
            })
        }),
        (string("Subobject", 1), |o| {
            json!(str_of(o, "/involvedObject/fieldPath"))
        }),
        (string("Source", 1), |o| {
            let or = |a: &'static str, b: &'static str| match str_of(o, a) {
                "" => str_of(o, b),
                v => v,
            };
            json!(match (
                or("/source/component", "/reportingComponent"),
                or("/source/host", "/reportingInstance"),
            ) {
                ("", _) => String::new(),
                (c, "") => c.to_string(),
                (c, i) => format!("{c}, {i}"),
            })
        }),
        (string("Message", 0), |o| {
            json!(str_of(o, "/message").trim())
        }),
        (string("First Seen", 1), |o| json!(age(first_seen(o)))),
        (string("Count", 1), |o| {
            let count = o
                .pointer("/series/count")
                .or_else(|| o.get("count"))
                .and_then(Value::as_i64)
                .filter(|c| *c > 0)
                .unwrap_or(1);
            json!(count)
        }),
        (column("Name", "string", "name", "", 1), |o| {
            o.pointer("/metadata/name").cloned().unwrap_or(Value::Null)
        }),
    ]
}

/// A Table of Events (core or events.k8s.io, computed from the stored core shape).
fn render_events(info: &ResourceInfo, objects: &[Value], list_meta: Value) -> Value {
    let columns = event_columns();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let core = crate::events::to_storage(info, o.clone());
            let cells: Vec<Value> = columns.iter().map(|(_, f)| f(&core)).collect();
            json!({
                "cells": cells,
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]},
            })
        })
        .collect();
    let definitions: Vec<Value> = columns.into_iter().map(|(c, _)| c).collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": definitions, "rows": rows})
}

/// Builds a Table of objects for a resource at a version.
pub fn render(info: &ResourceInfo, version: &str, objects: &[Value], list_meta: Value) -> Value {
    if info.kind == "Event" && !info.is_custom() {
        return render_events(info, objects, list_meta);
    }
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

    #[test]
    fn events_get_kubectl_columns() {
        let builtins = crate::kinds::builtins();
        let core = builtins
            .iter()
            .find(|i| i.group.is_empty() && i.kind == "Event")
            .unwrap();
        let new = builtins
            .iter()
            .find(|i| crate::events::is_new_events(i))
            .unwrap();
        // Ten minutes ago: "10m" however long the test takes.
        let ts = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(600)).to_string();
        let event = json!({"metadata": {"name": "web.1"}, "type": "Warning", "reason": "Unhealthy",
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{main}"},
            "message": "Readiness probe failed: x\n", "source": {"component": "kubelet"},
            "reportingInstance": "node-1", "firstTimestamp": ts, "lastTimestamp": ts, "count": 3});
        let t = render(core, "v1", std::slice::from_ref(&event), json!({}));
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject",
                "Source",
                "Message",
                "First Seen",
                "Count",
                "Name"
            ]
        );
        let default: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["priority"] == 0)
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            default,
            ["Last Seen", "Type", "Reason", "Object", "Message"]
        );
        let cells = &t["rows"][0]["cells"];
        assert_eq!(
            cells,
            &json!([
                "10m",
                "Warning",
                "Unhealthy",
                "pod/web",
                "spec.containers{main}",
                "kubelet, node-1",
                "Readiness probe failed: x",
                "10m",
                3,
                "web.1"
            ])
        );
        // The events.k8s.io view of the same event renders the same row.
        let presented = crate::events::from_storage(new, event.clone());
        assert_eq!(
            render(new, "v1", &[presented], json!({}))["rows"][0]["cells"],
            *cells
        );
        // A new-style singleton event: eventTime only, no count.
        let single = json!({"metadata": {"name": "s"}, "eventTime": ts, "regarding": {"kind": "DorisChangelogSync"}, "note": "n", "reportingController": "dcs"});
        let cells = &render(new, "v1", &[single], json!({}))["rows"][0]["cells"];
        assert_eq!(cells[0], "10m");
        assert_eq!(cells[3], "dorischangelogsync");
        assert_eq!(cells[5], "dcs");
        assert_eq!(cells[8], 1);
    }
}

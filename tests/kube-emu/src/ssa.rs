//! Field ownership (`metadata.managedFields`) and server-side apply.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::patch::merge_key;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Elem {
    /// An object field.
    Field(String),
    /// A list item identified by its merge key, as the JSON `{"name":"x"}`.
    Key(String),
}

/// A leaf field path.
pub type FieldPath = Vec<Elem>;

/// Renders a path as Kubernetes prints it in conflicts: `.spec.containers[name="a"].image`.
pub fn path_string(p: &FieldPath) -> String {
    let mut s = String::new();
    for e in p {
        match e {
            Elem::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            Elem::Key(k) => {
                let v: Value = serde_json::from_str(k).unwrap_or(Value::Null);
                let inner: Vec<String> = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                s.push_str(&format!("[{}]", inner.join(",")));
            }
        }
    }
    s
}

const SKIPPED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

/// Which top-level part of an object a write may own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything except `status` (main endpoint of a kind with a status subresource).
    NoStatus,
    /// Only `status` (the `/status` subresource).
    StatusOnly,
    /// Everything (kinds without a status subresource).
    All,
}

/// Leaf paths an object sets, within a scope.
pub fn leaves(obj: &Value, scope: Scope) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    let Some(m) = obj.as_object() else { return out };
    for (k, v) in m {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        let in_scope = match scope {
            Scope::NoStatus => k != "status",
            Scope::StatusOnly => k == "status",
            Scope::All => true,
        };
        if !in_scope {
            continue;
        }
        if k == "metadata" {
            for (mk, mv) in v.as_object().into_iter().flatten() {
                if !SKIPPED_METADATA.contains(&mk.as_str()) {
                    walk(
                        mv,
                        vec![Elem::Field(k.clone()), Elem::Field(mk.clone())],
                        &mut out,
                    );
                }
            }
            continue;
        }
        walk(v, vec![Elem::Field(k.clone())], &mut out);
    }
    out
}

fn key_json(item: &Value, key: &str) -> String {
    json!({ key: item[key] }).to_string()
}

fn walk(v: &Value, path: FieldPath, out: &mut BTreeSet<FieldPath>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let mut p = path.clone();
                p.push(Elem::Field(k.clone()));
                walk(v, p, out);
            }
        }
        Value::Array(items) => match merge_key(items) {
            Some(key) => {
                for item in items {
                    let mut p = path.clone();
                    p.push(Elem::Key(key_json(item, key)));
                    walk(item, p, out);
                }
            }
            None => {
                out.insert(path);
            }
        },
        _ => {
            out.insert(path);
        }
    }
}

fn find_item<'a>(items: &'a [Value], k: &str) -> Option<(usize, &'a Value)> {
    let want: Value = serde_json::from_str(k).ok()?;
    let (key, id) = want.as_object()?.iter().next()?;
    items
        .iter()
        .enumerate()
        .find(|(_, i)| i.get(key) == Some(id))
}

/// The value at a path.
pub fn get_path<'a>(v: &'a Value, p: &FieldPath) -> Option<&'a Value> {
    let mut cur = v;
    for e in p {
        cur = match e {
            Elem::Field(f) => cur.get(f)?,
            Elem::Key(k) => find_item(cur.as_array()?, k)?.1,
        };
    }
    Some(cur)
}

/// Removes the value at a path, and parents left empty by the removal.
pub fn remove_path(v: &mut Value, p: &[Elem]) {
    let Some((last, parent)) = p.split_last() else {
        return;
    };
    let mut cur = &mut *v;
    for e in parent {
        let next = match e {
            Elem::Field(f) => cur.get_mut(f),
            Elem::Key(k) => match cur.as_array() {
                Some(items) => match find_item(items, k) {
                    Some((i, _)) => cur.get_mut(i),
                    None => None,
                },
                None => None,
            },
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match last {
        Elem::Field(f) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(f);
            }
        }
        Elem::Key(k) => {
            if let Some(items) = cur.as_array_mut()
                && let Some((i, _)) = find_item(items, k)
            {
                items.remove(i);
            }
        }
    }
    let now_empty = match get_path(v, &parent.to_vec()) {
        Some(Value::Object(m)) => m.is_empty(),
        _ => false,
    };
    if now_empty && parent.len() > 1 {
        remove_path(v, parent);
    }
}

/// Merges an applied configuration into a live object: objects merge, keyed lists merge by key,
/// everything else is replaced.
pub fn apply_merge(live: &mut Value, applied: &Value) {
    match (live.as_object_mut(), applied.as_object()) {
        (Some(l), Some(a)) => {
            for (k, av) in a {
                match l.get_mut(k) {
                    Some(lv) => apply_merge(lv, av),
                    None => {
                        l.insert(k.clone(), av.clone());
                    }
                }
            }
        }
        _ => {
            if let (Some(l), Some(a)) = (live.as_array(), applied.as_array())
                && let Some(key) = merge_key(a)
                && l.iter().all(|i| i.get(key).is_some())
            {
                let mut out = l.clone();
                for item in a {
                    match out.iter_mut().find(|x| x[key] == item[key]) {
                        Some(x) => apply_merge(x, item),
                        None => out.push(item.clone()),
                    }
                }
                *live = Value::Array(out);
                return;
            }
            *live = applied.clone();
        }
    }
}

/// One entry of `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedEntry {
    /// The field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// `apiVersion` the fields were written at.
    pub api_version: String,
    /// When.
    pub time: String,
    /// `""` or `status`.
    pub subresource: String,
    /// Owned leaf paths.
    pub fields: BTreeSet<FieldPath>,
}

fn to_fields_v1(fields: &BTreeSet<FieldPath>) -> Value {
    let mut root = Map::new();
    for p in fields {
        let mut cur = &mut root;
        for e in p {
            let k = match e {
                Elem::Field(f) => format!("f:{f}"),
                Elem::Key(k) => format!("k:{k}"),
            };
            cur = cur
                .entry(k)
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("built as objects");
        }
    }
    Value::Object(root)
}

fn from_fields_v1(v: &Value, path: FieldPath, out: &mut BTreeSet<FieldPath>) {
    let Some(m) = v.as_object() else { return };
    let children: Vec<_> = m.iter().filter(|(k, _)| k.as_str() != ".").collect();
    if children.is_empty() {
        if !path.is_empty() {
            out.insert(path);
        }
        return;
    }
    for (k, v) in children {
        let e = if let Some(f) = k.strip_prefix("f:") {
            Elem::Field(f.to_string())
        } else if let Some(key) = k.strip_prefix("k:") {
            Elem::Key(key.to_string())
        } else {
            continue;
        };
        let mut p = path.clone();
        p.push(e);
        from_fields_v1(v, p, out);
    }
}

/// Reads `metadata.managedFields`.
pub fn read_managed(obj: &Value) -> Vec<ManagedEntry> {
    let mut out = Vec::new();
    for e in obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut fields = BTreeSet::new();
        from_fields_v1(&e["fieldsV1"], vec![], &mut fields);
        out.push(ManagedEntry {
            manager: e["manager"].as_str().unwrap_or_default().into(),
            operation: e["operation"].as_str().unwrap_or("Update").into(),
            api_version: e["apiVersion"].as_str().unwrap_or_default().into(),
            time: e["time"].as_str().unwrap_or_default().into(),
            subresource: e["subresource"].as_str().unwrap_or_default().into(),
            fields,
        });
    }
    out
}

/// Writes `metadata.managedFields`.
pub fn write_managed(obj: &mut Value, entries: &[ManagedEntry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if list.is_empty() {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
    } else {
        obj["metadata"]["managedFields"] = Value::Array(list);
    }
}

/// Who is writing and how.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    /// Field manager name.
    pub manager: &'a str,
    /// apiVersion of the request.
    pub api_version: &'a str,
    /// `""` or `status`.
    pub subresource: &'a str,
    /// Current time, RFC 3339.
    pub now: &'a str,
}

fn entry_mut<'a>(
    entries: &'a mut Vec<ManagedEntry>,
    w: &Writer<'_>,
    op: &str,
) -> &'a mut ManagedEntry {
    let pos = entries.iter().position(|e| {
        e.manager == w.manager && e.operation == op && e.subresource == w.subresource
    });
    let i = match pos {
        Some(i) => i,
        None => {
            entries.push(ManagedEntry {
                manager: w.manager.into(),
                operation: op.into(),
                api_version: w.api_version.into(),
                time: w.now.into(),
                subresource: w.subresource.into(),
                fields: BTreeSet::new(),
            });
            entries.len() - 1
        }
    };
    let e = &mut entries[i];
    e.time = w.now.into();
    e.api_version = w.api_version.into();
    e
}

/// Records ownership for a create or update: the writer takes the fields it changed, and
/// fields that disappeared are owned by nobody.
pub fn record_update(old: Option<&Value>, new: &mut Value, w: &Writer<'_>, scope: Scope) {
    let mut entries = old.map(read_managed).unwrap_or_default();
    let new_leaves = leaves(new, scope);
    let changed: BTreeSet<FieldPath> = new_leaves
        .iter()
        .filter(|p| old.is_none_or(|o| get_path(o, p) != get_path(new, p)))
        .cloned()
        .collect();
    let old_leaves = old.map(|o| leaves(o, scope)).unwrap_or_default();
    let gone: BTreeSet<FieldPath> = old_leaves.difference(&new_leaves).cloned().collect();
    for e in entries.iter_mut() {
        e.fields
            .retain(|p| !changed.contains(p) && !gone.contains(p));
    }
    if !changed.is_empty() {
        entry_mut(&mut entries, w, "Update").fields.extend(changed);
    }
    write_managed(new, &entries);
}

/// A server-side apply that other managers' fields block: `(manager, field)` pairs.
pub type Conflicts = Vec<(String, String)>;

/// Server-side apply of `applied` onto `live` (None: the object is created).
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    w: &Writer<'_>,
    force: bool,
    scope: Scope,
) -> Result<Value, Conflicts> {
    let Some(live) = live else {
        let mut obj = applied.clone();
        let mut entries = Vec::new();
        entry_mut(&mut entries, w, "Apply").fields = leaves(applied, scope);
        write_managed(&mut obj, &entries);
        return Ok(obj);
    };
    let mut entries = read_managed(live);
    let set = leaves(applied, scope);
    let mine = |e: &ManagedEntry| {
        e.manager == w.manager && e.operation == "Apply" && e.subresource == w.subresource
    };
    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !mine(e)) {
        for p in e.fields.intersection(&set) {
            if get_path(live, p) != get_path(applied, p) {
                conflicts.push((e.manager.clone(), path_string(p)));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    if force {
        for e in entries.iter_mut().filter(|e| !mine(e)) {
            let lost: Vec<FieldPath> = e
                .fields
                .intersection(&set)
                .filter(|p| get_path(live, p) != get_path(applied, p))
                .cloned()
                .collect();
            for p in lost {
                e.fields.remove(&p);
            }
        }
    }
    let previous = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut obj = live.clone();
    apply_merge(&mut obj, applied);
    for p in previous.difference(&set) {
        let owned_elsewhere = entries.iter().any(|e| !mine(e) && e.fields.contains(p));
        if !owned_elsewhere {
            remove_path(&mut obj, p);
        }
    }
    entry_mut(&mut entries, w, "Apply").fields = set;
    write_managed(&mut obj, &entries);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(m: &str) -> Writer<'_> {
        Writer {
            manager: m,
            api_version: "v1",
            subresource: "",
            now: "2026-01-01T00:00:00Z",
        }
    }

    #[test]
    fn two_appliers_conflict_on_a_shared_field_unless_forced() {
        let a = apply(
            None,
            &json!({"metadata": {"name": "x"}, "spec": {"replicas": 1}}),
            &w("a"),
            false,
            Scope::All,
        )
        .unwrap();
        let c = apply(
            Some(&a),
            &json!({"spec": {"replicas": 2}}),
            &w("b"),
            false,
            Scope::All,
        )
        .unwrap_err();
        assert_eq!(c, vec![("a".to_string(), ".spec.replicas".to_string())]);
        // Same value: shared ownership, no conflict.
        apply(
            Some(&a),
            &json!({"spec": {"replicas": 1}}),
            &w("b"),
            false,
            Scope::All,
        )
        .unwrap();
        let forced = apply(
            Some(&a),
            &json!({"spec": {"replicas": 2}}),
            &w("b"),
            true,
            Scope::All,
        )
        .unwrap();
        assert_eq!(forced["spec"]["replicas"], 2);
        let owners = read_managed(&forced);
        assert!(
            owners
                .iter()
                .find(|e| e.manager == "a")
                .is_none_or(|e| e.fields.is_empty())
        );
    }

    #[test]
    fn fields_dropped_from_an_apply_are_removed() {
        let a = apply(
            None,
            &json!({"spec": {"x": 1, "y": 2}}),
            &w("a"),
            false,
            Scope::All,
        )
        .unwrap();
        let b = apply(
            Some(&a),
            &json!({"spec": {"x": 1}}),
            &w("a"),
            false,
            Scope::All,
        )
        .unwrap();
        assert_eq!(b["spec"], json!({"x": 1}));
    }

    #[test]
    fn keyed_lists_merge_and_round_trip_through_fields_v1() {
        let a = apply(
            None,
            &json!({"spec": {"containers": [{"name": "c", "image": "i"}]}}),
            &w("a"),
            false,
            Scope::All,
        )
        .unwrap();
        let b = apply(
            Some(&a),
            &json!({"spec": {"containers": [{"name": "d", "image": "j"}]}}),
            &w("b"),
            false,
            Scope::All,
        )
        .unwrap();
        assert_eq!(b["spec"]["containers"].as_array().unwrap().len(), 2);
        let entries = read_managed(&b);
        assert!(entries[0].fields.contains(&vec![
            Elem::Field("spec".into()),
            Elem::Field("containers".into()),
            Elem::Key("{\"name\":\"c\"}".into()),
            Elem::Field("image".into())
        ]));
    }
}

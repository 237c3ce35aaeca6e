//! `events.k8s.io/v1` Events are the same objects as core `v1` Events, stored once (in the core
//! shape) and converted on the way in and out, so `kubectl get events` and `kubectl describe`
//! show what kube-rs' event recorder wrote.

use serde_json::{Map, Value};

use crate::kinds::ResourceInfo;

/// Whether a resource is the events.k8s.io view of core events.
pub fn is_new_events(info: &ResourceInfo) -> bool {
    info.group == "events.k8s.io" && info.kind == "Event"
}

/// `(events.k8s.io field, core field)` pairs.
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("deprecatedSource", "source"),
];

fn rename(obj: &mut Value, from_new: bool) {
    let Some(m) = obj.as_object_mut() else { return };
    let mut moved = Map::new();
    for (new, old) in RENAMES {
        let (from, to) = if from_new { (new, old) } else { (old, new) };
        if let Some(v) = m.remove(*from) {
            moved.insert(to.to_string(), v);
        }
    }
    m.extend(moved);
}

/// Converts an events.k8s.io/v1 Event to its stored (core) shape.
pub fn to_storage(info: &ResourceInfo, mut obj: Value) -> Value {
    if is_new_events(info) {
        rename(&mut obj, true);
        if obj.get("source").is_none()
            && let Some(c) = obj.get("reportingComponent").cloned()
        {
            obj["source"] = serde_json::json!({"component": c});
        }
    }
    obj
}

/// Converts a stored Event to the events.k8s.io/v1 shape.
pub fn from_storage(info: &ResourceInfo, mut obj: Value) -> Value {
    if is_new_events(info) {
        rename(&mut obj, false);
        if let Some(m) = obj.as_object_mut() {
            // Core-only fields with no events.k8s.io counterpart.
            m.remove("firstTimestamp");
            m.remove("lastTimestamp");
        }
    }
    obj
}

/// Rewrites an events.k8s.io field selector to the stored field names.
pub fn storage_field_selector(info: &ResourceInfo, selector: &str) -> String {
    if !is_new_events(info) {
        return selector.to_string();
    }
    let mut s = selector.to_string();
    for (new, old) in RENAMES {
        s = s
            .replace(&format!("{new}."), &format!("{old}."))
            .replace(&format!("{new}="), &format!("{old}="));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_round_trip_between_shapes() {
        let info = crate::kinds::builtins()
            .into_iter()
            .find(is_new_events)
            .unwrap();
        let new = json!({"regarding": {"name": "x"}, "note": "hi", "reason": "R", "reportingController": "c", "type": "Warning"});
        let stored = to_storage(&info, new.clone());
        assert_eq!(stored["involvedObject"]["name"], "x");
        assert_eq!(stored["message"], "hi");
        assert_eq!(stored["source"]["component"], "c");
        let back = from_storage(&info, stored);
        assert_eq!(back["note"], "hi");
        assert_eq!(back["regarding"], new["regarding"]);
        assert_eq!(
            storage_field_selector(&info, "regarding.name=x"),
            "involvedObject.name=x"
        );
    }
}

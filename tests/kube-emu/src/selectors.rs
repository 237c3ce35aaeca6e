//! Label and field selectors.

use serde_json::Value;

use crate::status::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label or field selector; an empty one matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    reqs: Vec<Requirement>,
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set_values(s: &str) -> ApiResult<Vec<String>> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| ApiError::bad_request(format!("unable to parse requirement: {s}")))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl Selector {
    /// Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h`.
    pub fn parse(s: &str) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let req = if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once(" notin ") {
                Requirement::NotIn(k.trim().into(), set_values(v)?)
            } else if let Some((k, v)) = part.split_once(" in ") {
                Requirement::In(k.trim().into(), set_values(v)?)
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::NotExists(k.trim().into())
            } else if part
                .chars()
                .all(|c| c.is_alphanumeric() || "-_./".contains(c))
            {
                Requirement::Exists(part.into())
            } else {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: {part}"
                )));
            };
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// Whether nothing is required.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The value a field selector asks for `key` with `=`, if any (used for `metadata.name`).
    pub fn equality(&self, key: &str) -> Option<&str> {
        self.reqs.iter().find_map(|r| match r {
            Requirement::Eq(k, v) if k == key => Some(v.as_str()),
            _ => None,
        })
    }

    /// Matches with a lookup of a key's value.
    pub fn matches_with(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        self.reqs.iter().all(|r| match r {
            Requirement::Eq(k, v) => lookup(k).as_deref() == Some(v.as_str()),
            Requirement::NotEq(k, v) => lookup(k).as_deref() != Some(v.as_str()),
            Requirement::In(k, vs) => lookup(k).is_some_and(|x| vs.contains(&x)),
            Requirement::NotIn(k, vs) => lookup(k).is_none_or(|x| !vs.contains(&x)),
            Requirement::Exists(k) => lookup(k).is_some(),
            Requirement::NotExists(k) => lookup(k).is_none(),
        })
    }

    /// Matches an object's labels.
    pub fn matches_labels(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        self.matches_with(|k| {
            labels
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .map(String::from)
        })
    }

    /// Matches an object's fields (`metadata.name`, `status.phase`, `spec.nodeName`, ...).
    pub fn matches_fields(&self, obj: &Value) -> bool {
        self.matches_with(|k| {
            let pointer = format!("/{}", k.replace('.', "/"));
            match obj.pointer(&pointer) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Null) | None => {
                    // Unset fields compare as the empty string, as Kubernetes does.
                    Some(String::new())
                }
                Some(v) => Some(v.to_string()),
            }
        })
    }
}

/// Matches a `LabelSelector` object (`matchLabels` + `matchExpressions`) against labels.
pub fn label_selector_matches(selector: &Value, labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    if let Some(ml) = selector.get("matchLabels").and_then(Value::as_object)
        && !ml.iter().all(|(k, v)| get(k) == v.as_str())
    {
        return false;
    }
    for e in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let ok = match e["operator"].as_str().unwrap_or_default() {
            "In" => get(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => get(key).is_some(),
            "DoesNotExist" => get(key).is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_forms() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (db, web)", true),
            ("tier notin (front)", false),
            ("app", true),
            ("!missing", true),
            ("missing", false),
        ] {
            assert_eq!(
                Selector::parse(sel).unwrap().matches_labels(&obj),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn field_selector_reads_paths() {
        let obj =
            json!({"metadata": {"name": "a", "namespace": "n"}, "status": {"phase": "Running"}});
        assert!(
            Selector::parse("metadata.name=a,metadata.namespace=n")
                .unwrap()
                .matches_fields(&obj)
        );
        assert!(
            !Selector::parse("status.phase!=Running")
                .unwrap()
                .matches_fields(&obj)
        );
    }
}

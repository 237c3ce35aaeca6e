//! Kubernetes `Status` errors: the code, reason and message a real API server would send.

use serde_json::{Value, json};

/// A failed API call, rendered as a `meta/v1 Status` body.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// Human-readable message, worded as Kubernetes words it.
    pub message: String,
    /// `details` of the Status, when there are any.
    pub details: Option<Value>,
}

/// Result alias for API operations.
pub type ApiResult<T> = Result<T, ApiError>;

/// One field-level cause of an `Invalid` error.
#[derive(Debug, Clone)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, ...
    pub reason: &'static str,
    /// Field path such as `spec.replicas`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

fn details(group_resource: &str, name: &str) -> Value {
    let (kind, group) = group_resource
        .split_once('.')
        .unwrap_or((group_resource, ""));
    let mut d = json!({"name": name, "kind": kind});
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 404 for a named object of a resource (`configmaps`, `widgets.example.com`).
    pub fn not_found(group_resource: &str, name: &str) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            format!("{group_resource} \"{name}\" not found"),
        );
        e.details = Some(details(group_resource, name));
        e
    }

    /// 404 for a path the server does not serve.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 409 for a create of an existing name.
    pub fn already_exists(group_resource: &str, name: &str) -> Self {
        let mut e = Self::new(
            409,
            "AlreadyExists",
            format!("{group_resource} \"{name}\" already exists"),
        );
        e.details = Some(details(group_resource, name));
        e
    }

    /// 409 for a write with a stale resourceVersion or a failed precondition.
    pub fn conflict(group_resource: &str, name: &str, why: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {group_resource} \"{name}\": {why}"),
        );
        e.details = Some(details(group_resource, name));
        e
    }

    /// The message Kubernetes uses for a stale resourceVersion.
    pub const STALE: &'static str = "the object has been modified; please apply your changes to the latest version and try again";

    /// 409 for a server-side apply conflicting with other field managers.
    pub fn apply_conflict(
        group_resource: &str,
        name: &str,
        conflicts: &[(String, String)],
    ) -> Self {
        let list: Vec<String> = conflicts
            .iter()
            .map(|(m, f)| format!("conflict with \"{m}\": {f}"))
            .collect();
        let message = if conflicts.len() == 1 {
            format!("Apply failed with 1 conflict: {}", list[0])
        } else {
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                list.join("\n")
            )
        };
        let mut d = details(group_resource, name);
        d["causes"] = Value::Array(
            conflicts
                .iter()
                .map(|(m, f)| {
                    json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\""), "field": f})
                })
                .collect(),
        );
        Self {
            code: 409,
            reason: "Conflict",
            message,
            details: Some(d),
        }
    }

    /// 422 with field causes.
    pub fn invalid(kind_group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let text: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let message = if text.len() == 1 {
            format!("{kind_group} \"{name}\" is invalid: {}", text[0])
        } else {
            format!("{kind_group} \"{name}\" is invalid: [{}]", text.join(", "))
        };
        let (kind, group) = kind_group.split_once('.').unwrap_or((kind_group, ""));
        let d = json!({
            "name": name, "group": group, "kind": kind,
            "causes": causes.iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect::<Vec<_>>(),
        });
        Self {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(d),
        }
    }

    /// 410 for a resourceVersion older than the retained history.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 410 Gone.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Gone", message)
    }

    /// 401 for a missing or unknown bearer token.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 415.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 504 for a resourceVersion newer than the store has.
    pub fn too_large_rv() -> Self {
        let mut e = Self::new(504, "Timeout", "Too large resource version");
        e.details = Some(
            json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
        );
        e
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// A success `Status`, as returned by some deletes.
pub fn success_status(group_resource: &str, name: &str, uid: &str) -> Value {
    let mut d = details(group_resource, name);
    d["uid"] = json!(uid);
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

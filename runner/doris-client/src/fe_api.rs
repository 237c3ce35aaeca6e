//! The FE's `/api` answers both binaries read (docs/doris-protocols.md): Doris's
//! `{"msg","code","data","count"}` envelope, and `/api/tso`'s current TSO.
//!
//! Every FE `/api` answer is HTTP 200 with the envelope, including authentication failures
//! (`code` 401), so the `code` decides, not the HTTP status. A TSO is `physical_ms << 18 |
//! logical`. All pure.

use serde_json::Value;

/// What one FE answered, before failover decides whether to try the next node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvelopeError {
    /// `code` 401: the user or password is wrong.
    Unauthorized(String),
    /// Any other non-zero `code`: Doris's message.
    Doris(String),
    /// Not the envelope at all.
    Malformed(String),
}

/// Unwrap Doris's `{"msg","code","data"}` envelope into its `data`.
pub fn unwrap_envelope(body: &str) -> std::result::Result<Value, EnvelopeError> {
    let v: Value = serde_json::from_str(body).map_err(|e| {
        EnvelopeError::Malformed(format!("not JSON ({e}): {}", truncate(body, 200)))
    })?;
    let code = v
        .get("code")
        .and_then(Value::as_i64)
        .ok_or_else(|| EnvelopeError::Malformed(format!("no code in {}", truncate(body, 200))))?;
    let data = v.get("data").cloned().unwrap_or(Value::Null);
    let text = |d: &Value| match d {
        Value::String(s) => s.clone(),
        Value::Null => v
            .get("msg")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        other => other.to_string(),
    };
    match code {
        0 => Ok(data),
        401 => Err(EnvelopeError::Unauthorized(text(&data))),
        _ => Err(EnvelopeError::Doris(text(&data))),
    }
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Bits of a TSO holding the logical counter: `tso = physical_ms << 18 | logical`.
pub const TSO_LOGICAL_BITS: u32 = 18;

/// The physical milliseconds of a TSO.
pub fn tso_to_ms(tso: i64) -> i64 {
    tso >> TSO_LOGICAL_BITS
}

/// The first TSO of a millisecond (logical counter 0).
pub fn ms_to_tso(ms: i64) -> i64 {
    ms << TSO_LOGICAL_BITS
}

/// Doris's current TSO as `/api/tso` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DorisNow {
    /// `current_tso`.
    pub tso: i64,
    /// `current_tso_physical_time`, epoch milliseconds.
    pub physical_ms: i64,
}

/// Read `/api/tso`'s `data`: requires `current_tso_physical_time > 0`.
///
/// # Errors
/// A description of what is missing.
pub fn parse_tso_data(data: &Value) -> std::result::Result<DorisNow, String> {
    let physical_ms = data
        .get("current_tso_physical_time")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("no current_tso_physical_time in {data}"))?;
    if physical_ms <= 0 {
        return Err(format!(
            "current_tso_physical_time is {physical_ms}, not a time"
        ));
    }
    let tso = data
        .get("current_tso")
        .and_then(Value::as_i64)
        .unwrap_or_else(|| ms_to_tso(physical_ms));
    Ok(DorisNow { tso, physical_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_success_gives_data() {
        let v = unwrap_envelope(r#"{"msg":"success","code":0,"data":{"a":1},"count":0}"#).unwrap();
        assert_eq!(v, serde_json::json!({"a": 1}));
    }

    #[test]
    fn envelope_401_is_unauthorized_even_with_http_200() {
        let e = unwrap_envelope(
            r#"{"msg":"Unauthorized","code":401,"data":"Access denied for user 'root@127.0.0.1' (using password: YES)","count":0}"#,
        )
        .unwrap_err();
        assert_eq!(
            e,
            EnvelopeError::Unauthorized(
                "Access denied for user 'root@127.0.0.1' (using password: YES)".into()
            )
        );
    }

    #[test]
    fn envelope_error_keeps_the_message() {
        let e = unwrap_envelope(r#"{"msg":"Error","code":1,"data":"Unknown table 'x'","count":0}"#)
            .unwrap_err();
        assert_eq!(e, EnvelopeError::Doris("Unknown table 'x'".into()));
        assert!(matches!(
            unwrap_envelope("<html>"),
            Err(EnvelopeError::Malformed(_))
        ));
    }

    #[test]
    fn tso_and_ms_convert() {
        assert_eq!(tso_to_ms(461373440032243713), 1760000000123);
        assert_eq!(tso_to_ms(ms_to_tso(1760000000123)), 1760000000123);
    }

    #[test]
    fn tso_data_needs_a_positive_physical_time() {
        let ok = serde_json::json!({"current_tso": 461373440032243713i64, "current_tso_physical_time": 1760000000123i64});
        assert_eq!(
            parse_tso_data(&ok).unwrap(),
            DorisNow {
                tso: 461373440032243713,
                physical_ms: 1760000000123
            }
        );
        assert!(parse_tso_data(&serde_json::json!({"current_tso_physical_time": 0})).is_err());
        assert!(parse_tso_data(&serde_json::json!({})).is_err());
    }
}

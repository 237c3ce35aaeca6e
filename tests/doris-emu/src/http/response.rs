//! Response bodies shaped like Doris's: the FE's `ResponseEntityBuilder` envelope
//! (`{"msg","code","data","count"}`), the FE's `RestBaseResult` (`{"status","msg"}`), and the BE's
//! rapidjson `PrettyWriter` objects (4-space indent, keys in a fixed order).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

/// A JSON object whose keys keep insertion order; values are raw JSON text.
#[derive(Debug, Default, Clone)]
pub struct Obj(Vec<(String, String)>);

/// JSON string literal.
pub fn jstr(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

impl Obj {
    /// Empty object.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Add a string member.
    pub fn s(mut self, k: &str, v: &str) -> Self {
        self.0.push((k.into(), jstr(v)));
        self
    }

    /// Add an integer member.
    pub fn n(mut self, k: &str, v: i64) -> Self {
        self.0.push((k.into(), v.to_string()));
        self
    }

    /// Add a member whose value is already JSON text.
    pub fn raw(mut self, k: &str, v: impl Into<String>) -> Self {
        self.0.push((k.into(), v.into()));
        self
    }

    /// `{"k":v,...}`.
    pub fn compact(&self) -> String {
        let inner: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{}:{}", jstr(k), v))
            .collect();
        format!("{{{}}}", inner.join(","))
    }

    /// rapidjson PrettyWriter layout (flat objects only).
    pub fn pretty(&self) -> String {
        if self.0.is_empty() {
            return "{}".into();
        }
        let inner: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("    {}: {}", jstr(k), v))
            .collect();
        format!("{{\n{}\n}}", inner.join(",\n"))
    }
}

/// A response with a JSON body.
pub fn json(status: StatusCode, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    r
}

/// A plain-text response.
pub fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut r = Response::new(Body::from(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// `ResponseEntityBuilder`: HTTP 200 with `{"msg":msg,"code":code,"data":data,"count":0}`.
pub fn envelope(code: i64, msg: &str, data_json: &str) -> Response {
    let body = Obj::new()
        .s("msg", msg)
        .n("code", code)
        .raw("data", data_json)
        .n("count", 0)
        .compact();
    json(StatusCode::OK, body)
}

/// `ResponseEntityBuilder.ok(data)`.
pub fn ok(data_json: &str) -> Response {
    envelope(0, "success", data_json)
}

/// `ResponseEntityBuilder.okWithCommonError(msg)`: code 1, msg `Error`, data the message.
pub fn common_error(message: &str) -> Response {
    envelope(1, "Error", &jstr(message))
}

/// `ResponseEntityBuilder.badRequest(msg)`: code 403, msg `Bad Request`.
pub fn bad_request(message: &str) -> Response {
    envelope(403, "Bad Request", &jstr(message))
}

/// `ResponseEntityBuilder.unauthorized(msg)`: HTTP 200, code 401, msg `Unauthorized`.
pub fn unauthorized(message: &str) -> Response {
    envelope(401, "Unauthorized", &jstr(message))
}

/// `RestBaseResult` failure: `{"status":"FAILED","msg":...}`.
pub fn rest_failed(message: &str) -> Response {
    json(
        StatusCode::OK,
        Obj::new().s("status", "FAILED").s("msg", message).compact(),
    )
}

/// The BE's 2PC answer (`Status::to_json` / `get_success_info` layout).
pub fn two_phase(status: &str, msg: &str) -> Response {
    json(
        StatusCode::OK,
        Obj::new().s("status", status).s("msg", msg).pretty(),
    )
}

/// Numbers of one Stream Load (`StreamLoadContext::to_json`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadResult {
    /// `TxnId` (-1 before a transaction began).
    pub txn_id: i64,
    /// `Label`.
    pub label: String,
    /// `Comment`.
    pub comment: String,
    /// `TwoPhaseCommit`.
    pub two_phase: bool,
    /// `Status`.
    pub status: String,
    /// `ExistingJobStatus` (label conflicts only).
    pub existing_job_status: Option<String>,
    /// `Message`.
    pub message: String,
    /// `NumberTotalRows`.
    pub total: u64,
    /// `NumberLoadedRows`.
    pub loaded: u64,
    /// `NumberFilteredRows`.
    pub filtered: u64,
    /// `NumberUnselectedRows`.
    pub unselected: u64,
    /// `LoadBytes`.
    pub load_bytes: u64,
    /// `LoadTimeMs`.
    pub load_time_ms: u64,
    /// `BeginTxnTimeMs`.
    pub begin_txn_ms: u64,
    /// `StreamLoadPutTimeMs`.
    pub put_ms: u64,
    /// `ReadDataTimeMs`.
    pub read_data_ms: u64,
    /// `WriteDataTimeMs`.
    pub write_data_ms: u64,
    /// `CommitAndPublishTimeMs`.
    pub commit_publish_ms: u64,
    /// `ErrorURL`.
    pub error_url: Option<String>,
}

impl LoadResult {
    /// A failed load before or after its transaction began.
    pub fn fail(txn_id: i64, label: &str, two_phase: bool, comment: &str, message: &str) -> Self {
        Self {
            txn_id,
            label: label.into(),
            comment: comment.into(),
            two_phase,
            status: "Fail".into(),
            message: message.into(),
            ..Self::default()
        }
    }

    /// The body, keys in Doris's order, with the trailing newline the BE adds.
    pub fn to_json(&self) -> String {
        let mut o = Obj::new()
            .n("TxnId", self.txn_id)
            .s("Label", &self.label)
            .s("Comment", &self.comment)
            .s(
                "TwoPhaseCommit",
                if self.two_phase { "true" } else { "false" },
            )
            .s("Status", &self.status);
        if let Some(s) = &self.existing_job_status {
            o = o.s("ExistingJobStatus", s);
        }
        let n = |v: u64| v.min(i64::MAX as u64) as i64;
        o = o
            .s("Message", &self.message)
            .n("NumberTotalRows", n(self.total))
            .n("NumberLoadedRows", n(self.loaded))
            .n("NumberFilteredRows", n(self.filtered))
            .n("NumberUnselectedRows", n(self.unselected))
            .n("LoadBytes", n(self.load_bytes))
            .n("LoadTimeMs", n(self.load_time_ms))
            .n("BeginTxnTimeMs", n(self.begin_txn_ms))
            .n("StreamLoadPutTimeMs", n(self.put_ms))
            .n("ReadDataTimeMs", n(self.read_data_ms))
            .n("WriteDataTimeMs", n(self.write_data_ms))
            .n("CommitAndPublishTimeMs", n(self.commit_publish_ms));
        if let Some(u) = &self.error_url {
            o = o.s("ErrorURL", u);
        }
        o.pretty() + "\n"
    }

    /// As an HTTP 200 response.
    pub fn response(&self) -> Response {
        json(StatusCode::OK, self.to_json())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_result_key_order() {
        let mut r = LoadResult::fail(-1, "l1", false, "", "boom");
        r.existing_job_status = Some("FINISHED".into());
        let s = r.to_json();
        let keys: Vec<String> = s
            .lines()
            .filter_map(|l| {
                l.trim()
                    .strip_prefix('"')
                    .map(|x| x.split('"').next().unwrap_or("").to_string())
            })
            .collect();
        assert_eq!(
            keys,
            vec![
                "TxnId",
                "Label",
                "Comment",
                "TwoPhaseCommit",
                "Status",
                "ExistingJobStatus",
                "Message",
                "NumberTotalRows",
                "NumberLoadedRows",
                "NumberFilteredRows",
                "NumberUnselectedRows",
                "LoadBytes",
                "LoadTimeMs",
                "BeginTxnTimeMs",
                "StreamLoadPutTimeMs",
                "ReadDataTimeMs",
                "WriteDataTimeMs",
                "CommitAndPublishTimeMs"
            ]
        );
        assert!(s.starts_with("{\n    \"TxnId\": -1,\n"));
        assert!(s.ends_with("}\n"));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["Status"], "Fail");
    }

    #[test]
    fn compact_escapes() {
        assert_eq!(
            Obj::new().s("a", "x\"y").n("b", 2).compact(),
            "{\"a\":\"x\\\"y\",\"b\":2}"
        );
    }
}

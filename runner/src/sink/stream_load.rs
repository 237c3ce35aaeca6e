//! Stream Load: one HTTP PUT per batch, answered by Doris with a JSON report
//! (docs/doris-protocols.md §4).
//!
//! The client asks an FE for a BE with an empty-bodied PUT (`Expect: 100-continue`, as Doris
//! requires; the FE answers 307 without reading a body) and then sends the body to that BE with the
//! credentials re-sent by hand — or straight to a configured BE. What the response means is decided
//! by the pure [`classify`], so retries are a policy, not scattered checks.

use std::time::Duration;

use bytes::Bytes;
use dcs_doris_client::{
    Answer, TxnKey, classify_label_abort, classify_txn, redirect_target, snippet, two_phase,
    without_url,
};
pub use dcs_doris_client::{LabelAbort, TxnOperation, TxnOutcome};
use reqwest::StatusCode;
use serde::Deserialize;

/// The JSON report Doris returns for a load (keys as Doris spells them).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct LoadReport {
    /// Transaction id (-1 for a duplicate label).
    pub txn_id: i64,
    /// The label.
    pub label: String,
    /// `Success`, `Publish Timeout`, `Label Already Exists`, `Fail`.
    pub status: String,
    /// Status of the earlier job holding the label: `RUNNING`, `FINISHED`, `PRECOMMITTED`.
    pub existing_job_status: Option<String>,
    /// `OK` or the error.
    pub message: String,
    /// Rows in the body.
    pub number_total_rows: u64,
    /// Rows loaded.
    pub number_loaded_rows: u64,
    /// Rows rejected.
    pub number_filtered_rows: u64,
    /// Body size.
    pub load_bytes: u64,
    /// Where Doris explains the rejected rows.
    #[serde(rename = "ErrorURL")]
    pub error_url: Option<String>,
}

/// What a load attempt means for the caller.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadOutcome {
    /// Loaded now (visible, or pre-committed under 2PC).
    Loaded(LoadReport),
    /// The label was already loaded by an earlier attempt: done, do not load again. Under 2PC the
    /// earlier transaction is pre-committed and `txn_id` is parsed from Doris's message.
    AlreadyLoaded {
        /// The earlier job's status (`FINISHED`, `VISIBLE`, `PRECOMMITTED`).
        existing_status: String,
        /// The earlier transaction, when Doris names it.
        txn_id: Option<i64>,
    },
    /// Worth another attempt with the same label.
    Retry(String),
    /// Retrying cannot help: the sync stops with this message.
    Permanent(String),
}

/// Decide what an HTTP status and body mean.
pub fn classify(status: u16, body: &str) -> LoadOutcome {
    if status == 401 || status == 403 {
        return LoadOutcome::Permanent(format!(
            "Doris refused the sink credentials (HTTP {status}); check the sink credentials Secret"
        ));
    }
    if (400..500).contains(&status) && status != 408 && status != 429 {
        return LoadOutcome::Permanent(format!(
            "Stream Load rejected with HTTP {status}: {}",
            snippet(body)
        ));
    }
    if status != 200 {
        return LoadOutcome::Retry(format!(
            "Stream Load answered HTTP {status}: {}",
            snippet(body)
        ));
    }
    let report: LoadReport = match serde_json::from_str(body) {
        Ok(r) => r,
        Err(e) => {
            return LoadOutcome::Retry(format!(
                "Stream Load answered a malformed report ({e}): {}",
                snippet(body)
            ));
        }
    };
    match report.status.as_str() {
        "Success" | "Publish Timeout" => LoadOutcome::Loaded(report),
        "Label Already Exists" => match report.existing_job_status.as_deref() {
            Some(s @ ("FINISHED" | "VISIBLE" | "PRECOMMITTED")) => LoadOutcome::AlreadyLoaded {
                existing_status: s.to_string(),
                txn_id: txn_id_in_message(&report.message),
            },
            other => LoadOutcome::Retry(format!(
                "label {} is held by a job in state {}; waiting for it to finish",
                report.label,
                other.unwrap_or("unknown")
            )),
        },
        "Fail" if is_transient(&report.message) => LoadOutcome::Retry(report.message),
        "Fail" => {
            let mut msg = format!(
                "Stream Load of label {} failed: {}",
                report.label, report.message
            );
            if let Some(url) = &report.error_url {
                msg.push_str(&format!("; rejected rows are explained at {url}"));
            }
            LoadOutcome::Permanent(msg)
        }
        other => LoadOutcome::Retry(format!(
            "Stream Load answered an unknown status {other:?}: {}",
            report.message
        )),
    }
}

/// `... Label [l] has already been used, relate to txn [1234]` → 1234.
fn txn_id_in_message(message: &str) -> Option<i64> {
    let start = message.rfind("txn [")? + "txn [".len();
    let end = message[start..].find(']')? + start;
    message[start..end].parse().ok()
}

/// Failures Doris reports as `Fail` that clear up on their own.
fn is_transient(message: &str) -> bool {
    const MARKERS: [&str; 7] = [
        "timeout",
        "timed out",
        "too many versions",
        "-235",
        "busy",
        "unavailable",
        // `current running txns on db … is …, larger than limit …`: other loads finish.
        "larger than limit",
    ];
    let m = message.to_ascii_lowercase();
    MARKERS.iter().any(|k| m.contains(k))
}

/// Retry delays: exponential from `base`, capped at `max`, with full jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// First delay.
    pub base: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(200),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// Delay before retry `attempt` (1-based), given a uniform random `jitter` in `[0, 1)`.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        let capped = exp.min(self.max);
        // Full jitter keeps a herd of runners from retrying in step; never below half the delay.
        capped.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

/// The FE answers errors before the redirect with HTTP 200 and a JSON report: `{"code":401,…}`
/// for bad credentials (Doris's exception handler), `{"status":"FAILED","msg":…}` for the rest.
fn fe_refusal(fe: &str, body: &str) -> LoadOutcome {
    let code = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("code").and_then(|c| c.as_i64()));
    if code == Some(401) {
        LoadOutcome::Permanent(format!(
            "FE {fe} refused the sink credentials: {}; check the sink credentials Secret",
            snippet(body)
        ))
    } else {
        LoadOutcome::Retry(format!(
            "FE {fe} did not redirect the load: {}",
            snippet(body)
        ))
    }
}

/// Where and how to load.
#[derive(Clone)]
pub struct StreamLoadClient {
    http: reqwest::Client,
    fe_nodes: Vec<String>,
    be_nodes: Vec<String>,
    user: String,
    password: String,
    /// Timeout of one HTTP request, named in timeout errors.
    timeout: Duration,
}

impl std::fmt::Debug for StreamLoadClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password never reaches logs.
        f.debug_struct("StreamLoadClient")
            .field("fe_nodes", &self.fe_nodes)
            .field("be_nodes", &self.be_nodes)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// One load to send.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    /// Database.
    pub db: String,
    /// Table.
    pub table: String,
    /// Deterministic label.
    pub label: String,
    /// Stream Load headers besides the label (format, columns, two_phase_commit, ...).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Bytes,
}

impl StreamLoadClient {
    /// A client for the given FE (`host:port`) and optional BE nodes.
    pub fn new(
        fe_nodes: Vec<String>,
        be_nodes: Vec<String>,
        user: String,
        password: String,
        timeout: Duration,
    ) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .build()
            .expect("HTTP client builds");
        Self {
            http,
            fe_nodes,
            be_nodes,
            user,
            password,
            timeout,
        }
    }

    /// The BE to send `req` to: a configured BE (round-robin by label), else the FE's 307 answer.
    async fn be_url(&self, req: &LoadRequest, attempt: u32) -> Result<String, LoadOutcome> {
        let path = format!("/api/{}/{}/_stream_load", req.db, req.table);
        let pick = |nodes: &[String]| {
            nodes[(hash(&req.label) as usize + attempt as usize) % nodes.len()].clone()
        };
        if !self.be_nodes.is_empty() {
            return Ok(format!("http://{}{path}", pick(&self.be_nodes)));
        }
        let fe = pick(&self.fe_nodes);
        let resp = self
            .http
            .put(format!("http://{fe}{path}"))
            .basic_auth(&self.user, Some(&self.password))
            .header("Expect", "100-continue")
            .header("label", &req.label)
            .header(reqwest::header::CONTENT_LENGTH, "0")
            .send()
            .await
            .map_err(|e| {
                LoadOutcome::Retry(if e.is_timeout() {
                    format!("FE {fe} timed out: no answer within {:?}", self.timeout)
                } else {
                    format!("FE {fe} unreachable: {}", without_url(&e))
                })
            })?;
        if resp.status() != StatusCode::TEMPORARY_REDIRECT {
            let status = resp.status().as_u16();
            let body = dcs_doris_client::read_answer(resp)
                .await
                .unwrap_or_default();
            return Err(if status == 200 {
                fe_refusal(&fe, &body)
            } else {
                classify(status, &body)
            });
        }
        // Doris puts the credentials into the Location; they are re-sent as a header instead.
        let url = redirect_target(&resp).ok_or_else(|| {
            LoadOutcome::Retry(format!("FE {fe} redirected without a usable Location"))
        })?;
        Ok(url.to_string())
    }

    /// A BE load that got no answer in time: Doris may still finish it, so the retry (same label)
    /// finds out.
    fn timed_out(&self) -> String {
        format!(
            "Stream Load to the BE timed out: no answer within {:?}",
            self.timeout
        )
    }

    /// One attempt of one load.
    pub async fn load_once(&self, req: &LoadRequest, attempt: u32) -> LoadOutcome {
        let url = match self.be_url(req, attempt).await {
            Ok(u) => u,
            Err(outcome) => return outcome,
        };
        let mut builder = self
            .http
            .put(&url)
            .basic_auth(&self.user, Some(&self.password))
            .header("Expect", "100-continue")
            .header("label", &req.label);
        for (k, v) in &req.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        match builder.body(req.body.clone()).send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                match dcs_doris_client::read_answer(resp).await {
                    Ok(body) => classify(status, &body),
                    Err(e) if e.is_timeout() => LoadOutcome::Retry(self.timed_out()),
                    Err(e) => LoadOutcome::Retry(format!(
                        "reading the Stream Load answer failed: {}",
                        without_url(&e)
                    )),
                }
            }
            Err(e) if e.is_timeout() => LoadOutcome::Retry(self.timed_out()),
            Err(e) => {
                LoadOutcome::Retry(format!("Stream Load to the BE failed: {}", without_url(&e)))
            }
        }
    }
}

impl StreamLoadClient {
    /// Commit or abort transaction `txn_id` of database `db`, following the FE's redirect by hand.
    /// Attempt `attempt` (1, 2, …) goes to the next node of the list, so a node that is down
    /// costs one attempt, not all of them.
    pub async fn finish_txn(
        &self,
        db: &str,
        txn_id: i64,
        operation: TxnOperation,
        attempt: u32,
    ) -> TxnOutcome {
        let pick = (txn_id.unsigned_abs() as usize).wrapping_add(attempt as usize);
        match self.send_2pc(db, TxnKey::Id(txn_id), operation, pick).await {
            Ok(a) => classify_txn(operation, a.status, &a.body),
            Err(message) => TxnOutcome::Retry(message),
        }
    }

    /// Abort the transaction labelled `label` in database `db` (the `label:` form of 2PC); the
    /// node rotates with `attempt` as in [`StreamLoadClient::finish_txn`].
    pub async fn abort_label(&self, db: &str, label: &str, attempt: u32) -> LabelAbort {
        let pick = (hash(label) as usize).wrapping_add(attempt as usize);
        match self
            .send_2pc(db, TxnKey::Label(label), TxnOperation::Abort, pick)
            .await
        {
            Ok(a) => classify_label_abort(a.status, &a.body),
            Err(message) => LabelAbort::Retry(message),
        }
    }

    /// One `_stream_load_2pc` request to a BE (when configured) or an FE.
    async fn send_2pc(
        &self,
        db: &str,
        key: TxnKey<'_>,
        operation: TxnOperation,
        pick: usize,
    ) -> Result<Answer, String> {
        let nodes = if self.be_nodes.is_empty() {
            &self.fe_nodes
        } else {
            &self.be_nodes
        };
        let node = &nodes[pick % nodes.len()];
        let credentials = (self.user.as_str(), self.password.as_str());
        two_phase(&self.http, node, credentials, db, key, operation)
            .await
            .map_err(|e| format!("2PC {} of {key}: {e}", operation.as_header()))
    }
}

fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(status: &str, extra: &str) -> String {
        format!(
            r#"{{"TxnId":12,"Label":"l1","Comment":"","TwoPhaseCommit":"false","Status":"{status}"{extra},"Message":"OK","NumberTotalRows":3,"NumberLoadedRows":3,"NumberFilteredRows":0,"NumberUnselectedRows":0,"LoadBytes":30,"LoadTimeMs":1}}"#
        )
    }

    #[test]
    fn success_and_publish_timeout_are_loaded() {
        for s in ["Success", "Publish Timeout"] {
            match classify(200, &body(s, "")) {
                LoadOutcome::Loaded(r) => {
                    assert_eq!(
                        (r.txn_id, r.number_loaded_rows, r.label.as_str()),
                        (12, 3, "l1")
                    )
                }
                other => panic!("{s}: {other:?}"),
            }
        }
    }

    #[test]
    fn duplicate_label_of_a_finished_or_precommitted_job_is_done() {
        let dup = r#"{"TxnId":-1,"Label":"l1","Status":"Label Already Exists","ExistingJobStatus":"PRECOMMITTED","Message":"errCode = 2, detailMessage = Label [l1] has already been used, relate to txn [1017]"}"#;
        assert_eq!(
            classify(200, dup),
            LoadOutcome::AlreadyLoaded {
                existing_status: "PRECOMMITTED".into(),
                txn_id: Some(1017)
            }
        );
        let running = dup.replace("PRECOMMITTED", "RUNNING");
        assert!(matches!(classify(200, &running), LoadOutcome::Retry(m) if m.contains("RUNNING")));
    }

    #[test]
    fn data_errors_are_permanent_and_name_the_error_url() {
        let fail = r#"{"TxnId":3,"Label":"l9","Status":"Fail","Message":"[DATA_QUALITY_ERROR]too many filtered rows","NumberFilteredRows":2,"ErrorURL":"http://be:8040/api/_load_error_log?file=x"}"#;
        assert_eq!(
            classify(200, fail),
            LoadOutcome::Permanent(
                "Stream Load of label l9 failed: [DATA_QUALITY_ERROR]too many filtered rows; rejected rows are explained at http://be:8040/api/_load_error_log?file=x".into()
            )
        );
    }

    #[test]
    fn http_errors_split_into_permanent_4xx_and_retried_5xx() {
        assert!(
            matches!(classify(401, ""), LoadOutcome::Permanent(m) if m.contains("credentials"))
        );
        assert!(matches!(
            classify(404, "no such table"),
            LoadOutcome::Permanent(_)
        ));
        assert!(matches!(classify(503, ""), LoadOutcome::Retry(_)));
        assert!(matches!(classify(429, ""), LoadOutcome::Retry(_)));
        assert!(
            matches!(classify(200, "<html>proxy</html>"), LoadOutcome::Retry(m) if m.contains("malformed"))
        );
    }

    #[test]
    fn fe_pre_redirect_reports_split_credentials_from_the_rest() {
        let unauthorized =
            r#"{"msg":"Unauthorized","code":401,"data":"Need auth information.","count":0}"#;
        assert!(
            matches!(fe_refusal("fe:8030", unauthorized), LoadOutcome::Permanent(m) if m.contains("credentials"))
        );
        let failed = r#"{"status":"FAILED","msg":"There is no 100-continue header"}"#;
        assert!(
            matches!(fe_refusal("fe:8030", failed), LoadOutcome::Retry(m) if m.contains("100-continue"))
        );
    }

    #[test]
    fn transient_fail_messages_are_retried() {
        let fail = body("Fail", "").replace("\"OK\"", "\"[E-235]too many versions\"");
        assert!(matches!(classify(200, &fail), LoadOutcome::Retry(_)));
    }

    #[test]
    fn backoff_grows_caps_and_jitters() {
        let b = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        assert_eq!(b.delay(1, 1.0), Duration::from_millis(100));
        assert_eq!(b.delay(3, 1.0), Duration::from_millis(400));
        assert_eq!(b.delay(30, 1.0), Duration::from_secs(1));
        assert_eq!(b.delay(3, 0.0), Duration::from_millis(200));
    }
}

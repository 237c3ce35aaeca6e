//! Stream Load: one HTTP PUT per batch, answered by Doris with a JSON report
//! (docs/doris-protocols.md §4).
//!
//! The client asks an FE for a BE with an empty-bodied PUT (`Expect: 100-continue`, as Doris
//! requires; the FE answers 307 without reading a body) and then sends the body to that BE with the
//! credentials re-sent by hand — or straight to a configured BE. What the response means is decided
//! by the pure [`classify`], so retries are a policy, not scattered checks.

use std::time::Duration;

use crate::cluster::Refusal;
use crate::{
    Answer, LabelAbort, TxnKey, TxnOperation, TxnOutcome, classify_label_abort, classify_txn,
    redirect_target, snippet, two_phase, url::host_port, without_url,
};
use bytes::Bytes;
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
    /// Doris filtered rows of the body (a value the sink column cannot hold under
    /// `strict_mode`, NULL into NOT NULL, …): permanent, and the rows are not written, whether
    /// the load failed or (with a `max_filter_ratio` above 0) loaded the rest.
    /// [`StreamLoadClient::load_once`] reads the ErrorURL and answers [`Self::Permanent`] naming
    /// the first rejected row instead; [`rejection_message`] words it.
    Rejected(LoadReport),
}

/// At most this much of a load's error log is read: its first lines name the first rejected
/// rows, which is all the message needs.
pub const MAX_ERROR_LOG_BYTES: usize = 64 << 10;

/// At most this much of the rejected row is quoted in a message.
const MAX_ROW_CHARS: usize = 512;

/// The first rejected row of a Doris load error log (`Reason: <why>. src line [<row>]; ` per
/// line; docs/doris-protocols.md §4.2): the column Doris names (`column(<name>)`), the reason and
/// the row. `None` when the log has no such line. Pure.
pub fn first_rejected_row(log: &str) -> Option<RejectedRow> {
    let line = log
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("Reason:"))?;
    let rest = line["Reason:".len()..].trim_start();
    let (reason, row) = match rest.find(". src line [") {
        Some(i) => {
            let row = &rest[i + ". src line [".len()..];
            let row = row
                .strip_suffix(';')
                .unwrap_or(row)
                .trim_end()
                .strip_suffix(']')
                .unwrap_or(row);
            (&rest[..i], Some(row))
        }
        None => (rest, None),
    };
    // Doris names the column three ways: the scanner's `column(<c>) …`, the sink's `null value
    // for not null column, column=<c>, type=…` and `column_name[<c>], the length of input is too
    // long than schema`.
    let column = [("column(", ')'), ("column=", ','), ("column_name[", ']')]
        .iter()
        .find_map(|(start, end)| {
            let rest = &reason[reason.find(start)? + start.len()..];
            Some(
                rest[..rest.find(*end).unwrap_or(rest.len())]
                    .trim()
                    .to_owned(),
            )
        })
        .filter(|c| !c.is_empty());
    Some(RejectedRow {
        column,
        reason: reason.trim().to_owned(),
        row: row.map(|r| {
            let mut r = r.to_owned();
            if r.chars().count() > MAX_ROW_CHARS {
                r = r.chars().take(MAX_ROW_CHARS).collect::<String>() + "…";
            }
            r
        }),
    })
}

/// At most this much of a load's error log is read to tell which rows it refused (Doris lists
/// at most 50, each line cut at the BE's `load_error_log_limit_bytes`; docs/doris-protocols.md
/// §4.2).
pub const MAX_FULL_ERROR_LOG_BYTES: usize = 8 << 20;

/// One refused row of a load error log: `Reason: <why>. src line [<row>]; `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorLogLine {
    /// Doris's reason.
    pub reason: String,
    /// The row as Doris quotes it: the load's source columns as text, space-separated (the
    /// scanner's `dump_one_line`), or the body text a reader could not split.
    pub src: Option<String>,
}

/// Every refused row of a load error log, in order, and whether the log lists them all: Doris
/// writes at most 50 (`MAX_ERROR_NUM`), then `TOO MUCH ERROR! …`, and cuts a line longer than its
/// `load_error_log_limit_bytes` with `error log is too long` (docs/doris-protocols.md §4.2).
/// Pure.
pub fn error_log_lines(log: &str) -> (Vec<ErrorLogLine>, bool) {
    let mut complete = true;
    let mut lines = Vec::new();
    for line in log.lines() {
        let line = line.trim_start();
        if line.starts_with("TOO MUCH ERROR") || line.trim_end().ends_with("error log is too long")
        {
            complete = false;
            continue;
        }
        let Some(rest) = line.strip_prefix("Reason:") else {
            continue;
        };
        let rest = rest.trim_start();
        let (reason, src) = match rest.find(". src line [") {
            Some(i) => {
                let row = &rest[i + ". src line [".len()..];
                let row = row.trim_end();
                let row = row.strip_suffix(';').unwrap_or(row);
                match row.strip_suffix(']') {
                    Some(row) => (&rest[..i], Some(row.to_owned())),
                    None => {
                        complete = false;
                        (&rest[..i], None)
                    }
                }
            }
            None => (rest, None),
        };
        lines.push(ErrorLogLine {
            reason: reason.trim().to_owned(),
            src,
        });
    }
    (lines, complete)
}

/// A row Doris filtered out of a load, as its error log tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedRow {
    /// The sink column Doris names, when it names one.
    pub column: Option<String>,
    /// Doris's reason.
    pub reason: String,
    /// The row as Doris quotes it from the body.
    pub row: Option<String>,
}

/// The message for a load whose rows Doris filtered: how many, the column and the first
/// rejected row when the error log could be read (`log`), else why not. Pure.
pub fn rejection_message(report: &LoadReport, log: Option<Result<&str, String>>) -> String {
    let mut msg = format!(
        "Stream Load of label {} rejected {} of {} rows ({}: {}), so the batch was not written",
        report.label,
        report.number_filtered_rows,
        report.number_total_rows,
        report.status,
        report.message
    );
    match log {
        Some(Ok(text)) => match first_rejected_row(text) {
            Some(first) => {
                if let Some(c) = &first.column {
                    msg.push_str(&format!("; column {c}"));
                }
                msg.push_str(&format!("; Doris says: {}", first.reason));
                if let Some(row) = &first.row {
                    msg.push_str(&format!("; first rejected row: {row}"));
                }
            }
            None => msg.push_str(&format!("; the error log names no row: {}", snippet(text))),
        },
        Some(Err(why)) => msg.push_str(&format!("; the error log could not be read: {why}")),
        None => {}
    }
    msg.push_str(
        "; make the sink column hold the source's values (dcs-runner check compares the types) \
         and restart; nothing of this batch was counted as written",
    );
    msg
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
        "Success" | "Publish Timeout" if report.number_filtered_rows > 0 => {
            LoadOutcome::Rejected(report)
        }
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
        "Fail" if report.number_filtered_rows > 0 || report.error_url.is_some() => {
            LoadOutcome::Rejected(report)
        }
        "Fail" if is_transient(&report.message) => LoadOutcome::Retry(report.message),
        "Fail" => LoadOutcome::Permanent(format!(
            "Stream Load of label {} failed: {}",
            report.label, report.message
        )),
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
    /// The FEs and BEs given, which are also the hosts credentials may be re-sent to after a
    /// redirect (with the BEs the FE lists).
    cluster: crate::cluster::ClusterHosts,
    user: String,
    password: String,
    /// Timeout of one HTTP request, named in timeout errors.
    timeout: Duration,
    /// TLS towards the sink cluster (plaintext by default).
    tls: crate::tls::Tls,
}

impl std::fmt::Debug for StreamLoadClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password never reaches logs.
        f.debug_struct("StreamLoadClient")
            .field("fe_nodes", &self.cluster.fe_nodes())
            .field("be_nodes", &self.cluster.be_nodes())
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
        let tls = crate::tls::Tls::plaintext();
        let http = Self::http(&tls, timeout).expect("a plaintext HTTP client builds");
        Self {
            http,
            cluster: crate::cluster::ClusterHosts::new(fe_nodes, be_nodes),
            user,
            password,
            timeout,
            tls,
        }
    }

    fn http(tls: &crate::tls::Tls, timeout: Duration) -> Result<reqwest::Client, String> {
        tls.http_client(
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(timeout),
        )
    }

    /// The same client over `tls`: `https://` URLs, certificates checked as `tls` says, and
    /// a redirect from `https://` to `http://` refused.
    ///
    /// # Errors
    /// When the HTTP client cannot be built with `tls`.
    pub fn with_tls(mut self, tls: crate::tls::Tls) -> Result<Self, String> {
        self.http = Self::http(&tls, self.timeout)?;
        self.tls = tls;
        Ok(self)
    }

    /// A failed request to `node` (`role` FE or BE) as text: the TLS reason when TLS failed.
    fn failure(&self, role: &str, node: &str, e: &reqwest::Error, otherwise: String) -> String {
        crate::tls::describe_failure(role, node, "HTTP", e, || otherwise)
    }

    /// The BE to send `req` to: a configured BE (round-robin by label), else the FE's 307 answer.
    async fn be_url(&self, req: &LoadRequest, attempt: u32) -> Result<String, LoadOutcome> {
        let path = format!("/api/{}/{}/_stream_load", req.db, req.table);
        let pick = |nodes: &[String]| {
            nodes[(hash(&req.label) as usize + attempt as usize) % nodes.len()].clone()
        };
        let be_nodes = self.cluster.be_nodes();
        if !be_nodes.is_empty() {
            return Ok(self.tls.url(&pick(be_nodes), &path));
        }
        let fe = pick(self.cluster.fe_nodes());
        let fe_url = self.tls.url(&fe, &path);
        let resp = self
            .http
            .put(&fe_url)
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
                    self.failure(
                        "FE",
                        &fe,
                        &e,
                        format!("FE {fe} unreachable: {}", without_url(&e)),
                    )
                })
            })?;
        if resp.status() != StatusCode::TEMPORARY_REDIRECT {
            let status = resp.status().as_u16();
            let body = crate::read_answer(resp).await.unwrap_or_default();
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
        if crate::is_downgrade(&fe_url, &url) {
            return Err(LoadOutcome::Permanent(format!(
                "FE {fe} redirected the load from https to http ({}), which would send the \
                 credentials in clear; refused: turn TLS on for the BEs too",
                host_port(&url)
            )));
        }
        let scheme = self.tls.http_scheme();
        let credentials = (self.user.as_str(), self.password.as_str());
        self.cluster
            .admit(&format!("FE {fe}"), &url, &self.http, scheme, credentials)
            .await
            .map_err(|refusal| match refusal {
                Refusal::Foreign(m) => LoadOutcome::Permanent(m),
                Refusal::ListUnavailable(m) => LoadOutcome::Retry(m),
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

    /// The first [`MAX_ERROR_LOG_BYTES`] of a load's error log (its `ErrorURL`); `None` when the
    /// report has none. The URL is followed only to a node of the cluster over the client's own
    /// scheme, as a redirect is: the credentials are sent along (Doris asks for them when
    /// `enable_all_http_auth` is set) and must reach no other host.
    pub async fn error_log(&self, report: &LoadReport) -> Option<Result<String, String>> {
        let raw = report.error_url.as_deref()?;
        Some(self.read_error_log(raw).await)
    }

    /// The error log of a load whose rows Doris refused, up to [`MAX_FULL_ERROR_LOG_BYTES`], to
    /// tell which rows it refused ([`error_log_lines`]); `None` when the report has no
    /// `ErrorURL`. Read as [`StreamLoadClient::load_once`] reads it.
    pub async fn refused_rows_log(&self, report: &LoadReport) -> Option<Result<String, String>> {
        let raw = report.error_url.as_deref()?;
        Some(
            self.read_error_log_capped(raw, MAX_FULL_ERROR_LOG_BYTES)
                .await,
        )
    }

    async fn read_error_log(&self, raw: &str) -> Result<String, String> {
        self.read_error_log_capped(raw, MAX_ERROR_LOG_BYTES).await
    }

    async fn read_error_log_capped(&self, raw: &str, cap: usize) -> Result<String, String> {
        let url = reqwest::Url::parse(raw).map_err(|e| format!("the ErrorURL is no URL ({e})"))?;
        let scheme = self.tls.http_scheme();
        if url.scheme() != scheme {
            return Err(format!(
                "the ErrorURL on {} is {}, not {scheme} like the loads; it was not read",
                host_port(&url),
                url.scheme()
            ));
        }
        let credentials = (self.user.as_str(), self.password.as_str());
        self.cluster
            .admit("the load's ErrorURL", &url, &self.http, scheme, credentials)
            .await
            .map_err(|refusal| refusal.to_string())?;
        let resp = self
            .http
            .get(url.clone())
            .basic_auth(&self.user, Some(&self.password))
            .send()
            .await
            .map_err(|e| without_url(&e))?;
        let status = resp.status().as_u16();
        let text = crate::read_capped(resp, cap)
            .await
            .map_err(|e| without_url(&e))?;
        if status != 200 {
            return Err(format!(
                "{} answered HTTP {status}: {}",
                host_port(&url),
                snippet(&text)
            ));
        }
        Ok(text)
    }

    /// One attempt of one load; rows Doris refused fail it for good, with a message naming the
    /// column and the first refused row ([`rejection_message`]).
    pub async fn load_once(&self, req: &LoadRequest, attempt: u32) -> LoadOutcome {
        match self.load_attempt(req, attempt).await {
            LoadOutcome::Rejected(report) => {
                let log = self.error_log(&report).await;
                LoadOutcome::Permanent(rejection_message(
                    &report,
                    log.as_ref().map(|r| r.as_deref().map_err(Clone::clone)),
                ))
            }
            other => other,
        }
    }

    /// One attempt of one load, rows Doris refused answered as [`LoadOutcome::Rejected`] (for a
    /// caller that sets them aside, [`StreamLoadClient::refused_rows_log`]).
    pub async fn load_attempt(&self, req: &LoadRequest, attempt: u32) -> LoadOutcome {
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
                match crate::read_answer(resp).await {
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
                let be = reqwest::Url::parse(&url)
                    .map(|u| host_port(&u))
                    .unwrap_or_default();
                LoadOutcome::Retry(self.failure(
                    "BE",
                    &be,
                    &e,
                    format!("Stream Load to the BE failed: {}", without_url(&e)),
                ))
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

    /// The nodes a 2PC request may go to: the configured BEs, else the FEs (which redirect).
    fn two_phase_nodes(&self) -> &[String] {
        if self.cluster.be_nodes().is_empty() {
            self.cluster.fe_nodes()
        } else {
            self.cluster.be_nodes()
        }
    }

    /// One `_stream_load_2pc` request to node `pick` (modulo their number) of
    /// [`StreamLoadClient::two_phase_nodes`]; Doris's answer of any status, or why none came.
    ///
    /// # Errors
    /// The message when no node is configured or the node (or the BE it redirected to) did not
    /// answer: `cannot reach sink FE 10.0.0.1:8030 to abort transaction 42: …`.
    pub async fn send_2pc(
        &self,
        db: &str,
        key: TxnKey<'_>,
        operation: TxnOperation,
        pick: usize,
    ) -> Result<Answer, String> {
        let nodes = self.two_phase_nodes();
        let Some(node) = nodes.get(pick % nodes.len().max(1)) else {
            return Err(format!(
                "cannot {} {key}: the sink has no FE nodes",
                operation.as_header()
            ));
        };
        let credentials = (self.user.as_str(), self.password.as_str());
        let scheme = self.tls.http_scheme();
        let reach = crate::Reach {
            http: &self.http,
            scheme,
            cluster: &self.cluster,
        };
        two_phase(reach, node, credentials, db, key, operation)
            .await
            .map_err(|e| match e {
                crate::Error::Unreachable { node, message } => {
                    let role = if self.cluster.be_nodes().contains(&node)
                        || !self.cluster.fe_nodes().contains(&node)
                    {
                        "BE"
                    } else {
                        "FE"
                    };
                    format!(
                        "cannot reach sink {role} {node} to {} {key}: {message}",
                        operation.as_header()
                    )
                }
                other => format!("cannot {} {key}: sink {other}", operation.as_header()),
            })
    }

    /// Aborts, label by label, the loads `sweep` names ([`Sweep`]): for each checkpoint id from
    /// the first, seq 0, 1, … until Doris does not know the label, up to `sweep.checkpoints` ids
    /// and stopping at the first id without any. A transient failure is retried `sweep.retries`
    /// times on the next node, after `pause(attempt)`.
    pub async fn sweep_labels<L: Fn(u64, u32) -> String>(
        &self,
        sweep: &Sweep<'_, L>,
        pause: impl Fn(u32) -> Duration,
    ) -> Swept {
        let mut swept = Swept::default();
        let end = sweep.first_checkpoint_id.saturating_add(sweep.checkpoints);
        for checkpoint_id in sweep.first_checkpoint_id..end {
            let mut seq = 0;
            'labels: loop {
                if seq >= MAX_SWEPT_SEQ {
                    swept.stopped = Some(SweepStop {
                        checkpoint_id,
                        label: (sweep.label)(checkpoint_id, seq),
                        message: format!(
                            "more than {MAX_SWEPT_SEQ} loads under one checkpoint id; the rest is left for Doris to time out"
                        ),
                    });
                    return swept;
                }
                let label = (sweep.label)(checkpoint_id, seq);
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let answer = self.abort_label(sweep.db, &label, attempt).await;
                    match after_abort(answer, attempt, sweep.retries) {
                        SweepNext::Aborted => swept.aborted.push(label),
                        SweepNext::Finished => {}
                        SweepNext::Committed(message) => swept.committed.push((label, message)),
                        SweepNext::NoMore => break 'labels,
                        SweepNext::Retry(message) => {
                            tracing::warn!(%label, %message, "aborting a load failed; retrying");
                            tokio::time::sleep(pause(attempt)).await;
                            continue;
                        }
                        SweepNext::Stop(message) => {
                            swept.stopped = Some(SweepStop {
                                checkpoint_id,
                                label,
                                message,
                            });
                            return swept;
                        }
                    }
                    break;
                }
                swept.found += 1;
                seq += 1;
            }
            if seq == 0 {
                break;
            }
        }
        swept
    }
}

/// The most loads per checkpoint id a sweep aborts (a guard against a loop, far above any batch
/// count a checkpoint interval produces).
pub const MAX_SWEPT_SEQ: u32 = 100_000;

/// Which labels a [`StreamLoadClient::sweep_labels`] aborts.
pub struct Sweep<'a, L> {
    /// Sink database.
    pub db: &'a str,
    /// The first checkpoint id whose loads no checkpoint records.
    pub first_checkpoint_id: u64,
    /// How many checkpoint ids from the first are swept at most.
    pub checkpoints: u64,
    /// Retries of a transient failure per label.
    pub retries: u32,
    /// The label of load `seq` of a checkpoint id.
    pub label: L,
}

/// What a sweep found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// The labels Doris knew (aborted now, already aborted, or committed).
    pub found: u32,
    /// The labels it aborted now.
    pub aborted: Vec<String>,
    /// The labels Doris had already committed, with its answer: nothing is left to abort, but no
    /// checkpoint records them (the caller decides what that means).
    pub committed: Vec<(String, String)>,
    /// Where and why it stopped before the end.
    pub stopped: Option<SweepStop>,
}

/// A sweep that could not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepStop {
    /// The checkpoint id it stopped at (the next sweep starts there).
    pub checkpoint_id: u64,
    /// The label it could not abort.
    pub label: String,
    /// Why.
    pub message: String,
}

/// What a sweep does after Doris's answer to aborting one label (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SweepNext {
    /// Aborted now: count it, go on with the next seq.
    Aborted,
    /// Known and no longer running (aborted earlier): go on.
    Finished,
    /// Committed already: record it, go on.
    Committed(String),
    /// Doris does not know the label: this checkpoint id has no more loads.
    NoMore,
    /// A transient failure within the retries: try again.
    Retry(String),
    /// A failure for good, or past the retries: stop here.
    Stop(String),
}

/// [`SweepNext`] for `answer` to attempt `attempt` (1-based) of `retries` retries.
pub fn after_abort(answer: LabelAbort, attempt: u32, retries: u32) -> SweepNext {
    match answer {
        LabelAbort::Aborted => SweepNext::Aborted,
        LabelAbort::NotRunning => SweepNext::Finished,
        LabelAbort::AlreadyCommitted(m) => SweepNext::Committed(m),
        LabelAbort::NotFound => SweepNext::NoMore,
        LabelAbort::Retry(m) if attempt <= retries => SweepNext::Retry(m),
        LabelAbort::Retry(m) | LabelAbort::Permanent(m) => SweepNext::Stop(m),
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

    #[test]
    fn an_error_log_lists_its_refused_rows_and_says_whether_it_is_complete() {
        let log = "Reason: column(age) value is incorrect while strict mode is true, src value is abc. src line [2 abc 0]; \n\
                   Reason: column_name[name], the length of input is too long than schema. first 32 bytes of input str: [xxx] schema length: 4; actual length: 9; . src line [3 NULL 1]; \n";
        let (lines, complete) = error_log_lines(log);
        assert!(complete);
        assert_eq!(
            lines,
            [
                ErrorLogLine {
                    reason: "column(age) value is incorrect while strict mode is true, src value is abc".into(),
                    src: Some("2 abc 0".into()),
                },
                ErrorLogLine {
                    reason: "column_name[name], the length of input is too long than schema. first 32 bytes of input str: [xxx] schema length: 4; actual length: 9;".into(),
                    src: Some("3 NULL 1".into()),
                },
            ]
        );
        let more = format!("{log}TOO MUCH ERROR! already reach 50. show no more next error.\n");
        assert!(!error_log_lines(&more).1, "a capped log is not complete");
        let cut = "Reason: column(a) value is incorrect. src line [1 xxxxxerror log is too long\n";
        assert!(!error_log_lines(cut).1, "a cut line is not complete");
    }

    fn body(status: &str, extra: &str) -> String {
        format!(
            r#"{{"TxnId":12,"Label":"l1","Comment":"","TwoPhaseCommit":"false","Status":"{status}"{extra},"Message":"OK","NumberTotalRows":3,"NumberLoadedRows":3,"NumberFilteredRows":0,"NumberUnselectedRows":0,"LoadBytes":30,"LoadTimeMs":1}}"#
        )
    }

    #[test]
    fn a_sweep_goes_on_past_finished_and_committed_labels_and_retries_within_bounds() {
        assert_eq!(after_abort(LabelAbort::Aborted, 1, 0), SweepNext::Aborted);
        assert_eq!(
            after_abort(LabelAbort::NotRunning, 1, 0),
            SweepNext::Finished
        );
        assert_eq!(after_abort(LabelAbort::NotFound, 3, 2), SweepNext::NoMore);
        assert_eq!(
            after_abort(LabelAbort::AlreadyCommitted("VISIBLE".into()), 1, 0),
            SweepNext::Committed("VISIBLE".into())
        );
        assert_eq!(
            after_abort(LabelAbort::Retry("503".into()), 2, 2),
            SweepNext::Retry("503".into())
        );
        assert_eq!(
            after_abort(LabelAbort::Retry("503".into()), 3, 2),
            SweepNext::Stop("503".into())
        );
        assert_eq!(
            after_abort(LabelAbort::Permanent("denied".into()), 1, 5),
            SweepNext::Stop("denied".into())
        );
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
    fn filtered_rows_are_rejected_whether_the_load_failed_or_succeeded() {
        let fail = r#"{"TxnId":3,"Label":"l9","Status":"Fail","Message":"[DATA_QUALITY_ERROR]too many filtered rows","NumberTotalRows":3,"NumberFilteredRows":2,"ErrorURL":"http://be:8040/api/_load_error_log?file=x"}"#;
        let LoadOutcome::Rejected(report) = classify(200, fail) else {
            panic!("{:?}", classify(200, fail));
        };
        assert_eq!(
            report.error_url.as_deref(),
            Some("http://be:8040/api/_load_error_log?file=x")
        );
        // A ratio above 0 lets Doris load the rest and answer Success: the filtered rows are
        // lost all the same.
        let partial = r#"{"TxnId":4,"Label":"l9","Status":"Success","Message":"OK","NumberTotalRows":3,"NumberLoadedRows":2,"NumberFilteredRows":1,"ErrorURL":"http://be:8040/api/_load_error_log?file=y"}"#;
        assert!(
            matches!(classify(200, partial), LoadOutcome::Rejected(r) if r.number_filtered_rows == 1)
        );
        // A timeout is no rejection, even when worded like one.
        let other = r#"{"TxnId":5,"Label":"l9","Status":"Fail","Message":"[CANCELLED]timeout"}"#;
        assert!(matches!(classify(200, other), LoadOutcome::Retry(_)));
    }

    #[test]
    fn a_rejection_names_the_column_and_the_first_rejected_row() {
        let log = "Reason: column(age) value is incorrect while strict mode is true, src value is 5000000000. src line [{\"id\":1,\"age\":5000000000}]; \nReason: column(age) value is incorrect while strict mode is true, src value is 6000000000. src line [{\"id\":2,\"age\":6000000000}]; \n";
        assert_eq!(
            first_rejected_row(log),
            Some(RejectedRow {
                column: Some("age".into()),
                reason: "column(age) value is incorrect while strict mode is true, src value is 5000000000".into(),
                row: Some("{\"id\":1,\"age\":5000000000}".into()),
            })
        );
        let report = LoadReport {
            label: "l9".into(),
            status: "Fail".into(),
            message: "[DATA_QUALITY_ERROR]too many filtered rows".into(),
            number_total_rows: 2,
            number_filtered_rows: 2,
            ..LoadReport::default()
        };
        assert_eq!(
            rejection_message(&report, Some(Ok(log))),
            "Stream Load of label l9 rejected 2 of 2 rows (Fail: [DATA_QUALITY_ERROR]too many filtered rows), so the batch was not written; column age; Doris says: column(age) value is incorrect while strict mode is true, src value is 5000000000; first rejected row: {\"id\":1,\"age\":5000000000}; make the sink column hold the source's values (dcs-runner check compares the types) and restart; nothing of this batch was counted as written"
        );
        assert!(
            rejection_message(
                &report,
                Some(Err("be:8040 answered HTTP 404: File not exist".into()))
            )
            .contains(
                "; the error log could not be read: be:8040 answered HTTP 404: File not exist; "
            )
        );
        assert_eq!(first_rejected_row("<html>"), None);
        let not_null = "Reason: null value for not null column, column=name, type=VARCHAR(48). src line [{\"id\":2,\"name\":null}]; ";
        assert_eq!(
            first_rejected_row(not_null).unwrap().column.as_deref(),
            Some("name")
        );
        let too_long = "Reason: column_name[name], the length of input is too long than schema. first 32 bytes of input str: [abcd] schema length: 3; actual length: 4; . src line [{\"id\":3,\"name\":\"abcd\"}]; ";
        let row = first_rejected_row(too_long).unwrap();
        assert_eq!(row.column.as_deref(), Some("name"));
        assert_eq!(row.row.as_deref(), Some("{\"id\":3,\"name\":\"abcd\"}"));
        let long = format!("Reason: too long. src line [{}]; ", "x".repeat(2000));
        assert_eq!(
            first_rejected_row(&long)
                .unwrap()
                .row
                .unwrap()
                .chars()
                .count(),
            MAX_ROW_CHARS + 1
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

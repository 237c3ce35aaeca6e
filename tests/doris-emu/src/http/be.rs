//! BE HTTP endpoints: Stream Load, the 2PC second phase and the load error log
//! (docs/doris-protocols.md §4).

use std::collections::HashMap;
use std::time::Instant;

use axum::Router;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, put};

use super::auth::{access_denied, parse_basic};
use super::body::LoadPlan;
use super::response::{self, LoadResult};
use super::stream_load::parse_options;
use super::{Ctx, Peer, TxnRecord, header_text};
use crate::engine::{BeginError, TxnOperation, TxnRef, TxnState};

/// Largest body the BE accepts (Doris's `streaming_load_max_mb` is 10 GiB; the emulator keeps
/// bodies in memory).
pub const MAX_BODY_BYTES: usize = 1 << 30;
/// Message of the data-quality failure.
pub const TOO_MANY_FILTERED: &str = "[DATA_QUALITY_ERROR]too many filtered rows";
/// Default message of an injected `Publish Timeout`.
pub const PUBLISH_TIMEOUT_MSG: &str =
    "transaction commit successfully, BUT data will be visible later";

pub(super) fn router() -> Router<Ctx> {
    Router::new()
        .route("/api/{db}/{table}/_stream_load", put(stream_load))
        .route("/api/{db}/_stream_load_2pc", put(two_phase_db))
        .route("/api/{db}/{table}/_stream_load_2pc", put(two_phase_table))
        .route("/api/_load_error_log", get(error_log))
}

/// `ExistingJobStatus` of a transaction state.
pub fn job_status(state: TxnState) -> &'static str {
    match state {
        TxnState::Prepare => "RUNNING",
        TxnState::PreCommitted => "PRECOMMITTED",
        TxnState::Visible => "FINISHED",
        TxnState::Aborted => "CANCELLED",
    }
}

/// The FE's label rule (`FeNameFormat.checkLabel`, `label_regex_length` 128).
pub fn label_ok(label: &str) -> bool {
    (1..=128).contains(&label.len())
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_:".contains(&b))
}

fn ms(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

async fn stream_load(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path((db, table)): Path<(String, String)>,
    req: Request,
) -> Response {
    ctx.doris.counters.hit("be_stream_load");
    let started = Instant::now();
    let headers = req.headers().clone();
    let get = |k: &str| header_text(&headers, k);
    let label = get("label")
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let two_phase = get("two_phase_commit").as_deref() == Some("true");
    let comment = get("comment").unwrap_or_default();
    let fail = |txn: i64, msg: &str| LoadResult::fail(txn, &label, two_phase, &comment, msg);

    let mut publish_timeout: Option<String> = None;
    if let Some(f) = ctx.doris.faults.take_stream_load() {
        if let Some(code) = f.http_status {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return response::text(status, f.message.unwrap_or_default());
        }
        let status = f.status.unwrap_or_else(|| "Fail".into());
        if status == "Publish Timeout" {
            publish_timeout = Some(f.message.unwrap_or_else(|| PUBLISH_TIMEOUT_MSG.into()));
        } else {
            let mut r = fail(
                -1,
                &f.message
                    .unwrap_or_else(|| "injected stream load failure".into()),
            );
            r.status = status;
            r.load_time_ms = ms(started);
            return r.response();
        }
    }

    let Some(creds) = parse_basic(&headers) else {
        return fail(-1, "no valid Basic authorization").response();
    };
    let opts = match parse_options(get) {
        Ok(o) => o,
        Err(m) => return fail(-1, &m).response(),
    };
    if !ctx.doris.authenticate(&creds.user, &creds.password) {
        let m = format!(
            "errCode = 2, detailMessage = {}",
            access_denied(&creds.user, &peer.ip(), &creds.password)
        );
        return fail(-1, &m).response();
    }

    if !label_ok(&label) {
        let m = format!(
            "errCode = 2, detailMessage = Label format error. regex: ^[-_A-Za-z0-9:]{{1,128}}$, label: {label}"
        );
        return fail(-1, &m).response();
    }

    // Begin the transaction (label dedup).
    let begin = Instant::now();
    let txn_id = match ctx
        .doris
        .engine
        .begin_txn_with_timeout(&db, &table, &label, opts.timeout_s)
    {
        Ok(id) => id,
        Err(BeginError::LabelExists { txn_id, state }) => {
            let mut r = fail(
                -1,
                &format!(
                    "errCode = 2, detailMessage = Label [{label}] has already been used, relate to txn [{txn_id}]"
                ),
            );
            r.status = "Label Already Exists".into();
            r.existing_job_status = Some(job_status(state).into());
            r.load_time_ms = ms(started);
            return r.response();
        }
        Err(BeginError::Other(e)) => return fail(-1, &e.message).response(),
    };
    let begin_ms = ms(begin);
    let _unfinished = AbortUnfinished {
        doris: &ctx.doris,
        txn_id,
    };
    ctx.state.record_txn(TxnRecord {
        txn_id,
        label: label.clone(),
        db: db.clone(),
        table: table.clone(),
    });
    let abort = |reason: &str| {
        let _ = ctx.doris.engine.abort_txn(txn_id, reason);
    };

    // Plan the load against the table (the FE's stream load put).
    let put = Instant::now();
    let plan = match ctx.doris.engine.table_info(&db, &table) {
        Ok(info) => LoadPlan::new(&db, &table, &info.columns, info.keys_type, &opts),
        Err(e) => Err(e.message),
    };
    let plan = match plan {
        Ok(p) => p,
        Err(m) => {
            abort(&m);
            let mut r = fail(txn_id, &m);
            r.begin_txn_ms = begin_ms;
            return r.response();
        }
    };
    let put_ms = ms(put);

    // Read the body (this is when hyper answers `100 Continue`).
    let read = Instant::now();
    let body = match axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            let m = format!(
                "body exceed max size: {MAX_BODY_BYTES}, or the body could not be read: {e}"
            );
            abort(&m);
            return fail(txn_id, &m).response();
        }
    };
    let read_ms = ms(read);

    let write = Instant::now();
    let outcome = plan.parse(&body);
    let mut result = LoadResult {
        txn_id,
        label: label.clone(),
        comment: comment.clone(),
        two_phase,
        status: "Success".into(),
        message: "OK".into(),
        total: outcome.total,
        loaded: outcome.writes.len() as u64,
        filtered: outcome.filtered,
        unselected: outcome.unselected,
        load_bytes: body.len() as u64,
        begin_txn_ms: begin_ms,
        put_ms,
        read_data_ms: read_ms,
        ..LoadResult::default()
    };
    if outcome.filtered > 0 {
        let file = format!(
            "__shard_{}/error_log_insert_stmt_{}",
            txn_id.rem_euclid(100),
            uuid::Uuid::new_v4().simple()
        );
        let mut content = outcome.errors.join("\n");
        content.push('\n');
        ctx.state.put_error_log(file.clone(), content);
        result.error_url = Some(format!(
            "{}://{}:{}/api/_load_error_log?file={file}",
            ctx.doris.http_scheme(),
            ctx.public_host(&headers),
            ctx.doris.ports.be_http_port
        ));
    }
    let considered = outcome.total.saturating_sub(outcome.unselected);
    if outcome.filtered > 0 && outcome.filtered as f64 > opts.max_filter_ratio * considered as f64 {
        abort(TOO_MANY_FILTERED);
        result.status = "Fail".into();
        result.message = TOO_MANY_FILTERED.into();
        result.loaded = 0;
        result.write_data_ms = ms(write);
        result.load_time_ms = ms(started);
        return result.response();
    }
    result.write_data_ms = ms(write);

    let commit = Instant::now();
    match ctx
        .doris
        .engine
        .finish_txn(txn_id, outcome.writes, two_phase)
    {
        Ok(_) => {
            if let Some(m) = publish_timeout {
                result.status = "Publish Timeout".into();
                result.message = m;
            }
        }
        Err(e) => {
            abort(&e.message);
            result.status = "Fail".into();
            result.message = e.message;
            result.loaded = 0;
        }
    }
    result.commit_publish_ms = ms(commit);
    result.load_time_ms = ms(started);
    result.response()
}

/// Aborts a load's transaction that is still being prepared when the handler stops: the client
/// went away (e.g. its timeout passed) and hyper dropped the request. Doris cancels such a load
/// too, so its label can be used again.
struct AbortUnfinished<'a> {
    doris: &'a crate::Doris,
    txn_id: i64,
}

impl Drop for AbortUnfinished<'_> {
    fn drop(&mut self) {
        if self.doris.engine.txn_state(self.txn_id) == Some(TxnState::Prepare) {
            let _ = self.doris.engine.abort_txn(
                self.txn_id,
                "the load's connection was closed before the load finished",
            );
        }
    }
}

/// `std::stoull` as the BE uses it: leading blanks, optional sign, then at least one digit
/// (trailing garbage ignored).
fn stoull(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits: String = t.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() {
        return None;
    }
    let v: u64 = digits.parse().ok()?;
    let v = if neg { v.wrapping_neg() } else { v };
    Some(v as i64)
}

fn two_phase(ctx: &Ctx, peer: &Peer, db: &str, headers: &HeaderMap) -> Response {
    ctx.doris.counters.hit("be_stream_load_2pc");
    let nonempty = |k: &str| header_text(headers, k).filter(|v| !v.is_empty());
    let mut msg = String::new();
    let label = nonempty("label");
    if let Some(l) = &label {
        msg.push_str(&format!("label [{l}] "));
    }
    let mut txn_id = None;
    if let Some(raw) = nonempty("txn_id") {
        msg.push_str(&format!("transaction [{raw}] "));
        match stoull(&raw) {
            Some(v) => txn_id = Some(v),
            None => return response::two_phase("Fail", &format!("convert txn_id [{raw}] failed")),
        }
    }
    let op_text = header_text(headers, "txn_operation").unwrap_or_default();
    let op = match op_text.as_str() {
        "commit" => TxnOperation::Commit,
        "abort" => TxnOperation::Abort,
        _ => {
            return response::two_phase(
                "Fail",
                "transaction operation should be 'commit' or 'abort'",
            );
        }
    };
    msg.push_str(&format!("{op_text} successfully."));
    let txn_label = || match (txn_id, &label) {
        (Some(id), _) => ctx.doris.engine.txn_label(id),
        (None, l) => l.clone(),
    };
    if op == TxnOperation::Commit
        && let Some(f) = ctx.doris.faults.take_commit(txn_label().as_deref())
    {
        if let Some(code) = f.http_status {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return response::text(status, f.message.unwrap_or_default());
        }
        return response::two_phase(
            &f.status.unwrap_or_else(|| "Fail".into()),
            &f.message
                .unwrap_or_else(|| "injected 2PC commit failure".into()),
        );
    }
    let Some(creds) = parse_basic(headers) else {
        return response::two_phase("Fail", "no valid Basic authorization");
    };
    if !ctx.doris.authenticate(&creds.user, &creds.password) {
        let m = format!(
            "errCode = 2, detailMessage = {}",
            access_denied(&creds.user, &peer.ip(), &creds.password)
        );
        return response::two_phase("Fail", &m);
    }
    let txn = match (txn_id, label) {
        (Some(id), _) => TxnRef::Id(id),
        (None, Some(l)) => TxnRef::Label(l),
        (None, None) => TxnRef::Id(0),
    };
    match ctx.doris.engine.two_phase(db, &txn, op) {
        Ok(_) => response::two_phase("Success", &msg),
        Err(m) => response::two_phase("Fail", &m),
    }
}

async fn two_phase_db(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(db): Path<String>,
    headers: HeaderMap,
) -> Response {
    two_phase(&ctx, &peer, &db, &headers)
}

async fn two_phase_table(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path((db, _table)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    two_phase(&ctx, &peer, &db, &headers)
}

async fn error_log(State(ctx): State<Ctx>, Query(q): Query<HashMap<String, String>>) -> Response {
    ctx.doris.counters.hit("be_load_error_log");
    let file = q.get("file").cloned().unwrap_or_default();
    match ctx.state.error_log(&file) {
        Some(c) => response::text(StatusCode::OK, c),
        None => response::text(StatusCode::NOT_FOUND, format!("File not exist: {file}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stoull_like_the_be() {
        assert_eq!(stoull("12"), Some(12));
        assert_eq!(stoull(" 12abc"), Some(12));
        assert_eq!(stoull("abc"), None);
        assert_eq!(stoull(""), None);
        assert_eq!(stoull("-"), None);
    }

    #[test]
    fn labels() {
        assert!(label_ok("dcs-c1-42-0"));
        assert!(label_ok("a:b_c"));
        assert!(!label_ok("a.b"));
        assert!(!label_ok(""));
        assert!(!label_ok(&"x".repeat(129)));
    }
}

//! What a `_stream_load_2pc` answer means (pure).

use serde::Deserialize;

use crate::TxnOperation;

/// What a commit or abort by transaction id means for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOutcome {
    /// Done now, or already done by an earlier attempt (a commit of a committed or visible
    /// transaction, an abort of an aborted or unknown one).
    Done,
    /// An abort found the transaction committed: its rows are visible and nothing is left to
    /// abort. A loss for a runner that meant to drop them; done for a cleanup.
    AlreadyCommitted(String),
    /// A commit found the transaction aborted (by Doris's pre-commit timeout, or by someone) or
    /// unknown: its rows are not in the table and never will be; they must be loaded again.
    Lost(String),
    /// Worth another attempt.
    Retry(String),
    /// The transaction cannot reach the wanted state (e.g. commit of an aborted one), or Doris
    /// refused the credentials.
    Permanent(String),
}

/// What an abort by label found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelAbort {
    /// The label's transaction was aborted now.
    Aborted,
    /// Doris knows the label but nothing of it is running: aborted before, or never pre-committed.
    NotRunning,
    /// The label's transaction was committed: its rows are visible.
    AlreadyCommitted(String),
    /// Doris has no transaction with this label.
    NotFound,
    /// Worth another attempt.
    Retry(String),
    /// Doris refused for a reason retrying cannot fix.
    Permanent(String),
}

#[derive(Deserialize)]
struct Report {
    status: String,
    #[serde(default)]
    msg: String,
}

/// Decides what a `_stream_load_2pc` answer by transaction id means.
pub fn classify_txn(operation: TxnOperation, status: u16, body: &str) -> TxnOutcome {
    if status == 401 || status == 403 {
        return TxnOutcome::Permanent(format!(
            "Doris refused the sink credentials (HTTP {status}); check the sink credentials Secret"
        ));
    }
    let op = operation.as_header();
    if status != 200 {
        return TxnOutcome::Retry(format!(
            "2PC {op} answered HTTP {status}: {}",
            snippet(body)
        ));
    }
    let Ok(report) = serde_json::from_str::<Report>(body) else {
        return TxnOutcome::Retry(format!(
            "2PC {op} answered a malformed report: {}",
            snippet(body)
        ));
    };
    if report.status.eq_ignore_ascii_case("success") {
        return TxnOutcome::Done;
    }
    let msg = report.msg;
    let done = match operation {
        TxnOperation::Commit => {
            msg.contains("is already committed") || msg.contains("is already visible")
        }
        TxnOperation::Abort => msg.contains("is already aborted") || msg.ends_with("not found"),
    };
    if done {
        TxnOutcome::Done
    } else if operation == TxnOperation::Commit
        && (msg.contains("is already aborted") || msg.ends_with("not found"))
    {
        TxnOutcome::Lost(msg)
    } else if operation == TxnOperation::Abort && msg.contains("could not abort") {
        TxnOutcome::AlreadyCommitted(msg)
    } else if msg.contains("not found") || msg.contains("is already") {
        TxnOutcome::Permanent(msg)
    } else {
        TxnOutcome::Retry(msg)
    }
}

/// Decides what an abort by label answered: `transaction not found, label=<l>` is
/// [`LabelAbort::NotFound`]; `running transaction not found` (the label exists, nothing runs) and
/// already aborted are [`LabelAbort::NotRunning`].
pub fn classify_label_abort(status: u16, body: &str) -> LabelAbort {
    let report = serde_json::from_str::<Report>(body).ok();
    let msg = report.as_ref().map_or("", |r| r.msg.as_str());
    if msg.contains("running transaction not found") {
        return LabelAbort::NotRunning;
    }
    if msg.contains("transaction not found, label=") {
        return LabelAbort::NotFound;
    }
    match classify_txn(TxnOperation::Abort, status, body) {
        TxnOutcome::Done if report.is_some_and(|r| r.status.eq_ignore_ascii_case("success")) => {
            LabelAbort::Aborted
        }
        TxnOutcome::Done => LabelAbort::NotRunning,
        TxnOutcome::AlreadyCommitted(m) => LabelAbort::AlreadyCommitted(m),
        TxnOutcome::Retry(m) => LabelAbort::Retry(m),
        TxnOutcome::Permanent(m) | TxnOutcome::Lost(m) => LabelAbort::Permanent(m),
    }
}

/// The start of a response body for an error message (300 bytes at most, trimmed).
pub fn snippet(body: &str) -> String {
    let t = body.trim();
    if t.len() <= 300 {
        return t.to_string();
    }
    let mut end = 300;
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &t[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(msg: &str) -> String {
        serde_json::json!({"status": "Fail", "msg": msg}).to_string()
    }

    #[test]
    fn answers_that_mean_done_already_count_as_done() {
        let ok = r#"{"status":"Success","msg":"transaction [17] abort successfully."}"#;
        assert_eq!(classify_txn(TxnOperation::Abort, 200, ok), TxnOutcome::Done);
        assert_eq!(
            classify_txn(TxnOperation::Commit, 200, ok),
            TxnOutcome::Done
        );
        let aborted = fail(
            "errCode = 2, detailMessage = transaction [7] is already aborted. abort reason: user",
        );
        assert!(matches!(
            classify_txn(TxnOperation::Commit, 200, &aborted),
            TxnOutcome::Lost(_)
        ));
        assert_eq!(
            classify_txn(TxnOperation::Abort, 200, &aborted),
            TxnOutcome::Done
        );
        let unknown = fail("errCode = 2, detailMessage = transaction [17] not found");
        assert_eq!(
            classify_txn(TxnOperation::Abort, 200, &unknown),
            TxnOutcome::Done
        );
        assert!(matches!(
            classify_txn(TxnOperation::Commit, 200, &unknown),
            TxnOutcome::Lost(_)
        ));
        let visible = fail(
            "errCode = 2, detailMessage = transaction [7] is already VISIBLE, could not abort.",
        );
        assert_eq!(
            classify_txn(TxnOperation::Abort, 200, &visible),
            TxnOutcome::AlreadyCommitted(
                "errCode = 2, detailMessage = transaction [7] is already VISIBLE, could not abort."
                    .into()
            )
        );
        let committed = fail("errCode = 2, detailMessage = transaction [7] is already committed");
        assert_eq!(
            classify_txn(TxnOperation::Commit, 200, &committed),
            TxnOutcome::Done
        );
    }

    #[test]
    fn other_answers_are_retried_or_refused_with_what_doris_said() {
        assert_eq!(
            classify_txn(TxnOperation::Abort, 200, &fail("disk full")),
            TxnOutcome::Retry("disk full".into())
        );
        assert_eq!(
            classify_txn(TxnOperation::Abort, 401, ""),
            TxnOutcome::Permanent(
                "Doris refused the sink credentials (HTTP 401); check the sink credentials Secret"
                    .into()
            )
        );
        assert_eq!(
            classify_txn(TxnOperation::Commit, 502, "<html>bad gateway</html>"),
            TxnOutcome::Retry("2PC commit answered HTTP 502: <html>bad gateway</html>".into())
        );
        assert_eq!(
            classify_txn(TxnOperation::Abort, 200, "not json"),
            TxnOutcome::Retry("2PC abort answered a malformed report: not json".into())
        );
    }

    #[test]
    fn label_aborts_tell_unknown_labels_apart_from_finished_ones() {
        let ok = r#"{"status":"Success","msg":"label [dcs-c-3-0] abort successfully."}"#;
        assert_eq!(classify_label_abort(200, ok), LabelAbort::Aborted);
        assert_eq!(
            classify_label_abort(
                200,
                &fail("errCode = 2, detailMessage = transaction not found, label=dcs-c-3-1")
            ),
            LabelAbort::NotFound
        );
        assert_eq!(
            classify_label_abort(
                200,
                &fail(
                    "errCode = 2, detailMessage = running transaction not found, label=dcs-c-3-0"
                )
            ),
            LabelAbort::NotRunning
        );
        assert_eq!(
            classify_label_abort(
                200,
                &fail(
                    "errCode = 2, detailMessage = transaction [9] is already aborted. abort reason: x"
                )
            ),
            LabelAbort::NotRunning
        );
        assert!(matches!(
            classify_label_abort(
                200,
                &fail(
                    "errCode = 2, detailMessage = transaction [9] is already VISIBLE, could not abort."
                )
            ),
            LabelAbort::AlreadyCommitted(_)
        ));
        assert_eq!(
            classify_label_abort(200, &fail("disk full")),
            LabelAbort::Retry("disk full".into())
        );
        assert!(
            matches!(classify_label_abort(403, ""), LabelAbort::Permanent(m) if m.contains("credentials"))
        );
        assert!(matches!(
            classify_label_abort(503, ""),
            LabelAbort::Retry(_)
        ));
    }

    #[test]
    fn snippets_stop_at_a_char_boundary() {
        let long = "é".repeat(400);
        let s = snippet(&long);
        assert!(s.ends_with('…'));
        assert!(s.len() <= 303);
        assert_eq!(snippet("  short \n"), "short");
    }
}

//! What Doris answers over HTTP: Stream Load and 2PC answers, the FE's `/api` envelope and the
//! `/api/tso` data. Any status and body: a classification, never a panic, and an error snippet
//! that stays short.
#![no_main]

use dcs_doris_client::fe_api::{parse_tso_data, unwrap_envelope};
use dcs_doris_client::stream_load::classify;
use dcs_doris_client::{TxnOperation, classify_label_abort, classify_txn, snippet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u16, &str)| {
    let (status, body) = input;
    let _ = classify(status, body);
    let _ = classify_txn(TxnOperation::Commit, status, body);
    let _ = classify_txn(TxnOperation::Abort, status, body);
    let _ = classify_label_abort(status, body);
    // An error message carries at most 300 bytes of what a server said.
    assert!(snippet(body).len() <= 300 + '…'.len_utf8());
    if let Ok(data) = unwrap_envelope(body) {
        let _ = parse_tso_data(&data);
    }
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        let _ = parse_tso_data(&value);
    }
});

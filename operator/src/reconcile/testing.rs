//! Builders for test observations (on the test kit's sample sync and checkpoint,
//! `dcs_crds::testing`), and a scripted API server ([`fake_api`]) for the tests of the reconcile's
//! API calls.

use std::sync::{Arc, Mutex};

use dcs_crds::doris_table::{KeysModel, PropertySpelling, SourceTableInfo};
use dcs_crds::testing::{CheckpointBuilder, SyncBuilder, offset};
use dcs_crds::{DorisChangelogSync, DorisChangelogSyncSpec, DorisChangelogSyncStatus, StartupMode};
use k8s_openapi::jiff::Timestamp;

use super::observed::{Observed, RunnerState};
use super::plan::Run;
use crate::facts::SourceProbe;
use crate::{
    checkpoint::{Checkpoint, Counters},
    cleanup::{OffsetRow, Work},
};

/// Doris "now" in the tests: 2026-11-29 14:00:00 UTC.
pub const NOW_MS: i64 = 1_795_960_800_000;

/// `s` seconds after [`NOW_MS`].
pub fn at(s: i64) -> Timestamp {
    Timestamp::from_second(NOW_MS / 1000 + s).unwrap()
}

/// What a teardown of consumer `orders` has to do, or left undone, when all there is is its
/// offset-table row in `meta.offsets`.
pub fn offset_row_work() -> Work {
    Work {
        offset_row: Some(OffsetRow {
            table: "meta.offsets".parse().unwrap(),
            consumer_id: "orders".into(),
        }),
        ..Work::default()
    }
}

/// An incremental sync (initial) into a Doris sink, TTL needs 30m + 10s + 10s + 5m = 2120s: the
/// test kit's sample.
pub fn spec() -> DorisChangelogSyncSpec {
    SyncBuilder::new().spec()
}

/// A healthy probe with a one-day TTL.
pub fn probe() -> SourceProbe {
    SourceProbe {
        table: SourceTableInfo {
            spelling: PropertySpelling::Changelog,
            enabled: true,
            need_historical_value: false,
            ttl_seconds: 86_400,
            keys: KeysModel::Unique {
                merge_on_write: true,
            },
            light_delete: false,
        },
        doris_now_ms: Some(NOW_MS),
    }
}

/// A fresh sync: nothing running, no checkpoint, empty status.
pub fn observed() -> Observed {
    Observed {
        name: "orders".into(),
        spec: spec(),
        generation: Some(1),
        deleting: false,
        runner_allowed: Ok(()),
        probe: Ok(probe()),
        sink_probe: Ok(()),
        checkpoint: None,
        checkpoint_error: None,
        status: DorisChangelogSyncStatus::default(),
        applied_nonce: None,
        runner: RunnerState::Absent,
        runner_restarts: None,
        runner_exit: None,
        stopping: None,
        shards: None,
    }
}

/// The plan's run of [`observed`]: launch one runner of consumer `orders` in `initial` mode. Tests
/// compare whole plans against it, changed where they differ, so any other field that moves
/// fails them.
pub fn fresh_run() -> Run {
    Run {
        consumer_id: "orders".into(),
        consumer_generation: 0,
        launch: true,
        bounded: false,
        startup_mode: StartupMode::Initial,
        previous_consumer_id: None,
        probe_warning: None,
        shards: None,
    }
}

/// A changelog checkpoint whose offset is `age_s` seconds behind [`NOW_MS`].
pub fn streaming_checkpoint(consumer: &str, age_s: i64) -> Checkpoint {
    CheckpointBuilder::new()
        .consumer(consumer)
        .saved_at("2026-11-29T13:59:55Z")
        .changelog_at(offset("2026-11-29 13:59:50", NOW_MS - age_s * 1000))
        .counters(Counters {
            rows_read: 100,
            rows_written: 90,
            rows_deleted: 10,
            loads: 3,
            rows_rejected: 4,
            ..Counters::default()
        })
        .label_scheme(1)
        .build()
}

/// One request the [`fake_api`] server was sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// `GET`, `PATCH`, ...
    pub method: String,
    /// The path, e.g. `/api/v1/namespaces/ns/configmaps/orders-config`.
    pub path: String,
    /// The body as JSON (`null` when empty).
    pub body: serde_json::Value,
}

/// A client whose API server answers each request with `answer(method, path)`: a status code
/// and a JSON body. Every request is kept, in order, in the returned list.
pub fn fake_api(
    answer: impl Fn(&str, &str) -> (u16, serde_json::Value) + Send + Sync + 'static,
) -> (kube::Client, Arc<Mutex<Vec<Sent>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let log = sent.clone();
    let answer = Arc::new(answer);
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (log, answer) = (log.clone(), answer.clone());
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.expect("a readable request body");
            let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
            let (method, path) = (parts.method.to_string(), parts.uri.path().to_owned());
            let (code, reply) = answer(&method, &path);
            log.lock().unwrap().push(Sent { method, path, body });
            let response = http::Response::builder()
                .status(code)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(kube::client::Body::from(
                    serde_json::to_vec(&reply).unwrap(),
                ))
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    (kube::Client::new(service, "ns"), sent)
}

/// The body of an API error answer (a `Status`) with `code` and `reason`, e.g. 404 `NotFound`.
pub fn api_error(code: u16, reason: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("{reason} (from the test's API server)"),
        "reason": reason,
        "code": code,
    })
}

/// The sync `orders` in namespace `ns` with [`spec`], as the API server would hold it.
pub fn sync() -> DorisChangelogSync {
    SyncBuilder::new().namespace("ns").uid("uid-1").build()
}

//! Builders for test observations.

use dcs_crds::doris_table::{KeysModel, PropertySpelling, SourceTableInfo};
use dcs_crds::{DorisChangelogSyncSpec, DorisChangelogSyncStatus};

use super::plan::{Observed, RunnerState, SourceProbe};
use crate::checkpoint::{Checkpoint, Counters, Offset, Position};

/// Doris "now" in the tests: 2026-11-29 14:00:00 UTC.
pub const NOW_MS: i64 = 1_795_960_800_000;

/// An incremental sync (initial) into a Doris sink, TTL needs 30m + 10s + 10s + 5m = 2120s.
pub fn spec() -> DorisChangelogSyncSpec {
    serde_yaml::from_str(
        r#"
source:
  feNodes: ["fe:8030"]
  table: db.src
  credentials: {secretName: src-creds}
startup: {mode: initial}
sink:
  doris:
    feNodes: ["sink-fe:8030"]
    table: db.dst
    credentials: {secretName: sink-creds}
"#,
    )
    .unwrap()
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
    }
}

/// A changelog checkpoint whose offset is `age_s` seconds behind [`NOW_MS`].
pub fn streaming_checkpoint(consumer: &str, age_s: i64) -> Checkpoint {
    let epoch_ms = NOW_MS - age_s * 1000;
    Checkpoint {
        format_version: 1,
        consumer_id: consumer.into(),
        checkpoint_id: 7,
        saved_at: "2026-11-29T13:59:55Z".into(),
        position: Position::Changelog {
            offset: Offset {
                timestamp: "2026-11-29 13:59:50".into(),
                epoch_ms,
                tso: epoch_ms << 18,
            },
        },
        start_point: None,
        pending_txns: Vec::new(),
        counters: Counters {
            rows_read: 100,
            rows_written: 90,
            rows_deleted: 10,
            loads: 3,
            bytes: 0,
        },
        last_error: None,
        stopped: None,
        in_window: None,
        loads_source: None,
        label_scheme: 1,
        rebuild: None,
    }
}

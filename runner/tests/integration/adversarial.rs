//! The adversarial suite, short version: one seeded run per sink kind with the ConfigMap
//! checkpoint store (so ambiguous saves are among the faults), through every fault class of
//! [`harness`]. The long version is `cargo bench -p dcs-runner --bench adversarial`
//! (`DCS_ADVERSARIAL_RUNS`, `DCS_ADVERSARIAL_STEPS`); RELIABILITY.md records its figures.
//!
//! Each test prints its seed; `DCS_TEST_SEED=<seed>` replays it.

pub mod harness;

use harness::{Options, Report, SinkMode, StoreKind};

use crate::source_support::seed;

/// Fault steps of a short run (`DCS_ADVERSARIAL_STEPS` to change).
const STEPS: u32 = 14;

async fn short(name: &str, sink: SinkMode) {
    let seed = seed(name);
    let steps = std::env::var("DCS_ADVERSARIAL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(STEPS);
    let opts = Options {
        steps,
        long_stalls: false,
        sink: Some(sink),
        store: Some(StoreKind::ConfigMap),
    };
    let mut report = Report::default();
    harness::run(seed, &opts, &mut report).await;
    println!("{}", report.summary());
    assert!(report.failures.is_empty(), "{}", report.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_sink_equals_the_source_through_seeded_faults() {
    short("adversarial-upsert", SinkMode::Upsert).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changelog_sink_holds_every_change_once_through_seeded_faults() {
    short("adversarial-changelog", SinkMode::Changelog).await;
}

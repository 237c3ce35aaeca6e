//! The snapshot reader against the emulator: every row once, over several tablets, with
//! projection, filter, resumption and Doris's errors.

use crate::source_support;

use std::collections::{BTreeMap, BTreeSet};

use arrow_array::RecordBatch;
use dcs_runner::Error;
use dcs_runner::settings::StreamRetry;
use dcs_runner::source::flight::resolve_flight_port;
use dcs_runner::source::snapshot::{self, Replay, SnapshotEvent, SnapshotOptions};
use source_support::*;

async fn seed(emu: &dcs_doris_emu::RunningEmulator, rows: usize) {
    exec(emu, &["CREATE DATABASE src", &unique_ddl("src.people", 6)]).await;
    let values: Vec<String> = (1..=rows)
        .map(|i| format!("({i}, 'person-{i}', {})", i % 97))
        .collect();
    for chunk in values.chunks(1000) {
        exec(
            emu,
            &[&format!(
                "INSERT INTO src.people VALUES {}",
                chunk.join(", ")
            )],
        )
        .await;
    }
}

/// Drain the reader: batches per split in arrival order, and the finished splits' tablets.
async fn drain(
    mut rx: tokio::sync::mpsc::Receiver<SnapshotEvent>,
) -> (Vec<RecordBatch>, BTreeMap<usize, Vec<i64>>) {
    let mut batches = Vec::new();
    let mut done = BTreeMap::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            SnapshotEvent::Batch { split, batch } => {
                assert!(
                    !done.contains_key(&split),
                    "a batch of split {split} after its SplitDone"
                );
                batches.push(batch);
            }
            SnapshotEvent::SplitDone { split, tablets } => {
                assert!(
                    done.insert(split, tablets).is_none(),
                    "split {split} done twice"
                );
            }
        }
    }
    (batches, done)
}

#[tokio::test]
async fn snapshot_equals_select_over_mysql() {
    let emu = emu().await;
    seed(&emu, 5000).await;
    let http = http(settings(&emu, "src.people"));
    let options = SnapshotOptions {
        concurrency: 3,
        channel_capacity: 2,
        ..Default::default()
    };
    let (plan, rx, task) = snapshot::read(&http, &options).await.unwrap();
    assert_eq!(plan.tablets_total.len(), 6);
    assert_eq!(plan.splits.len(), 4, "min(tablets, 4) splits");
    assert_eq!(plan.columns, ["id", "name", "age"]);
    let (batches, done) = drain(rx).await;
    task.await.unwrap().unwrap();

    let got = batch_rows(&batches, None);
    assert_eq!(got.len(), 5000, "every row exactly once");
    let expected = mysql_rows(&emu, "SELECT id, name, age FROM src.people").await;
    assert_eq!(row_set(&got), row_set(&expected));

    let tablets: BTreeSet<i64> = done.values().flatten().copied().collect();
    assert_eq!(tablets, plan.tablets_total.iter().copied().collect());
    assert_eq!(done.len(), 4);
    assert!(emu.doris.counters.get("flight_do_get_be") >= 4);
    // Sessions are closed: one per worker that ran.
    assert_eq!(
        emu.doris.counters.get("flight_close_session"),
        emu.doris.counters.get("flight_handshake")
    );
}

#[tokio::test]
async fn projection_keeps_the_unique_key_and_filter_applies() {
    let emu = emu().await;
    seed(&emu, 1200).await;
    let http = http(settings(&emu, "src.people"));
    let options = SnapshotOptions {
        columns: Some(vec!["age".into()]),
        filter: Some("age > 90".into()),
        ..Default::default()
    };
    let (plan, rx, task) = snapshot::read(&http, &options).await.unwrap();
    assert_eq!(plan.columns, ["id", "age"], "the key column is added first");
    let (batches, _) = drain(rx).await;
    task.await.unwrap().unwrap();
    let names: Vec<String> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["id", "age"]);
    let got = batch_rows(&batches, None);
    let expected = mysql_rows(&emu, "SELECT id, age FROM src.people WHERE age > 90").await;
    assert!(!expected.is_empty());
    assert_eq!(got.len(), expected.len());
    assert_eq!(row_set(&got), row_set(&expected));
}

#[tokio::test]
async fn finished_tablets_are_not_read_again() {
    let emu = emu().await;
    seed(&emu, 600).await;
    let http = http(settings(&emu, "src.people"));
    let first = snapshot::plan(&http, &SnapshotOptions::default())
        .await
        .unwrap();
    let done: Vec<i64> = first.tablets_total[..2].to_vec();
    let options = SnapshotOptions {
        tablets_done: done.clone(),
        ..Default::default()
    };
    let (plan, rx, task) = snapshot::read(&http, &options).await.unwrap();
    let planned: Vec<i64> = plan.splits.iter().flat_map(|s| s.tablets.clone()).collect();
    assert!(planned.iter().all(|t| !done.contains(t)));
    assert_eq!(planned.len(), 4);
    let (batches, _) = drain(rx).await;
    task.await.unwrap().unwrap();
    let ids: BTreeSet<String> = batch_rows(&batches, Some(&["id"]))
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    let mut all = BTreeSet::new();
    for t in &first.tablets_total {
        for r in mysql_rows(&emu, &format!("SELECT id FROM src.people TABLET({t})")).await {
            if !done.contains(t) {
                all.insert(r[0].clone());
            }
        }
    }
    assert_eq!(ids, all);
    assert!(ids.len() < 600);
}

#[tokio::test]
async fn a_bad_filter_fails_with_the_doris_message() {
    let emu = emu().await;
    seed(&emu, 10).await;
    let http = http(settings(&emu, "src.people"));
    let options = SnapshotOptions {
        filter: Some("nosuch > 1".into()),
        ..Default::default()
    };
    let (_, rx, task) = snapshot::read(&http, &options).await.unwrap();
    drop(drain(rx).await);
    let err = task.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Doris { .. }), "{err:?}");
    assert!(err.to_string().contains("nosuch"), "{err}");
}

#[tokio::test]
async fn unknown_tables_and_columns_are_reported() {
    let emu = emu().await;
    seed(&emu, 10).await;
    let err = snapshot::plan(
        &http(settings(&emu, "src.nosuch")),
        &SnapshotOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Doris { .. }), "{err:?}");
    let options = SnapshotOptions {
        columns: Some(vec!["nope".into()]),
        ..Default::default()
    };
    let err = snapshot::plan(&http(settings(&emu, "src.people")), &options)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"nope\""), "{err}");
}

#[tokio::test]
async fn the_flight_port_is_discovered_from_show_frontends() {
    let emu = emu().await;
    let port = resolve_flight_port(&http(settings(&emu, "src.people")))
        .await
        .unwrap();
    assert_eq!(port, emu.ports().fe_flight_port);
    assert_eq!(emu.doris.counters.get("fe_query"), 1);
    // An explicit port wins, without asking.
    let mut s = settings(&emu, "src.people");
    s.flight_sql_port = Some(4242);
    assert_eq!(resolve_flight_port(&http(s)).await.unwrap(), 4242);
    assert_eq!(emu.doris.counters.get("fe_query"), 1);
}

/// Arm doris-emu's `flight_cut_after_batches`: the next BE DoGet stream breaks after `batches`.
fn cut_next_stream(emu: &dcs_doris_emu::RunningEmulator, batches: u32) {
    emu.doris
        .faults
        .update(|f| f.flight_cut_after_batches = Some(batches));
}

fn quick_retry(max_retries: u32) -> StreamRetry {
    StreamRetry {
        max_retries,
        base: std::time::Duration::from_millis(10),
        max: std::time::Duration::from_millis(50),
    }
}

#[tokio::test]
async fn a_split_cut_mid_stream_is_read_again_and_continues_after_the_rows_sent() {
    let emu = emu().await;
    // 20 000 rows in 6 tablets, 4 splits: every split streams more than one 4096-row batch.
    seed(&emu, 20_000).await;
    let http = http(settings(&emu, "src.people"));
    cut_next_stream(&emu, 1);
    let options = SnapshotOptions {
        concurrency: 1,
        retry: quick_retry(3),
        ..Default::default()
    };
    assert_eq!(options.replay, Replay::SkipDelivered);
    let (_, rx, task) = snapshot::read(&http, &options).await.unwrap();
    let (batches, done) = drain(rx).await;
    task.await.unwrap().unwrap();
    assert_eq!(
        emu.doris.faults.get().flight_cut_after_batches,
        None,
        "the cut happened"
    );
    assert_eq!(
        emu.doris.counters.get("flight_do_get_be"),
        5,
        "4 splits, one read twice"
    );
    let got = batch_rows(&batches, None);
    assert_eq!(got.len(), 20_000, "every row exactly once");
    let expected = mysql_rows(&emu, "SELECT id, name, age FROM src.people").await;
    assert_eq!(row_set(&got), row_set(&expected));
    assert_eq!(done.len(), 4);
}

#[tokio::test]
async fn resend_sends_a_cut_split_again_from_its_first_row() {
    let emu = emu().await;
    seed(&emu, 20_000).await;
    let http = http(settings(&emu, "src.people"));
    cut_next_stream(&emu, 1);
    let options = SnapshotOptions {
        concurrency: 1,
        replay: Replay::Resend,
        retry: quick_retry(3),
        ..Default::default()
    };
    let (_, rx, task) = snapshot::read(&http, &options).await.unwrap();
    let (batches, _) = drain(rx).await;
    task.await.unwrap().unwrap();
    let got = batch_rows(&batches, None);
    assert_eq!(
        got.len(),
        20_000 + 4096,
        "the first batch of the cut split twice"
    );
    let expected = mysql_rows(&emu, "SELECT id, name, age FROM src.people").await;
    assert_eq!(row_set(&got), row_set(&expected));
}

#[tokio::test]
async fn a_cut_without_retries_left_fails_with_the_doris_message() {
    let emu = emu().await;
    seed(&emu, 20_000).await;
    let http = http(settings(&emu, "src.people"));
    cut_next_stream(&emu, 1);
    let options = SnapshotOptions {
        concurrency: 1,
        retry: quick_retry(0),
        ..Default::default()
    };
    let (_, rx, task) = snapshot::read(&http, &options).await.unwrap();
    drop(drain(rx).await);
    let err = task.await.unwrap().unwrap_err();
    assert_eq!(
        err.to_string(),
        "Flight DoGet: [INTERNAL_ERROR]arrow flight result stream interrupted after 1 batches \
         (injected fault)"
    );
}

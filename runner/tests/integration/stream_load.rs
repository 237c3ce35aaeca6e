//! The Stream Load client against the Doris emulator: redirects by hand, labels, 2PC, faults.

use std::time::Duration;

use bytes::Bytes;
use dcs_doris_client::stream_load::{LoadOutcome, LoadRequest, StreamLoadClient};
use dcs_doris_client::{TxnOperation, TxnOutcome};
use dcs_doris_emu::faults::StreamLoadFault;
use dcs_doris_emu::{EmuConfig, RunningEmulator};
use mysql_async::prelude::*;

async fn emu_with_table() -> (RunningEmulator, mysql_async::Conn) {
    let emu = dcs_doris_emu::start(EmuConfig::ephemeral()).await.unwrap();
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(emu.ports().query_port)
        .user(Some("root"))
        .pass(Some(""));
    let mut c = mysql_async::Conn::new(opts).await.unwrap();
    c.query_drop("CREATE DATABASE sink").await.unwrap();
    c.query_drop(
        "CREATE TABLE sink.t (id INT NOT NULL, name VARCHAR(32)) UNIQUE KEY(id) \
         DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES ('replication_num' = '1')",
    )
    .await
    .unwrap();
    (emu, c)
}

fn client(emu: &RunningEmulator, password: &str) -> StreamLoadClient {
    StreamLoadClient::new(
        vec![emu.fe_http_addr()],
        vec![],
        "root".into(),
        password.into(),
        Duration::from_secs(10),
    )
}

fn json_load(label: &str, body: &str, two_phase: bool) -> LoadRequest {
    LoadRequest {
        db: "sink".into(),
        table: "t".into(),
        label: label.into(),
        headers: vec![
            ("format".into(), "json".into()),
            ("read_json_by_line".into(), "true".into()),
            ("hidden_columns".into(), "__DORIS_DELETE_SIGN__".into()),
            ("two_phase_commit".into(), two_phase.to_string()),
        ],
        body: Bytes::from(body.to_string()),
    }
}

async fn rows(c: &mut mysql_async::Conn) -> Vec<(i32, String)> {
    c.query("SELECT id, name FROM sink.t ORDER BY id")
        .await
        .unwrap()
}

#[tokio::test]
async fn loads_through_the_fe_redirect_and_deduplicates_by_label() {
    let (emu, mut c) = emu_with_table().await;
    let sl = client(&emu, "");
    let body = "{\"id\":1,\"name\":\"a\",\"__DORIS_DELETE_SIGN__\":0}\n{\"id\":2,\"name\":\"b\",\"__DORIS_DELETE_SIGN__\":0}\n";
    match sl.load_once(&json_load("dcs-x-1-0", body, false), 0).await {
        LoadOutcome::Loaded(r) => assert_eq!(r.number_loaded_rows, 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(rows(&mut c).await, vec![(1, "a".into()), (2, "b".into())]);
    // The same label again is recognised as done, and nothing loads twice.
    let again = sl
        .load_once(
            &json_load("dcs-x-1-0", "{\"id\":3,\"name\":\"c\"}\n", false),
            1,
        )
        .await;
    assert!(
        matches!(again, LoadOutcome::AlreadyLoaded { ref existing_status, .. } if existing_status == "FINISHED"),
        "{again:?}"
    );
    assert_eq!(rows(&mut c).await.len(), 2);
    // A delete sign deletes.
    let del = "{\"id\":1,\"name\":\"a\",\"__DORIS_DELETE_SIGN__\":1}\n";
    assert!(matches!(
        sl.load_once(&json_load("dcs-x-2-0", del, false), 0).await,
        LoadOutcome::Loaded(_)
    ));
    assert_eq!(rows(&mut c).await, vec![(2, "b".into())]);
    assert_eq!(
        emu.doris.counters.get("fe_stream_load"),
        3,
        "every load asked the FE for a BE"
    );
    assert_eq!(emu.doris.counters.get("be_stream_load"), 3);
}

#[tokio::test]
async fn two_phase_loads_become_visible_on_commit_only() {
    let (emu, mut c) = emu_with_table().await;
    let sl = client(&emu, "");
    let txn = match sl
        .load_once(
            &json_load("dcs-x-5-0", "{\"id\":5,\"name\":\"e\"}\n", true),
            0,
        )
        .await
    {
        LoadOutcome::Loaded(r) => r.txn_id,
        other => panic!("{other:?}"),
    };
    assert!(
        rows(&mut c).await.is_empty(),
        "pre-committed rows are invisible"
    );
    // A replayed pre-commit after a crash is recognised, with the transaction id.
    let replay = sl
        .load_once(
            &json_load("dcs-x-5-0", "{\"id\":5,\"name\":\"e\"}\n", true),
            0,
        )
        .await;
    assert_eq!(
        replay,
        LoadOutcome::AlreadyLoaded {
            existing_status: "PRECOMMITTED".into(),
            txn_id: Some(txn)
        }
    );
    assert_eq!(
        sl.finish_txn("sink", txn, TxnOperation::Commit, 1).await,
        TxnOutcome::Done
    );
    assert_eq!(rows(&mut c).await, vec![(5, "e".into())]);
    // Committing again (a restart re-commits the saved checkpoint's txns) is still done.
    assert_eq!(
        sl.finish_txn("sink", txn, TxnOperation::Commit, 1).await,
        TxnOutcome::Done
    );
    // An abort of a visible transaction cannot succeed.
    assert!(matches!(
        sl.finish_txn("sink", txn, TxnOperation::Abort, 1).await,
        TxnOutcome::AlreadyCommitted(_)
    ));

    let txn2 = match sl
        .load_once(
            &json_load("dcs-x-6-0", "{\"id\":6,\"name\":\"f\"}\n", true),
            0,
        )
        .await
    {
        LoadOutcome::Loaded(r) => r.txn_id,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        sl.finish_txn("sink", txn2, TxnOperation::Abort, 1).await,
        TxnOutcome::Done
    );
    assert_eq!(rows(&mut c).await, vec![(5, "e".into())]);
}

#[tokio::test]
async fn server_errors_are_retryable_and_bad_credentials_are_not() {
    let (emu, _c) = emu_with_table().await;
    emu.doris.faults.update(|f| {
        f.stream_load = Some(StreamLoadFault {
            count: 1,
            http_status: Some(503),
            status: None,
            message: None,
        })
    });
    let sl = client(&emu, "");
    let req = json_load("dcs-x-7-0", "{\"id\":7,\"name\":\"g\"}\n", false);
    assert!(matches!(sl.load_once(&req, 0).await, LoadOutcome::Retry(m) if m.contains("503")));
    assert!(matches!(
        sl.load_once(&req, 1).await,
        LoadOutcome::Loaded(_)
    ));

    let wrong = client(&emu, "not-the-password");
    let outcome = wrong
        .load_once(&json_load("dcs-x-8-0", "{}\n", false), 0)
        .await;
    assert!(
        matches!(&outcome, LoadOutcome::Permanent(m) if m.contains("credentials")),
        "{outcome:?}"
    );
    assert!(
        !format!("{outcome:?}").contains("not-the-password"),
        "the password never appears in errors"
    );
}

#[tokio::test]
async fn data_errors_are_permanent_naming_the_rejected_row() {
    let (emu, _c) = emu_with_table().await;
    let sl = client(&emu, "");
    let outcome = sl
        .load_once(
            &json_load("dcs-x-9-0", "{\"id\":null,\"name\":\"x\"}\n", false),
            0,
        )
        .await;
    match outcome {
        LoadOutcome::Permanent(m) => {
            assert!(m.contains("rejected 1 of 1 rows"), "{m}");
            assert!(m.contains("; column id;"), "{m}");
            assert!(m.contains("first rejected row: NULL x"), "{m}");
            assert!(!m.contains("_load_error_log"), "no URL in errors: {m}");
        }
        other => panic!("{other:?}"),
    }
}

/// One of two FEs down: a 2PC request's next attempt goes to the other FE, whichever of the two
/// the transaction id or label picks first (before, every attempt went to the same FE, and a
/// runner whose pending transaction mapped to the dead FE exited on every restart).
#[tokio::test]
async fn with_one_of_two_fes_down_2pc_reaches_the_other_on_the_next_attempt() {
    let (emu, mut c) = emu_with_table().await;
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    for (round, nodes) in [
        vec![dead.clone(), emu.fe_http_addr()],
        vec![emu.fe_http_addr(), dead.clone()],
    ]
    .into_iter()
    .enumerate()
    {
        let sl = StreamLoadClient::new(
            nodes.clone(),
            vec![],
            "root".into(),
            String::new(),
            Duration::from_secs(10),
        );
        let live = client(&emu, "");
        for id in 1..=2 {
            let label = format!("dcs-fe-{round}-{id}");
            let body = format!("{{\"id\":{id},\"name\":\"n{id}\"}}\n");
            let txn = match live.load_once(&json_load(&label, &body, true), 0).await {
                LoadOutcome::Loaded(r) => r.txn_id,
                other => panic!("{other:?}"),
            };
            let outcomes = [
                sl.finish_txn("sink", txn, TxnOperation::Commit, 1).await,
                sl.finish_txn("sink", txn, TxnOperation::Commit, 2).await,
            ];
            assert!(
                outcomes.contains(&TxnOutcome::Done),
                "txn {txn} over {nodes:?}: {outcomes:?}"
            );
            assert!(
                outcomes.iter().any(|o| matches!(o, TxnOutcome::Retry(_))),
                "one of the attempts went to the dead FE: {outcomes:?}"
            );
        }
        c.query_drop("TRUNCATE TABLE sink.t").await.unwrap();
    }
}

/// A listener standing for a host outside the cluster: counts the connections it accepts and
/// answers nothing.
async fn stranger() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn credentials_follow_a_redirect_only_to_a_node_of_the_cluster() {
    let (emu, mut c) = emu_with_table().await;
    let sl = client(&emu, "");
    let body = "{\"id\":1,\"name\":\"a\",\"__DORIS_DELETE_SIGN__\":0}\n";
    // The FE redirects to its BE, which is not in the FE list: the FE's BE list admits it, read
    // once and then remembered.
    for (n, label) in ["dcs-r-1-0", "dcs-r-1-1"].into_iter().enumerate() {
        match sl.load_once(&json_load(label, body, false), 0).await {
            LoadOutcome::Loaded(_) => {}
            other => panic!("load {n}: {other:?}"),
        }
    }
    assert_eq!(emu.doris.counters.get("fe_backends"), 1);

    // A rogue FE points its 307 at a host of its choosing: nothing is sent there, and the load
    // fails for good with what to do, whatever the attempt.
    let (foreign, accepted) = stranger().await;
    emu.doris
        .faults
        .update(|f| f.redirect_to = Some(foreign.clone()));
    for attempt in 0..2 {
        match sl
            .load_once(&json_load("dcs-r-2-0", body, false), attempt)
            .await
        {
            LoadOutcome::Permanent(m) => assert_eq!(
                m,
                format!(
                    "FE {fe} redirected to {foreign}, which is not a node of the cluster (neither \
                     in feNodes nor in beNodes, nor a live BE the FE lists at /api/backends); the \
                     credentials were not sent there: if it is a BE of this cluster, add it to \
                     beNodes",
                    fe = emu.fe_http_addr()
                )
            ),
            other => panic!("{other:?}"),
        }
    }
    // The list read a moment ago is not asked for again: a stream of foreign redirects is not a
    // stream of requests to the FE.
    assert_eq!(emu.doris.counters.get("fe_backends"), 1);
    // 2PC through the same FE: refused too.
    let e = sl
        .send_2pc(
            "sink",
            dcs_doris_client::TxnKey::Label("dcs-r-2-0"),
            TxnOperation::Abort,
            0,
        )
        .await
        .unwrap_err();
    assert!(
        e.contains(&format!(
            "redirected to {foreign}, which is not a node of the cluster"
        )),
        "{e}"
    );
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(rows(&mut c).await, vec![(1, "a".into())]);

    // The same host given as a BE of the cluster is trusted: the load goes to it.
    let listed = StreamLoadClient::new(
        vec![emu.fe_http_addr()],
        vec![foreign.clone()],
        "root".into(),
        String::new(),
        Duration::from_secs(2),
    );
    assert!(matches!(
        listed
            .load_once(&json_load("dcs-r-3-0", body, false), 0)
            .await,
        LoadOutcome::Retry(_)
    ));
    assert!(accepted.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}

/// A value an INT column cannot hold, sent with strict mode as the runner sends every load:
/// Doris filters the row and fails the load; the client reads the ErrorURL and names the
/// column, Doris's reason and the row. With `max_filter_ratio` 0.5 Doris loads the rest and
/// answers `Success`, which is refused all the same: the filtered row would be lost.
#[tokio::test]
async fn strict_mode_rejections_name_the_column_and_the_row() {
    let (emu, mut c) = emu_with_table().await;
    c.query_drop(
        "CREATE TABLE sink.n (id INT NOT NULL, big INT) UNIQUE KEY(id) \
         DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES ('replication_num' = '1')",
    )
    .await
    .unwrap();
    let sl = client(&emu, "");
    let load = |label: &str, extra: &[(&str, &str)]| {
        let mut req = json_load(
            label,
            "{\"id\":1,\"big\":7}\n{\"id\":2,\"big\":5000000000}\n",
            false,
        );
        req.table = "n".into();
        req.headers.push(("strict_mode".into(), "true".into()));
        for (k, v) in extra {
            req.headers.push(((*k).into(), (*v).into()));
        }
        req
    };
    let failed = sl.load_once(&load("dcs-n-1-0", &[]), 0).await;
    let LoadOutcome::Permanent(m) = failed else {
        panic!("{failed:?}");
    };
    assert_eq!(
        m,
        "Stream Load of label dcs-n-1-0 rejected 1 of 2 rows (Fail: [DATA_QUALITY_ERROR]too many \
         filtered rows), so the batch was not written; column big; Doris says: column(big) value \
         is incorrect while strict mode is true, src value is 5000000000; first rejected row: 2 \
         5000000000 NULL; make the sink column hold the source's values (dcs-runner \
         check compares the types) and restart; nothing of this batch was counted as written"
    );
    let partial = sl
        .load_once(&load("dcs-n-2-0", &[("max_filter_ratio", "0.5")]), 0)
        .await;
    assert!(
        matches!(&partial, LoadOutcome::Permanent(m)
            if m.starts_with("Stream Load of label dcs-n-2-0 rejected 1 of 2 rows (Success: OK)")
                && m.contains("first rejected row: 2 5000000000 NULL")),
        "{partial:?}"
    );
    assert_eq!(emu.doris.counters.get("be_load_error_log"), 2);
}

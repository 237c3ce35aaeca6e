//! Stream Load through the FE redirect to the BE, 2PC, label dedup, filtering and faults.
//! Loads follow the 307 by hand (as a client must); results are read back over the statement API.

use crate::common;

use common::{STUDENT_DDL, emu, setup_sql};
use dcs_doris_emu::RunningEmulator;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    crate::common::plain_reqwest_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn student() -> RunningEmulator {
    let e = emu().await;
    setup_sql(&e, &["CREATE DATABASE test", STUDENT_DDL]).await;
    e
}

/// PUT to the FE, check the 307, replay to the Location with the credentials; the raw body.
async fn put_via_fe(
    e: &RunningEmulator,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (StatusCode, String) {
    let c = client();
    let mut b = c
        .put(format!("http://{}{}", e.fe_http_addr(), path))
        .basic_auth("root", Some(""))
        .header("Expect", "100-continue");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let r = b.send().await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::TEMPORARY_REDIRECT,
        "{:?}",
        r.text().await
    );
    let loc = r.headers()["location"].to_str().unwrap().to_string();
    let prefix = format!("http://root:@127.0.0.1:{}/", e.ports().be_http_port);
    assert!(loc.starts_with(&prefix), "{loc}");
    let target = loc.replacen("root:@", "", 1);
    let mut b = c
        .put(target)
        .basic_auth("root", Some(""))
        .header("Expect", "100-continue");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let r = b.body(body.to_vec()).send().await.unwrap();
    let status = r.status();
    (status, r.text().await.unwrap())
}

async fn load(e: &RunningEmulator, headers: &[(&str, &str)], body: &str) -> Value {
    let (s, t) = put_via_fe(
        e,
        "/api/test/student/_stream_load",
        headers,
        body.as_bytes(),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{t}");
    serde_json::from_str(&t).unwrap_or_else(|_| panic!("not JSON: {t}"))
}

async fn two_pc(e: &RunningEmulator, headers: &[(&str, &str)]) -> Value {
    let (s, t) = put_via_fe(e, "/api/test/_stream_load_2pc", headers, b"").await;
    assert_eq!(s, StatusCode::OK, "{t}");
    serde_json::from_str(&t).unwrap()
}

async fn rows(e: &RunningEmulator, sql: &str) -> Value {
    let r = client()
        .post(format!(
            "http://{}/api/query/default_cluster/test",
            e.fe_http_addr()
        ))
        .basic_auth("root", Some(""))
        .json(&json!({ "stmt": sql }))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["code"], 0, "{v}");
    v["data"]["data"].clone()
}

async fn ids(e: &RunningEmulator) -> Value {
    rows(e, "select id from test.student order by id").await
}

#[tokio::test]
async fn csv_load_succeeds_with_dorises_response() {
    let e = student().await;
    let (s, raw) = put_via_fe(
        &e,
        "/api/test/student/_stream_load",
        &[("label", "csv-1"), ("column_separator", ",")],
        b"1,ann,20,12.50,2024-01-02 03:04:05.678\n2,bob,\\N,1,\\N\n3,cy,30,\\N,\\N\n",
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let keys: Vec<&str> = raw
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"').and_then(|x| x.split('"').next()))
        .collect();
    assert_eq!(
        keys,
        vec![
            "TxnId",
            "Label",
            "Comment",
            "TwoPhaseCommit",
            "Status",
            "Message",
            "NumberTotalRows",
            "NumberLoadedRows",
            "NumberFilteredRows",
            "NumberUnselectedRows",
            "LoadBytes",
            "LoadTimeMs",
            "BeginTxnTimeMs",
            "StreamLoadPutTimeMs",
            "ReadDataTimeMs",
            "WriteDataTimeMs",
            "CommitAndPublishTimeMs"
        ]
    );
    let v: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(v["Status"], "Success");
    assert_eq!(v["Message"], "OK");
    assert_eq!(v["Label"], "csv-1");
    assert_eq!(v["TwoPhaseCommit"], "false");
    assert_eq!(v["NumberTotalRows"], 3);
    assert_eq!(v["NumberLoadedRows"], 3);
    assert_eq!(v["NumberFilteredRows"], 0);
    assert!(v["TxnId"].as_i64().unwrap() > 0);
    assert!(v.get("ErrorURL").is_none());
    assert_eq!(
        rows(
            &e,
            "select id, name, age, score, updated from test.student order by id"
        )
        .await,
        json!([
            [1, "ann", 20, 12.50, "2024-01-02 03:04:05.678"],
            [2, "bob", null, 1.00, null],
            [3, "cy", 30, null, null]
        ])
    );
    // Generated label when none is sent.
    let v = load(&e, &[("column_separator", ",")], "4,d,1,1,\\N\n").await;
    assert_eq!(v["Status"], "Success");
    assert_eq!(v["Label"].as_str().unwrap().len(), 36);
}

#[tokio::test]
async fn json_by_line_and_strip_outer_array() {
    let e = student().await;
    let v = load(
        &e,
        &[("format", "json"), ("read_json_by_line", "true")],
        "{\"id\":1,\"name\":\"a\",\"age\":\"7\",\"score\":\"1.25\"}\n{\"id\":2,\"name\":null,\"age\":8}\n",
    )
    .await;
    assert_eq!(v["Status"], "Success", "{v}");
    assert_eq!(v["NumberLoadedRows"], 2);
    let v = load(
        &e,
        &[("format", "json"), ("strip_outer_array", "true")],
        "[{\"id\":3,\"name\":\"c\"},{\"id\":4,\"age\":true,\"updated\":\"2024-05-06 07:08:09\"}]",
    )
    .await;
    assert_eq!(v["Status"], "Success", "{v}");
    assert_eq!(v["NumberLoadedRows"], 2);
    assert_eq!(
        rows(
            &e,
            "select id, name, age, score from test.student order by id"
        )
        .await,
        json!([
            [1, "a", 7, 1.25],
            [2, null, 8, null],
            [3, "c", null, null],
            [4, null, 1, null]
        ])
    );
}

#[tokio::test]
async fn columns_hidden_delete_sign_merge_delete_and_partial_update() {
    let e = student().await;
    let v = load(
        &e,
        &[("column_separator", ","), ("columns", "name,id")],
        "a,1\nb,2\nc,3\nd,4\n",
    )
    .await;
    assert_eq!(v["NumberLoadedRows"], 4, "{v}");
    // hidden_columns: the delete sign is the last CSV field.
    let v = load(
        &e,
        &[
            ("column_separator", ","),
            ("hidden_columns", "__DORIS_DELETE_SIGN__"),
        ],
        "1,a,1,1,\\N,1\n5,e,5,5,\\N,0\n",
    )
    .await;
    assert_eq!(v["Status"], "Success", "{v}");
    assert_eq!(ids(&e).await, json!([[2], [3], [4], [5]]));
    // Delete sign as a JSON key.
    let v = load(
        &e,
        &[
            ("format", "json"),
            ("hidden_columns", "__DORIS_DELETE_SIGN__"),
            ("read_json_by_line", "true"),
        ],
        "{\"id\":5,\"__DORIS_DELETE_SIGN__\":1}\n",
    )
    .await;
    assert_eq!(v["Status"], "Success", "{v}");
    assert_eq!(ids(&e).await, json!([[2], [3], [4]]));
    // merge_type DELETE: every row deletes.
    let v = load(
        &e,
        &[
            ("column_separator", ","),
            ("columns", "id"),
            ("merge_type", "DELETE"),
        ],
        "2\n",
    )
    .await;
    assert_eq!(v["Status"], "Success", "{v}");
    assert_eq!(ids(&e).await, json!([[3], [4]]));
    // partial_columns: only age changes.
    let v = load(
        &e,
        &[
            ("column_separator", ","),
            ("columns", "id,age"),
            ("partial_columns", "true"),
        ],
        "3,33\n",
    )
    .await;
    assert_eq!(v["Status"], "Success", "{v}");
    assert_eq!(
        rows(&e, "select id, name, age from test.student order by id").await,
        json!([[3, "c", 33], [4, "d", null]])
    );
    // Unsupported expression in columns: a clear failure, nothing written.
    let v = load(
        &e,
        &[("column_separator", ","), ("columns", "id,name=upper(x)")],
        "9,z\n",
    )
    .await;
    assert_eq!(v["Status"], "Fail");
    assert!(
        v["Message"].as_str().unwrap().contains("not supported"),
        "{v}"
    );
    assert_eq!(ids(&e).await, json!([[3], [4]]));
}

#[tokio::test]
async fn filtered_rows_max_filter_ratio_and_error_url() {
    let e = student().await;
    let body = "1,a,1,1,\\N\n\\N,b,2,2,\\N\n3,c\n";
    let v = load(&e, &[("column_separator", ","), ("label", "f1")], body).await;
    assert_eq!(v["Status"], "Fail", "{v}");
    assert_eq!(v["Message"], "[DATA_QUALITY_ERROR]too many filtered rows");
    assert_eq!(v["NumberTotalRows"], 3);
    assert_eq!(v["NumberFilteredRows"], 2);
    let url = v["ErrorURL"].as_str().unwrap();
    let prefix = format!(
        "http://127.0.0.1:{}/api/_load_error_log?file=__shard_",
        e.ports().be_http_port
    );
    assert!(url.starts_with(&prefix), "{url}");
    let log = client()
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(log.contains("Reason: "), "{log}");
    assert!(
        log.contains(
            "Reason: column(id) values is null while columns is not nullable. src line [NULL b 2 2 NULL]; "
        ),
        "{log}"
    );
    assert!(log.contains("src line [3,c]"), "{log}");
    assert_eq!(ids(&e).await, json!([]));
    // The failed load's label is free again.
    let v = load(
        &e,
        &[
            ("column_separator", ","),
            ("label", "f1"),
            ("max_filter_ratio", "0.7"),
        ],
        body,
    )
    .await;
    assert_eq!(v["Status"], "Success", "{v}");
    assert_eq!(v["NumberLoadedRows"], 1);
    assert_eq!(v["NumberFilteredRows"], 2);
    assert!(v["ErrorURL"].is_string());
    assert_eq!(ids(&e).await, json!([[1]]));
    // strict_mode turns a bad value into a filtered row; without it the value becomes NULL.
    let v = load(
        &e,
        &[("column_separator", ","), ("columns", "id,age")],
        "7,abc\n",
    )
    .await;
    assert_eq!(v["NumberLoadedRows"], 1, "{v}");
    let v = load(
        &e,
        &[
            ("column_separator", ","),
            ("columns", "id,age"),
            ("strict_mode", "true"),
        ],
        "8,abc\n",
    )
    .await;
    assert_eq!(v["Status"], "Fail", "{v}");
}

#[tokio::test]
async fn duplicate_labels_report_the_existing_job() {
    let e = student().await;
    let v = load(
        &e,
        &[("column_separator", ","), ("label", "dup")],
        "1,a,1,1,\\N\n",
    )
    .await;
    assert_eq!(v["Status"], "Success");
    let txn = v["TxnId"].as_i64().unwrap();
    let v = load(
        &e,
        &[("column_separator", ","), ("label", "dup")],
        "2,b,1,1,\\N\n",
    )
    .await;
    assert_eq!(v["Status"], "Label Already Exists");
    assert_eq!(v["ExistingJobStatus"], "FINISHED");
    assert_eq!(v["TxnId"], -1);
    assert_eq!(
        v["Message"],
        format!(
            "errCode = 2, detailMessage = Label [dup] has already been used, relate to txn [{txn}]"
        )
    );
    assert_eq!(ids(&e).await, json!([[1]]));

    let v = load(
        &e,
        &[
            ("column_separator", ","),
            ("label", "dup2"),
            ("two_phase_commit", "true"),
        ],
        "3,c,1,1,\\N\n",
    )
    .await;
    assert_eq!(v["Status"], "Success");
    assert_eq!(v["TwoPhaseCommit"], "true");
    let v = load(
        &e,
        &[("column_separator", ","), ("label", "dup2")],
        "3,c,1,1,\\N\n",
    )
    .await;
    assert_eq!(v["Status"], "Label Already Exists");
    assert_eq!(v["ExistingJobStatus"], "PRECOMMITTED");
}

#[tokio::test]
async fn two_phase_commit_abort_and_every_error() {
    let e = student().await;
    let v = load(
        &e,
        &[
            ("column_separator", ","),
            ("label", "p1"),
            ("two_phase_commit", "true"),
        ],
        "1,a,1,1,\\N\n",
    )
    .await;
    assert_eq!(v["Status"], "Success", "{v}");
    let txn = v["TxnId"].as_i64().unwrap().to_string();
    assert_eq!(
        ids(&e).await,
        json!([]),
        "pre-committed rows are not visible"
    );
    let v = two_pc(&e, &[("txn_id", &txn), ("txn_operation", "commit")]).await;
    assert_eq!(
        v,
        json!({"status": "Success", "msg": format!("transaction [{txn}] commit successfully.")})
    );
    assert_eq!(ids(&e).await, json!([[1]]));
    // Commit again: already visible.
    let v = two_pc(&e, &[("txn_id", &txn), ("txn_operation", "commit")]).await;
    assert_eq!(v["status"], "Fail");
    let m = v["msg"].as_str().unwrap();
    assert!(
        m.contains("is already") && m.contains("not pre-committed"),
        "{m}"
    );
    // Abort a committed one.
    let v = two_pc(&e, &[("txn_id", &txn), ("txn_operation", "abort")]).await;
    assert!(
        v["msg"].as_str().unwrap().contains("could not abort"),
        "{v}"
    );

    // Abort by label; the label is reusable afterwards.
    let v = load(
        &e,
        &[
            ("column_separator", ","),
            ("label", "p2"),
            ("two_phase_commit", "true"),
        ],
        "2,b,1,1,\\N\n",
    )
    .await;
    let txn2 = v["TxnId"].as_i64().unwrap().to_string();
    let v = two_pc(&e, &[("label", "p2"), ("txn_operation", "abort")]).await;
    assert_eq!(
        v,
        json!({"status": "Success", "msg": "label [p2] abort successfully."})
    );
    let v = two_pc(&e, &[("txn_id", &txn2), ("txn_operation", "commit")]).await;
    assert_eq!(v["status"], "Fail");
    assert!(
        v["msg"].as_str().unwrap().contains("is already aborted"),
        "{v}"
    );
    let v = load(
        &e,
        &[("column_separator", ","), ("label", "p2")],
        "2,b,1,1,\\N\n",
    )
    .await;
    assert_eq!(v["Status"], "Success", "{v}");
    assert_eq!(ids(&e).await, json!([[1], [2]]));

    // Error messages of docs/doris-protocols.md §4.3.
    let v = two_pc(&e, &[("txn_id", "abc"), ("txn_operation", "commit")]).await;
    assert_eq!(
        v,
        json!({"status": "Fail", "msg": "convert txn_id [abc] failed"})
    );
    let v = two_pc(&e, &[("txn_id", "1"), ("txn_operation", "rollback")]).await;
    assert_eq!(
        v,
        json!({"status": "Fail", "msg": "transaction operation should be 'commit' or 'abort'"})
    );
    let v = two_pc(&e, &[("txn_id", "987654321"), ("txn_operation", "commit")]).await;
    assert_eq!(v["status"], "Fail");
    assert_eq!(
        v["msg"],
        "errCode = 2, detailMessage = transaction [987654321] not found"
    );
}

#[tokio::test]
async fn injected_failures_then_success_and_counters() {
    let e = student().await;
    let c = client();
    let fe = |p: &str| format!("http://{}{}", e.fe_http_addr(), p);
    c.delete(fe("/_emu/counters")).send().await.unwrap();
    c.put(fe("/_emu/faults"))
        .json(&json!({"stream_load": {"count": 2, "http_status": 503}}))
        .send()
        .await
        .unwrap();
    for _ in 0..2 {
        let (s, _) = put_via_fe(
            &e,
            "/api/test/student/_stream_load",
            &[("column_separator", ",")],
            b"1,a,1,1,\\N\n",
        )
        .await;
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    }
    let v = load(&e, &[("column_separator", ",")], "1,a,1,1,\\N\n").await;
    assert_eq!(v["Status"], "Success");
    let counters: Value = c
        .get(fe("/_emu/counters"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(counters["fe_stream_load"], 3);
    assert_eq!(counters["be_stream_load"], 3);

    // A body Status fault: nothing applied.
    c.put(fe("/_emu/faults"))
        .json(&json!({"stream_load": {"count": 1, "status": "Fail", "message": "boom"}}))
        .send()
        .await
        .unwrap();
    let v = load(&e, &[("column_separator", ",")], "2,b,1,1,\\N\n").await;
    assert_eq!(
        (v["Status"].as_str(), v["Message"].as_str()),
        (Some("Fail"), Some("boom"))
    );
    // Publish Timeout: committed, reported as such.
    c.put(fe("/_emu/faults"))
        .json(&json!({"stream_load": {"count": 1, "status": "Publish Timeout"}}))
        .send()
        .await
        .unwrap();
    let v = load(&e, &[("column_separator", ",")], "3,c,1,1,\\N\n").await;
    assert_eq!(v["Status"], "Publish Timeout", "{v}");
    assert_eq!(ids(&e).await, json!([[1], [3]]));
    let txns: Value = c
        .get(fe("/_emu/txns"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        txns.as_array()
            .unwrap()
            .iter()
            .any(|t| t["state"] == "VISIBLE"),
        "{txns}"
    );
}

#[tokio::test]
async fn hostile_input_fails_cleanly() {
    let e = student().await;
    let v = load(&e, &[("format", "parquet")], "x").await;
    assert_eq!(v["Status"], "Fail");
    let v = load(&e, &[("format", "xml")], "x").await;
    assert_eq!(v["Message"], "unknown data format, format=xml");
    let (s, t) = put_via_fe(
        &e,
        "/api/test/student/_stream_load",
        &[("column_separator", ",")],
        b"\xff\xfe,\x80\n",
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let v: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(v["Status"], "Fail");
    let long = format!("1,{},1,1,\\N\n", "x".repeat(2_000_000));
    let v = load(&e, &[("column_separator", ",")], &long).await;
    assert_eq!(v["Status"], "Fail");
    assert_eq!(v["NumberFilteredRows"], 1);
    let v = load(&e, &[("format", "json")], &"[".repeat(100_000)).await;
    assert_eq!(v["Status"], "Fail");
    let v = load(&e, &[], "").await;
    assert_eq!(v["Status"], "Success");
    assert_eq!(v["NumberTotalRows"], 0);
    let v = load(&e, &[("label", "bad.label")], "1\n").await;
    assert_eq!(
        v["Message"],
        "errCode = 2, detailMessage = Label format error. regex: ^[-_A-Za-z0-9:]{1,128}$, label: bad.label"
    );
    // Unknown table.
    let (_, t) = put_via_fe(&e, "/api/test/nope/_stream_load", &[], b"1\n").await;
    let v: Value = serde_json::from_str(&t).unwrap();
    assert_eq!(v["Status"], "Fail");
    assert_eq!(v["TxnId"], -1);
}

#[tokio::test]
async fn big_body_sent_to_the_fe_does_not_break_the_redirect() {
    // A client that cannot wait for `100 Continue` (reqwest) sends the body to the FE too.
    let e = student().await;
    let body: String = (0..200_000)
        .map(|i| format!("{i},n{i},1,1,\\N\n"))
        .collect();
    assert!(body.len() > 3_000_000);
    let v = load(&e, &[("column_separator", ",")], &body).await;
    assert_eq!(v["Status"], "Success", "{v}");
    assert_eq!(v["NumberLoadedRows"], 200_000);
}

//! FE HTTP: /api/tso, auth, statement API, _schema, _query_plan, Stream Load / 2PC entries
//! (307), and the /_emu control API. Everything is asserted over HTTP.

use crate::common;

use std::time::{Duration, Instant};

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

fn fe(e: &RunningEmulator, path: &str) -> String {
    format!("http://{}{}", e.fe_http_addr(), path)
}

async fn get_json(e: &RunningEmulator, path: &str) -> Value {
    let r = client()
        .get(fe(e, path))
        .basic_auth("root", Some(""))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

async fn stmt(e: &RunningEmulator, db: &str, sql: &str) -> Value {
    let r = client()
        .post(fe(e, &format!("/api/query/default_cluster/{db}")))
        .basic_auth("root", Some(""))
        .json(&json!({ "stmt": sql }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

async fn with_student() -> RunningEmulator {
    let e = emu().await;
    setup_sql(&e, &["CREATE DATABASE test", STUDENT_DDL]).await;
    e
}

#[tokio::test]
async fn tso_shape_and_moves_with_the_clock() {
    let e = emu().await;
    let v = get_json(&e, "/api/tso").await;
    assert_eq!(v["code"], 0);
    assert_eq!(v["msg"], "success");
    let d = &v["data"];
    let tso = d["current_tso"].as_i64().unwrap();
    let phys = d["current_tso_physical_time"].as_i64().unwrap();
    assert_eq!(tso >> 18, phys);
    assert_eq!(
        tso & 0x3ffff,
        d["current_tso_logical_counter"].as_i64().unwrap()
    );
    assert!(d["window_end_physical_time"].as_i64().unwrap() > phys);
    assert!(phys > 1_700_000_000_000);

    let r = client()
        .post(fe(&e, "/_emu/clock/advance"))
        .json(&json!({"seconds": 3600}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let now: Value = r.json().await.unwrap();
    assert!(now["now_ms"].as_i64().unwrap() >= phys + 3_600_000);
    let v2 = get_json(&e, "/api/tso").await;
    assert!(v2["data"]["current_tso_physical_time"].as_i64().unwrap() >= phys + 3_600_000);
    let clock = get_json(&e, "/_emu/clock").await;
    assert!(clock["now_ms"].as_i64().unwrap() >= phys + 3_600_000);
}

#[tokio::test]
async fn auth_failures_answer_like_the_fe() {
    let e = emu().await;
    // No credentials.
    let r = client().get(fe(&e, "/api/tso")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v,
        json!({"msg": "Unauthorized", "code": 401, "data": "Need auth information.", "count": 0})
    );
    // Wrong password.
    let r = client()
        .get(fe(&e, "/api/tso"))
        .basic_auth("root", Some("bad"))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["code"], 401);
    assert_eq!(
        v["data"],
        "Access denied for user 'root@127.0.0.1' (using password: YES)"
    );
    // Unknown user, stream load entry.
    let r = client()
        .put(fe(&e, "/api/test/student/_stream_load"))
        .basic_auth("nobody", Some(""))
        .header("Expect", "100-continue")
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["data"],
        "Access denied for user 'nobody@127.0.0.1' (using password: NO)"
    );
    // Statement API without auth checks the cookie.
    let r = client()
        .post(fe(&e, "/api/query/default_cluster/test"))
        .json(&json!({"stmt": "select 1"}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["code"], 401);
    assert_eq!(v["data"], "Cookie is invalid");
    // BE: no Basic header.
    let be = format!(
        "http://127.0.0.1:{}/api/test/student/_stream_load",
        e.ports().be_http_port
    );
    let r = client().put(&be).body("1\n").send().await.unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["Status"], "Fail");
    assert_eq!(v["Message"], "no valid Basic authorization");
    assert_eq!(v["TxnId"], -1);
}

#[tokio::test]
async fn statement_api_result_sets_exec_status_and_errors() {
    let e = with_student().await;
    let v = stmt(
        &e,
        "information_schema",
        "SELECT FROM_UNIXTIME(1700000000123 / 1000, '%Y-%m-%d %H:%i:%s')",
    )
    .await;
    assert_eq!(v["code"], 0, "{v}");
    assert_eq!(v["msg"], "success");
    assert_eq!(v["count"], 0);
    assert_eq!(v["data"]["type"], "result_set");
    assert_eq!(v["data"]["status"], json!({}));
    assert!(v["data"]["time"].is_i64());
    let ts = v["data"]["data"][0][0].as_str().unwrap();
    assert_eq!(ts.len(), 19, "{ts}");
    assert!(ts.starts_with("2023-11-1"), "{ts}");

    let v = stmt(&e, "information_schema", "show frontends").await;
    assert_eq!(v["code"], 0, "{v}");
    let meta = v["data"]["meta"].as_array().unwrap();
    let idx = meta
        .iter()
        .position(|m| m["name"] == "ArrowFlightSqlPort")
        .expect("ArrowFlightSqlPort column");
    let port = &v["data"]["data"][0][idx];
    let port = port
        .as_i64()
        .or_else(|| port.as_str().and_then(|s| s.parse().ok()))
        .unwrap();
    assert_eq!(port, e.ports().fe_flight_port as i64);

    let v = stmt(
        &e,
        "test",
        "INSERT INTO student (id, name, age, score) VALUES (1, 'ann', 20, 12.5)",
    )
    .await;
    assert_eq!(v["code"], 0, "{v}");
    assert_eq!(v["data"]["type"], "exec_status");
    assert_eq!(v["data"]["status"], json!({}));

    let v = stmt(
        &e,
        "test",
        "select id, name, age, score, updated from student",
    )
    .await;
    assert_eq!(v["data"]["meta"][0], json!({"name": "id", "type": "INT"}));
    assert_eq!(v["data"]["data"], json!([[1, "ann", 20, 12.50, null]]));

    let v = stmt(&e, "test", "select * from test.nope").await;
    assert_eq!(v["code"], 1, "{v}");
    assert_eq!(v["msg"], "Error");
    let msg = v["data"].as_str().unwrap();
    assert!(msg.starts_with("Failed to execute sql: "), "{msg}");
    assert!(msg.contains("nope"), "{msg}");

    let r = client()
        .post(fe(&e, "/api/query/default_cluster/test"))
        .basic_auth("root", Some(""))
        .json(&json!({"limit": 3}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v,
        json!({"msg": "Bad Request", "code": 403, "data": "Missing statement request body", "count": 0})
    );
}

#[tokio::test]
async fn schema_follows_table_schema_action() {
    let e = with_student().await;
    let v = get_json(&e, "/api/test/student/_schema").await;
    assert_eq!(v["code"], 0);
    let d = &v["data"];
    assert_eq!(d["status"], 200);
    assert_eq!(d["keysType"], "UNIQUE_KEYS");
    let props = d["properties"].as_array().unwrap();
    let names: Vec<&str> = props.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["id", "name", "age", "score", "updated"]);
    let types: Vec<&str> = props.iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        vec!["INT", "VARCHAR", "INT", "DECIMAL64", "DATETIMEV2"]
    );
    assert_eq!(props[3]["precision"], "10");
    assert_eq!(props[3]["scale"], "2");
    assert_eq!(props[0]["is_key"], "Yes");
    assert_eq!(props[0]["is_nullable"], "No");
    assert_eq!(props[0]["aggregation_type"], "");
    assert_eq!(props[1]["aggregation_type"], "REPLACE");
    assert_eq!(props[1]["is_nullable"], "Yes");

    let v = get_json(&e, "/api/test/nope/_schema").await;
    assert_eq!(v["code"], 1);
    assert_eq!(v["msg"], "Error");
}

#[tokio::test]
async fn query_plan_lists_every_tablet() {
    let e = with_student().await;
    let post = |body: Value| {
        client()
            .post(fe(&e, "/api/test/student/_query_plan"))
            .basic_auth("root", Some(""))
            .json(&body)
            .send()
    };
    let v: Value = post(json!({"sql": "select id, name from test.student"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["code"], 0, "{v}");
    let d = &v["data"];
    assert_eq!(d["status"], 200);
    let parts = d["partitions"].as_object().unwrap();
    assert_eq!(parts.len(), 4);
    for (id, p) in parts {
        assert!(id.parse::<i64>().is_ok());
        assert_eq!(
            p["routings"],
            json!([format!("127.0.0.1:{}", e.ports().be_http_port)])
        );
        assert!(p["version"].is_i64());
        assert!(p["schemaHash"].is_i64());
    }
    assert!(!d["opaqued_query_plan"].as_str().unwrap().is_empty());

    let v: Value = post(json!({"sql": "select * from test.other"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"]["status"], 400);
    assert!(
        v["data"]["exception"]
            .as_str()
            .unwrap()
            .starts_with("requested database and table must consistent with sql")
    );
    let v: Value = post(json!({"nosql": 1}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["code"], 403);
    assert_eq!(v["data"], "POST body must contains [sql] root object");
}

#[tokio::test]
async fn stream_load_entry_checks_expect_and_redirects_to_the_be() {
    let e = emu().await;
    let be = e.ports().be_http_port;
    // No Expect header: HTTP 200 and RestBaseResult, exactly.
    let r = client()
        .put(fe(&e, "/api/test/student/_stream_load"))
        .basic_auth("root", Some(""))
        .body("1,a\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"status":"FAILED","msg":"There is no 100-continue header"}"#
    );

    // With Expect: 307 to the BE with the credentials in the userinfo.
    let r = client()
        .put(fe(&e, "/api/test/student/_stream_load"))
        .basic_auth("root", Some(""))
        .header("Expect", "100-continue")
        .header("label", "l1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    let loc = r.headers()["location"].to_str().unwrap();
    assert_eq!(
        loc,
        format!("http://root:@127.0.0.1:{be}/api/test/student/_stream_load?")
    );

    // 2PC pre-checks, then 307.
    let put2 = |hs: &[(&str, &str)]| {
        let mut b = client()
            .put(fe(&e, "/api/test/_stream_load_2pc"))
            .basic_auth("root", Some(""));
        for (k, v) in hs {
            b = b.header(*k, *v);
        }
        b.send()
    };
    let t = put2(&[("txn_operation", "commit")])
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        t,
        r#"{"status":"FAILED","msg":"No transaction id or label selected."}"#
    );
    let t = put2(&[("txn_id", "7")])
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        t,
        r#"{"status":"FAILED","msg":"No transaction operation('commit' or 'abort') selected."}"#
    );
    let r = put2(&[("txn_id", "7"), ("txn_operation", "commit")])
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(
        r.headers()["location"].to_str().unwrap(),
        format!("http://root:@127.0.0.1:{be}/api/test/_stream_load_2pc?")
    );
    let r = client()
        .put(fe(&e, "/api/test/student/_stream_load_2pc"))
        .basic_auth("root", Some(""))
        .header("label", "x")
        .header("txn_operation", "abort")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(
        r.headers()["location"].to_str().unwrap(),
        format!("http://root:@127.0.0.1:{be}/api/test/student/_stream_load_2pc?")
    );
}

#[tokio::test]
async fn control_api_faults_counters_delay_and_refusal() {
    let e = emu().await;
    let c = client();
    let _ = get_json(&e, "/api/tso").await;
    let _ = get_json(&e, "/api/tso").await;
    let counters: Value = c
        .get(fe(&e, "/_emu/counters"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(counters["fe_tso"], 2);
    let r = c.delete(fe(&e, "/_emu/counters")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let counters: Value = c
        .get(fe(&e, "/_emu/counters"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(counters, json!({}));

    let state = json!({
        "stream_load": {"count": 2, "http_status": 503},
        "http_delay_ms": 0,
        "flight_cut_after_batches": 1,
        "incr_error": {"code": 5100, "count": 1},
        "refuse_connections": false
    });
    let r: Value = c
        .put(fe(&e, "/_emu/faults"))
        .json(&state)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["stream_load"]["count"], 2);
    let got: Value = c
        .get(fe(&e, "/_emu/faults"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["incr_error"]["code"], 5100);
    let r = c
        .put(fe(&e, "/_emu/faults"))
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let cleared: Value = c
        .delete(fe(&e, "/_emu/faults"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cleared["stream_load"], Value::Null);

    // Delay applies to /api, not to /_emu.
    c.put(fe(&e, "/_emu/faults"))
        .json(&json!({"http_delay_ms": 300}))
        .send()
        .await
        .unwrap();
    let t = Instant::now();
    let _ = get_json(&e, "/api/tso").await;
    assert!(t.elapsed() >= Duration::from_millis(300));
    c.delete(fe(&e, "/_emu/faults")).send().await.unwrap();

    // Refused connections: accepted and closed at once (disarm in-process: /_emu is refused too).
    e.doris.faults.update(|f| f.refuse_connections = true);
    let fresh = crate::common::plain_reqwest_builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    assert!(
        fresh
            .get(fe(&e, "/api/tso"))
            .basic_auth("root", Some(""))
            .send()
            .await
            .is_err()
    );
    e.doris.faults.clear();
    let v = get_json(&e, "/api/tso").await;
    assert_eq!(v["code"], 0);
}

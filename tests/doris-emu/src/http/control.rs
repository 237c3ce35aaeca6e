//! The `/_emu` control API on the FE HTTP port (no auth): clock, faults, counters, transactions.
//! Documented in `tests/doris-emu/README.md` ("Control API").

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde::Deserialize;

use super::Ctx;
use super::be::job_status;
use super::response::{self, Obj, jstr};
use crate::faults::FaultState;

pub(super) fn router() -> Router<Ctx> {
    Router::new()
        .route("/_emu/clock", get(clock))
        .route("/_emu/clock/advance", axum::routing::post(advance))
        .route(
            "/_emu/faults",
            get(get_faults).put(put_faults).delete(delete_faults),
        )
        .route("/_emu/counters", get(get_counters).delete(delete_counters))
        .route("/_emu/txns", get(txns))
        .route("/_emu/config", get(get_config).put(put_config))
}

fn config_body(ctx: &Ctx) -> String {
    serde_json::to_string(&ctx.doris.engine.fe_config.values()).unwrap_or_else(|_| "{}".into())
}

async fn get_config(State(ctx): State<Ctx>) -> Response {
    ok_json(config_body(&ctx))
}

async fn put_config(State(ctx): State<Ctx>, body: Bytes) -> Response {
    let values: crate::engine::fe_config::FeConfigValues = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad(&format!("invalid FE config: {e}")),
    };
    match ctx.doris.engine.fe_config.set(values) {
        Ok(()) => ok_json(config_body(&ctx)),
        Err(m) => bad(&m),
    }
}

fn ok_json(body: String) -> Response {
    response::json(StatusCode::OK, body)
}

fn bad(message: &str) -> Response {
    response::json(
        StatusCode::BAD_REQUEST,
        Obj::new().s("error", message).compact(),
    )
}

fn clock_body(ctx: &Ctx) -> String {
    Obj::new()
        .n("now_ms", ctx.doris.clock.now_ms())
        .n("current_tso", ctx.doris.clock.current_tso())
        .compact()
}

async fn clock(State(ctx): State<Ctx>) -> Response {
    ok_json(clock_body(&ctx))
}

#[derive(Deserialize)]
struct Advance {
    #[serde(default)]
    seconds: Option<f64>,
    #[serde(default)]
    ms: Option<i64>,
}

async fn advance(State(ctx): State<Ctx>, body: Bytes) -> Response {
    let a: Advance = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            return bad(&format!(
                "expected {{\"seconds\": N}} or {{\"ms\": N}}: {e}"
            ));
        }
    };
    let delta = match (a.seconds, a.ms) {
        (Some(s), None) if s.is_finite() && s >= 0.0 => (s * 1000.0).round() as i64,
        (None, Some(m)) if m >= 0 => m,
        _ => return bad("give exactly one of seconds or ms, not negative"),
    };
    ctx.doris.clock.advance_ms(delta);
    ok_json(clock_body(&ctx))
}

fn faults_body(ctx: &Ctx) -> String {
    serde_json::to_string(&ctx.doris.faults.get()).unwrap_or_else(|_| "{}".into())
}

async fn get_faults(State(ctx): State<Ctx>) -> Response {
    ok_json(faults_body(&ctx))
}

async fn put_faults(State(ctx): State<Ctx>, body: Bytes) -> Response {
    // Missing fields mean "disarmed": overlay the body on the default state.
    let given: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(_) => return bad("invalid FaultState: expected a JSON object"),
        Err(e) => return bad(&format!("invalid FaultState: {e}")),
    };
    let mut merged = serde_json::to_value(FaultState::default()).unwrap_or_default();
    if let (Some(m), serde_json::Value::Object(g)) = (merged.as_object_mut(), given) {
        for (k, v) in g {
            m.insert(k, v);
        }
    }
    let state: FaultState = match serde_json::from_value(merged) {
        Ok(s) => s,
        Err(e) => return bad(&format!("invalid FaultState: {e}")),
    };
    ctx.doris.faults.set(state);
    ok_json(faults_body(&ctx))
}

async fn delete_faults(State(ctx): State<Ctx>) -> Response {
    ctx.doris.faults.clear();
    ok_json(faults_body(&ctx))
}

async fn get_counters(State(ctx): State<Ctx>) -> Response {
    ok_json(serde_json::to_string(&ctx.doris.counters.snapshot()).unwrap_or_else(|_| "{}".into()))
}

async fn delete_counters(State(ctx): State<Ctx>) -> Response {
    ctx.doris.counters.reset();
    ok_json("{}".into())
}

async fn txns(State(ctx): State<Ctx>) -> Response {
    let items: Vec<String> = ctx
        .state
        .txns()
        .iter()
        .map(|t| {
            let state = ctx.doris.engine.txn_state(t.txn_id);
            Obj::new()
                .n("txn_id", t.txn_id)
                .s("label", &t.label)
                .s("db", &t.db)
                .s("table", &t.table)
                .raw(
                    "state",
                    state
                        .map(|s| jstr(&format!("{s:?}").to_uppercase()))
                        .unwrap_or_else(|| "null".into()),
                )
                .raw(
                    "job_status",
                    state
                        .map(|s| jstr(job_status(s)))
                        .unwrap_or_else(|| "null".into()),
                )
                .s(
                    "reason",
                    &ctx.doris.engine.txn_reason(t.txn_id).unwrap_or_default(),
                )
                .compact()
        })
        .collect();
    ok_json(format!("[{}]", items.join(",")))
}

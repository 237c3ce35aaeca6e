//! FE HTTP endpoints: `/api/tso`, the statement API, `_schema`, `_query_plan`, and the Stream
//! Load / 2PC entries that answer 307 to the BE.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::Response;
use axum::routing::{get, post, put};
use base64::Engine as _;

use super::auth::{Credentials, access_denied, encode_userinfo, parse_basic};
use super::body::Json;
use super::response::{self, Obj, jstr};
use super::{Ctx, Peer, header_text};
use crate::clock::{tso_logical, tso_physical_ms};
use crate::engine::{ColumnDef, KeysType};
use crate::sql::{self, Session};
use crate::types::{DorisType, QueryResult, Value};

/// How far ahead of the current TSO's physical time `window_end_physical_time` reports.
pub const TSO_WINDOW_MS: i64 = 3000;
/// Default `limit` of the statement API (StmtExecutionAction `DEFAULT_ROW_LIMIT`).
const DEFAULT_ROW_LIMIT: u64 = 1000;

static CONN_IDS: AtomicU64 = AtomicU64::new(1);

pub(super) fn router() -> Router<Ctx> {
    Router::new()
        .route("/api/tso", get(tso))
        .route("/api/backends", get(backends))
        .route("/api/query/{ns}/{db}", post(query))
        .route("/api/{db}/{table}/_schema", get(schema))
        .route(
            "/api/{db}/{table}/_query_plan",
            post(query_plan).get(query_plan),
        )
        .route("/api/{db}/{table}/_stream_load", put(stream_load))
        .route("/api/{db}/_stream_load_2pc", put(stream_load_2pc_db))
        .route(
            "/api/{db}/{table}/_stream_load_2pc",
            put(stream_load_2pc_table),
        )
}

/// `executeCheckPassword`: the credentials, or the `Unauthorized` envelope.
#[allow(clippy::result_large_err)]
fn check_password(
    ctx: &Ctx,
    headers: &HeaderMap,
    peer: &Peer,
    missing: &str,
) -> Result<Credentials, Response> {
    match parse_basic(headers) {
        None => Err(response::unauthorized(missing)),
        Some(c) if ctx.doris.authenticate(&c.user, &c.password) => Ok(c),
        Some(c) => Err(response::unauthorized(&access_denied(
            &c.user,
            &peer.ip(),
            &c.password,
        ))),
    }
}

async fn tso(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    headers: HeaderMap,
) -> Response {
    ctx.doris.counters.hit("fe_tso");
    if let Err(r) = check_password(&ctx, &headers, &peer, "Need auth information.") {
        return r;
    }
    let tso = ctx.doris.clock.current_tso();
    let physical = tso_physical_ms(tso);
    let data = Obj::new()
        .n("window_end_physical_time", physical + TSO_WINDOW_MS)
        .n("current_tso", tso)
        .n("current_tso_physical_time", physical)
        .n("current_tso_logical_counter", tso_logical(tso))
        .compact();
    response::ok(&data)
}

/// `BackendsAction`: the BEs, each with its host and HTTP port (the one BE of the emulator, always
/// alive, at the host a redirect names).
async fn backends(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    headers: HeaderMap,
) -> Response {
    ctx.doris.counters.hit("fe_backends");
    if let Err(r) = check_password(&ctx, &headers, &peer, "Need auth information.") {
        return r;
    }
    let be = Obj::new()
        .s("ip", &ctx.public_host(&headers))
        .n("http_port", i64::from(ctx.doris.ports.be_http_port))
        .raw("is_alive", "true")
        .compact();
    response::ok(&Obj::new().raw("backends", format!("[{be}]")).compact())
}

/// The JDBC type name the FE's statement submitter reports for a column.
fn meta_type(ty: &DorisType) -> &'static str {
    match ty {
        DorisType::Boolean => "BOOLEAN",
        DorisType::TinyInt => "TINYINT",
        DorisType::SmallInt => "SMALLINT",
        DorisType::Int => "INT",
        DorisType::BigInt => "BIGINT",
        DorisType::LargeInt => "CHAR",
        DorisType::Float => "FLOAT",
        DorisType::Double => "DOUBLE",
        DorisType::Decimal { .. } => "DECIMAL",
        DorisType::Char(_) => "CHAR",
        DorisType::Varchar(_) | DorisType::String | DorisType::Json => "VARCHAR",
        DorisType::Date => "DATE",
        DorisType::DateTime(_) => "DATETIME",
    }
}

fn is_json_number(s: &str) -> bool {
    matches!(
        Json::parse(s),
        Ok(Json {
            kind: super::body::JKind::Num,
            ..
        })
    )
}

/// One cell as the statement API renders it: numbers for numeric types (exact text), strings for
/// text, dates and LARGEINT, booleans for BOOLEAN, `null` for NULL.
pub fn cell_json(v: &Value, ty: &DorisType) -> String {
    let Some(text) = v.to_text(ty) else {
        return "null".into();
    };
    match (v, ty) {
        (Value::Bool(b), DorisType::Boolean) => if *b { "true" } else { "false" }.into(),
        (_, DorisType::Boolean) => match text.as_str() {
            "1" => "true".into(),
            "0" => "false".into(),
            _ => jstr(&text),
        },
        (
            _,
            DorisType::TinyInt
            | DorisType::SmallInt
            | DorisType::Int
            | DorisType::BigInt
            | DorisType::Float
            | DorisType::Double
            | DorisType::Decimal { .. },
        ) if is_json_number(&text) => text,
        _ => jstr(&text),
    }
}

async fn query(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path((_ns, db)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    ctx.doris.counters.hit("fe_query");
    let creds = match check_password(&ctx, &headers, &peer, "Cookie is invalid") {
        Ok(c) => c,
        Err(r) => return r,
    };
    let req: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) if body.iter().all(|b| b.is_ascii_whitespace()) => {
            let _ = e;
            return response::bad_request("Missing statement request body");
        }
        Err(e) => {
            return response::envelope(
                500,
                "Internal Error",
                &jstr(&format!("com.google.gson.JsonSyntaxException: {e}")),
            );
        }
    };
    let stmt = req.get("stmt").and_then(|s| s.as_str()).unwrap_or("");
    if stmt.is_empty() {
        return response::bad_request("Missing statement request body");
    }
    if req.get("is_sync").and_then(|v| v.as_bool()) == Some(false) {
        return response::common_error("Not support async query execution");
    }
    let limit = req
        .get("limit")
        .and_then(|v| v.as_u64())
        .unwrap_or(DEFAULT_ROW_LIMIT);
    let mut session = Session::new(creds.user.clone());
    session.current_db = Some(db);
    let start = Instant::now();
    let conn = CONN_IDS.fetch_add(1, Ordering::Relaxed);
    match sql::execute(&ctx.doris, &mut session, stmt).await {
        Ok(QueryResult::Rows(rs)) => {
            let meta: Vec<String> = rs
                .columns
                .iter()
                .map(|c| {
                    Obj::new()
                        .s("name", &c.name)
                        .s("type", meta_type(&c.ty))
                        .compact()
                })
                .collect();
            let truncated = rs.rows.len() as u64 > limit;
            let rows: Vec<String> = rs
                .rows
                .iter()
                .take(limit.min(usize::MAX as u64) as usize)
                .map(|row| {
                    let cells: Vec<String> = row
                        .iter()
                        .zip(rs.columns.iter())
                        .map(|(v, c)| cell_json(v, &c.ty))
                        .collect();
                    format!("[{}]", cells.join(","))
                })
                .collect();
            let data = Obj::new()
                .s("type", "result_set")
                .raw("meta", format!("[{}]", meta.join(",")))
                .raw("data", format!("[{}]", rows.join(",")))
                .raw("status", "{}")
                .raw("truncated", truncated.to_string())
                .n("time", start.elapsed().as_millis() as i64)
                .compact();
            response::ok(&data)
        }
        Ok(QueryResult::Ok { affected_rows, .. }) => {
            let data = Obj::new()
                .s("type", "exec_status")
                .raw("status", "{}")
                .n("affectedRows", affected_rows.min(i64::MAX as u64) as i64)
                .n("time", start.elapsed().as_millis() as i64)
                .compact();
            response::ok(&data)
        }
        Err(e) => response::common_error(&format!(
            "Failed to execute sql: java.sql.SQLException: (conn={conn}) {}",
            e.message
        )),
    }
}

fn column_info(i: usize, c: &ColumnDef, keys_type: KeysType) -> String {
    let agg = if c.is_key || keys_type != KeysType::Unique {
        ""
    } else {
        "REPLACE"
    };
    let mut o = Obj::new();
    if let DorisType::Decimal { precision, scale } = c.ty {
        o = o
            .s("precision", &precision.to_string())
            .s("scale", &scale.to_string());
    }
    o.s("column_uid", &i.to_string())
        .s("type", c.ty.primitive_name())
        .s("comment", &c.comment)
        .s("name", &c.name)
        .s("aggregation_type", agg)
        .s("is_nullable", if c.nullable { "Yes" } else { "No" })
        .s("is_key", if c.is_key { "Yes" } else { "No" })
        .compact()
}

async fn schema(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path((db, table)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    ctx.doris.counters.hit("fe_schema");
    if let Err(r) = check_password(&ctx, &headers, &peer, "Need auth information.") {
        return r;
    }
    let info = match ctx.doris.engine.table_info(&db, &table) {
        Ok(i) => i,
        Err(e) => return response::common_error(&e.message),
    };
    let props: Vec<String> = info
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| column_info(i, c, info.keys_type))
        .collect();
    let data = Obj::new()
        .n("status", 200)
        .s("keysType", info.keys_type.doris_name())
        .n("schema_version", 0)
        .raw("properties", format!("[{}]", props.join(",")))
        .compact();
    response::ok(&data)
}

/// The table a `SELECT … FROM <t>` reads: `(db, table)` with `db` defaulting to `default_db`.
fn sql_table(sql: &str, default_db: &str) -> Option<(String, String)> {
    let lower = sql.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut pos = 0;
    while let Some(i) = lower[pos..].find("from") {
        let at = pos + i;
        let before_ok = at == 0 || bytes[at - 1].is_ascii_whitespace() || bytes[at - 1] == b')';
        let after = at + 4;
        let after_ok =
            after < bytes.len() && (bytes[after].is_ascii_whitespace() || bytes[after] == b'`');
        if before_ok && after_ok {
            let rest = sql[after..].trim_start();
            let name: String = rest
                .chars()
                .take_while(|c| {
                    !c.is_whitespace() && *c != ';' && *c != '(' && *c != ')' && *c != ','
                })
                .collect();
            let parts: Vec<String> = name
                .split('.')
                .map(|p| p.trim_matches('`').to_string())
                .collect();
            return match parts.as_slice() {
                [t] if !t.is_empty() => Some((default_db.to_string(), t.clone())),
                [d, t] => Some((d.clone(), t.clone())),
                [_, d, t] => Some((d.clone(), t.clone())),
                _ => None,
            };
        }
        pos = at + 4;
    }
    None
}

fn plan_error(status: i64, message: &str) -> Response {
    response::ok(
        &Obj::new()
            .n("status", status)
            .s("exception", message)
            .compact(),
    )
}

async fn query_plan(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path((db, table)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    ctx.doris.counters.hit("fe_query_plan");
    if let Err(r) = check_password(&ctx, &headers, &peer, "Need auth information.") {
        return r;
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    if text.is_empty() {
        return response::bad_request("POST body must contains [sql] root object");
    }
    let req: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => return response::bad_request(&format!("malformed json: {text}")),
    };
    let sql = req
        .get("sql")
        .and_then(|s| s.as_str())
        .unwrap_or("")
        .to_string();
    if sql.is_empty() {
        return response::bad_request("POST body must contains [sql] root object");
    }
    let info = match ctx.doris.engine.table_info(&db, &table) {
        Ok(i) => i,
        Err(e) => return response::common_error(&e.message),
    };
    let trimmed = sql.trim_start();
    if !trimmed
        .get(..6)
        .is_some_and(|s| s.eq_ignore_ascii_case("select"))
    {
        return plan_error(400, &format!("Select statement needed, but found [{sql} ]"));
    }
    match sql_table(&sql, &db) {
        None => return plan_error(400, "Select statement must have only one table"),
        Some((sdb, stbl)) if sdb != db || stbl != table => {
            return plan_error(
                400,
                &format!(
                    "requested database and table must consistent with sql: request [ {db}.{table}]and sql [{sdb}.{stbl}]"
                ),
            );
        }
        Some(_) => {}
    }
    let routing = format!(
        "{}:{}",
        ctx.public_host(&headers),
        ctx.doris.ports.be_http_port
    );
    let partitions: Vec<String> = info
        .tablets
        .iter()
        .map(|t| {
            let node = Obj::new()
                .raw("routings", format!("[{}]", jstr(&routing)))
                .n("version", 1)
                .n("schemaHash", 0)
                .compact();
            format!("{}:{}", jstr(&t.to_string()), node)
        })
        .collect();
    let opaque = Obj::new()
        .s("emulator", "dcs-doris-emu")
        .s("sql", &sql)
        .raw(
            "tablets",
            format!(
                "[{}]",
                info.tablets
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        )
        .compact();
    let data = Obj::new()
        .raw("partitions", format!("{{{}}}", partitions.join(",")))
        .s(
            "opaqued_query_plan",
            &base64::engine::general_purpose::STANDARD.encode(opaque),
        )
        .n("status", 200)
        .compact();
    response::ok(&data)
}

/// The 307 to the BE: `http[s]://[user:pwd@]host:be_http_port<path>?<query>` (`https` when TLS is
/// on).
fn redirect_to_be(ctx: &Ctx, headers: &HeaderMap, uri: &Uri, creds: &Credentials) -> Response {
    let userinfo = if headers.contains_key(header::AUTHORIZATION) {
        format!(
            "{}:{}@",
            encode_userinfo(&creds.user),
            encode_userinfo(&creds.password)
        )
    } else {
        String::new()
    };
    let be = ctx.doris.faults.redirect_to().unwrap_or_else(|| {
        format!(
            "{}:{}",
            ctx.public_host(headers),
            ctx.doris.ports.be_http_port
        )
    });
    let location = format!(
        "{}://{userinfo}{be}{}?{}",
        ctx.doris.http_scheme(),
        uri.path(),
        uri.query().unwrap_or("")
    );
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::TEMPORARY_REDIRECT;
    match HeaderValue::from_str(&location) {
        Ok(v) => {
            r.headers_mut().insert(header::LOCATION, v);
            r
        }
        Err(_) => response::rest_failed("cannot build the redirect location"),
    }
}

async fn stream_load(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path((_db, _table)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    ctx.doris.counters.hit("fe_stream_load");
    let creds = match check_password(&ctx, &headers, &peer, "Need auth information.") {
        Ok(c) => c,
        Err(r) => return r,
    };
    if let Some(g) = header_text(&headers, "group_commit") {
        let g = g.to_ascii_lowercase();
        if !matches!(g.as_str(), "async_mode" | "sync_mode" | "off_mode") {
            return response::rest_failed(
                "Header `group_commit` can only be `sync_mode`, `async_mode` or `off_mode`.",
            );
        }
    }
    if !headers.contains_key(header::EXPECT) {
        return response::rest_failed("There is no 100-continue header");
    }
    redirect_to_be(&ctx, &headers, &uri, &creds)
}

fn stream_load_2pc(ctx: &Ctx, peer: &Peer, headers: &HeaderMap, uri: &Uri) -> Response {
    ctx.doris.counters.hit("fe_stream_load_2pc");
    let creds = match check_password(ctx, headers, peer, "Need auth information.") {
        Ok(c) => c,
        Err(r) => return r,
    };
    let nonempty = |k: &str| header_text(headers, k).filter(|v| !v.is_empty());
    if nonempty("txn_id").is_none() && nonempty("label").is_none() {
        return response::rest_failed("No transaction id or label selected.");
    }
    if nonempty("txn_operation").is_none() {
        return response::rest_failed("No transaction operation('commit' or 'abort') selected.");
    }
    redirect_to_be(ctx, headers, uri, &creds)
}

async fn stream_load_2pc_db(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(_db): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    stream_load_2pc(&ctx, &peer, &headers, &uri)
}

async fn stream_load_2pc_table(
    State(ctx): State<Ctx>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path((_db, _table)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    stream_load_2pc(&ctx, &peer, &headers, &uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_table_extraction() {
        assert_eq!(
            sql_table("select * from db.t", "x"),
            Some(("db".into(), "t".into()))
        );
        assert_eq!(
            sql_table("SELECT a FROM `db`.`t` WHERE a>1", "x"),
            Some(("db".into(), "t".into()))
        );
        assert_eq!(
            sql_table("select * from t;", "x"),
            Some(("x".into(), "t".into()))
        );
        assert_eq!(
            sql_table("select fromage from t", "x"),
            Some(("x".into(), "t".into()))
        );
        assert_eq!(sql_table("select 1", "x"), None);
    }

    #[test]
    fn cells() {
        assert_eq!(cell_json(&Value::Null, &DorisType::Int), "null");
        assert_eq!(cell_json(&Value::Int(5), &DorisType::Int), "5");
        assert_eq!(
            cell_json(
                &Value::Decimal(1250, 2),
                &DorisType::Decimal {
                    precision: 10,
                    scale: 2
                }
            ),
            "12.50"
        );
        assert_eq!(
            cell_json(&Value::Str("a\"b".into()), &DorisType::String),
            "\"a\\\"b\""
        );
        assert_eq!(
            cell_json(&Value::LargeInt(1), &DorisType::LargeInt),
            "\"1\""
        );
        assert_eq!(cell_json(&Value::Bool(true), &DorisType::Boolean), "true");
        assert!(cell_json(&Value::Float(f64::NAN), &DorisType::Double).starts_with('"'));
    }
}

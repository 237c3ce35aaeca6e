//! The MySQL protocol front end (query port, 9030 in Doris).
//!
//! Speaks the handshake of `mysql_native_password` (what Doris offers), runs every statement
//! through [`crate::sql::execute`], and renders results in the text protocol. Prepared statements
//! are emulated by substituting the parameters into the text, which is all the clients the tests
//! use need (`mysql_async`'s `exec` for the offset table, JDBC-style `?` inserts).
//!
//! With TLS configured the port takes SSL connections only ([`ssl`]).

pub mod ssl;

use std::io;
use std::sync::Arc;

use opensrv_mysql::{
    AsyncMysqlIntermediary, AsyncMysqlShim, Column, ColumnFlags, ColumnType, ErrorKind, InitWriter,
    OkResponse, ParamParser, QueryResultWriter, StatementMetaWriter, ValueInner,
};
use sha1::{Digest, Sha1};
use tokio::io::AsyncWrite;
use tokio::net::TcpListener;

use crate::Doris;
use crate::error::DorisError;
use crate::sql::{self, Session};
use crate::types::{DorisType, QueryResult, ResultSet};

/// The version string Doris reports in the handshake and `SELECT VERSION()`.
pub const SERVER_VERSION: &str = "5.7.99";

/// Accept MySQL connections until the task is aborted.
pub async fn serve(listener: TcpListener, doris: Arc<Doris>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "mysql accept failed");
                continue;
            }
        };
        doris.counters.hit("mysql_connect");
        if doris.faults.refuse_connections() {
            drop(stream);
            continue;
        }
        let doris = doris.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let shim = Connection::new(doris.clone());
            let ended = match doris.tls.as_ref().map(|t| t.mysql.clone()) {
                None => {
                    let (r, w) = stream.into_split();
                    AsyncMysqlIntermediary::run_on(shim, r, w).await
                }
                Some(acceptor) => {
                    let greeting =
                        ssl::greeting(SERVER_VERSION, shim.session.connection_id, &shim.salt);
                    match ssl::upgrade(stream, &acceptor, &greeting, &doris.counters).await {
                        Ok(tls) => {
                            let (r, w) = tokio::io::split(tls);
                            AsyncMysqlIntermediary::run_on(shim, r, w).await
                        }
                        Err(e) => {
                            tracing::warn!(%peer, error = %e, "mysql SSL upgrade failed");
                            return;
                        }
                    }
                }
            };
            if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "mysql connection ended");
            }
        });
    }
}

/// One client connection: its session and its prepared statements.
struct Connection {
    doris: Arc<Doris>,
    salt: [u8; 20],
    session: Session,
    statements: Vec<Option<String>>,
}

impl Connection {
    fn new(doris: Arc<Doris>) -> Self {
        let mut salt = [0u8; 20];
        for b in salt.iter_mut() {
            // Printable, never NUL or '$' (the handshake treats those specially).
            *b = rand::random_range(b'0'..=b'z');
        }
        Self {
            session: Session::on(&doris, doris.config.user.clone()),
            doris,
            salt,
            statements: Vec::new(),
        }
    }

    /// Run one statement and answer it. Prepared statements answer in the binary protocol, where
    /// every column is sent as a string (clients convert to the type they ask for).
    async fn run<W: AsyncWrite + Send + Unpin>(
        &mut self,
        query: &str,
        results: QueryResultWriter<'_, W>,
        binary: bool,
    ) -> io::Result<()> {
        match sql::execute(&self.doris, &mut self.session, query).await {
            Ok(QueryResult::Rows(rs)) => write_rows(results, &rs, binary).await,
            Ok(QueryResult::Ok {
                affected_rows,
                info,
            }) => {
                results
                    .completed(OkResponse {
                        affected_rows,
                        info: doris_ok_info(info),
                        ..Default::default()
                    })
                    .await
            }
            Err(e) => write_error(results, &e).await,
        }
    }
}

/// The info of an OK packet as Doris writes it: a length-encoded string even when the client did
/// not negotiate `CLIENT_SESSION_TRACK` (fe `MysqlOkPacket.writeTo`: "in datasheet, use EOF
/// string, but in the code, mysql use length encoded string"), and nothing when empty. MySQL
/// Connector/J reads it that way and fails on a bare string (`Buffer length is less than expected
/// payload length`). opensrv-mysql writes the info as the rest of the packet, so the length byte
/// is put in front here; an info of 128 bytes or more (never written by the emulator, whose
/// longest is the INSERT label line) cannot carry a one-byte prefix in a `String` and stays bare.
fn doris_ok_info(info: String) -> String {
    match u8::try_from(info.len()) {
        Ok(n @ 1..=127) => {
            let mut out = String::with_capacity(info.len() + 1);
            out.push(char::from(n));
            out.push_str(&info);
            out
        }
        _ => info,
    }
}

/// `mysql_native_password`: SHA1(pw) XOR SHA1(salt + SHA1(SHA1(pw))).
fn native_password_scramble(password: &str, salt: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = Sha1::digest(password.as_bytes());
    let stage2 = Sha1::digest(stage1);
    let mut h = Sha1::new();
    h.update(salt);
    h.update(stage2);
    let mix = h.finalize();
    stage1.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect()
}

fn mysql_type(ty: &DorisType) -> ColumnType {
    match ty {
        DorisType::Boolean | DorisType::TinyInt => ColumnType::MYSQL_TYPE_TINY,
        DorisType::SmallInt => ColumnType::MYSQL_TYPE_SHORT,
        DorisType::Int => ColumnType::MYSQL_TYPE_LONG,
        DorisType::BigInt => ColumnType::MYSQL_TYPE_LONGLONG,
        DorisType::LargeInt => ColumnType::MYSQL_TYPE_VAR_STRING,
        DorisType::Float => ColumnType::MYSQL_TYPE_FLOAT,
        DorisType::Double => ColumnType::MYSQL_TYPE_DOUBLE,
        DorisType::Decimal { .. } => ColumnType::MYSQL_TYPE_NEWDECIMAL,
        DorisType::Char(_) => ColumnType::MYSQL_TYPE_STRING,
        DorisType::Varchar(_) | DorisType::String | DorisType::Json => {
            ColumnType::MYSQL_TYPE_VAR_STRING
        }
        DorisType::Date => ColumnType::MYSQL_TYPE_DATE,
        DorisType::DateTime(_) => ColumnType::MYSQL_TYPE_DATETIME,
    }
}

async fn write_rows<W: AsyncWrite + Send + Unpin>(
    results: QueryResultWriter<'_, W>,
    rs: &ResultSet,
    binary: bool,
) -> io::Result<()> {
    let columns: Vec<Column> = rs
        .columns
        .iter()
        .map(|c| Column {
            table: String::new(),
            column: c.name.clone(),
            coltype: if binary {
                ColumnType::MYSQL_TYPE_VAR_STRING
            } else {
                mysql_type(&c.ty)
            },
            colflags: if c.nullable || binary {
                ColumnFlags::empty()
            } else {
                ColumnFlags::NOT_NULL_FLAG
            },
        })
        .collect();
    let mut w = results.start(&columns).await?;
    for row in &rs.rows {
        for (value, meta) in row.iter().zip(&rs.columns) {
            w.write_col(value.to_text(&meta.ty))?;
        }
        w.end_row().await?;
    }
    w.finish().await
}

/// The error kinds the emulator uses; anything else is reported as 1105 (ER_UNKNOWN_ERROR), which
/// is what Doris itself uses for most errors. The MySQL library cannot send Doris's own 5100/5101
/// codes; their text still names them.
fn error_kind(code: u16) -> ErrorKind {
    match code {
        1045 => ErrorKind::ER_ACCESS_DENIED_ERROR,
        1049 => ErrorKind::ER_BAD_DB_ERROR,
        1146 => ErrorKind::ER_NO_SUCH_TABLE,
        1064 => ErrorKind::ER_PARSE_ERROR,
        1007 => ErrorKind::ER_DB_CREATE_EXISTS,
        1008 => ErrorKind::ER_DB_DROP_EXISTS,
        1050 => ErrorKind::ER_TABLE_EXISTS_ERROR,
        1051 => ErrorKind::ER_BAD_TABLE_ERROR,
        1054 => ErrorKind::ER_BAD_FIELD_ERROR,
        1060 => ErrorKind::ER_DUP_FIELDNAME,
        1062 => ErrorKind::ER_DUP_ENTRY,
        1193 => ErrorKind::ER_UNKNOWN_SYSTEM_VARIABLE,
        1046 => ErrorKind::ER_NO_DB_ERROR,
        _ => ErrorKind::ER_UNKNOWN_ERROR,
    }
}

async fn write_error<W: AsyncWrite + Send + Unpin>(
    results: QueryResultWriter<'_, W>,
    e: &DorisError,
) -> io::Result<()> {
    results
        .error(error_kind(e.code), e.message.as_bytes())
        .await
}

/// Render a bound parameter as a SQL literal.
fn param_literal(v: opensrv_mysql::Value<'_>) -> String {
    match v.into_inner() {
        ValueInner::NULL => "NULL".into(),
        ValueInner::Bytes(b) => quote(&String::from_utf8_lossy(b)),
        ValueInner::Int(i) => i.to_string(),
        ValueInner::UInt(u) => u.to_string(),
        ValueInner::Double(d) => d.to_string(),
        ValueInner::Date(_) | ValueInner::Datetime(_) => {
            match opensrv_mysql::to_naive_datetime(v) {
                Ok(dt) => quote(&dt.format("%Y-%m-%d %H:%M:%S%.6f").to_string()),
                Err(_) => "NULL".into(),
            }
        }
        ValueInner::Time(_) => "NULL".into(),
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// Split a statement at its `?` placeholders (those outside quotes and backticks).
fn split_at_placeholders(query: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quote_char: Option<u8> = None;
    let mut start = 0;
    let bytes = query.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match quote_char {
            Some(_) if c == b'\\' => i += 1,
            Some(q) if c == q => quote_char = None,
            Some(_) => {}
            None if matches!(c, b'\'' | b'"' | b'`') => quote_char = Some(c),
            None if c == b'?' => {
                parts.push(&query[start..i]);
                start = i + 1;
            }
            None => {}
        }
        i += 1;
    }
    parts.push(&query[start.min(query.len())..]);
    parts
}

/// Substitute the placeholders with the given literals.
fn bind_params(query: &str, params: &[String]) -> Result<String, String> {
    let parts = split_at_placeholders(query);
    if parts.len() - 1 != params.len() {
        return Err(format!(
            "the statement has {} placeholders but {} parameters were sent",
            parts.len() - 1,
            params.len()
        ));
    }
    let mut out = String::from(parts[0]);
    for (literal, part) in params.iter().zip(&parts[1..]) {
        out.push_str(literal);
        out.push_str(part);
    }
    Ok(out)
}

fn count_placeholders(query: &str) -> usize {
    split_at_placeholders(query).len() - 1
}

#[async_trait::async_trait]
impl<W: AsyncWrite + Send + Unpin> AsyncMysqlShim<W> for Connection {
    type Error = io::Error;

    fn version(&self) -> String {
        SERVER_VERSION.to_string()
    }

    fn connect_id(&self) -> u32 {
        self.session.connection_id
    }

    fn salt(&self) -> [u8; 20] {
        self.salt
    }

    async fn authenticate(
        &self,
        _plugin: &str,
        username: &[u8],
        salt: &[u8],
        auth_data: &[u8],
    ) -> bool {
        let user = String::from_utf8_lossy(username);
        // The handshake salt is NUL-terminated on the wire; only the 20 bytes count.
        let salt = &salt[..salt.len().min(20)];
        let expected = native_password_scramble(&self.doris.config.password, salt);
        let ok = user == self.doris.config.user && auth_data == expected.as_slice();
        if !ok {
            self.doris.counters.hit("mysql_auth_failed");
        }
        ok
    }

    async fn on_prepare<'a>(
        &'a mut self,
        query: &'a str,
        info: StatementMetaWriter<'a, W>,
    ) -> io::Result<()> {
        let params = count_placeholders(query);
        self.statements.push(Some(query.to_string()));
        let id = self.statements.len() as u32;
        let param_cols: Vec<Column> = (0..params)
            .map(|i| Column {
                table: String::new(),
                column: format!("?{i}"),
                coltype: ColumnType::MYSQL_TYPE_VAR_STRING,
                colflags: ColumnFlags::empty(),
            })
            .collect();
        info.reply(id, &param_cols, &[]).await
    }

    async fn on_execute<'a>(
        &'a mut self,
        id: u32,
        params: ParamParser<'a>,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let Some(Some(query)) = self.statements.get((id as usize).wrapping_sub(1)).cloned() else {
            return results
                .error(
                    ErrorKind::ER_UNKNOWN_STMT_HANDLER,
                    b"Unknown prepared statement handler",
                )
                .await;
        };
        let literals: Vec<String> = params.into_iter().map(|p| param_literal(p.value)).collect();
        match bind_params(&query, &literals) {
            Ok(sql) => {
                self.doris.counters.hit("mysql_execute");
                self.run(&sql, results, true).await
            }
            Err(e) => {
                results
                    .error(ErrorKind::ER_WRONG_ARGUMENTS, e.as_bytes())
                    .await
            }
        }
    }

    async fn on_close<'a>(&'a mut self, stmt: u32)
    where
        W: 'async_trait,
    {
        if let Some(slot) = self.statements.get_mut((stmt as usize).wrapping_sub(1)) {
            *slot = None;
        }
    }

    async fn on_query<'a>(
        &'a mut self,
        query: &'a str,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        self.doris.counters.hit("mysql_query");
        self.run(query, results, false).await
    }

    async fn on_init<'a>(&'a mut self, db: &'a str, writer: InitWriter<'a, W>) -> io::Result<()> {
        let use_db = format!("USE `{}`", db.replace('`', "``"));
        match sql::execute(&self.doris, &mut self.session, &use_db).await {
            Ok(_) => writer.ok().await,
            Err(e) => writer.error(error_kind(e.code), e.message.as_bytes()).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_info_is_length_encoded_as_doris_writes_it() {
        let info = "{'label':'insert_1', 'status':'VISIBLE', 'txnId':'7'}".to_string();
        let wire = doris_ok_info(info.clone());
        assert_eq!(wire.as_bytes()[0] as usize, info.len());
        assert_eq!(&wire[1..], info);
        assert_eq!(doris_ok_info(String::new()), "");
    }

    #[test]
    fn binds_placeholders_outside_quotes_only() {
        let sql = "INSERT INTO t VALUES (?, '?', \"a?\", ?)";
        let bound = bind_params(sql, &["1".into(), "'x'".into()]).unwrap();
        assert_eq!(bound, "INSERT INTO t VALUES (1, '?', \"a?\", 'x')");
        assert_eq!(count_placeholders(sql), 2);
        assert!(bind_params("SELECT ?", &[]).is_err());
    }

    #[test]
    fn quotes_escape_quotes_and_backslashes() {
        assert_eq!(quote("it's a\\b"), "'it''s a\\\\b'");
    }

    #[test]
    fn empty_password_scrambles_to_nothing() {
        assert!(native_password_scramble("", b"12345678901234567890").is_empty());
        assert_eq!(
            native_password_scramble("pw", b"12345678901234567890").len(),
            20
        );
    }
}

//! Reading what an FE answers over the MySQL protocol without trusting it.
//!
//! mysql_async's typed `query`/`query_first` panic when a value does not convert (a NULL where a
//! `String` is asked for, a non-UTF-8 name): an FE that answers oddly, or anything else a spec
//! names as one, would take the process down. Queries ask for plain [`Row`]s
//! (`conn.query::<Row, _>(…)`) and decode them with [`decode`] or [`decode_all`], so an odd
//! answer fails the operation with an [`Error::BadRow`] instead.

use mysql_async::Row;
use mysql_async::prelude::FromRow;

use crate::Error;
use crate::tls::Tls;

/// One row as `T`, or [`Error::BadRow`] saying what was asked for and what came.
///
/// # Errors
/// When a column is missing or its value does not convert (NULL, not UTF-8, not a number).
pub fn decode<T: FromRow>(row: Row, what: &str) -> Result<T, Error> {
    let columns = row.len();
    mysql_async::from_row_opt(row).map_err(|e| Error::BadRow {
        what: what.to_owned(),
        detail: format!(
            "{columns} column(s) that do not read as {}: {}",
            std::any::type_name::<T>(),
            describe(&e.0)
        ),
    })
}

/// The values of a row that did not convert, cut short and without the values themselves beyond
/// their kind (they come from outside).
fn describe(row: &Row) -> String {
    (0..row.len())
        .map(|i| match row.as_ref(i) {
            None => "missing".to_owned(),
            Some(mysql_async::Value::NULL) => "NULL".to_owned(),
            Some(mysql_async::Value::Bytes(b)) if std::str::from_utf8(b).is_err() => {
                format!("{} bytes, not UTF-8", b.len())
            }
            Some(mysql_async::Value::Bytes(_)) => "text".to_owned(),
            Some(mysql_async::Value::Int(_) | mysql_async::Value::UInt(_)) => "integer".to_owned(),
            Some(_) => "other".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How long opening a MySQL connection to an FE may take (TCP, handshake, login) before it
/// counts as failed: an FE that accepts and then says nothing must not hang the caller.
pub const CONNECT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(15);

/// A connection with `opts`, or a timed-out I/O error after `deadline`.
///
/// # Errors
/// The driver's error, or `TimedOut`.
pub async fn connect(
    opts: mysql_async::Opts,
    deadline: std::time::Duration,
) -> Result<mysql_async::Conn, mysql_async::Error> {
    match tokio::time::timeout(deadline, mysql_async::Conn::new(opts)).await {
        Ok(result) => result,
        Err(_) => Err(timed_out("handshake", deadline)),
    }
}

/// `call` (a statement on an open connection) bounded by `deadline`: an FE that took a statement
/// and never answers fails it with [`timed_out`] instead of hanging the caller. The connection
/// is left mid-statement: drop it.
///
/// # Errors
/// The driver's error, or `TimedOut`.
pub async fn within<T>(
    deadline: std::time::Duration,
    call: impl std::future::Future<Output = Result<T, mysql_async::Error>>,
) -> Result<T, mysql_async::Error> {
    tokio::time::timeout(deadline, call)
        .await
        .unwrap_or_else(|_| Err(timed_out("answer", deadline)))
}

/// The error of a MySQL call that did not finish within `deadline`: an I/O `TimedOut`, which
/// callers read as "the FE did not answer", never as Doris's answer.
pub fn timed_out(what: &str, deadline: std::time::Duration) -> mysql_async::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("no MySQL {what} within {}s", deadline.as_secs_f64()),
    )
    .into()
}

/// The MySQL server errors that mean the login was refused: 1045 (`ER_ACCESS_DENIED_ERROR`,
/// wrong user or password) and 1698 (`ER_ACCESS_DENIED_NO_PASSWORD_ERROR`).
pub const LOGIN_REFUSED_CODES: [u16; 2] = [1045, 1698];

/// Doris's message when `e` says the login was refused: every FE would refuse the same login,
/// so the caller stops trying others and names the credentials.
pub fn login_refused(e: &mysql_async::Error) -> Option<&str> {
    match e {
        mysql_async::Error::Server(s) if LOGIN_REFUSED_CODES.contains(&s.code) => {
            Some(s.message.as_str())
        }
        _ => None,
    }
}

/// What to do after a connection to one FE failed with `e`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// The login was refused ([`login_refused`]): every FE would refuse it, stop at once.
    Stop,
    /// The FE did not answer (or failed otherwise): try the next one.
    NextFe,
}

/// Whether a failed connection stops the search for an FE or moves on to the next (pure).
pub fn after_failure(e: &mysql_async::Error) -> AfterFailure {
    if login_refused(e).is_some() {
        AfterFailure::Stop
    } else {
        AfterFailure::NextFe
    }
}

/// A MySQL connection to one FE host: TCP only (never a local socket), logged in as `user`,
/// within [`CONNECT_DEADLINE`].
///
/// # Errors
/// As [`connect`].
pub async fn connect_to(
    host: &str,
    port: u16,
    user: &str,
    password: &str,
) -> Result<mysql_async::Conn, mysql_async::Error> {
    connect_to_tls(host, port, user, password, &Tls::plaintext()).await
}

/// [`connect_to`] with `tls`: over TLS the SSL upgrade is required (a server that does not offer
/// it is refused, never used in plaintext) and the certificate is checked as `tls` says.
///
/// # Errors
/// As [`connect`].
pub async fn connect_to_tls(
    host: &str,
    port: u16,
    user: &str,
    password: &str,
    tls: &Tls,
) -> Result<mysql_async::Conn, mysql_async::Error> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(host.to_owned())
        .tcp_port(port)
        .user(Some(user.to_owned()))
        .pass(Some(password.to_owned()))
        .prefer_socket(false)
        .ssl_opts(tls.mysql_ssl_opts());
    connect(opts.into(), CONNECT_DEADLINE).await
}

/// A failed MySQL connection to `host:port` as text: `TLS to FE host:port (MySQL): reason` when
/// TLS failed (a wrong CA, a name mismatch, an expired certificate, a server without TLS), else
/// the driver's message.
pub fn describe_connect_error(host: &str, port: u16, tls: &Tls, e: &mysql_async::Error) -> String {
    let node = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    if let Some(reason) = crate::tls::tls_reason(e) {
        return format!("TLS to FE {node} (MySQL): {reason}");
    }
    if tls.is_on()
        && let mysql_async::Error::Driver(d) = e
    {
        // The server offered no SSL upgrade: refused rather than logged in in plaintext.
        return format!("TLS to FE {node} (MySQL): {d}");
    }
    if tls.is_on()
        && let mysql_async::Error::Io(io) = e
        && io.to_string().to_ascii_lowercase().contains("tls")
    {
        return format!("TLS to FE {node} (MySQL): {io}");
    }
    format!("FE {node} (MySQL): {e}")
}

/// The connection [`connect_first`] opened, and which of the hosts answered.
#[derive(Debug)]
pub struct Connected {
    /// The open connection.
    pub conn: mysql_async::Conn,
    /// The position of the host that answered among those given.
    pub index: usize,
}

/// Why [`connect_first`] has no connection.
#[derive(Debug)]
pub enum ConnectFailure {
    /// `host` refused the login: every FE would refuse it, so no other was tried.
    LoginRefused {
        /// The host that refused.
        host: String,
        /// The driver's error ([`login_refused`] reads Doris's message from it).
        error: mysql_async::Error,
    },
    /// No host answered; the last one tried and how it failed.
    NoAnswer {
        /// The last host tried.
        host: String,
        /// Its failure.
        error: mysql_async::Error,
    },
    /// There was no host to try.
    NoNodes,
}

/// A MySQL connection to the first of `hosts` that accepts one ([`connect_to`] each in turn),
/// stopping at once when the login is refused ([`after_failure`]).
///
/// # Errors
/// A [`ConnectFailure`] saying which of the three ways it failed.
pub async fn connect_first<I>(
    hosts: I,
    port: u16,
    user: &str,
    password: &str,
) -> Result<Connected, ConnectFailure>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    connect_first_tls(hosts, port, user, password, &Tls::plaintext()).await
}

/// [`connect_first`] over `tls` ([`connect_to_tls`]).
///
/// # Errors
/// As [`connect_first`].
pub async fn connect_first_tls<I>(
    hosts: I,
    port: u16,
    user: &str,
    password: &str,
    tls: &Tls,
) -> Result<Connected, ConnectFailure>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut last = ConnectFailure::NoNodes;
    for (index, host) in hosts.into_iter().enumerate() {
        let host = host.as_ref();
        match connect_to_tls(host, port, user, password, tls).await {
            Ok(conn) => return Ok(Connected { conn, index }),
            Err(error) => {
                let host = host.to_owned();
                match after_failure(&error) {
                    AfterFailure::Stop => return Err(ConnectFailure::LoginRefused { host, error }),
                    AfterFailure::NextFe => last = ConnectFailure::NoAnswer { host, error },
                }
            }
        }
    }
    Err(last)
}

/// The row a `query_first` returned, if any, as `T`.
///
/// # Errors
/// As [`decode`].
pub fn decode_first<T: FromRow>(row: Option<Row>, what: &str) -> Result<Option<T>, Error> {
    row.map(|r| decode(r, what)).transpose()
}

/// Every row as `T`.
///
/// # Errors
/// The first row that does not decode ([`decode`]).
pub fn decode_all<T: FromRow>(rows: Vec<Row>, what: &str) -> Result<Vec<T>, Error> {
    rows.into_iter().map(|r| decode(r, what)).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use mysql_async::Value;

    /// A row of `values` as mysql_async hands one out, every column a string.
    pub(crate) fn row(values: Vec<Value>) -> Row {
        let columns: Vec<mysql_async::Column> = (0..values.len())
            .map(|_| {
                mysql_async::Column::new(mysql_async::consts::ColumnType::MYSQL_TYPE_VAR_STRING)
            })
            .collect();
        mysql_common::row::new_row(values, columns.into())
    }

    fn server_error(code: u16) -> mysql_async::Error {
        mysql_async::Error::Server(mysql_async::ServerError {
            code,
            message: format!("error {code}"),
            state: "28000".into(),
        })
    }

    #[test]
    fn only_access_denied_is_a_refused_login() {
        assert_eq!(login_refused(&server_error(1045)), Some("error 1045"));
        assert_eq!(login_refused(&server_error(1698)), Some("error 1698"));
        assert_eq!(login_refused(&server_error(1105)), None);
        let io: mysql_async::Error =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused").into();
        assert_eq!(login_refused(&io), None);
    }

    #[test]
    fn a_refused_login_stops_anything_else_moves_on() {
        assert_eq!(after_failure(&server_error(1045)), AfterFailure::Stop);
        assert_eq!(after_failure(&server_error(1698)), AfterFailure::Stop);
        assert_eq!(after_failure(&server_error(1105)), AfterFailure::NextFe);
        let io: mysql_async::Error =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused").into();
        assert_eq!(after_failure(&io), AfterFailure::NextFe);
    }

    /// A local port nothing listens on (bound, then released).
    async fn closed_port() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    }

    #[tokio::test]
    async fn no_hosts_is_no_nodes() {
        let hosts: [&str; 0] = [];
        let e = connect_first(hosts, 9030, "u", "p").await.unwrap_err();
        assert!(matches!(e, ConnectFailure::NoNodes), "{e:?}");
    }

    #[tokio::test]
    async fn when_no_host_answers_the_last_one_is_named() {
        let port = closed_port().await;
        let e = connect_first(["127.0.0.2", "127.0.0.1"], port, "u", "p")
            .await
            .unwrap_err();
        match e {
            ConnectFailure::NoAnswer { host, error } => {
                assert_eq!(host, "127.0.0.1");
                assert_eq!(after_failure(&error), AfterFailure::NextFe);
            }
            other => panic!("{other:?}"),
        }
    }

    /// A MySQL packet: 3-byte length, sequence id, payload.
    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut packet = u32::try_from(payload.len()).unwrap().to_le_bytes()[..3].to_vec();
        packet.push(seq);
        packet.extend_from_slice(payload);
        packet
    }

    /// A server that refuses every login with 1045, counting the connections it accepted.
    async fn refusing_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // Protocol 10 handshake: mysql_native_password, 4.1 protocol, secure connection,
                // plugin auth.
                let mut hello = vec![10u8];
                hello.extend_from_slice(b"5.7.99\0");
                hello.extend_from_slice(&1u32.to_le_bytes());
                hello.extend_from_slice(b"abcdefgh\0");
                hello.extend_from_slice(&0xA201u16.to_le_bytes());
                hello.push(0x21);
                hello.extend_from_slice(&2u16.to_le_bytes());
                hello.extend_from_slice(&0x0008u16.to_le_bytes());
                hello.push(21);
                hello.extend_from_slice(&[0; 10]);
                hello.extend_from_slice(b"ijklmnopqrst\0");
                hello.extend_from_slice(b"mysql_native_password\0");
                socket.write_all(&packet(0, &hello)).await.unwrap();
                let mut header = [0u8; 4];
                socket.read_exact(&mut header).await.unwrap();
                let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
                let mut login = vec![0u8; len];
                socket.read_exact(&mut login).await.unwrap();
                let mut err = vec![0xffu8];
                err.extend_from_slice(&1045u16.to_le_bytes());
                err.extend_from_slice(b"#28000Access denied for user 'u'");
                socket
                    .write_all(&packet(header[3] + 1, &err))
                    .await
                    .unwrap();
            }
        });
        (port, accepted)
    }

    #[tokio::test]
    async fn a_refused_login_is_not_tried_on_the_next_host() {
        let (port, accepted) = refusing_server().await;
        let e = connect_first(["127.0.0.1", "localhost"], port, "u", "wrong")
            .await
            .unwrap_err();
        match e {
            ConnectFailure::LoginRefused { host, error } => {
                assert_eq!(host, "127.0.0.1");
                assert_eq!(login_refused(&error), Some("Access denied for user 'u'"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_server_that_accepts_and_says_nothing_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (_socket, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
        });
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .prefer_socket(false);
        let e = connect(opts.into(), std::time::Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("no MySQL handshake within 0.3s"),
            "{e}"
        );
    }

    #[test]
    fn a_good_row_decodes() {
        let r = row(vec![
            Value::Bytes(b"t".to_vec()),
            Value::Bytes(b"CREATE TABLE t".to_vec()),
        ]);
        let (name, ddl): (String, String) = decode(r, "the definition of t").unwrap();
        assert_eq!((name.as_str(), ddl.as_str()), ("t", "CREATE TABLE t"));
    }

    #[test]
    fn a_null_or_a_non_utf8_value_is_an_error_not_a_panic() {
        let r = row(vec![Value::Bytes(b"t".to_vec()), Value::NULL]);
        let e = decode::<(String, String)>(r, "the definition of t").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the definition of t: the server answered 2 column(s) that do not read as (alloc::string::String, alloc::string::String): text, NULL"
        );
        let r = row(vec![
            Value::Bytes(vec![0xff, 0xfe]),
            Value::Bytes(b"x".to_vec()),
        ]);
        let e = decode::<(String, String)>(r, "the definition of t").unwrap_err();
        assert!(e.to_string().ends_with("2 bytes, not UTF-8, text"), "{e}");
        // Too few columns.
        let r = row(vec![Value::Bytes(b"t".to_vec())]);
        assert!(decode::<(String, String)>(r, "x").is_err());
        // A NULL where one is allowed is fine.
        let r = row(vec![Value::Bytes(b"k".to_vec()), Value::NULL]);
        let (_, v): (String, Option<String>) = decode(r, "x").unwrap();
        assert_eq!(v, None);
    }
}

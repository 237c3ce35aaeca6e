//! The MySQL SSL upgrade on the query port, through mysql_async with rustls (ring).

use mysql_async::prelude::*;
use mysql_async::{Opts, OptsBuilder, SslOpts};

use super::{tls_emu, tls_emu_with, wrong_ca};

fn opts(port: u16, password: &str, ssl: Option<&str>) -> Opts {
    let ssl = ssl.map(|ca| SslOpts::default().with_root_certs(vec![ca.as_bytes().to_vec().into()]));
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .pass(Some(password))
        .prefer_socket(false)
        .ssl_opts(ssl)
        .into()
}

#[tokio::test]
async fn statements_and_prepared_statements_run_over_tls_with_the_right_ca() {
    let (emu, pki) = tls_emu_with(|c| c.password = "s3cret".into()).await;
    let port = emu.ports().query_port;
    let mut c = mysql_async::Conn::new(opts(port, "s3cret", Some(&pki.ca_pem)))
        .await
        .expect("connects over TLS");
    c.query_drop("CREATE DATABASE tls_db").await.unwrap();
    c.query_drop(
        "CREATE TABLE tls_db.t (id INT NOT NULL, v VARCHAR(16)) UNIQUE KEY(id) \
         DISTRIBUTED BY HASH(id) BUCKETS 1",
    )
    .await
    .unwrap();
    c.exec_drop("INSERT INTO tls_db.t VALUES (?, ?)", (1, "one"))
        .await
        .unwrap();
    c.exec_drop("INSERT INTO tls_db.t VALUES (?, ?)", (2, "two"))
        .await
        .unwrap();
    let rows: Vec<(i32, String)> = c
        .query("SELECT id, v FROM tls_db.t ORDER BY id")
        .await
        .unwrap();
    assert_eq!(rows, vec![(1, "one".to_string()), (2, "two".to_string())]);
    c.disconnect().await.unwrap();
    assert_eq!(emu.doris.counters.get("mysql_plaintext_refused"), 0);
}

#[tokio::test]
async fn a_wrong_password_over_tls_is_still_refused() {
    let (emu, pki) = tls_emu_with(|c| c.password = "s3cret".into()).await;
    let err = mysql_async::Conn::new(opts(emu.ports().query_port, "wrong", Some(&pki.ca_pem)))
        .await
        .expect_err("refused");
    match err {
        mysql_async::Error::Server(e) => assert_eq!(e.code, 1698, "{e}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_wrong_ca_fails_the_handshake() {
    let (emu, pki) = tls_emu().await;
    let port = emu.ports().query_port;
    let err = mysql_async::Conn::new(opts(port, "", Some(&wrong_ca())))
        .await
        .expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("UnknownIssuer"), "{text}");
    // The port still serves the next client.
    let mut c = mysql_async::Conn::new(opts(port, "", Some(&pki.ca_pem)))
        .await
        .expect("connects over TLS");
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn a_plaintext_login_is_refused_with_3159() {
    let (emu, _pki) = tls_emu().await;
    let err = mysql_async::Conn::new(opts(emu.ports().query_port, "", None))
        .await
        .expect_err("refused");
    match err {
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 3159, "{e}");
            assert_eq!(
                e.message,
                "Connections using insecure transport are prohibited while \
                 --require_secure_transport=ON."
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(emu.doris.counters.get("mysql_plaintext_refused"), 1);
}

//! HTTPS on the FE and BE HTTP ports: `/api/tso`, Stream Load through the FE's 307 (which must
//! say `https://`), and the refusals.

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{client_config, tls_emu, wrong_ca};
use crate::common::{STUDENT_DDL, run_sql, setup_sql};
use dcs_doris_emu::types::QueryResult;

/// One HTTP/1.1 request over a new TLS connection to `127.0.0.1:port`, verifying the server as
/// `localhost` against `ca_pem`. The error is the TLS or HTTP failure, as text.
async fn https(
    ca_pem: &str,
    port: u16,
    req: Request<Full<Bytes>>,
) -> Result<(StatusCode, hyper::HeaderMap, String), String> {
    let connector = TlsConnector::from(client_config(ca_pem, &[b"http/1.1"]));
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let name = ServerName::try_from("localhost").expect("server name");
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    send(TokioIo::new(tls), req).await
}

async fn send<T>(
    io: TokioIo<T>,
    req: Request<Full<Bytes>>,
) -> Result<(StatusCode, hyper::HeaderMap, String), String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("http handshake: {e}"))?;
    tokio::spawn(conn);
    let resp: Response<hyper::body::Incoming> = sender
        .send_request(req)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok((
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&body).into_owned(),
    ))
}

fn basic_root() -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("root:")
    )
}

fn get_tso(port: u16) -> Request<Full<Bytes>> {
    Request::get("/api/tso")
        .header("host", format!("localhost:{port}"))
        .header("authorization", basic_root())
        .body(Full::default())
        .unwrap()
}

#[tokio::test]
async fn fe_api_tso_over_https_with_the_right_ca() {
    let (emu, pki) = tls_emu().await;
    let port = emu.ports().fe_http_port;
    let (status, _, body) = https(&pki.ca_pem, port, get_tso(port)).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["code"], 0, "{body}");
    assert!(v["data"]["current_tso"].as_i64().unwrap() > 0, "{body}");
}

#[tokio::test]
async fn stream_load_redirect_says_https_and_the_be_loads_over_https() {
    let (emu, pki) = tls_emu().await;
    setup_sql(&emu, &["CREATE DATABASE test", STUDENT_DDL]).await;
    let (fe, be) = (emu.ports().fe_http_port, emu.ports().be_http_port);
    let path = "/api/test/student/_stream_load";
    let put = |port: u16, uri: &str, body: &'static [u8]| {
        Request::put(uri)
            .header("host", format!("localhost:{port}"))
            .header("authorization", basic_root())
            .header("expect", "100-continue")
            .header("label", "tls_load_1")
            .header("column_separator", ",")
            .header("columns", "id,name,age")
            .body(Full::new(Bytes::from_static(body)))
            .unwrap()
    };
    let (status, headers, body) = https(&pki.ca_pem, fe, put(fe, path, b"")).await.unwrap();
    assert_eq!(status, StatusCode::TEMPORARY_REDIRECT, "{body}");
    let loc = headers["location"].to_str().unwrap();
    let expected = format!("https://root:@127.0.0.1:{be}{path}?");
    assert_eq!(loc, expected);

    let (status, _, body) = https(&pki.ca_pem, be, put(be, path, b"1,a,20\n2,b,30\n"))
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["Status"], "Success", "{body}");
    assert_eq!(v["NumberLoadedRows"], 2, "{body}");
    let count = match run_sql(&emu, "SELECT id FROM test.student").await {
        Ok(QueryResult::Rows(rs)) => rs.rows.len(),
        other => panic!("{other:?}"),
    };
    assert_eq!(count, 2);
}

#[tokio::test]
async fn a_wrong_ca_is_refused_on_both_http_ports() {
    let (emu, pki) = tls_emu().await;
    let other = wrong_ca();
    for port in [emu.ports().fe_http_port, emu.ports().be_http_port] {
        let err = https(&other, port, get_tso(port)).await.unwrap_err();
        assert!(
            err.starts_with("tls: ") && err.contains("UnknownIssuer"),
            "{err}"
        );
    }
    // The failed handshakes cost their connections only.
    let port = emu.ports().fe_http_port;
    let (status, _, _) = https(&pki.ca_pem, port, get_tso(port)).await.unwrap();
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn plaintext_http_gets_no_answer_from_a_tls_port() {
    let (emu, pki) = tls_emu().await;
    for port in [emu.ports().fe_http_port, emu.ports().be_http_port] {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let err = send(TokioIo::new(tcp), get_tso(port)).await.unwrap_err();
        assert!(err.starts_with("request: "), "{err}");
    }
    let port = emu.ports().be_http_port;
    let (status, _, _) = https(&pki.ca_pem, port, get_tso(port)).await.unwrap();
    // The BE has no /api/tso; what matters is that it answers over TLS after the failures.
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        emu.doris.counters.get("tls_handshake_failed"),
        2,
        "one failed handshake per plaintext request"
    );
}

#[tokio::test]
async fn many_plaintext_clients_at_once_leave_the_port_serving() {
    let (emu, pki) = tls_emu().await;
    let port = emu.ports().fe_http_port;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        tasks.push(tokio::spawn(async move {
            let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            send(TokioIo::new(tcp), get_tso(port)).await.is_err()
        }));
    }
    for t in tasks {
        assert!(t.await.unwrap());
    }
    let (status, _, _) = https(&pki.ca_pem, port, get_tso(port)).await.unwrap();
    assert_eq!(status, StatusCode::OK);
}

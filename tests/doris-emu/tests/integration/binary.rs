//! The `dcs-doris-emu` binary: one JSON line of ports on stdout, logs on stderr, `--help`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_dcs-doris-emu");

#[test]
fn prints_exactly_one_json_line_with_the_bound_ports() {
    let mut child = Command::new(BIN)
        .args([
            "--fe-http-port",
            "0",
            "--be-http-port",
            "0",
            "--query-port",
            "0",
        ])
        .args(["--fe-flight-port", "0", "--be-flight-port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the emulator starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ports: serde_json::Value = serde_json::from_str(&line).expect("the first line is JSON");
    let keys = [
        "fe_http_port",
        "be_http_port",
        "query_port",
        "fe_flight_port",
        "be_flight_port",
    ];
    let obj = ports.as_object().unwrap();
    assert_eq!(obj.len(), keys.len() + 1, "{line}");
    assert_eq!(obj["tls"], false, "{line}");
    for k in keys {
        let port = obj[k].as_u64().unwrap_or(0);
        assert!(port > 0, "{k} is bound: {line}");
        // The port really listens.
        std::net::TcpStream::connect(("127.0.0.1", port as u16))
            .unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn help_names_every_flag() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--fe-http-port",
        "--be-http-port",
        "--query-port",
        "--fe-flight-port",
        "--be-flight-port",
        "--host",
        "--user",
        "--password",
        "--feature-changelog",
        "--tls-cert",
        "--tls-key",
        "--tls-self-signed",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn a_busy_port_is_reported_and_exits_non_zero() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = Command::new(BIN)
        .args([
            "--fe-http-port",
            &port,
            "--be-http-port",
            "0",
            "--query-port",
            "0",
        ])
        .args(["--fe-flight-port", "0", "--be-flight-port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot bind 127.0.0.1:{port}")),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no ports line when start-up fails");
}

#[test]
fn tls_self_signed_writes_the_pki_and_serves_tls() {
    let dir = std::env::temp_dir().join(format!("emu-tls-{}", std::process::id()));
    let mut child = Command::new(BIN)
        .args([
            "--fe-http-port",
            "0",
            "--be-http-port",
            "0",
            "--query-port",
            "0",
        ])
        .args(["--fe-flight-port", "0", "--be-flight-port", "0"])
        .arg("--tls-self-signed")
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the emulator starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let start: serde_json::Value = serde_json::from_str(&line).expect("the first line is JSON");
    assert_eq!(start["tls"], true, "{line}");
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    for f in ["cert.pem", "key.pem"] {
        assert!(dir.join(f).is_file(), "{f} written");
    }

    // A TLS handshake with the written CA succeeds on the FE HTTP port.
    let port = start["fe_http_port"].as_u64().unwrap() as u16;
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).expect("the handshake completes");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unreadable_certificate_is_named_and_exits_non_zero() {
    let out = Command::new(BIN)
        .args([
            "--tls-cert",
            "/nonexistent/cert.pem",
            "--tls-key",
            "/nonexistent/key.pem",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("dcs-doris-emu: cannot read --tls-cert /nonexistent/cert.pem: "),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

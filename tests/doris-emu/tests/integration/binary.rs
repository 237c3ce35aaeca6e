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
    assert_eq!(obj.len(), keys.len(), "{line}");
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

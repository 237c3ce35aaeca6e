//! Readiness and liveness probes (HTTP, TCP, exec).

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProbeKind {
    Readiness,
    Liveness,
}

pub(super) async fn probe_once(probe: &Value, ip: &str) -> bool {
    let timeout = Duration::from_secs(probe["timeoutSeconds"].as_u64().unwrap_or(1).max(1));
    let port_of = |v: &Value| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|p| p.parse().ok()))
            .unwrap_or(80)
    };
    if let Some(h) = probe.get("httpGet") {
        let port = port_of(&h["port"]);
        let path = h["path"].as_str().unwrap_or("/");
        let host = h["host"].as_str().unwrap_or(ip).to_string();
        let attempt = async {
            let mut stream =
                match tokio::net::TcpStream::connect((host.as_str(), port as u16)).await {
                    Ok(s) => s,
                    Err(_) => tokio::net::TcpStream::connect(("127.0.0.1", port as u16))
                        .await
                        .ok()?,
                };
            let req = format!(
                "GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.33\r\nConnection: close\r\n\r\n"
            );
            stream.write_all(req.as_bytes()).await.ok()?;
            let mut head = [0u8; 64];
            let n = stream.read(&mut head).await.ok()?;
            let line = String::from_utf8_lossy(&head[..n]).to_string();
            let code: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some((200..400).contains(&code))
        };
        return tokio::time::timeout(timeout, attempt)
            .await
            .ok()
            .flatten()
            .unwrap_or(false);
    }
    if let Some(t) = probe.get("tcpSocket") {
        let port = port_of(&t["port"]) as u16;
        let ok = tokio::time::timeout(timeout, async {
            tokio::net::TcpStream::connect((ip, port)).await.is_ok()
                || tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
        });
        return ok.await.unwrap_or(false);
    }
    if let Some(cmd) = probe.pointer("/exec/command").and_then(Value::as_array) {
        let argv: Vec<&str> = cmd.iter().filter_map(Value::as_str).collect();
        if let Some((first, rest)) = argv.split_first() {
            let run = tokio::process::Command::new(first)
                .args(rest)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            return matches!(tokio::time::timeout(timeout, run).await, Ok(Ok(s)) if s.success());
        }
    }
    true
}

/// Runs a probe until the task is dropped; reports transitions through `tx`.
pub(super) async fn probe_loop(
    probe: Value,
    ip: String,
    kind: ProbeKind,
    tx: tokio::sync::mpsc::Sender<(ProbeKind, bool)>,
) {
    let initial = Duration::from_secs(probe["initialDelaySeconds"].as_u64().unwrap_or(0));
    let period = Duration::from_secs(probe["periodSeconds"].as_u64().unwrap_or(10).max(1));
    let failure_threshold = probe["failureThreshold"].as_u64().unwrap_or(3).max(1);
    let success_threshold = probe["successThreshold"].as_u64().unwrap_or(1).max(1);
    tokio::time::sleep(initial).await;
    let (mut fails, mut oks) = (0u64, 0u64);
    let mut reported: Option<bool> = None;
    loop {
        if probe_once(&probe, &ip).await {
            oks += 1;
            fails = 0;
        } else {
            fails += 1;
            oks = 0;
        }
        let verdict = if oks >= success_threshold {
            Some(true)
        } else if fails >= failure_threshold {
            Some(false)
        } else {
            None
        };
        if let Some(v) = verdict
            && reported != Some(v)
        {
            reported = Some(v);
            if tx.send((kind, v)).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(period).await;
    }
}

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

/// The port a probe's `port` designates: a number, the name of one of the container's
/// `ports[]` (an IANA_SVC_NAME such as `http`), or a number written as a string; as the
/// kubelet's `resolveContainerPort`.
pub(super) fn resolve_port(port: &Value, container: &Value) -> Result<u16, String> {
    let n = match port {
        Value::Number(n) => n.as_i64(),
        Value::String(name) => container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str() == Some(name.as_str()))
            .and_then(|p| p["containerPort"].as_i64())
            .or_else(|| name.parse().ok()),
        Value::Null => return Err("no port given".into()),
        other => return Err(format!("invalid port {other}")),
    };
    match n {
        Some(n) if (1..=65535).contains(&n) => Ok(n as u16),
        Some(n) => Err(format!("invalid port number: {n}")),
        None => Err(format!(
            "couldn't find port {port} in the container's ports"
        )),
    }
}

/// Runs a probe once: `Ok` when it passes, the reason it failed otherwise.
pub(super) async fn probe_once(probe: &Value, container: &Value, ip: &str) -> Result<(), String> {
    let timeout = Duration::from_secs(probe["timeoutSeconds"].as_u64().unwrap_or(1).max(1));
    if let Some(h) = probe.get("httpGet") {
        let port = resolve_port(&h["port"], container)?;
        let path = h["path"].as_str().unwrap_or("/");
        let host = h["host"].as_str().unwrap_or(ip).to_string();
        let attempt = async {
            let mut stream = match tokio::net::TcpStream::connect((host.as_str(), port)).await {
                Ok(s) => s,
                Err(_) => tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .map_err(|e| format!("Get \"http://{host}:{port}{path}\": {e}"))?,
            };
            let req = format!(
                "GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.33\r\nConnection: close\r\n\r\n"
            );
            stream
                .write_all(req.as_bytes())
                .await
                .map_err(|e| e.to_string())?;
            let mut head = [0u8; 64];
            let n = stream.read(&mut head).await.map_err(|e| e.to_string())?;
            let line = String::from_utf8_lossy(&head[..n]).to_string();
            let code: u16 = line
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| format!("malformed HTTP response {line:?}"))?;
            if (200..400).contains(&code) {
                Ok(())
            } else {
                Err(format!("HTTP probe failed with statuscode: {code}"))
            }
        };
        return tokio::time::timeout(timeout, attempt)
            .await
            .unwrap_or_else(|_| Err("context deadline exceeded".into()));
    }
    if let Some(t) = probe.get("tcpSocket") {
        let port = resolve_port(&t["port"], container)?;
        let host = t["host"].as_str().unwrap_or(ip);
        let attempt = async {
            if tokio::net::TcpStream::connect((host, port)).await.is_ok() {
                return Ok(());
            }
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .map(drop)
                .map_err(|e| format!("dial tcp {host}:{port}: {e}"))
        };
        return tokio::time::timeout(timeout, attempt)
            .await
            .unwrap_or_else(|_| Err(format!("dial tcp {host}:{port}: i/o timeout")));
    }
    if let Some(cmd) = probe.pointer("/exec/command").and_then(Value::as_array) {
        let argv: Vec<&str> = cmd.iter().filter_map(Value::as_str).collect();
        if let Some((first, rest)) = argv.split_first() {
            let run = tokio::process::Command::new(first)
                .args(rest)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            return match tokio::time::timeout(timeout, run).await {
                Ok(Ok(s)) if s.success() => Ok(()),
                Ok(Ok(s)) => Err(format!("command {first:?} exited with {s}")),
                Ok(Err(e)) => Err(format!("command {first:?}: {e}")),
                Err(_) => Err(format!("command {first:?} timed out")),
            };
        }
    }
    Ok(())
}

/// A probe's verdict changed: it passes (`ok`) or failed `failureThreshold` times in a row,
/// the last time for `message`.
#[derive(Debug)]
pub(super) struct ProbeResult {
    pub(super) kind: ProbeKind,
    pub(super) ok: bool,
    pub(super) message: String,
}

/// Runs a probe until the task is dropped; reports transitions through `tx`.
pub(super) async fn probe_loop(
    probe: Value,
    container: Value,
    ip: String,
    kind: ProbeKind,
    tx: tokio::sync::mpsc::Sender<ProbeResult>,
) {
    let initial = Duration::from_secs(probe["initialDelaySeconds"].as_u64().unwrap_or(0));
    let period = Duration::from_secs(probe["periodSeconds"].as_u64().unwrap_or(10).max(1));
    let failure_threshold = probe["failureThreshold"].as_u64().unwrap_or(3).max(1);
    let success_threshold = probe["successThreshold"].as_u64().unwrap_or(1).max(1);
    tokio::time::sleep(initial).await;
    let (mut fails, mut oks) = (0u64, 0u64);
    let mut reported: Option<bool> = None;
    let mut last_error = String::new();
    loop {
        match probe_once(&probe, &container, &ip).await {
            Ok(()) => {
                oks += 1;
                fails = 0;
            }
            Err(e) => {
                fails += 1;
                oks = 0;
                last_error = e;
            }
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
            let result = ProbeResult {
                kind,
                ok: v,
                message: if v { String::new() } else { last_error.clone() },
            };
            if tx.send(result).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(period).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn named_ports_resolve_against_the_container_ports() {
        let c = json!({"ports": [{"name": "grpc", "containerPort": 9090}, {"name": "http", "containerPort": 18181}]});
        assert_eq!(resolve_port(&json!("http"), &c), Ok(18181));
        assert_eq!(resolve_port(&json!(8080), &c), Ok(8080));
        assert_eq!(resolve_port(&json!("8080"), &c), Ok(8080));
        assert!(resolve_port(&json!("metrics"), &c).is_err());
        assert!(resolve_port(&json!("http"), &json!({})).is_err());
        assert!(resolve_port(&json!(0), &c).is_err());
        assert!(resolve_port(&json!(70000), &c).is_err());
        assert!(resolve_port(&Value::Null, &c).is_err());
    }
}

//! `pods/{name}/log`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use serde_json::Value;

use crate::api::{Body, stream_response};
use crate::cluster::Cluster;
use crate::status::{ApiError, ApiResult};
use crate::store::ObjKey;

use super::*;

/// Serves `pods/{name}/log` (`container`, `follow`, `previous`, `tailLines`).
pub async fn logs(
    cluster: Arc<Cluster>,
    ns: &str,
    name: &str,
    q: &HashMap<String, String>,
) -> ApiResult<Response<Body>> {
    let pod = cluster
        .store
        .get(&ObjKey::new("pods", ns, name))
        .ok_or_else(|| ApiError::not_found("pods", name))?;
    let containers: Vec<String> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    let container = match q.get("container").filter(|c| !c.is_empty()) {
        Some(c) if containers.contains(c) => c.clone(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
    };
    let mut key = format!("{ns}/{name}/{container}");
    if q.get("previous").is_some_and(|p| p == "true") {
        key.push_str("/previous");
    }
    let buf = log_buffer(&cluster, &key);
    let tail = |data: &[u8]| -> Vec<u8> {
        match q.get("tailLines").and_then(|t| t.parse::<usize>().ok()) {
            Some(n) => {
                let text = String::from_utf8_lossy(data);
                let lines: Vec<&str> = text.lines().collect();
                let start = lines.len().saturating_sub(n);
                let mut out = lines[start..].join("\n");
                if !out.is_empty() {
                    out.push('\n');
                }
                out.into_bytes()
            }
            None => data.to_vec(),
        }
    };
    let initial = tail(&buf.read());
    if q.get("follow").is_none_or(|f| f != "true") {
        return Ok(Response::builder()
            .status(200)
            .header("content-type", "text/plain")
            .body(http_body_util::BodyExt::boxed(http_body_util::Full::new(
                Bytes::from(initial),
            )))
            .expect("valid response"));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let (ns, name, uid) = (
        ns.to_string(),
        name.to_string(),
        s(&pod, "/metadata/uid").to_string(),
    );
    let mut offset = buf.read().len();
    tokio::spawn(async move {
        if tx.send(Bytes::from(initial)).await.is_err() {
            return;
        }
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let chunk = {
                let b = buf.read();
                if b.len() < offset {
                    offset = 0;
                }
                let c = b[offset..].to_vec();
                offset = b.len();
                c
            };
            if !chunk.is_empty() && tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
            let pod = cluster.store.get(&ObjKey::new("pods", &ns, &name));
            let done = match &pod {
                None => true,
                Some(p) => {
                    s(p, "/metadata/uid") != uid
                        || matches!(s(p, "/status/phase"), "Succeeded" | "Failed")
                }
            };
            if done {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let rest = {
                    let b = buf.read();
                    b.get(offset..).map(<[u8]>::to_vec).unwrap_or_default()
                };
                if !rest.is_empty() {
                    let _ = tx.send(Bytes::from(rest)).await;
                }
                return;
            }
        }
    });
    Ok(stream_response("text/plain", rx))
}

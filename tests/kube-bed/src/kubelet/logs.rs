//! Container logs: a buffer per container run, and what `/containerLogs` answers from it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::RwLock;
use serde_json::Value;

use super::{Shared, s};

/// The output of one run of a container; closed when the process and its pipes have ended.
#[derive(Debug, Default)]
pub(crate) struct LogBuf {
    data: RwLock<Vec<u8>>,
    closed: RwLock<bool>,
}

impl LogBuf {
    pub(super) fn append(&self, chunk: &[u8]) {
        self.data.write().extend_from_slice(chunk);
    }

    pub(super) fn close(&self) {
        *self.closed.write() = true;
    }

    fn is_closed(&self) -> bool {
        *self.closed.read()
    }

    /// Everything written so far.
    pub(super) fn contents(&self) -> Vec<u8> {
        self.data.read().clone()
    }

    fn from(&self, offset: usize) -> Vec<u8> {
        self.data
            .read()
            .get(offset..)
            .map(<[u8]>::to_vec)
            .unwrap_or_default()
    }
}

/// The last `n` lines of `data`.
pub(super) fn tail_lines(data: &[u8], n: Option<usize>) -> Vec<u8> {
    let Some(n) = n else { return data.to_vec() };
    let text = String::from_utf8_lossy(data);
    let lines: Vec<&str> = text.lines().collect();
    let mut out = lines[lines.len().saturating_sub(n)..].join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out.into_bytes()
}

/// What a `/containerLogs/{ns}/{pod}/{container}` request gets.
pub(super) enum Answer {
    /// 200 with the whole text.
    Text(Vec<u8>),
    /// 200, streamed until the container's run ends (`follow=true`).
    Stream(tokio::sync::mpsc::Receiver<Bytes>),
    /// An error status and its message.
    Error(u16, String),
}

/// Answers a log request (`follow`, `previous`, `tailLines`, `limitBytes`).
pub(super) fn answer(
    shared: &Arc<Shared>,
    ns: &str,
    pod: &str,
    container: &str,
    q: &HashMap<String, String>,
) -> Answer {
    let known = shared.pods.read().get(&format!("{ns}/{pod}")).cloned();
    let Some(spec) = known else {
        return Answer::Error(404, format!("pod {ns}/{pod} not found on this node"));
    };
    let names: Vec<&str> = spec
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(
            spec.pointer("/spec/initContainers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        )
        .map(|c| s(c, "/name"))
        .collect();
    if !names.contains(&container) {
        return Answer::Error(
            400,
            format!("container {container} is not valid for pod {pod}"),
        );
    }
    let previous = q.get("previous").is_some_and(|p| p == "true");
    let mut key = format!("{ns}/{pod}/{container}");
    if previous {
        key.push_str("/previous");
    }
    let Some(buf) = shared.logs.read().get(&key).cloned() else {
        return if previous {
            Answer::Error(
                400,
                format!("previous terminated container \"{container}\" in pod \"{pod}\" not found"),
            )
        } else {
            Answer::Error(
                400,
                format!(
                    "container \"{container}\" in pod \"{pod}\" is waiting to start: ContainerCreating"
                ),
            )
        };
    };
    let tail = q.get("tailLines").and_then(|t| t.parse::<usize>().ok());
    let limit = q.get("limitBytes").and_then(|t| t.parse::<usize>().ok());
    let mut initial = tail_lines(&buf.from(0), tail);
    if let Some(l) = limit {
        initial.truncate(l);
    }
    if q.get("follow").is_none_or(|f| f != "true") {
        return Answer::Text(initial);
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let mut offset = buf.from(0).len();
        if tx.send(Bytes::from(initial)).await.is_err() {
            return;
        }
        loop {
            let closed = buf.is_closed();
            let chunk = buf.from(offset);
            offset += chunk.len();
            if !chunk.is_empty() && tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
            if closed {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    Answer::Stream(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail_lines(b"a\nb\nc\n", Some(2)), b"b\nc\n");
        assert_eq!(tail_lines(b"a\nb\nc\n", Some(0)), b"");
        assert_eq!(tail_lines(b"a\nb", None), b"a\nb");
    }
}

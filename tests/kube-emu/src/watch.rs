//! Watches: chunked JSON event streams with selectors, bookmarks, timeouts and 410 for
//! resourceVersions older than the retained history.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::cluster::Cluster;
use crate::kinds::ResourceInfo;
use crate::selectors::Selector;
use crate::store::{Event, EventType};

/// What a watch request asked for.
#[derive(Debug, Clone)]
pub struct WatchParams {
    /// The resource.
    pub info: ResourceInfo,
    /// The request's version.
    pub version: String,
    /// Namespace, or all.
    pub ns: Option<String>,
    /// `resourceVersion` (None or "0": start with the current state).
    pub resource_version: Option<String>,
    /// `labelSelector`.
    pub labels: Selector,
    /// `fieldSelector`.
    pub fields: Selector,
    /// `timeoutSeconds`.
    pub timeout: Duration,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: bool,
    /// How often bookmarks are sent.
    pub bookmark_every: Duration,
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut s = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    s.push(b'\n');
    Bytes::from(s)
}

/// Runs a watch, sending JSON lines until the timeout, an error, or the client leaving.
pub async fn run(cluster: Arc<Cluster>, p: WatchParams, tx: mpsc::Sender<Bytes>) {
    let gr = p.info.storage_key();
    let present = |o: &Value| Cluster::present(&p.info, &p.version, o.clone());
    let matches = |o: &Value| {
        let o = present(o);
        p.labels.matches_labels(&o) && p.fields.matches_fields(&o)
    };
    let from_now = matches!(p.resource_version.as_deref(), None | Some("") | Some("0"))
        || p.send_initial_events;
    let (mut last_rv, mut rx): (u64, broadcast::Receiver<Arc<Event>>) = if from_now {
        let (items, rv, rx) = cluster.store.snapshot_and_subscribe(&gr, p.ns.as_deref());
        for o in items.iter().filter(|o| matches(o)) {
            if tx.send(line("ADDED", &present(o))).await.is_err() {
                return;
            }
        }
        if p.send_initial_events && p.bookmarks {
            let b = json!({"kind": p.info.kind, "apiVersion": p.info.api_version(&p.version),
                "metadata": {"resourceVersion": rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}});
            if tx.send(line("BOOKMARK", &b)).await.is_err() {
                return;
            }
        }
        (rv, rx)
    } else {
        let rv: u64 = p
            .resource_version
            .as_deref()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        match cluster.store.watch_from(rv) {
            Ok((past, rx)) => {
                let mut last = rv;
                for e in past {
                    if let Some(l) = translate(&e, &gr, p.ns.as_deref(), &matches, &present)
                        && tx.send(l).await.is_err()
                    {
                        return;
                    }
                    last = e.rv;
                }
                (last, rx)
            }
            Err(e) => {
                let _ = tx.send(line("ERROR", &e.to_status())).await;
                return;
            }
        }
    };
    let deadline = tokio::time::Instant::now() + p.timeout;
    let mut ticker = tokio::time::interval(p.bookmark_every);
    ticker.tick().await;
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(e) => {
                    if e.rv <= last_rv {
                        continue;
                    }
                    last_rv = e.rv;
                    if let Some(l) = translate(&e, &gr, p.ns.as_deref(), &matches, &present)
                        && tx.send(l).await.is_err() {
                            return;
                        }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let status = crate::status::ApiError::expired("watch fell too far behind; relist").to_status();
                    let _ = tx.send(line("ERROR", &status)).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = tokio::time::sleep_until(deadline) => return,
            _ = ticker.tick(), if p.bookmarks => {
                let b = json!({"kind": p.info.kind, "apiVersion": p.info.api_version(&p.version), "metadata": {"resourceVersion": last_rv.max(cluster.store.current_rv()).to_string()}});
                if tx.send(line("BOOKMARK", &b)).await.is_err() {
                    return;
                }
            }
            _ = tx.closed() => return,
        }
    }
}

/// Turns a store event into the watch event this watcher sees, if any: objects entering or
/// leaving the selection appear as ADDED or DELETED.
fn translate(
    e: &Event,
    gr: &str,
    ns: Option<&str>,
    matches: &impl Fn(&Value) -> bool,
    present: &impl Fn(&Value) -> Value,
) -> Option<Bytes> {
    if e.key.gr != gr || ns.is_some_and(|n| n != e.key.ns) {
        return None;
    }
    let now = matches(&e.object);
    let before = e.previous.as_ref().is_some_and(matches);
    let kind = match e.kind {
        EventType::Added if now => "ADDED",
        EventType::Modified if now && before => "MODIFIED",
        EventType::Modified if now => "ADDED",
        EventType::Modified if before => "DELETED",
        EventType::Deleted if now => "DELETED",
        _ => return None,
    };
    Some(line(kind, &present(&e.object)))
}

//! Writing a pod's status: one writer task per pod, so writes reach the API server in order and
//! a burst of changes becomes one PATCH of the latest state.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{Shared, now};

/// The latest status of one pod, and the task that writes it.
pub(super) struct Publisher {
    tx: watch::Sender<(u64, Value)>,
    written: watch::Receiver<u64>,
}

impl Publisher {
    /// Starts the writer of pod `ns/name` (uid `uid`).
    pub(super) fn start(shared: Arc<Shared>, ns: &str, name: &str, uid: &str) -> Self {
        let (tx, rx) = watch::channel((0u64, Value::Null));
        let (done_tx, written) = watch::channel(0u64);
        tokio::spawn(write_loop(
            Api::namespaced(shared.client.clone(), ns),
            name.to_string(),
            uid.to_string(),
            rx,
            done_tx,
        ));
        Self { tx, written }
    }

    /// Asks for `status` to be written.
    pub(super) fn publish(&self, status: Value) {
        self.tx.send_modify(|(n, s)| {
            *n += 1;
            *s = status;
        });
    }

    /// Waits (at most 10 s) until the latest status was written or given up on.
    pub(super) async fn flush(&self) {
        let want = self.tx.borrow().0;
        let mut written = self.written.clone();
        let _ =
            tokio::time::timeout(Duration::from_secs(10), written.wait_for(|n| *n >= want)).await;
    }
}

/// Keeps each condition's `lastTransitionTime` while its status stays the same.
pub(super) fn with_transition_times(mut status: Value, previous: &Value) -> Value {
    let t = now();
    let old = previous["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if let Some(conds) = status["conditions"].as_array_mut() {
        for c in conds.iter_mut() {
            let kept = old
                .iter()
                .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
                .map(|o| o["lastTransitionTime"].clone());
            c["lastTransitionTime"] = kept.unwrap_or_else(|| json!(t));
        }
    }
    status
}

async fn write_loop(
    api: Api<Pod>,
    name: String,
    uid: String,
    mut rx: watch::Receiver<(u64, Value)>,
    done: watch::Sender<u64>,
) {
    let mut previous = Value::Null;
    loop {
        if rx.changed().await.is_err() {
            return;
        }
        let (n, status) = rx.borrow_and_update().clone();
        let status = with_transition_times(status, &previous);
        // The uid makes the patch fail on a pod of the same name that replaced this one.
        let patch = json!({"metadata": {"uid": uid}, "status": status});
        let mut backoff = Duration::from_millis(100);
        for _ in 0..8 {
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409 | 422) => {
                    tracing::debug!(pod = %name, error = %e, "pod status not written");
                    break;
                }
                Err(e) => {
                    tracing::debug!(pod = %name, error = %e, "writing the pod status; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
            if rx.has_changed().unwrap_or(false) {
                break;
            }
        }
        previous = status;
        let _ = done.send(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_times_move_only_when_a_condition_changes() {
        let prev = json!({"conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": "2020-01-01T00:00:00Z"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
        ]});
        let next = with_transition_times(
            json!({"conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}),
            &prev,
        );
        assert_ne!(
            next["conditions"][0]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        assert_eq!(
            next["conditions"][1]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
    }
}

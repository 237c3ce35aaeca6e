//! Stopping a sync's runner before its checkpoint is read: for a re-initialisation and for a
//! deletion alike. Pure: the [`StopMark`] that makes a stop survive operator restarts and watch
//! cache lag, and [`decide`], which says whether to wait for the runner's pods, force them off or
//! go on. `teardown::stop_and_clean` does the I/O.
//!
//! A stop deletes the workload, fences the checkpoint ConfigMap (an annotation: a runner that
//! loaded the checkpoint before can no longer save it) and waits for the runner's pods to go, since
//! a stopping runner may still pre-commit a load or save a last checkpoint. The wait is bounded:
//! each pod gets its termination grace period (from its `deletionTimestamp`, else from the start of
//! the stop) plus [`DEFAULT_MARGIN`]; a pod still there then is deleted with `gracePeriodSeconds:
//! 0`, and the stop goes on without waiting for it any longer: the fence, and the checkpoint's
//! removal or overwrite that follows, keep such a runner from saving or committing.

use std::time::Duration;

use dcs_crds::conditions::reasons;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// Annotation on the sync while its runner is being stopped: the [`StopMark`] as JSON.
pub const STOPPING_ANNOTATION: &str = "dcs.dev/stopping";
/// Annotation on the checkpoint ConfigMap that fences the stopped runner; its value names the stop.
pub const FENCED_ANNOTATION: &str = "dcs.dev/fenced";
/// How long past a pod's grace period the operator waits before forcing it off.
pub const DEFAULT_MARGIN: Duration = Duration::from_secs(30);
/// How often a stop looks again while pods are stopping (pod events wake it sooner).
pub const POLL: Duration = Duration::from_secs(2);
/// The termination grace period of a pod that does not say (Kubernetes' default).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// What a stop is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "for", rename_all = "camelCase")]
pub enum Purpose {
    /// Re-initialising: the runner of `consumer` stops for good.
    #[serde(rename_all = "camelCase")]
    Reinit {
        /// The consumer being abandoned.
        consumer: String,
        /// `OffsetExpired` or `NonceChanged`.
        reason: String,
        /// Why, as the plan said it.
        message: String,
    },
    /// The sync is being deleted.
    Deletion,
}

/// A stop in progress, kept on the sync ([`STOPPING_ANNOTATION`]): the plan keeps a started
/// re-initialisation going even when what triggered it is no longer observed (a restarted runner
/// clearing its stop record, a probe blip), and the wait is measured from `since` however often
/// the operator restarts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopMark {
    /// When the stop began (the operator's clock).
    pub since: Timestamp,
    /// What for.
    #[serde(flatten)]
    pub purpose: Purpose,
}

impl StopMark {
    /// The annotation value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("a stop mark serializes")
    }

    /// Reads an annotation value; `None` when it is not a mark (written by hand, or garbled).
    pub fn from_annotation(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    /// The fence annotation's value: it names the stop, so each stop fences the runner anew.
    pub fn fence(&self) -> String {
        match &self.purpose {
            Purpose::Reinit { consumer, .. } => {
                format!("reinitializing consumer {consumer} since {}", self.since)
            }
            Purpose::Deletion => format!("deleted since {}", self.since),
        }
    }

    /// The re-initialisation reason as the plan names it.
    pub fn reinit_reason(&self) -> Option<&'static str> {
        match &self.purpose {
            Purpose::Reinit { reason, .. } if reason == reasons::NONCE_CHANGED => {
                Some(reasons::NONCE_CHANGED)
            }
            Purpose::Reinit { reason, .. } if reason == reasons::SNAPSHOT_TABLETS_CHANGED => {
                Some(reasons::SNAPSHOT_TABLETS_CHANGED)
            }
            Purpose::Reinit { .. } => Some(reasons::OFFSET_EXPIRED),
            Purpose::Deletion => None,
        }
    }

    /// Whether this mark re-initialises away from `consumer`.
    pub fn reinitializes(&self, consumer: &str) -> bool {
        matches!(&self.purpose, Purpose::Reinit { consumer: c, .. } if c == consumer)
    }

    /// Whether this mark is for the same stop as `purpose` (a re-initialisation of the same
    /// consumer, whatever its message, or the deletion).
    pub fn same_stop(&self, purpose: &Purpose) -> bool {
        match (&self.purpose, purpose) {
            (Purpose::Reinit { consumer: a, .. }, Purpose::Reinit { consumer: b, .. }) => a == b,
            (Purpose::Deletion, Purpose::Deletion) => true,
            _ => false,
        }
    }
}

/// A runner pod still there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerPod {
    /// Pod name.
    pub name: String,
    /// `metadata.deletionTimestamp`: when its grace period ends, once it is being deleted.
    pub deleting_until: Option<Timestamp>,
    /// `metadata.deletionGracePeriodSeconds`: 0 once it was deleted with `gracePeriodSeconds: 0`.
    pub deletion_grace_seconds: Option<i64>,
    /// Its termination grace period (`spec.terminationGracePeriodSeconds`, default 30 s).
    pub grace: Duration,
}

impl RunnerPod {
    /// Whether it was already forced off (deleted with `gracePeriodSeconds: 0`).
    pub fn forced(&self) -> bool {
        self.deletion_grace_seconds == Some(0)
    }
}

/// What to do about the runner's pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopStep {
    /// No pod is left that the stop waits for: go on. `lingering` are pods already forced off
    /// that are still listed (a finalizer, an unreachable kubelet); the fence covers them.
    Proceed {
        /// Forced pods still there.
        lingering: Vec<String>,
    },
    /// Wait for these pods until `deadline`; look again after `recheck`.
    Wait {
        /// The pods waited for.
        pods: Vec<String>,
        /// When they are forced off.
        deadline: Timestamp,
        /// When to look again.
        recheck: Duration,
    },
    /// These pods outlived their grace period and the margin: delete them with
    /// `gracePeriodSeconds: 0`.
    Force {
        /// The pods to force off.
        pods: Vec<String>,
        /// The deadline they passed.
        deadline: Timestamp,
    },
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// The moment `pod` is forced off: the end of its grace period (its `deletionTimestamp`, else
/// `since` + its grace period) plus `margin`.
pub fn deadline(pod: &RunnerPod, since: Timestamp, margin: Duration) -> Timestamp {
    let end = pod
        .deleting_until
        .unwrap_or_else(|| since.saturating_add(signed(pod.grace)).unwrap_or(since));
    end.saturating_add(signed(margin)).unwrap_or(end)
}

/// Decides the stop for the pods still listed (finished Job pods excluded by the caller).
pub fn decide(pods: &[RunnerPod], since: Timestamp, now: Timestamp, margin: Duration) -> StopStep {
    let (forced, live): (Vec<&RunnerPod>, Vec<&RunnerPod>) = pods.iter().partition(|p| p.forced());
    let names = |list: &[&RunnerPod]| list.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    let Some(latest) = live.iter().map(|p| deadline(p, since, margin)).max() else {
        return StopStep::Proceed {
            lingering: names(&forced),
        };
    };
    let left_ms = latest.as_millisecond() - now.as_millisecond();
    if left_ms > 0 {
        return StopStep::Wait {
            pods: names(&live),
            deadline: latest,
            recheck: Duration::from_millis(u64::try_from(left_ms).unwrap_or(0)).min(POLL),
        };
    }
    StopStep::Force {
        pods: names(&live),
        deadline: latest,
    }
}

/// The Ready message while a re-initialisation waits for the runner's pods.
pub fn waiting_message(why: &str, consumer: &str, pods: &[String], deadline: Timestamp) -> String {
    format!(
        "{why}; re-initialising: waiting for the runner pod(s) {} of consumer {consumer} to stop before reading its checkpoint, until {deadline} (their grace period and a margin); then they are deleted with gracePeriodSeconds 0",
        pods.join(", ")
    )
}

/// The Warning event after forcing pods off; `still_there` are those the API still lists.
pub fn forced_note(
    pods: &[String],
    deadline: Timestamp,
    margin: Duration,
    still_there: &[String],
) -> String {
    let mut note = format!(
        "runner pod(s) {} did not stop within their grace period and a {}s margin (until {deadline}): deleted them with gracePeriodSeconds 0 and went on",
        pods.join(", "),
        margin.as_secs()
    );
    if still_there.is_empty() {
        note.push_str("; the checkpoint ConfigMap fence keeps a runner that still runs on its node from saving or committing");
    } else {
        note.push_str(&format!(
            "; {} still listed (a finalizer or an unreachable node): the checkpoint ConfigMap fence keeps it from saving or committing, and a load it pre-commits is left to Doris's transaction timeout",
            still_there.join(", ")
        ));
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::testing::at;

    const MARGIN: Duration = Duration::from_secs(30);

    fn pod(name: &str, deleting: Option<i64>) -> RunnerPod {
        RunnerPod {
            name: name.into(),
            deleting_until: deleting.map(at),
            deletion_grace_seconds: deleting.map(|_| 30),
            grace: Duration::from_secs(30),
        }
    }

    #[test]
    fn no_pods_means_go_on() {
        assert_eq!(
            decide(&[], at(0), at(0), MARGIN),
            StopStep::Proceed { lingering: vec![] }
        );
    }

    #[test]
    fn a_pod_not_marked_for_deletion_gets_its_grace_from_the_start_of_the_stop() {
        let p = [pod("a", None)];
        assert_eq!(
            decide(&p, at(0), at(1), MARGIN),
            StopStep::Wait {
                pods: vec!["a".into()],
                deadline: at(60),
                recheck: POLL
            }
        );
        assert_eq!(
            decide(&p, at(0), at(59), MARGIN),
            StopStep::Wait {
                pods: vec!["a".into()],
                deadline: at(60),
                recheck: Duration::from_secs(1)
            }
        );
        assert_eq!(
            decide(&p, at(0), at(60), MARGIN),
            StopStep::Force {
                pods: vec!["a".into()],
                deadline: at(60)
            }
        );
    }

    #[test]
    fn a_deleting_pod_counts_from_its_deletion_timestamp() {
        let p = [pod("a", Some(5))];
        assert!(matches!(
            decide(&p, at(0), at(34), MARGIN),
            StopStep::Wait { deadline, .. } if deadline == at(35)
        ));
        assert!(matches!(
            decide(&p, at(0), at(35), MARGIN),
            StopStep::Force { .. }
        ));
    }

    #[test]
    fn the_latest_deadline_of_several_pods_counts_and_all_are_forced() {
        let p = [pod("a", Some(5)), pod("b", None)];
        assert!(matches!(
            decide(&p, at(0), at(40), MARGIN),
            StopStep::Wait { ref pods, deadline, .. } if pods.len() == 2 && deadline == at(60)
        ));
        assert_eq!(
            decide(&p, at(0), at(61), MARGIN),
            StopStep::Force {
                pods: vec!["a".into(), "b".into()],
                deadline: at(60)
            }
        );
    }

    #[test]
    fn forced_pods_are_not_waited_for_again() {
        // A CrashLoopBackOff pod whose deletion the kubelet has not processed: forced, still
        // listed. The stop goes on at once, however long ago it started.
        let mut forced = pod("a", Some(5));
        forced.deletion_grace_seconds = Some(0);
        assert_eq!(
            decide(std::slice::from_ref(&forced), at(0), at(36), MARGIN),
            StopStep::Proceed {
                lingering: vec!["a".into()]
            }
        );
        // A new pod next to it is still waited for.
        let p = [forced, pod("b", None)];
        assert!(matches!(
            decide(&p, at(0), at(36), MARGIN),
            StopStep::Wait { ref pods, .. } if pods == &["b".to_owned()]
        ));
    }

    #[test]
    fn a_late_pass_forces_at_once() {
        // The wait is measured from the persisted start: a pass that comes long after (a requeue
        // that came late on a loaded machine) forces at once.
        let p = [pod("a", None)];
        assert!(matches!(
            decide(&p, at(0), at(600), MARGIN),
            StopStep::Force { .. }
        ));
    }

    #[test]
    fn the_mark_round_trips_and_names_the_stop() {
        let mark = StopMark {
            since: at(0),
            purpose: Purpose::Reinit {
                consumer: "s".into(),
                reason: "OffsetExpired".into(),
                message: "the runner reports the offset expired".into(),
            },
        };
        let text = mark.to_annotation();
        assert_eq!(
            text,
            r#"{"since":"2026-11-29T14:00:00Z","for":"reinit","consumer":"s","reason":"OffsetExpired","message":"the runner reports the offset expired"}"#
        );
        assert_eq!(StopMark::from_annotation(&text), Some(mark.clone()));
        assert_eq!(StopMark::from_annotation("deleted"), None);
        assert_eq!(
            mark.fence(),
            "reinitializing consumer s since 2026-11-29T14:00:00Z"
        );
        assert!(mark.reinitializes("s") && !mark.reinitializes("s-r1"));
        assert_eq!(mark.reinit_reason(), Some("OffsetExpired"));
        assert!(mark.same_stop(&Purpose::Reinit {
            consumer: "s".into(),
            reason: "NonceChanged".into(),
            message: String::new()
        }));
        assert!(!mark.same_stop(&Purpose::Deletion));
        let deletion = StopMark {
            since: at(0),
            purpose: Purpose::Deletion,
        };
        assert_eq!(
            deletion.to_annotation(),
            r#"{"since":"2026-11-29T14:00:00Z","for":"deletion"}"#
        );
        assert_eq!(deletion.fence(), "deleted since 2026-11-29T14:00:00Z");
        assert_eq!(deletion.reinit_reason(), None);
    }

    #[test]
    fn messages_name_the_pods_and_the_deadline() {
        assert_eq!(
            waiting_message("the offset expired", "s", &["s-runner-1".into()], at(60)),
            "the offset expired; re-initialising: waiting for the runner pod(s) s-runner-1 of consumer s to stop before reading its checkpoint, until 2026-11-29T14:01:00Z (their grace period and a margin); then they are deleted with gracePeriodSeconds 0"
        );
        assert_eq!(
            forced_note(&["a".into()], at(60), MARGIN, &["a".into()]),
            "runner pod(s) a did not stop within their grace period and a 30s margin (until 2026-11-29T14:01:00Z): deleted them with gracePeriodSeconds 0 and went on; a still listed (a finalizer or an unreachable node): the checkpoint ConfigMap fence keeps it from saving or committing, and a load it pre-commits is left to Doris's transaction timeout"
        );
    }
}

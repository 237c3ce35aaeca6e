//! Publishing a Kubernetes Event about a sync, as every I/O stage does: its action names a digest
//! of its note ([`event_action`]), and its note fits the API server's limit ([`event_note`]).

use dcs_crds::DorisChangelogSync;
use kube::{
    Resource,
    runtime::events::{Event as KubeEvent, EventType},
};
use tracing::warn;

use super::{build, context::Context};

/// Publishes an event about `sync`; a failure is only logged.
pub(super) async fn publish(
    ctx: &Context,
    sync: &DorisChangelogSync,
    warning: bool,
    reason: &str,
    note: String,
) {
    let note = event_note(note);
    let event = KubeEvent {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_owned(),
        action: event_action(&note),
        note: Some(note),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &sync.object_ref(&())).await {
        warn!(error = %e, "cannot publish an event");
    }
}

/// The event's action: `Reconcile/` and a digest of its note. The recorder merges events with the
/// same reason and action into one series that keeps the first note, so without the digest a
/// second re-initialisation (another consumer id) or a new Blocked message would only raise the
/// count of the first, and its own words would be lost. The same note repeated still merges.
pub fn event_action(note: &str) -> String {
    let digest = build::content_hash(note);
    format!("Reconcile/{}", &digest[..digest.len().min(8)])
}

/// The API server rejects an `events.k8s.io/v1` Event whose note is longer than 1 KiB: longer
/// notes are cut (at a character boundary) and say so, rather than the event being lost.
pub fn event_note(note: String) -> String {
    dcs_crds::status::cut_text(note, 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_with_other_words_are_other_events_and_the_same_words_the_same() {
        let a = event_action("starting again as consumer s-r1");
        assert!(a.starts_with("Reconcile/") && a.len() <= 128, "{a}");
        assert_eq!(a, event_action("starting again as consumer s-r1"));
        assert_ne!(a, event_action("starting again as consumer s-r2"));
    }

    #[test]
    fn event_notes_fit_the_api_servers_limit() {
        assert_eq!(event_note("short".into()), "short");
        let long = "é".repeat(700);
        let cut = event_note(long.clone());
        assert!(
            cut.len() <= 1024 && cut.ends_with(" [...]"),
            "{}",
            cut.len()
        );
        assert!(long.starts_with(cut.trim_end_matches(" [...]")));
    }
}

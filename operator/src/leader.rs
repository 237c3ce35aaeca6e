//! Leader election with a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! The decision ([`decide`]) is pure: given the Lease as read, what this candidate observed of it
//! before ([`Observation`]), the time on this candidate's monotonic clock and its identity, it
//! says whether to create, acquire, renew or wait. [`LeaderElector`] does the I/O: every write is
//! a `replace` carrying the resourceVersion that was read, so two candidates racing for a free
//! Lease cannot both win (the second gets 409 Conflict).
//!
//! No wall clock is compared with another's. Another holder's Lease expires
//! `leaseDurationSeconds` after *this candidate saw its record change* (a renewal, a new holder),
//! measured on this candidate's monotonic clock, whatever `renewTime` says: replicas whose clocks
//! disagree, or a clock that steps, cannot make two leaders. A candidate that has just started
//! therefore waits one full lease duration before taking over an abandoned Lease.
//!
//! The leader steps down when no renewal succeeded within the renew deadline, counted on its own
//! monotonic clock from when its last successful renewal was *sent*, and no renew call outlives
//! that deadline (a stalled API server cannot keep it leading). Others can take over only a lease
//! duration after they saw that renewal, which came after it was sent: the renew deadline being
//! shorter than the lease duration, the old leader has stopped first.

use std::{
    future::Future,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{PostParams, ResourceExt},
};
use tokio::time::Instant;
use tracing::{info, warn};

/// The default Lease name.
pub const DEFAULT_LEASE_NAME: &str = "dcs-operator";
/// How long a Lease is valid after its last renewal.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the leader renews (and a standby retries).
pub const RENEW_INTERVAL: Duration = Duration::from_secs(5);
/// A leader that could not renew for this long steps down (before the Lease expires for others).
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);

/// What a candidate does with the Lease it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// There is no Lease: create it holding it.
    Create,
    /// The Lease is free (no holder) or expired: take it over.
    Acquire,
    /// This candidate holds it: renew.
    Renew,
    /// Someone else holds a valid Lease.
    Wait {
        /// The current holder.
        holder: String,
        /// Time left until it expires, if nobody renews it.
        expires_in: Duration,
    },
}

/// The Lease record a candidate last saw, and when (its monotonic clock) it saw it change.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    seen: Option<(LeaseSpec, Instant)>,
}

impl Observation {
    /// Note the record read at `now`; the time moves only when the record changed.
    pub fn observe(&mut self, spec: &LeaseSpec, now: Instant) {
        match &self.seen {
            Some((seen, _)) if seen == spec => {}
            _ => self.seen = Some((spec.clone(), now)),
        }
    }

    /// When the record now observed was first seen.
    pub fn since(&self) -> Option<Instant> {
        self.seen.as_ref().map(|(_, at)| *at)
    }
}

/// Decides from the Lease (`None` when it does not exist), what this candidate observed, the
/// current time on its monotonic clock and its identity. Call [`Observation::observe`] with the
/// same read first.
///
/// Another holder's Lease is valid while `now < observed + leaseDurationSeconds` (at exactly that
/// instant it is expired); a holder without a duration counts as expired.
pub fn decide(
    lease: Option<&LeaseSpec>,
    observed: &Observation,
    now: Instant,
    me: &str,
) -> Decision {
    let Some(spec) = lease else {
        return Decision::Create;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() {
        return Decision::Acquire;
    }
    if holder == me {
        return Decision::Renew;
    }
    let duration =
        Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0));
    let expires = observed.since().unwrap_or(now) + duration;
    if expires <= now {
        Decision::Acquire
    } else {
        Decision::Wait {
            holder: holder.to_owned(),
            expires_in: expires - now,
        }
    }
}

/// When a leader whose last successful renewal was sent at `last_renewal` steps down.
pub fn step_down_at(last_renewal: Instant, renew_deadline: Duration) -> Instant {
    last_renewal + renew_deadline
}

/// When to try renewing next: a renew interval after `now`, but never past `deadline`.
pub fn next_renewal(now: Instant, renew_interval: Duration, deadline: Instant) -> Instant {
    (now + renew_interval).min(deadline)
}

/// Why a leader steps down without another holder: no renewal within the deadline.
fn not_renewed(deadline: Duration, last_error: Option<&String>) -> String {
    let mut why = format!(
        "not renewed within the {}s renew deadline",
        deadline.as_secs_f64()
    );
    if let Some(e) = last_error {
        why.push_str(": ");
        why.push_str(e);
    }
    why
}

/// The Lease spec after `decision` by `me` at `now` (for Create, Acquire and Renew).
pub fn next_spec(
    old: Option<&LeaseSpec>,
    decision: &Decision,
    now: Timestamp,
    me: &str,
    duration: Duration,
) -> LeaseSpec {
    let old = old.cloned().unwrap_or_default();
    let duration_s = i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX);
    let now = MicroTime(now);
    match decision {
        Decision::Renew => LeaseSpec {
            renew_time: Some(now),
            lease_duration_seconds: Some(duration_s),
            ..old
        },
        _ => {
            let had_holder = old
                .holder_identity
                .as_deref()
                .is_some_and(|h| !h.is_empty() && h != me);
            LeaseSpec {
                holder_identity: Some(me.to_owned()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_duration_seconds: Some(duration_s),
                lease_transitions: Some(old.lease_transitions.unwrap_or(0) + i32::from(had_holder)),
                ..old
            }
        }
    }
}

/// Where and as whom to elect.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// This candidate (the pod name).
    pub identity: String,
    /// leaseDurationSeconds written to the Lease.
    pub lease_duration: Duration,
    /// How often to renew or retry.
    pub renew_interval: Duration,
    /// Step down when no renewal succeeded for this long.
    pub renew_deadline: Duration,
}

impl LeaseConfig {
    /// The standard timings (15 s lease, renew every 5 s, step down after 10 s without renewal).
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            lease_duration: LEASE_DURATION,
            renew_interval: RENEW_INTERVAL,
            renew_deadline: RENEW_DEADLINE,
        }
    }
}

/// The namespace of the Lease: `POD_NAMESPACE`, else the in-cluster service account's namespace,
/// else `default`.
pub fn default_namespace() -> String {
    if let Ok(ns) = std::env::var("POD_NAMESPACE")
        && !ns.trim().is_empty()
    {
        return ns.trim().to_owned();
    }
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

/// This candidate's identity: `POD_NAME`, else `<hostname>-<pid>` (distinct per process on a host).
pub fn default_identity() -> String {
    if let Ok(name) = std::env::var("POD_NAME")
        && !name.trim().is_empty()
    {
        return name.trim().to_owned();
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "dcs-operator".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Campaigns for and holds one Lease.
#[derive(Clone)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: std::sync::Arc<Mutex<Observation>>,
}

/// How leading ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome<T> {
    /// The work finished while leading; the Lease was released.
    Finished(T),
    /// The Lease was lost (or could not be renewed in time); the work was stopped.
    Lost(String),
    /// Shut down before becoming the leader.
    NeverLed,
}

impl LeaderElector {
    /// An elector for `config`.
    pub fn new(client: Client, config: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: std::sync::Arc::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    fn observation(&self) -> std::sync::MutexGuard<'_, Observation> {
        self.observed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One round: read the Lease, decide, write. `Ok(true)` when this candidate holds it after.
    ///
    /// # Errors
    /// API failures other than a lost race (409), which is `Ok(false)`.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let me = &self.config.identity;
        let lease = self.api.get_opt(&self.config.name).await?;
        let spec = lease.as_ref().and_then(|l| l.spec.as_ref());
        let decision = {
            let mut observed = self.observation();
            if let Some(spec) = spec {
                observed.observe(spec, Instant::now());
            }
            decide(spec, &observed, Instant::now(), me)
        };
        let spec = match &decision {
            Decision::Wait { .. } => return Ok(false),
            d => next_spec(spec, d, Timestamp::now(), me, self.config.lease_duration),
        };
        let result = match lease {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec.clone()),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                // The read resourceVersion stays in metadata: a concurrent write makes this a 409.
                lease.spec = Some(spec.clone());
                self.api
                    .replace(&self.config.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match result {
            Ok(_) => {
                self.observation().observe(&spec, Instant::now());
                if decision != Decision::Renew {
                    info!(lease = %self.config.name, identity = %me, "acquired the leader Lease");
                }
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Retries every renew interval until this candidate leads; returns when the successful
    /// attempt was sent (its renew deadline counts from then).
    pub async fn acquire(&self) -> Instant {
        loop {
            let sent = Instant::now();
            match self.try_acquire_or_renew().await {
                Ok(true) => return sent,
                Ok(false) => {}
                Err(e) => warn!(error = %e, "cannot read or write the leader Lease"),
            }
            tokio::time::sleep(self.config.renew_interval).await;
        }
    }

    /// Renews until the Lease is lost or no renewal succeeded within the renew deadline of the
    /// last one (sent at `last_renewal`); returns why. A renew call is cut off at that deadline.
    pub async fn hold(&self, mut last_renewal: Instant) -> String {
        let lost = |why: String| {
            format!(
                "Lease {}/{}: {why}",
                self.config.namespace, self.config.name
            )
        };
        let mut last_error = None;
        loop {
            let deadline = step_down_at(last_renewal, self.config.renew_deadline);
            tokio::time::sleep_until(next_renewal(
                Instant::now(),
                self.config.renew_interval,
                deadline,
            ))
            .await;
            let sent = Instant::now();
            if sent >= deadline {
                return lost(not_renewed(self.config.renew_deadline, last_error.as_ref()));
            }
            match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => {
                    last_renewal = sent;
                    last_error = None;
                }
                Ok(Ok(false)) => return lost("another candidate holds it".to_owned()),
                Ok(Err(e)) => {
                    warn!(error = %e, "cannot renew the leader Lease");
                    last_error = Some(e.to_string());
                }
                Err(_) => {
                    return lost(not_renewed(
                        self.config.renew_deadline,
                        Some(&"the renew call did not answer in time".to_owned()),
                    ));
                }
            }
        }
    }

    /// Gives the Lease up (clears holderIdentity) if this candidate still holds it.
    ///
    /// # Errors
    /// API failures; a Lease taken over meanwhile (409 or another holder) is not an error.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.acquire_time = None;
        spec.renew_time = None;
        match self
            .api
            .replace(&lease.name_any(), &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                info!(lease = %self.config.name, "released the leader Lease");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Campaigns (giving up when `shutdown` fires first), then runs `work` while holding the
    /// Lease. `on_lead` is called once leading starts. When `work` ends the Lease is released;
    /// when the Lease is lost `work` is dropped (stopped) and [`Outcome::Lost`] returned.
    pub async fn lead<T, W, S>(&self, shutdown: S, on_lead: impl FnOnce(), work: W) -> Outcome<T>
    where
        W: Future<Output = T>,
        S: Future<Output = ()>,
    {
        let renewed = tokio::select! {
            sent = self.acquire() => sent,
            () = shutdown => return Outcome::NeverLed,
        };
        on_lead();
        let outcome = tokio::select! {
            out = work => Outcome::Finished(out),
            why = self.hold(renewed) => Outcome::Lost(why),
        };
        if matches!(outcome, Outcome::Finished(_))
            && let Err(e) = self.release().await
        {
            warn!(error = %e, "cannot release the leader Lease; it expires on its own");
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn held(holder: &str, renewed: &str, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(at(renewed))),
            acquire_time: Some(MicroTime(at(renewed))),
            lease_duration_seconds: Some(duration),
            lease_transitions: Some(2),
            ..LeaseSpec::default()
        }
    }

    /// What a candidate that read `spec` at `seen` decides at `now`.
    fn decide_at(spec: &LeaseSpec, seen: Instant, now: Instant, me: &str) -> Decision {
        let mut observed = Observation::default();
        observed.observe(spec, seen);
        decide(Some(spec), &observed, now, me)
    }

    #[test]
    fn no_lease_is_created_and_a_free_one_acquired() {
        let now = Instant::now();
        assert_eq!(
            decide(None, &Observation::default(), now, "a"),
            Decision::Create
        );
        let free = LeaseSpec::default();
        assert_eq!(decide_at(&free, now, now, "a"), Decision::Acquire);
        let released = LeaseSpec {
            holder_identity: Some(String::new()),
            ..held("x", "2026-11-29T13:59:59Z", 15)
        };
        assert_eq!(decide_at(&released, now, now, "a"), Decision::Acquire);
    }

    #[test]
    fn another_holders_lease_expires_a_duration_after_it_was_seen_to_change() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let lease = held("b", "2026-11-29T14:00:00Z", 15);
        assert_eq!(
            decide_at(&lease, t0, t0, "a"),
            Decision::Wait {
                holder: "b".into(),
                expires_in: s(15)
            }
        );
        // 1 ms before the expiry instant: still valid; exactly at it: expired.
        assert_eq!(
            decide_at(&lease, t0, t0 + s(15) - Duration::from_millis(1), "a"),
            Decision::Wait {
                holder: "b".into(),
                expires_in: Duration::from_millis(1)
            }
        );
        assert_eq!(decide_at(&lease, t0, t0 + s(15), "a"), Decision::Acquire);
    }

    #[test]
    fn the_wall_clock_in_the_lease_never_decides() {
        // A renewTime a day old (a holder whose clock is behind, or this one's ahead) is still a
        // valid Lease for a full duration after this candidate first saw it ...
        let t0 = Instant::now();
        let stale = held("b", "2026-11-28T14:00:00Z", 15);
        assert!(matches!(
            decide_at(&stale, t0, t0 + Duration::from_secs(14), "a"),
            Decision::Wait { .. }
        ));
        // ... and one a day ahead expires like any other.
        let ahead = held("b", "2026-11-30T14:00:00Z", 15);
        assert_eq!(
            decide_at(&ahead, t0, t0 + Duration::from_secs(15), "a"),
            Decision::Acquire
        );
    }

    #[test]
    fn a_renewal_seen_restarts_the_wait_and_a_reread_does_not() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut observed = Observation::default();
        let first = held("b", "2026-11-29T14:00:00Z", 15);
        observed.observe(&first, t0);
        // Read again unchanged 10 s later: the wait still counts from t0.
        observed.observe(&first, t0 + s(10));
        assert_eq!(
            decide(Some(&first), &observed, t0 + s(15), "a"),
            Decision::Acquire
        );
        // Renewed (renewTime moved), seen at t0 + 12 s: valid until t0 + 27 s.
        let renewed = held("b", "2026-11-29T14:00:12Z", 15);
        observed.observe(&renewed, t0 + s(12));
        assert_eq!(
            decide(Some(&renewed), &observed, t0 + s(26), "a"),
            Decision::Wait {
                holder: "b".into(),
                expires_in: s(1)
            }
        );
        assert_eq!(
            decide(Some(&renewed), &observed, t0 + s(27), "a"),
            Decision::Acquire
        );
    }

    #[test]
    fn the_holder_renews_even_after_expiry() {
        let t0 = Instant::now();
        let lease = held("a", "2026-11-29T14:00:00Z", 15);
        assert_eq!(
            decide_at(&lease, t0, t0 + Duration::from_secs(1), "a"),
            Decision::Renew
        );
        assert_eq!(
            decide_at(&lease, t0, t0 + Duration::from_secs(3600), "a"),
            Decision::Renew
        );
    }

    #[test]
    fn a_holder_without_a_duration_counts_as_expired() {
        let t0 = Instant::now();
        let lease = LeaseSpec {
            holder_identity: Some("b".into()),
            ..LeaseSpec::default()
        };
        assert_eq!(decide_at(&lease, t0, t0, "a"), Decision::Acquire);
    }

    #[test]
    fn the_leader_steps_down_at_its_deadline_even_when_a_timer_fires_late() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let deadline = step_down_at(t0, s(10));
        assert_eq!(deadline, t0 + s(10));
        // The next try comes a renew interval later, never after the deadline ...
        assert_eq!(next_renewal(t0, s(5), deadline), t0 + s(5));
        assert_eq!(next_renewal(t0 + s(7), s(5), deadline), deadline);
        // ... and the renew deadline is shorter than the lease others wait for: the leader has
        // stopped before anyone may take over.
        assert!(RENEW_DEADLINE < LEASE_DURATION);
        assert!(RENEW_INTERVAL < RENEW_DEADLINE);
    }

    #[test]
    fn next_spec_counts_transitions_and_keeps_acquire_time_on_renew() {
        let now = at("2026-11-29T14:00:20Z");
        let old = held("b", "2026-11-29T14:00:00Z", 15);
        let taken = next_spec(
            Some(&old),
            &Decision::Acquire,
            now,
            "a",
            Duration::from_secs(15),
        );
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(3));
        assert_eq!(taken.acquire_time, Some(MicroTime(now)));
        let later = at("2026-11-29T14:00:25Z");
        let renewed = next_spec(
            Some(&taken),
            &Decision::Renew,
            later,
            "a",
            Duration::from_secs(15),
        );
        assert_eq!(renewed.acquire_time, Some(MicroTime(now)));
        assert_eq!(renewed.renew_time, Some(MicroTime(later)));
        assert_eq!(renewed.lease_transitions, Some(3));
        let created = next_spec(None, &Decision::Create, now, "a", Duration::from_secs(15));
        assert_eq!(
            (created.lease_transitions, created.lease_duration_seconds),
            (Some(0), Some(15))
        );
    }
}

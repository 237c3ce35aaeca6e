//! Leader election with a `coordination.k8s.io/v1` Lease.
//!
//! The decision ([`decide`]) is pure: given the Lease as read, the current time and this
//! candidate's identity it says whether to create, acquire, renew or wait. [`LeaderElector`] does
//! the I/O: every write is a `replace` carrying the resourceVersion that was read, so two
//! candidates racing for a free Lease cannot both win (the second gets 409 Conflict).
//!
//! Expiry is judged by `renewTime + leaseDurationSeconds` against the local clock, as most
//! kube-rs electors do; replicas' clocks are assumed to agree within a few seconds.

use std::{future::Future, time::Duration};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{PostParams, ResourceExt},
};
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

/// Decides from the Lease (`None` when it does not exist), the current time and this candidate.
///
/// A Lease is valid while `now < renewTime + leaseDurationSeconds` (at exactly the expiry instant
/// it is expired). A holder without a renewTime or a duration counts as expired.
pub fn decide(lease: Option<&LeaseSpec>, now: Timestamp, me: &str) -> Decision {
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
    let (Some(renewed), Some(duration)) = (
        spec.renew_time.as_ref().or(spec.acquire_time.as_ref()),
        spec.lease_duration_seconds,
    ) else {
        return Decision::Acquire;
    };
    let expires_ms = renewed.0.as_millisecond() + i64::from(duration.max(0)) * 1000;
    let left_ms = expires_ms - now.as_millisecond();
    if left_ms <= 0 {
        Decision::Acquire
    } else {
        Decision::Wait {
            holder: holder.to_owned(),
            expires_in: Duration::from_millis(u64::try_from(left_ms).unwrap_or(0)),
        }
    }
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
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// One round: read the Lease, decide, write. `Ok(true)` when this candidate holds it after.
    ///
    /// # Errors
    /// API failures other than a lost race (409), which is `Ok(false)`.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let me = &self.config.identity;
        let lease = self.api.get_opt(&self.config.name).await?;
        let now = Timestamp::now();
        let decision = decide(lease.as_ref().and_then(|l| l.spec.as_ref()), now, me);
        let spec = match &decision {
            Decision::Wait { .. } => return Ok(false),
            d => next_spec(
                lease.as_ref().and_then(|l| l.spec.as_ref()),
                d,
                now,
                me,
                self.config.lease_duration,
            ),
        };
        let result = match lease {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                // The read resourceVersion stays in metadata: a concurrent write makes this a 409.
                lease.spec = Some(spec);
                self.api
                    .replace(&self.config.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match result {
            Ok(_) => {
                if decision != Decision::Renew {
                    info!(lease = %self.config.name, identity = %me, "acquired the leader Lease");
                }
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Retries every renew interval until this candidate leads.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => warn!(error = %e, "cannot read or write the leader Lease"),
            }
            tokio::time::sleep(self.config.renew_interval).await;
        }
    }

    /// Renews until the Lease is lost or cannot be renewed within the renew deadline; returns why.
    pub async fn hold(&self) -> String {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.config.renew_interval).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_ok = tokio::time::Instant::now(),
                Ok(false) => {
                    return format!(
                        "another candidate holds Lease {}/{}",
                        self.config.namespace, self.config.name
                    );
                }
                Err(e) => {
                    warn!(error = %e, "cannot renew the leader Lease");
                    if last_ok.elapsed() >= self.config.renew_deadline {
                        return format!(
                            "could not renew Lease {}/{} for {}s: {e}",
                            self.config.namespace,
                            self.config.name,
                            self.config.renew_deadline.as_secs()
                        );
                    }
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
        tokio::select! {
            () = self.acquire() => {}
            () = shutdown => return Outcome::NeverLed,
        }
        on_lead();
        let outcome = tokio::select! {
            out = work => Outcome::Finished(out),
            why = self.hold() => Outcome::Lost(why),
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

    #[test]
    fn no_lease_is_created_and_a_free_one_acquired() {
        let now = at("2026-11-29T14:00:00Z");
        assert_eq!(decide(None, now, "a"), Decision::Create);
        let free = LeaseSpec::default();
        assert_eq!(decide(Some(&free), now, "a"), Decision::Acquire);
        let released = LeaseSpec {
            holder_identity: Some(String::new()),
            ..held("x", "2026-11-29T13:59:59Z", 15)
        };
        assert_eq!(decide(Some(&released), now, "a"), Decision::Acquire);
    }

    #[test]
    fn expiry_edges() {
        let lease = held("b", "2026-11-29T14:00:00Z", 15);
        // 1 ms before the expiry instant: still valid.
        assert_eq!(
            decide(Some(&lease), at("2026-11-29T14:00:14.999Z"), "a"),
            Decision::Wait {
                holder: "b".into(),
                expires_in: Duration::from_millis(1)
            }
        );
        // Exactly at renewTime + duration: expired.
        assert_eq!(
            decide(Some(&lease), at("2026-11-29T14:00:15Z"), "a"),
            Decision::Acquire
        );
        assert_eq!(
            decide(Some(&lease), at("2026-11-29T14:00:00Z"), "a"),
            Decision::Wait {
                holder: "b".into(),
                expires_in: Duration::from_secs(15)
            }
        );
        // A renewTime in the future (clock skew) is still someone else's valid Lease.
        assert!(matches!(
            decide(Some(&lease), at("2026-11-29T13:59:50Z"), "a"),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn the_holder_renews_even_after_expiry() {
        let lease = held("a", "2026-11-29T14:00:00Z", 15);
        assert_eq!(
            decide(Some(&lease), at("2026-11-29T14:00:01Z"), "a"),
            Decision::Renew
        );
        assert_eq!(
            decide(Some(&lease), at("2026-11-29T15:00:00Z"), "a"),
            Decision::Renew
        );
    }

    #[test]
    fn a_holder_without_times_counts_as_expired() {
        let lease = LeaseSpec {
            holder_identity: Some("b".into()),
            ..LeaseSpec::default()
        };
        assert_eq!(
            decide(Some(&lease), at("2026-11-29T14:00:00Z"), "a"),
            Decision::Acquire
        );
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

//! What `/metrics`, `/healthz` and `/readyz` serve.
//!
//! Counters are kept here; the per-sync gauges are read at scrape time from the controllers'
//! reflector stores, so a deleted sync disappears from `/metrics` with its object. Lag and
//! headroom are the values in the syncs' status (refreshed by the operator when they move by 5 s
//! or more).

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use dcs_crds::Phase;
use kube::{ResourceExt, runtime::reflector::Store};

use crate::sync_object::SyncObject;

/// Error kinds always listed (with 0) in `dcs_operator_reconcile_errors_total`.
const ERROR_KINDS: [&str; 7] = [
    "Cleanup",
    "Kube",
    "Serialize",
    "Credentials",
    "Finalizer",
    "MissingMetadata",
    "Controller",
];

const PHASES: [Phase; 7] = [
    Phase::Pending,
    Phase::Blocked,
    Phase::Snapshotting,
    Phase::Streaming,
    Phase::Reinitializing,
    Phase::Suspended,
    Phase::Failed,
];

/// Counters and the stores the gauges are read from.
#[derive(Default)]
pub struct Metrics {
    /// Reconciles run (successful or not).
    pub reconciles: AtomicU64,
    /// Reconciles that failed.
    pub errors: AtomicU64,
    errors_by_kind: Mutex<BTreeMap<&'static str, u64>>,
    stores: Mutex<Vec<(u64, Store<SyncObject>)>>,
    next_store: AtomicU64,
    /// Whether leader election is on.
    pub election: AtomicBool,
    /// Whether this replica leads (always true without leader election once controllers run).
    pub leading: AtomicBool,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("reconciles", &self.reconciles)
            .field("errors", &self.errors)
            .finish_non_exhaustive()
    }
}

/// One sync's gauges.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncSample {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `status.phase`; `None` before the first status and for unreadable objects.
    pub phase: Option<Phase>,
    /// `status.lagSeconds`.
    pub lag_seconds: Option<i64>,
    /// `status.ttlHeadroomSeconds`.
    pub ttl_headroom_seconds: Option<i64>,
    /// `status.source.ttlSeconds`.
    pub ttl_seconds: Option<i64>,
    /// `status.runnerRestarts`.
    pub runner_restarts: Option<i32>,
    /// `status.consumerGeneration`: re-initialisations so far (0 once the sync has a status).
    pub reinits: Option<i64>,
    /// `status.conditions` as (type, status, reason).
    pub conditions: Vec<(String, String, String)>,
    /// The object does not deserialize.
    pub invalid: bool,
}

impl SyncSample {
    /// The sample of a watched object.
    pub fn of(object: &SyncObject) -> Self {
        let status = object.parsed.as_ref().ok().and_then(|s| s.status.as_ref());
        Self {
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
            phase: status.and_then(|s| s.phase),
            lag_seconds: status.and_then(|s| s.lag_seconds),
            ttl_headroom_seconds: status.and_then(|s| s.ttl_headroom_seconds),
            ttl_seconds: status
                .and_then(|s| s.source.as_ref())
                .and_then(|s| s.ttl_seconds),
            runner_restarts: status.and_then(|s| s.runner_restarts),
            reinits: status.map(|s| s.consumer_generation.unwrap_or(0)),
            conditions: status
                .map(|s| {
                    s.conditions
                        .iter()
                        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            invalid: object.parsed.is_err(),
        }
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text of the counters and the samples (pure).
pub fn render_text(
    reconciles: u64,
    errors_by_kind: &BTreeMap<&'static str, u64>,
    leader: Option<bool>,
    samples: &[SyncSample],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP dcs_operator_reconciles_total Reconciles run, successful or not.\n# TYPE dcs_operator_reconciles_total counter\ndcs_operator_reconciles_total {reconciles}"
    );
    let _ = writeln!(
        out,
        "# HELP dcs_operator_reconcile_errors_total Reconciles that failed, by error kind.\n# TYPE dcs_operator_reconcile_errors_total counter"
    );
    let mut kinds: BTreeMap<&str, u64> = ERROR_KINDS.iter().map(|k| (*k, 0)).collect();
    for (k, v) in errors_by_kind {
        kinds.insert(k, *v);
    }
    for (kind, n) in kinds {
        let _ = writeln!(
            out,
            "dcs_operator_reconcile_errors_total{{kind=\"{kind}\"}} {n}"
        );
    }
    if let Some(leading) = leader {
        let _ = writeln!(
            out,
            "# HELP dcs_operator_leader 1 when this replica holds the leader Lease.\n# TYPE dcs_operator_leader gauge\ndcs_operator_leader {}",
            u8::from(leading)
        );
    }
    let _ = writeln!(
        out,
        "# HELP dcs_syncs DorisChangelogSyncs by status.phase (Unknown: no status yet, Invalid: unreadable object).\n# TYPE dcs_syncs gauge"
    );
    let mut phases: BTreeMap<String, u64> = PHASES.iter().map(|p| (p.to_string(), 0)).collect();
    phases.insert("Unknown".into(), 0);
    phases.insert("Invalid".into(), 0);
    for s in samples {
        let key = if s.invalid {
            "Invalid".to_owned()
        } else {
            s.phase
                .map_or_else(|| "Unknown".to_owned(), |p| p.to_string())
        };
        *phases.entry(key).or_default() += 1;
    }
    for (phase, n) in phases {
        let _ = writeln!(out, "dcs_syncs{{phase=\"{phase}\"}} {n}");
    }
    let mut sorted: Vec<&SyncSample> = samples.iter().collect();
    sorted.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let series = |out: &mut String,
                  metric: &str,
                  kind: &str,
                  help: &str,
                  pick: fn(&SyncSample) -> Option<i64>| {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} {kind}");
        for s in &sorted {
            if let Some(v) = pick(s) {
                let _ = writeln!(
                    out,
                    "{metric}{{namespace=\"{}\",name=\"{}\"}} {v}",
                    escape(&s.namespace),
                    escape(&s.name)
                );
            }
        }
    };
    series(
        &mut out,
        "dcs_sync_lag_seconds",
        "gauge",
        "Doris time minus the committed offset (status.lagSeconds).",
        |s| s.lag_seconds,
    );
    series(
        &mut out,
        "dcs_sync_ttl_headroom_seconds",
        "gauge",
        "Seconds before the oldest change still needed expires (status.ttlHeadroomSeconds).",
        |s| s.ttl_headroom_seconds,
    );
    series(
        &mut out,
        "dcs_sync_ttl_seconds",
        "gauge",
        "The source table's changelog TTL (status.source.ttlSeconds).",
        |s| s.ttl_seconds,
    );
    series(
        &mut out,
        "dcs_sync_runner_restarts_total",
        "counter",
        "Container restarts of the sync's runner pod (status.runnerRestarts); a new pod starts from 0.",
        |s| s.runner_restarts.map(i64::from),
    );
    series(
        &mut out,
        "dcs_sync_reinits_total",
        "counter",
        "Re-initialisations of the sync (status.consumerGeneration).",
        |s| s.reinits,
    );
    let _ = writeln!(
        out,
        "# HELP dcs_sync_condition 1 for each of the sync's status conditions, labelled with its type, status and reason.\n# TYPE dcs_sync_condition gauge"
    );
    for s in &sorted {
        for (type_, status, reason) in &s.conditions {
            let _ = writeln!(
                out,
                "dcs_sync_condition{{namespace=\"{}\",name=\"{}\",type=\"{}\",status=\"{}\",reason=\"{}\"}} 1",
                escape(&s.namespace),
                escape(&s.name),
                escape(type_),
                escape(status),
                escape(reason)
            );
        }
    }
    out
}

impl Metrics {
    /// Counts one reconcile; `Some(kind)` when it failed.
    pub fn count_reconcile(&self, failed: Option<&'static str>) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        if let Some(kind) = failed {
            self.errors.fetch_add(1, Ordering::Relaxed);
            *self
                .errors_by_kind
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(kind)
                .or_default() += 1;
        }
    }

    /// Reads per-sync gauges from `store` until [`Metrics::unwatch`]; returns the registration.
    pub fn watch(&self, store: Store<SyncObject>) -> u64 {
        let id = self.next_store.fetch_add(1, Ordering::Relaxed);
        self.stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((id, store));
        id
    }

    /// Stops reading a store.
    pub fn unwatch(&self, id: u64) {
        self.stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(i, _)| *i != id);
    }

    /// The samples of every watched sync.
    pub fn samples(&self) -> Vec<SyncSample> {
        let stores: Vec<Store<SyncObject>> = self
            .stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(_, s)| s.clone())
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for store in stores {
            for object in store.state() {
                let sample = SyncSample::of(&object);
                if seen.insert((sample.namespace.clone(), sample.name.clone())) {
                    out.push(sample);
                }
            }
        }
        out
    }

    /// Everything in the Prometheus text format.
    pub fn render(&self) -> String {
        let errors = self
            .errors_by_kind
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let leader = self
            .election
            .load(Ordering::Relaxed)
            .then(|| self.leading.load(Ordering::Relaxed));
        render_text(
            self.reconciles.load(Ordering::Relaxed),
            &errors,
            leader,
            &self.samples(),
        )
    }

    /// What `/readyz` answers: a standby is ready too (it is healthy and takes over when the
    /// leader goes), so a rolling update of a two-replica Deployment can progress.
    pub fn readiness(&self) -> &'static str {
        match (
            self.election.load(Ordering::Relaxed),
            self.leading.load(Ordering::Relaxed),
        ) {
            (true, true) => "ok: leader",
            (true, false) => "ok: standby",
            _ => "ok",
        }
    }
}

/// The `/metrics`, `/healthz` and `/readyz` routes.
pub fn router(metrics: Arc<Metrics>) -> axum::Router {
    use axum::routing::get;
    let ready = metrics.clone();
    axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let m = ready.clone();
                async move { m.readiness() }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4",
                        )],
                        m.render(),
                    )
                }
            }),
        )
}

/// Serves [`router`] on `listener`.
///
/// # Errors
/// When serving fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
) -> std::io::Result<()> {
    axum::serve(listener, router(metrics)).await
}

/// Binds `addr` and serves [`router`].
///
/// # Errors
/// When the address cannot be bound.
pub async fn bind_and_serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve(listener, metrics).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(
        name: &str,
        phase: Option<Phase>,
        lag: Option<i64>,
        headroom: Option<i64>,
    ) -> SyncSample {
        SyncSample {
            namespace: "default".into(),
            name: name.into(),
            phase,
            lag_seconds: lag,
            ttl_headroom_seconds: headroom,
            ttl_seconds: None,
            runner_restarts: None,
            reinits: None,
            conditions: Vec::new(),
            invalid: false,
        }
    }

    #[test]
    fn renders_counters_phases_and_per_sync_gauges() {
        let mut errors = BTreeMap::new();
        errors.insert("Kube", 2);
        let mut bad = sample("bad", None, None, None);
        bad.invalid = true;
        let text = render_text(
            7,
            &errors,
            Some(true),
            &[
                sample("b", Some(Phase::Streaming), Some(3), Some(86_000)),
                sample("a", Some(Phase::Streaming), Some(12), Some(85_000)),
                sample("c", Some(Phase::Blocked), None, None),
                bad,
            ],
        );
        for line in [
            "dcs_operator_reconciles_total 7",
            "dcs_operator_reconcile_errors_total{kind=\"Kube\"} 2",
            "dcs_operator_reconcile_errors_total{kind=\"Credentials\"} 0",
            "dcs_operator_leader 1",
            "dcs_syncs{phase=\"Streaming\"} 2",
            "dcs_syncs{phase=\"Blocked\"} 1",
            "dcs_syncs{phase=\"Failed\"} 0",
            "dcs_syncs{phase=\"Invalid\"} 1",
            "dcs_sync_lag_seconds{namespace=\"default\",name=\"a\"} 12",
            "dcs_sync_ttl_headroom_seconds{namespace=\"default\",name=\"b\"} 86000",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("name=\"c\""), "{text}");
        // Sorted by name: a before b.
        assert!(text.find("name=\"a\"} 12").unwrap() < text.find("name=\"b\"} 3").unwrap());
    }

    #[test]
    fn no_leader_line_without_election() {
        let text = render_text(0, &BTreeMap::new(), None, &[]);
        assert!(!text.contains("dcs_operator_leader"), "{text}");
        assert!(text.contains("dcs_syncs{phase=\"Unknown\"} 0"), "{text}");
    }

    #[test]
    fn per_sync_ttl_restarts_reinits_and_conditions() {
        let mut a = sample("a", Some(Phase::Streaming), Some(30), Some(10_000));
        a.ttl_seconds = Some(86_400);
        a.runner_restarts = Some(4);
        a.reinits = Some(2);
        a.conditions = vec![
            ("Ready".into(), "True".into(), "Streaming".into()),
            ("OffsetHealthy".into(), "False".into(), "NearExpiry".into()),
        ];
        let mut b = sample("b\"q", Some(Phase::Pending), None, None);
        b.reinits = Some(0);
        let text = render_text(0, &BTreeMap::new(), None, &[b, a]);
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        for line in [
            "dcs_sync_ttl_seconds{namespace=\"default\",name=\"a\"} 86400",
            "dcs_sync_runner_restarts_total{namespace=\"default\",name=\"a\"} 4",
            "dcs_sync_reinits_total{namespace=\"default\",name=\"a\"} 2",
            "dcs_sync_reinits_total{namespace=\"default\",name=\"b\\\"q\"} 0",
            "dcs_sync_condition{namespace=\"default\",name=\"a\",type=\"Ready\",status=\"True\",reason=\"Streaming\"} 1",
            "dcs_sync_condition{namespace=\"default\",name=\"a\",type=\"OffsetHealthy\",status=\"False\",reason=\"NearExpiry\"} 1",
        ] {
            assert!(lines.contains(&line), "{line} missing in\n{text}");
        }
        // No restarts series without a runner pod, no TTL before a probe.
        assert!(!text.contains("dcs_sync_runner_restarts_total{namespace=\"default\",name=\"b"));
        assert!(!text.contains("dcs_sync_ttl_seconds{namespace=\"default\",name=\"b"));
        for (name, kind) in [
            ("dcs_sync_ttl_seconds", "gauge"),
            ("dcs_sync_runner_restarts_total", "counter"),
            ("dcs_sync_reinits_total", "counter"),
            ("dcs_sync_condition", "gauge"),
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} {kind}\n")),
                "{name}\n{text}"
            );
        }
    }

    #[test]
    fn a_sample_reads_the_status() {
        use dcs_crds::{DorisChangelogSync, DorisChangelogSyncStatus, SourceStatus};
        let mut sync = dcs_crds::testing::SyncBuilder::new()
            .name("s")
            .namespace("team")
            .source_table("a.b")
            .source_secret("x")
            .mode(dcs_crds::StartupMode::Snapshot)
            .stdout()
            .build();
        let object = |sync: &DorisChangelogSync| SyncObject {
            metadata: sync.metadata.clone(),
            parsed: Ok(Arc::new(sync.clone())),
        };
        assert_eq!(SyncSample::of(&object(&sync)).reinits, None);
        sync.status = Some(DorisChangelogSyncStatus {
            source: Some(SourceStatus {
                ttl_seconds: Some(600),
                ..Default::default()
            }),
            runner_restarts: Some(3),
            conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "SinkHealthy".into(),
                status: "False".into(),
                reason: "RunnerFailed".into(),
                message: "boom".into(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                observed_generation: None,
            }],
            ..Default::default()
        });
        let sample = SyncSample::of(&object(&sync));
        assert_eq!(
            (
                sample.namespace.as_str(),
                sample.ttl_seconds,
                sample.runner_restarts,
                sample.reinits
            ),
            ("team", Some(600), Some(3), Some(0))
        );
        assert_eq!(
            sample.conditions,
            vec![("SinkHealthy".into(), "False".into(), "RunnerFailed".into())]
        );
    }
}

//! What a run needs, resolved once from a `DorisChangelogSync` and the credentials: the bottom
//! layer of the runner (docs/ARCHITECTURE.md §3). The source and the sink read their settings from
//! here and from nothing above; the pipeline puts them together.

pub mod shard;
mod sink;
mod source;
pub mod tls;

use std::fmt;
use std::time::Duration;

use dcs_crds::DorisChangelogSync;
use dcs_crds::spec::{StartupMode, TableRef};

pub use shard::{Role, Sharding};
pub use sink::{
    BatchLimits, BodyFormat, CreateTableSettings, DeadLetterSettings, DorisSinkConfig, EventPolicy,
    SinkConfig, parse_separator, sink_query_port,
};
pub use source::{
    ChangelogOptions, DEFAULT_REQUEST_RETRIES, SourceCredentials, SourceSettings, StreamRetry,
};
pub use tls::{SINK_CA_FILE_ENV, SOURCE_CA_FILE_ENV, TlsFiles};

use crate::{Error, Result};
use dcs_doris_client::stream_load::Backoff;

/// The Doris users the runner connects as. `Debug` never shows the passwords.
#[derive(Clone, Default)]
pub struct Credentials {
    /// Source user.
    pub source_user: String,
    /// Source password.
    pub source_password: String,
    /// Sink user.
    pub sink_user: String,
    /// Sink password.
    pub sink_password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("source_user", &self.source_user)
            .field("sink_user", &self.sink_user)
            .finish_non_exhaustive()
    }
}

/// Environment variables the credentials are read from.
pub const CREDENTIAL_ENV: [&str; 4] = [
    "DCS_SOURCE_USERNAME",
    "DCS_SOURCE_PASSWORD",
    "DCS_SINK_USERNAME",
    "DCS_SINK_PASSWORD",
];

impl Credentials {
    /// Read the credentials with `get` (the process environment in `main`). The usernames are
    /// required; a missing password is empty. The sink ones are only required with a Doris sink.
    ///
    /// # Errors
    /// [`Error::Config`] naming the missing variable.
    pub fn from_env(get: impl Fn(&str) -> Option<String>, needs_sink: bool) -> Result<Self> {
        let required = |name: &str| {
            get(name).filter(|v| !v.is_empty()).ok_or_else(|| Error::Config {
                reason: format!("environment variable {name} is not set; the runner reads Doris credentials only from the environment"),
            })
        };
        let [su, sp, ku, kp] = CREDENTIAL_ENV;
        Ok(Self {
            source_user: required(su)?,
            source_password: get(sp).unwrap_or_default(),
            sink_user: if needs_sink {
                required(ku)?
            } else {
                get(ku).unwrap_or_default()
            },
            sink_password: get(kp).unwrap_or_default(),
        })
    }
}

/// Everything the pipeline needs.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// `metadata.name` of the sync.
    pub sync_name: String,
    /// `metadata.namespace` of the sync (`default` without one): part of its load labels, so
    /// syncs of the same name in two namespaces never share one.
    pub namespace: String,
    /// The consumer progress belongs to.
    pub consumer_id: String,
    /// The source table and how to reach it.
    pub source: SourceSettings,
    /// `source.columns`.
    pub columns: Option<Vec<String>>,
    /// `source.filter` (snapshot mode only).
    pub filter: Option<String>,
    /// `startup.mode`.
    pub startup_mode: StartupMode,
    /// `startup.timestamp` as epoch ms (UTC), for fromTimestamp.
    pub startup_timestamp_ms: Option<i64>,
    /// How the changelog is polled.
    pub changelog: ChangelogOptions,
    /// Time between checkpoints.
    pub checkpoint_interval: Duration,
    /// The sink.
    pub sink: SinkConfig,
    /// Snapshot splits read at once.
    pub snapshot_concurrency: usize,
    /// How often and how soon a broken Flight result stream (a snapshot split or a changelog
    /// window) is read again before the run fails.
    pub stream_retry: StreamRetry,
    /// `offsets.table`: the connector-compatible offset table, read on start and written after
    /// each changelog checkpoint.
    pub offset_table: Option<TableRef>,
    /// How a failed offset-table write is retried.
    pub offset_table_retry: RetryPolicy,
    /// The manifest's `dcs.dev/reinitialized-from`: the consumer this one re-initialises, whose
    /// sink a run without a checkpoint rebuilds (`crate::sink::rebuild`).
    pub reinitialized_from: Option<String>,
    /// `spec.snapshot.parallelism`, this run's shard and the shards' T0 ([`Sharding`]).
    pub sharding: Sharding,
}

/// How a failed offset-table write is retried (`offsets.table`).
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts per value (a newer value replaces the one being retried).
    pub attempts: u32,
    /// Delay before the first retry; doubled for each further one.
    pub base_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            base_delay: Duration::from_secs(1),
        }
    }
}

/// A `yyyy-MM-dd HH:mm:ss` UTC timestamp (`startup.timestamp`, an `@incr` bound, an offset-table
/// value) as epoch milliseconds; the text rule is `dcs_crds::spec::parse_timestamp`, the one
/// validation applies.
///
/// # Errors
/// What is wrong with the text.
pub fn timestamp_ms(text: &str) -> std::result::Result<i64, String> {
    let dt = dcs_crds::spec::parse_timestamp(text).map_err(|e| e.to_string())?;
    dt.to_zoned(jiff::tz::TimeZone::UTC)
        .map(|z| z.timestamp().as_millisecond())
        .map_err(|e| format!("{text:?} is out of range: {e}"))
}

/// The Stream Load `timeout` of every load (pure): longer than the longest a pre-committed load
/// waits for its commit in a live run — a checkpoint interval, plus the window being read when it
/// falls due (up to `visibleWaitTimeout` of retries), plus, in a changelog-mode snapshot, the wait
/// for a split boundary (a quarter of the expected snapshot) — with 10 minutes to spare, and at
/// least Doris's own pre-commit timeout of an hour.
///
/// In Doris this header bounds the PREPARE state (a load still running); a PRECOMMITTED
/// transaction lives `stream_load_default_precommit_timeout_second` (an FE setting, 3600 s by
/// default) whatever it says. A commit that finds its load aborted anyway (a runner down longer
/// than that) is recovered from the changelog (`pipeline`), never taken for written.
pub fn load_timeout(
    checkpoint_interval: Duration,
    visible_wait_timeout: Duration,
    expected_snapshot: Duration,
) -> Duration {
    (checkpoint_interval + visible_wait_timeout + expected_snapshot / 4 + Duration::from_secs(600))
        .max(Duration::from_secs(3600))
}

impl PipelineConfig {
    /// Resolve a validated manifest, without CA bundle files ([`PipelineConfig::from_sync_tls`]).
    ///
    /// # Errors
    /// As [`PipelineConfig::from_sync_tls`].
    pub fn from_sync(sync: &DorisChangelogSync, credentials: Credentials) -> Result<Self> {
        Self::from_sync_tls(sync, credentials, &TlsFiles::default())
    }

    /// Resolve a validated manifest; TLS CA bundles are read from `tls_files`.
    ///
    /// # Errors
    /// [`Error::Config`] for what the runner cannot do (yet), e.g. an offset table, or a CA
    /// bundle that cannot be read.
    pub fn from_sync_tls(
        sync: &DorisChangelogSync,
        credentials: Credentials,
        tls_files: &TlsFiles,
    ) -> Result<Self> {
        let spec = &sync.spec;
        let config = |reason: String| Error::Config { reason };
        let offset_table = spec
            .offsets
            .as_ref()
            .and_then(|o| o.table.as_deref())
            .map(|t| {
                t.parse::<TableRef>()
                    .map_err(|e| config(format!("offsets.table: {e}")))
            })
            .transpose()?;
        let mut source = SourceSettings::from_spec(
            &spec.source,
            SourceCredentials {
                user: credentials.source_user.clone(),
                password: credentials.source_password.clone(),
            },
        )?;
        source.tls = tls::resolve(
            spec.source.tls.as_ref(),
            tls_files.source_ca.as_ref(),
            "source.tls",
            SOURCE_CA_FILE_ENV,
        )?;
        let duration = |path: &str, r: std::result::Result<Duration, _>| {
            r.map_err(|e: dcs_crds::duration::DurationError| config(format!("{path}: {e}")))
        };
        let startup_timestamp_ms = match spec.startup.timestamp.as_deref() {
            Some(t) if spec.startup.mode == StartupMode::FromTimestamp => {
                Some(timestamp_ms(t).map_err(|e| config(format!("startup.timestamp: {e}")))?)
            }
            _ => None,
        };
        let changelog = ChangelogOptions {
            increment_type: spec.changelog.increment_type,
            poll_interval: duration("changelog.pollInterval", spec.changelog.poll_interval())?,
            visible_wait_timeout: duration(
                "changelog.visibleWaitTimeout",
                spec.changelog.visible_wait_timeout(),
            )?,
            ..ChangelogOptions::default()
        };
        let sink = match (&spec.sink.doris, &spec.sink.stdout) {
            (Some(d), _) => {
                let table = d
                    .table_ref()
                    .map_err(|e| config(format!("sink.doris.table: {e}")))?;
                let dead_letter = d
                    .dead_letter_ref()
                    .map_err(|e| config(format!("sink.doris.deadLetter.table: {e}")))?
                    .map(|t| DeadLetterSettings {
                        table: t,
                        source: source.table.clone(),
                    });
                let limits = BatchLimits {
                    max_rows: u64::try_from(d.batch.max_rows.max(1)).unwrap_or(1),
                    max_bytes: d
                        .batch
                        .max_bytes()
                        .map_err(|e| config(format!("sink.doris.batch.maxBytes: {e}")))?,
                    interval: duration("sink.doris.batch.interval", d.batch.interval())?,
                };
                let tls = tls::resolve(
                    d.tls.as_ref(),
                    tls_files.sink_ca.as_ref(),
                    "sink.doris.tls",
                    SINK_CA_FILE_ENV,
                )?;
                SinkConfig::Doris(Box::new(DorisSinkConfig {
                    tls,
                    dead_letter,
                    fe_nodes: d.fe_nodes.clone(),
                    be_nodes: d.be_nodes.clone().unwrap_or_default(),
                    table,
                    user: credentials.sink_user,
                    password: credentials.sink_password,
                    label_prefix: d.label_prefix.clone(),
                    enable_2pc: d.enable2pc,
                    policy: EventPolicy {
                        mode: d.mode,
                        enable_delete: d.enable_delete,
                        ignore_update_before: d.ignore_update_before,
                    },
                    limits,
                    max_retries: u32::try_from(d.max_retries.max(0)).unwrap_or(0),
                    backoff: Backoff::default(),
                    properties: d.properties.clone(),
                    request_timeout: Duration::from_secs(60),
                    load_timeout: load_timeout(
                        duration("checkpoint.interval", spec.checkpoint.interval())?,
                        changelog.visible_wait_timeout,
                        duration(
                            "expectedSnapshotDuration",
                            spec.expected_snapshot_duration(),
                        )?,
                    ),
                    query_port: sink_query_port(&d.fe_nodes, &source),
                    format: BodyFormat::from_properties(&d.properties).map_err(config)?,
                    create_table: CreateTableSettings {
                        enabled: d.create_table.enabled,
                        properties: d.create_table.properties.clone(),
                        auto_partition: d
                            .create_table
                            .auto_partition
                            .as_ref()
                            .map(|a| (a.key.clone(), a.unit.as_sql().to_owned())),
                    },
                    schema_change: d.schema_change,
                }))
            }
            (None, Some(_)) => SinkConfig::Stdout,
            (None, None) => return Err(config("set sink.doris or sink.stdout".into())),
        };
        Ok(Self {
            sync_name: sync.metadata.name.clone().unwrap_or_default(),
            namespace: sync
                .metadata
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".to_owned()),
            consumer_id: sync.consumer_id(),
            source,
            columns: spec.source.columns.clone(),
            filter: spec.source.filter.clone(),
            startup_mode: spec.startup.mode,
            startup_timestamp_ms,
            changelog,
            checkpoint_interval: duration("checkpoint.interval", spec.checkpoint.interval())?,
            sink,
            snapshot_concurrency: 2,
            stream_retry: StreamRetry::default(),
            offset_table,
            offset_table_retry: Default::default(),
            reinitialized_from: sync
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(dcs_crds::checkpoint::REINITIALIZED_FROM_ANNOTATION))
                .cloned(),
            sharding: Sharding::of(sync)?,
        })
    }

    /// Make this run shard `index` of the sharded snapshot: it runs as the shard's consumer
    /// (`dcs_crds::shard::shard_consumer_id`), so its labels and checkpoint are its own.
    ///
    /// # Errors
    /// [`Error::Config`] as [`Sharding::role`] says, and for a re-initialised consumer's sink
    /// rebuild, which one runner does (a shadow table swapped in after the whole snapshot).
    pub fn assign_shard(&mut self, index: u32) -> Result<()> {
        self.sharding.index = Some(index);
        self.sharding.role(self.startup_mode)?;
        if let Some(previous) = &self.reinitialized_from {
            return Err(Error::Config {
                reason: format!(
                    "this manifest re-initialises consumer {previous} (annotation {}), whose sink rebuild one runner does; a sharded snapshot does not rebuild the sink: run it with spec.snapshot.parallelism 1",
                    dcs_crds::checkpoint::REINITIALIZED_FROM_ANNOTATION
                ),
            });
        }
        self.consumer_id = self.sharding.consumer_id(&self.consumer_id);
        Ok(())
    }

    /// The Doris sink, if that is the sink.
    pub fn doris_sink(&self) -> Option<&DorisSinkConfig> {
        match &self.sink {
            SinkConfig::Doris(d) => Some(d),
            SinkConfig::Stdout => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use dcs_crds::testing::SyncBuilder;

    use super::*;

    /// The student sync from a timestamp, its polls, checkpoints and batches set.
    fn manifest() -> SyncBuilder {
        SyncBuilder::new()
            .name("student-sync")
            .source_table("demo.student")
            .source_secret("s")
            .from_timestamp("2026-11-29 13:00:00")
            .poll_interval("2s")
            .checkpoint_interval("5s")
            .sink_fe("fe:8030")
            .sink_table("sink.student")
            .sink_secret("s")
            .max_rows(100)
            .max_bytes("1Mi")
            .batch_interval("3s")
    }

    fn creds() -> Credentials {
        Credentials {
            source_user: "reader".into(),
            source_password: "secret-1".into(),
            sink_user: "writer".into(),
            sink_password: "secret-2".into(),
        }
    }

    #[test]
    fn manifest_resolves_with_defaults() {
        let sync = dcs_crds::from_manifest(&manifest().yaml()).unwrap();
        let c = PipelineConfig::from_sync(&sync, creds()).unwrap();
        assert_eq!(c.consumer_id, "student-sync");
        assert_eq!(c.startup_timestamp_ms, Some(1_795_957_200_000));
        assert_eq!(c.changelog.poll_interval, Duration::from_secs(2));
        assert_eq!(c.checkpoint_interval, Duration::from_secs(5));
        let d = c.doris_sink().unwrap();
        assert_eq!(d.limits.max_rows, 100);
        assert_eq!(d.limits.max_bytes, 1 << 20);
        assert!(d.enable_2pc);
        assert_eq!(d.max_retries, 3);
        assert_eq!(c.reinitialized_from, None);
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("secret-1") && !debug.contains("secret-2"),
            "{debug}"
        );
    }

    #[test]
    fn an_offset_table_is_resolved_with_its_consumer() {
        let yaml = manifest().offsets("ops.offsets", Some("c1")).yaml();
        let sync = dcs_crds::from_manifest(&yaml).unwrap();
        let c = PipelineConfig::from_sync(&sync, creds()).unwrap();
        assert_eq!(c.offset_table.unwrap().quoted(), "`ops`.`offsets`");
        assert_eq!(c.consumer_id, "c1");
    }

    #[test]
    fn the_reinit_annotation_is_the_rebuild_directive() {
        let yaml = manifest()
            .annotation(
                dcs_crds::checkpoint::REINITIALIZED_FROM_ANNOTATION,
                "student-sync-r1",
            )
            .yaml();
        let sync = dcs_crds::from_manifest(&yaml).unwrap();
        let c = PipelineConfig::from_sync(&sync, creds()).unwrap();
        assert_eq!(c.reinitialized_from.as_deref(), Some("student-sync-r1"));
    }

    #[test]
    fn credentials_come_from_the_environment() {
        let env = |k: &str| match k {
            "DCS_SOURCE_USERNAME" => Some("root".to_string()),
            _ => None,
        };
        let c = Credentials::from_env(env, false).unwrap();
        assert_eq!(
            (c.source_user.as_str(), c.source_password.as_str()),
            ("root", "")
        );
        let err = Credentials::from_env(env, true).unwrap_err();
        assert!(err.to_string().contains("DCS_SINK_USERNAME"), "{err}");
    }
}

//! [`SyncBuilder`]: a valid `DorisChangelogSync` changed with typed methods.

use kube::ResourceExt;

use crate::spec::{
    AutoPartition, CaBundleRef, DorisChangelogSync, DorisChangelogSyncSpec, DorisSink,
    IncrementType, KeyRef, OffsetsSpec, OnOffsetExpired, PartitionUnit, SinkMode, StartupMode,
    StdoutFormat, StdoutSink, TlsSpec,
};

/// The sample every builder starts from: `db.src` on `fe:8030` read from its `initial` snapshot
/// on into the Doris table `db.dst` on `sink-fe:8030`, with the Secrets `src-creds` and
/// `sink-creds`; every other field at its default.
const SAMPLE: &str = r#"
source:
  feNodes: ["fe:8030"]
  table: db.src
  credentials: {secretName: src-creds}
startup: {mode: initial}
sink:
  doris:
    feNodes: ["sink-fe:8030"]
    table: db.dst
    credentials: {secretName: sink-creds}
"#;

/// A `DorisChangelogSync` named `orders` (no namespace) with the sample spec, changed field by
/// field; [`SyncBuilder::build`], [`SyncBuilder::spec`] or [`SyncBuilder::yaml`] give it back.
///
/// ```
/// use dcs_crds::{StartupMode, testing::SyncBuilder};
/// let sync = SyncBuilder::new()
///     .name("student-sync")
///     .source_table("demo.student")
///     .mode(StartupMode::Snapshot)
///     .build();
/// assert_eq!(sync.spec.source.table, "demo.student");
/// ```
#[derive(Clone, Debug)]
pub struct SyncBuilder {
    sync: DorisChangelogSync,
}

impl Default for SyncBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SyncBuilder {
    /// The sample sync `orders`.
    pub fn new() -> Self {
        let spec: DorisChangelogSyncSpec =
            serde_yaml::from_str(SAMPLE).expect("the sample spec parses");
        Self {
            sync: DorisChangelogSync::new("orders", spec),
        }
    }

    /// The typed resource.
    pub fn build(self) -> DorisChangelogSync {
        self.sync
    }

    /// The spec alone.
    pub fn spec(self) -> DorisChangelogSyncSpec {
        self.sync.spec
    }

    /// The resource as a manifest (`apiVersion`, `kind`, `metadata`, `spec`), as a user writes it
    /// for `dcs-runner run -f` or `kubectl apply`.
    pub fn yaml(&self) -> String {
        serde_yaml::to_string(&self.sync).expect("a sync always serializes")
    }

    /// The consumer id the sync's progress is recorded under.
    pub fn consumer_id(&self) -> String {
        self.sync.consumer_id()
    }

    /// The name the sync has now.
    pub fn current_name(&self) -> String {
        self.sync.name_any()
    }

    // === metadata ===

    /// `metadata.name`.
    pub fn name(mut self, name: &str) -> Self {
        self.sync.metadata.name = Some(name.to_owned());
        self
    }

    /// `metadata.namespace`.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.sync.metadata.namespace = Some(namespace.to_owned());
        self
    }

    /// `metadata.uid` (as the API server sets it; owner references need it).
    pub fn uid(mut self, uid: &str) -> Self {
        self.sync.metadata.uid = Some(uid.to_owned());
        self
    }

    /// `metadata.generation` (as the API server sets it).
    pub fn generation(mut self, generation: i64) -> Self {
        self.sync.metadata.generation = Some(generation);
        self
    }

    /// One annotation, added to those set before.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.sync
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// Without the annotation `key`.
    pub fn remove_annotation(mut self, key: &str) -> Self {
        if let Some(annotations) = self.sync.metadata.annotations.as_mut() {
            annotations.remove(key);
        }
        self
    }

    /// One label, added to those set before.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.sync
            .metadata
            .labels
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    // === source ===

    /// `source.feNodes`: one FE (`host:port` of its HTTP server).
    pub fn source_fe(self, node: &str) -> Self {
        self.source_fe_nodes(&[node])
    }

    /// `source.feNodes`.
    pub fn source_fe_nodes(mut self, nodes: &[&str]) -> Self {
        self.sync.spec.source.fe_nodes = nodes.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    /// `source.queryPort` (the FE's MySQL port).
    pub fn query_port(mut self, port: u16) -> Self {
        self.sync.spec.source.query_port = i32::from(port);
        self
    }

    /// `source.flightSqlPort`.
    pub fn flight_sql_port(mut self, port: u16) -> Self {
        self.sync.spec.source.flight_sql_port = Some(i32::from(port));
        self
    }

    /// `source.table` (`db.table`).
    pub fn source_table(mut self, table: &str) -> Self {
        self.sync.spec.source.table = table.to_owned();
        self
    }

    /// `source.credentials.secretName`.
    pub fn source_secret(mut self, name: &str) -> Self {
        self.sync.spec.source.credentials.secret_name = name.to_owned();
        self
    }

    /// `source.columns`.
    pub fn columns(mut self, columns: &[&str]) -> Self {
        self.sync.spec.source.columns = Some(columns.iter().map(|c| (*c).to_owned()).collect());
        self
    }

    /// `source.filter`.
    pub fn filter(mut self, filter: &str) -> Self {
        self.sync.spec.source.filter = Some(filter.to_owned());
        self
    }

    /// `source.tls`.
    pub fn source_tls(mut self, tls: TlsSpec) -> Self {
        self.sync.spec.source.tls = Some(tls);
        self
    }

    // === startup, changelog, offsets, checkpoint, snapshot ===

    /// `startup.mode`.
    pub fn mode(mut self, mode: StartupMode) -> Self {
        self.sync.spec.startup.mode = mode;
        self
    }

    /// `startup.mode: fromTimestamp` at `timestamp` (`YYYY-MM-DD HH:MM:SS`).
    pub fn from_timestamp(mut self, timestamp: &str) -> Self {
        self.sync.spec.startup.mode = StartupMode::FromTimestamp;
        self.sync.spec.startup.timestamp = Some(timestamp.to_owned());
        self
    }

    /// `changelog.incrementType`.
    pub fn increment_type(mut self, increment_type: IncrementType) -> Self {
        self.sync.spec.changelog.increment_type = increment_type;
        self
    }

    /// `changelog.pollInterval` (a duration such as `1s`).
    pub fn poll_interval(mut self, interval: &str) -> Self {
        self.sync.spec.changelog.poll_interval = interval.to_owned();
        self
    }

    /// `changelog.visibleWaitTimeout`.
    pub fn visible_wait_timeout(mut self, timeout: &str) -> Self {
        self.sync.spec.changelog.visible_wait_timeout = timeout.to_owned();
        self
    }

    /// `offsets`: the offset table and, when given, the consumer id.
    pub fn offsets(mut self, table: &str, consumer_id: Option<&str>) -> Self {
        self.sync.spec.offsets = Some(OffsetsSpec {
            table: Some(table.to_owned()),
            consumer_id: consumer_id.map(str::to_owned),
        });
        self
    }

    /// `checkpoint.interval`.
    pub fn checkpoint_interval(mut self, interval: &str) -> Self {
        self.sync.spec.checkpoint.interval = interval.to_owned();
        self
    }

    /// `expectedSnapshotDuration`.
    pub fn expected_snapshot_duration(mut self, duration: &str) -> Self {
        self.sync.spec.expected_snapshot_duration = duration.to_owned();
        self
    }

    /// `snapshot.parallelism`.
    pub fn parallelism(mut self, shards: i32) -> Self {
        self.sync.spec.snapshot.parallelism = shards;
        self
    }

    /// `onOffsetExpired`.
    pub fn on_offset_expired(mut self, then: OnOffsetExpired) -> Self {
        self.sync.spec.on_offset_expired = then;
        self
    }

    /// `suspend`.
    pub fn suspend(mut self, suspend: bool) -> Self {
        self.sync.spec.suspend = suspend;
        self
    }

    /// `reinitNonce`.
    pub fn reinit_nonce(mut self, nonce: &str) -> Self {
        self.sync.spec.reinit_nonce = nonce.to_owned();
        self
    }

    /// `runner.image`.
    pub fn runner_image(mut self, image: &str) -> Self {
        self.sync.spec.runner.image = Some(image.to_owned());
        self
    }

    /// `runner.serviceAccountName`.
    pub fn runner_service_account(mut self, name: &str) -> Self {
        self.sync.spec.runner.service_account_name = Some(name.to_owned());
        self
    }

    // === sink ===

    /// `sink.doris.feNodes`: one FE.
    pub fn sink_fe(self, node: &str) -> Self {
        self.sink_fe_nodes(&[node])
    }

    /// `sink.doris.feNodes`.
    pub fn sink_fe_nodes(self, nodes: &[&str]) -> Self {
        let nodes = nodes.iter().map(|n| (*n).to_owned()).collect();
        self.with_doris(|d| d.fe_nodes = nodes)
    }

    /// `sink.doris.beNodes`.
    pub fn be_nodes(self, nodes: &[&str]) -> Self {
        let nodes = nodes.iter().map(|n| (*n).to_owned()).collect();
        self.with_doris(|d| d.be_nodes = Some(nodes))
    }

    /// `sink.doris.autoRedirect`.
    pub fn auto_redirect(self, on: bool) -> Self {
        self.with_doris(|d| d.auto_redirect = on)
    }

    /// `sink.doris.table` (`db.table`).
    pub fn sink_table(self, table: &str) -> Self {
        self.with_doris(|d| d.table = table.to_owned())
    }

    /// `sink.doris.credentials.secretName`.
    pub fn sink_secret(self, name: &str) -> Self {
        self.with_doris(|d| d.credentials.secret_name = name.to_owned())
    }

    /// `sink.doris.labelPrefix`.
    pub fn label_prefix(self, prefix: &str) -> Self {
        self.with_doris(|d| d.label_prefix = prefix.to_owned())
    }

    /// `sink.doris.enable2pc`: loads pre-committed, then committed with each checkpoint.
    pub fn two_phase(self, on: bool) -> Self {
        self.with_doris(|d| d.enable2pc = on)
    }

    /// `sink.doris.enableDelete`.
    pub fn enable_delete(self, on: bool) -> Self {
        self.with_doris(|d| d.enable_delete = on)
    }

    /// `sink.doris.ignoreUpdateBefore`.
    pub fn ignore_update_before(self, on: bool) -> Self {
        self.with_doris(|d| d.ignore_update_before = on)
    }

    /// `sink.doris.mode`.
    pub fn sink_mode(self, mode: SinkMode) -> Self {
        self.with_doris(|d| d.mode = mode)
    }

    /// `sink.doris.batch.maxRows`.
    pub fn max_rows(self, rows: i64) -> Self {
        self.with_doris(|d| d.batch.max_rows = rows)
    }

    /// `sink.doris.batch.maxBytes` (a quantity such as `1Mi`).
    pub fn max_bytes(self, bytes: &str) -> Self {
        self.with_doris(|d| d.batch.max_bytes = bytes.to_owned())
    }

    /// `sink.doris.batch.interval`.
    pub fn batch_interval(self, interval: &str) -> Self {
        self.with_doris(|d| d.batch.interval = interval.to_owned())
    }

    /// `sink.doris.maxRetries`.
    pub fn max_retries(self, retries: i32) -> Self {
        self.with_doris(|d| d.max_retries = retries)
    }

    /// One of `sink.doris.properties` (Stream Load headers).
    pub fn sink_property(self, key: &str, value: &str) -> Self {
        self.with_doris(|d| {
            d.properties.insert(key.to_owned(), value.to_owned());
        })
    }

    /// `sink.doris.createTable.enabled`.
    pub fn create_table(self, on: bool) -> Self {
        self.with_doris(|d| d.create_table.enabled = on)
    }

    /// `sink.doris.schemaChange`.
    pub fn schema_change(self, policy: crate::SchemaChangePolicy) -> Self {
        self.with_doris(|d| d.schema_change = policy)
    }

    /// `sink.doris.deadLetter.table`.
    pub fn dead_letter(self, table: &str) -> Self {
        self.with_doris(|d| {
            d.dead_letter = Some(crate::spec::DeadLetterSpec {
                table: table.to_owned(),
            });
        })
    }

    /// One of `sink.doris.createTable.properties`.
    pub fn create_table_property(self, key: &str, value: &str) -> Self {
        self.with_doris(|d| {
            d.create_table
                .properties
                .insert(key.to_owned(), value.to_owned());
        })
    }

    /// `sink.doris.createTable.autoPartition`.
    pub fn auto_partition(self, key: &str, unit: PartitionUnit) -> Self {
        self.with_doris(|d| {
            d.create_table.auto_partition = Some(AutoPartition {
                key: key.to_owned(),
                unit,
            });
        })
    }

    /// `sink.doris.tls`.
    pub fn sink_tls(self, tls: TlsSpec) -> Self {
        self.with_doris(|d| d.tls = Some(tls))
    }

    /// `sink: {stdout: {}}` in place of the Doris sink.
    pub fn stdout(mut self) -> Self {
        self.sync.spec.sink.doris = None;
        self.sync.spec.sink.stdout = Some(StdoutSink {
            format: StdoutFormat::Json,
        });
        self
    }

    // === anything else ===

    /// Changes the spec in a way no method names (a field added later, a deliberately odd value).
    pub fn with_spec(mut self, change: impl FnOnce(&mut DorisChangelogSyncSpec)) -> Self {
        change(&mut self.sync.spec);
        self
    }

    /// Changes the Doris sink in a way no method names.
    ///
    /// # Panics
    /// When the sink is not Doris ([`SyncBuilder::stdout`] replaced it).
    pub fn with_doris(mut self, change: impl FnOnce(&mut DorisSink)) -> Self {
        change(
            self.sync
                .spec
                .sink
                .doris
                .as_mut()
                .expect("the sample's sink is Doris (stdout() replaced it)"),
        );
        self
    }
}

/// `tls` with TLS on and the CA bundle in key `key` of ConfigMap `name`.
pub fn tls_ca_config_map(name: &str, key: &str) -> TlsSpec {
    TlsSpec {
        enabled: true,
        ca_bundle: Some(CaBundleRef {
            config_map_key_ref: Some(KeyRef {
                name: name.to_owned(),
                key: key.to_owned(),
            }),
            ..CaBundleRef::default()
        }),
        ..TlsSpec::default()
    }
}

/// `tls` with TLS on and the CA bundle in key `key` of Secret `name`.
pub fn tls_ca_secret(name: &str, key: &str) -> TlsSpec {
    TlsSpec {
        enabled: true,
        ca_bundle: Some(CaBundleRef {
            secret_key_ref: Some(KeyRef {
                name: name.to_owned(),
                key: key.to_owned(),
            }),
            ..CaBundleRef::default()
        }),
        ..TlsSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_sample_is_valid_and_its_manifest_reads_back_as_the_same_sync() {
        let builder = SyncBuilder::new()
            .namespace("team")
            .source_fe("127.0.0.1:8030")
            .query_port(9031)
            .mode(StartupMode::Snapshot)
            .sink_mode(SinkMode::Changelog)
            .max_rows(100)
            .annotation("a", "b");
        assert_eq!(crate::validate(&builder.clone().spec()), Ok(()));
        let read = crate::from_manifest(&builder.yaml()).unwrap();
        assert_eq!(read, builder.build());
    }

    #[test]
    fn a_stdout_sync_has_no_doris_sink() {
        let spec = SyncBuilder::new().stdout().spec();
        assert_eq!(spec.sink.doris, None);
        assert_eq!(spec.sink.stdout, Some(StdoutSink::default()));
        assert_eq!(crate::validate(&spec), Ok(()));
    }

    #[test]
    fn properties_accumulate() {
        let spec = SyncBuilder::new()
            .sink_property("a", "1")
            .sink_property("b", "2")
            .spec();
        assert_eq!(
            spec.sink.doris.unwrap().properties,
            BTreeMap::from([("a".into(), "1".into()), ("b".into(), "2".into())])
        );
    }
}

//! Pure validation of a spec: every rule the schema cannot say, each error with its field path.
//!
//! The CEL rules in the CRD catch the cross-field mistakes at `kubectl apply` time; this module
//! repeats them (the runner's standalone mode has no API server) and adds what CEL cannot check
//! well: formats, ranges after parsing, names. All errors are collected, not just the first.

use std::{collections::BTreeMap, fmt, time::Duration};

use k8s_openapi::{
    api::core::v1::ResourceRequirements, apimachinery::pkg::api::resource::Quantity,
};

use crate::{
    duration::parse_duration,
    quantity::{parse_byte_quantity, parse_resource_quantity},
    spec::{
        BatchSpec, ChangelogSpec, Credentials, DorisChangelogSyncSpec, DorisSink,
        MAX_SNAPSHOT_PARALLELISM, SinkMode, SourceSpec, StartupMode, TableRef, TlsSpec,
        parse_timestamp,
    },
};

/// Characters Doris allows in a load label (and so in a label prefix or consumer id).
const LABEL_CHARS: &str = "letters, digits, '_' and '-'";

/// Doris's longest load label.
const MAX_LABEL_LEN: usize = 128;

/// The longest label prefix: `<prefix>-<consumerId>-<checkpointId>-<seq>` must fit in a label.
pub const MAX_LABEL_PREFIX_LEN: usize = 32;

/// The longest consumer id, leaving room for `-r<generation>` and the ids in a label.
pub const MAX_CONSUMER_ID_LEN: usize = 64;

/// The shortest poll interval, as the Flink connector has it.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The runner's environment variable for the address it serves metrics and probes on; in a pod
/// the operator sets it (`--runner-metrics-addr`) together with the container port the kubelet
/// probes and the chart's PodMonitor and NetworkPolicy name.
pub const METRICS_ADDR_ENV: &str = "DCS_METRICS_ADDR";

/// One thing wrong with a spec: where, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path from the object root, e.g. `spec.source.table` or `spec.source.feNodes[1]`.
    pub path: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl FieldError {
    /// A field error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Checks a spec and returns every error found, in field order.
///
/// # Errors
/// All [`FieldError`]s of the spec, when there is at least one.
pub fn validate(spec: &DorisChangelogSyncSpec) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    source(&mut errors, &spec.source, spec.startup.mode);
    startup(&mut errors, spec);
    changelog(&mut errors, &spec.changelog);
    offsets(&mut errors, spec);
    positive_duration(
        &mut errors,
        "spec.checkpoint.interval",
        &spec.checkpoint.interval,
    );
    sink(&mut errors, spec);
    if let Err(e) = parse_duration(&spec.expected_snapshot_duration) {
        errors.push("spec.expectedSnapshotDuration", e.to_string());
    }
    snapshot(&mut errors, spec);
    if spec.runner.image.as_deref() == Some("") {
        errors.push(
            "spec.runner.image",
            "is empty; remove it to use the operator's default image",
        );
    }
    for (i, var) in spec.runner.env.iter().flatten().enumerate() {
        if [
            crate::spec::SOURCE_CA_FILE_ENV,
            crate::spec::SINK_CA_FILE_ENV,
        ]
        .contains(&var.name.as_str())
        {
            errors.push(
                format!("spec.runner.env[{i}]"),
                format!(
                    "{} is set by the operator from tls.caBundle (the file it mounts the bundle \
                     at); remove it and name the bundle in spec.source.tls.caBundle or \
                     spec.sink.doris.tls.caBundle",
                    var.name
                ),
            );
        }
        if var.name == METRICS_ADDR_ENV {
            errors.push(
                format!("spec.runner.env[{i}]"),
                format!(
                    "{METRICS_ADDR_ENV} is set by the operator (its --runner-metrics-addr, the \
                     chart's runner.metricsAddr) together with the port the pod's probes use; \
                     remove it"
                ),
            );
        }
        // The runner pod gets Secrets only as source and sink credentials, which must opt in
        // (crate::access): a reference here would hand it any Secret of the namespace.
        if var
            .value_from
            .as_ref()
            .is_some_and(|v| v.secret_key_ref.is_some())
        {
            errors.push(
                format!("spec.runner.env[{i}].valueFrom.secretKeyRef"),
                "is not allowed: the runner gets Secrets only as spec.source.credentials and spec.sink.doris.credentials, from Secrets that allow the sync (annotation dcs.dev/allowed-syncs); use a plain value or a configMapKeyRef",
            );
        }
    }
    if let Some(resources) = &spec.runner.resources {
        errors
            .0
            .extend(validate_resources("spec.runner.resources", resources));
    }
    errors.finish()
}

/// Checks container resources as the API server would before it admits the pod: every request and
/// limit a quantity, no request above its limit. `path` names the field in the messages.
pub fn validate_resources(path: &str, resources: &ResourceRequirements) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut parse = |kind: &str, map: &Option<BTreeMap<String, Quantity>>| {
        let mut parsed = BTreeMap::new();
        for (name, quantity) in map.iter().flatten() {
            match parse_resource_quantity(&quantity.0) {
                Ok(q) => {
                    parsed.insert(name.clone(), (q, quantity.0.clone()));
                }
                Err(e) => errors.push(FieldError::new(
                    format!("{path}.{kind}.{name}"),
                    e.to_string(),
                )),
            }
        }
        parsed
    };
    let requests = parse("requests", &resources.requests);
    let limits = parse("limits", &resources.limits);
    for (name, (request, request_text)) in &requests {
        if let Some((limit, limit_text)) = limits.get(name)
            && request > limit
        {
            errors.push(FieldError::new(
                format!("{path}.requests.{name}"),
                format!(
                    "is {request_text}, more than the limit {limit_text} ({path}.limits.{name}); \
                     Kubernetes admits no pod whose request is above its limit"
                ),
            ));
        }
    }
    errors
}

#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(path, message));
    }

    fn finish(self) -> Result<(), Vec<FieldError>> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0)
        }
    }
}

fn source(errors: &mut Errors, source: &SourceSpec, mode: StartupMode) {
    endpoints(
        errors,
        "spec.source.feNodes",
        &source.fe_nodes,
        "doris-fe:8030",
        true,
    );
    port(errors, "spec.source.queryPort", source.query_port);
    if let Some(p) = source.flight_sql_port {
        port(errors, "spec.source.flightSqlPort", p);
    }
    table(errors, "spec.source.table", &source.table);
    credentials(errors, "spec.source.credentials", &source.credentials);
    if let Some(t) = &source.tls {
        tls(errors, "spec.source.tls", t);
    }
    if let Some(columns) = &source.columns {
        if columns.is_empty() {
            errors.push(
                "spec.source.columns",
                "is empty; list the columns to read, or remove it to read them all",
            );
        }
        for (i, column) in columns.iter().enumerate() {
            if column.trim().is_empty() || column.contains('`') {
                errors.push(
                    format!("spec.source.columns[{i}]"),
                    format!(
                        "{column:?} is not a column name; write the plain name without backticks"
                    ),
                );
            } else if column.chars().any(char::is_control) {
                errors.push(
                    format!("spec.source.columns[{i}]"),
                    format!(
                        "{column:?} holds a control character, which no Doris column name has; \
                         write the name as the table's schema shows it"
                    ),
                );
            }
        }
    }
    if let Some(filter) = &source.filter {
        if filter.trim().is_empty() {
            errors.push(
                "spec.source.filter",
                "is empty; write a predicate such as \"age > 18\" or remove it",
            );
        }
        if mode != StartupMode::Snapshot {
            errors.push(
                "spec.source.filter",
                format!(
                    "is only allowed with startup.mode snapshot, and the mode is {mode}: the changelog \
                     cannot be filtered; remove the filter or use mode snapshot"
                ),
            );
        }
    }
}

fn startup(errors: &mut Errors, spec: &DorisChangelogSyncSpec) {
    let mode = spec.startup.mode;
    match (&spec.startup.timestamp, mode) {
        (None, StartupMode::FromTimestamp) => errors.push(
            "spec.startup.timestamp",
            "is required with mode fromTimestamp; write where to start as \"yyyy-MM-dd HH:mm:ss\"",
        ),
        (Some(_), m) if m != StartupMode::FromTimestamp => errors.push(
            "spec.startup.timestamp",
            format!("is only allowed with mode fromTimestamp, and the mode is {m}; remove it or set mode: fromTimestamp"),
        ),
        (Some(ts), _) => {
            if let Err(e) = parse_timestamp(ts) {
                errors.push("spec.startup.timestamp", e.to_string());
            }
        }
        (None, _) => {}
    }
}

fn snapshot(errors: &mut Errors, spec: &DorisChangelogSyncSpec) {
    let n = spec.snapshot.parallelism;
    if !(1..=MAX_SNAPSHOT_PARALLELISM).contains(&n) {
        errors.push(
            "spec.snapshot.parallelism",
            format!("is {n}; it must be between 1 and {MAX_SNAPSHOT_PARALLELISM}"),
        );
    }
    if n <= 1 {
        return;
    }
    let mode = spec.startup.mode;
    if !matches!(mode, StartupMode::Snapshot | StartupMode::Initial) {
        errors.push(
            "spec.snapshot.parallelism",
            format!(
                "is {n}, but startup.mode {mode} reads no snapshot; remove it or use mode snapshot or initial"
            ),
        );
    }
    if spec.offsets.as_ref().is_some_and(|o| o.table.is_some()) {
        errors.push(
            "spec.snapshot.parallelism",
            format!(
                "is {n} together with offsets.table, which a sharded snapshot does not support yet (an offset-table row would skip the snapshot the shards read); remove one of them"
            ),
        );
    }
}

fn changelog(errors: &mut Errors, changelog: &ChangelogSpec) {
    match parse_duration(&changelog.poll_interval) {
        Ok(d) if d < MIN_POLL_INTERVAL => errors.push(
            "spec.changelog.pollInterval",
            format!("is {}; it must be at least 1s", changelog.poll_interval),
        ),
        Ok(_) => {}
        Err(e) => errors.push("spec.changelog.pollInterval", e.to_string()),
    }
    if let Err(e) = parse_duration(&changelog.visible_wait_timeout) {
        errors.push("spec.changelog.visibleWaitTimeout", e.to_string());
    }
}

fn offsets(errors: &mut Errors, spec: &DorisChangelogSyncSpec) {
    let Some(offsets) = &spec.offsets else {
        return;
    };
    if !spec.startup.mode.is_incremental() {
        errors.push(
            "spec.offsets",
            format!(
                "is only allowed with an incremental startup.mode (initial, latest or fromTimestamp), \
                 and the mode is {}; remove it or change the mode",
                spec.startup.mode
            ),
        );
    }
    match (&offsets.table, &offsets.consumer_id) {
        (Some(_), None) => errors.push(
            "spec.offsets.consumerId",
            "is required with offsets.table; name the consumer_id row to write, e.g. \"student-sync\"",
        ),
        (None, Some(_)) => errors.push(
            "spec.offsets.table",
            "is required with offsets.consumerId; name the offset table, e.g. \"ops.flink_source_offsets\"",
        ),
        (None, None) => errors.push(
            "spec.offsets",
            "is empty; set table and consumerId, or remove offsets",
        ),
        (Some(_), Some(_)) => {}
    }
    if let Some(t) = &offsets.table {
        table(errors, "spec.offsets.table", t);
    }
    if let Some(id) = &offsets.consumer_id {
        label_part(errors, "spec.offsets.consumerId", id, MAX_CONSUMER_ID_LEN);
    }
}

fn sink(errors: &mut Errors, spec: &DorisChangelogSyncSpec) {
    match (&spec.sink.doris, &spec.sink.stdout) {
        (None, None) => errors.push(
            "spec.sink",
            "sets no sink; set exactly one of doris or stdout",
        ),
        (Some(_), Some(_)) => {
            errors.push("spec.sink", "sets both doris and stdout; set exactly one")
        }
        _ => {}
    }
    if let Some(doris) = &spec.sink.doris {
        doris_sink(errors, doris);
        // With a fixed column list nothing is followed: a policy other than evolve would
        // promise what no run does.
        if spec.source.columns.is_some() && doris.schema_change != crate::SchemaChangePolicy::Evolve
        {
            errors.push(
                "spec.sink.doris.schemaChange",
                format!(
                    "is {}, which applies only when every source column is read; remove source.columns, or schemaChange",
                    doris.schema_change.as_str()
                ),
            );
        }
    }
}

fn doris_sink(errors: &mut Errors, doris: &DorisSink) {
    endpoints(
        errors,
        "spec.sink.doris.feNodes",
        &doris.fe_nodes,
        "doris-fe:8030",
        true,
    );
    match &doris.be_nodes {
        Some(be) => endpoints(errors, "spec.sink.doris.beNodes", be, "doris-be:8040", !doris.auto_redirect),
        None if !doris.auto_redirect => errors.push(
            "spec.sink.doris.beNodes",
            "is required when autoRedirect is false; list the BE HTTP endpoints, e.g. \"doris-be:8040\"",
        ),
        None => {}
    }
    table(errors, "spec.sink.doris.table", &doris.table);
    if let Err(e) = doris.dead_letter_ref() {
        errors.push("spec.sink.doris.deadLetter.table", e.to_string());
    }
    credentials(errors, "spec.sink.doris.credentials", &doris.credentials);
    if let Some(t) = &doris.tls {
        tls(errors, "spec.sink.doris.tls", t);
    }
    label_part(
        errors,
        "spec.sink.doris.labelPrefix",
        &doris.label_prefix,
        MAX_LABEL_PREFIX_LEN,
    );
    if doris.max_retries < 0 {
        errors.push(
            "spec.sink.doris.maxRetries",
            format!("is {}; it must be 0 or more", doris.max_retries),
        );
    }
    batch(errors, &doris.batch);
    for key in doris.properties.keys() {
        if key.trim().is_empty() {
            errors.push(
                "spec.sink.doris.properties",
                "has an empty key; write the Stream Load header name",
            );
        } else if let Some(why) = owned_header(key) {
            errors.push(
                format!("spec.sink.doris.properties.{key}"),
                format!("is a Stream Load header dcs sets itself: {why}; remove it"),
            );
        }
    }
    if doris.mode == SinkMode::Changelog && !doris.enable2pc {
        errors.push(
            "spec.sink.doris.enable2pc",
            "is false with mode: changelog; a changelog-mode sink appends every event, so without \
             two-phase commit every restart writes the events since the last checkpoint again \
             (duplicates nobody can tell apart); set enable2pc: true (the default), or use \
             mode: upsert",
        );
    }
    if let Some(partition) = &doris.create_table.auto_partition
        && (partition.key.trim().is_empty() || partition.key.contains('`'))
    {
        errors.push(
            "spec.sink.doris.createTable.autoPartition.key",
            format!(
                "{:?} is not a column name; write the date column to partition by",
                partition.key
            ),
        );
    }
}

/// Why dcs owns a Stream Load header (compared case-insensitively, as HTTP header names are);
/// `None` for headers a sync may set.
///
/// These either carry dcs's exactly-once protocol (the label, two-phase commit and its operations,
/// the load timeout) or would make Doris drop or change, without failing the load, rows dcs counts
/// as written (column mapping, the delete sign, filters, partial updates, sequence columns, CSV
/// quoting). Headers that only break the body's parsing (e.g. `read_json_by_line: false`) fail
/// every load loudly and are left to the user.
pub fn owned_header(name: &str) -> Option<&'static str> {
    const OWNED: [(&str, &str); 21] = [
        (
            "label",
            "loads are labelled per checkpoint so retries and restarts are deduplicated",
        ),
        (
            "two_phase_commit",
            "set from enable2pc; the checkpoint protocol commits the loads",
        ),
        ("txn_id", "the second phase of two-phase commit is dcs's"),
        (
            "txn_operation",
            "the second phase of two-phase commit is dcs's",
        ),
        (
            "timeout",
            "a pre-committed load must outlive the wait for its checkpoint",
        ),
        (
            "group_commit",
            "group commit has no labels or two-phase commit",
        ),
        ("columns", "the body's columns are the ones dcs writes"),
        (
            "hidden_columns",
            "the delete sign column is dcs's (upsert mode)",
        ),
        (
            "jsonpaths",
            "the JSON body is written by dcs, one object per line",
        ),
        (
            "json_root",
            "the JSON body is written by dcs, one object per line",
        ),
        ("enclose", "dcs's CSV has no enclosing quotes"),
        ("escape", "dcs's CSV has no escape character"),
        ("trim_double_quotes", "it would change the values dcs wrote"),
        ("skip_lines", "every line dcs writes is a row"),
        (
            "merge_type",
            "deletes are carried by the delete sign of each row",
        ),
        (
            "delete",
            "deletes are carried by the delete sign of each row",
        ),
        ("where", "it would drop rows dcs counts as written"),
        (
            "max_filter_ratio",
            "a filtered row would be lost without the sync failing",
        ),
        (
            "strict_mode",
            "dcs sets it to true, so a value the sink column cannot hold fails the load instead of becoming NULL",
        ),
        ("partial_columns", "every row is written whole"),
        ("unique_key_update_mode", "every row is written whole"),
    ];
    let name = name.trim();
    OWNED
        .iter()
        .find(|(owned, _)| owned.eq_ignore_ascii_case(name))
        .map(|(_, why)| *why)
        .or_else(|| {
            [
                "function_column.sequence_col",
                "partial_update_new_key_behavior",
            ]
            .iter()
            .any(|h| h.eq_ignore_ascii_case(name))
            .then_some("it would make Doris skip or change rows dcs counts as written")
        })
}

fn batch(errors: &mut Errors, batch: &BatchSpec) {
    if batch.max_rows <= 0 {
        errors.push(
            "spec.sink.doris.batch.maxRows",
            format!("is {}; it must be more than 0, e.g. 50000", batch.max_rows),
        );
    }
    match parse_byte_quantity(&batch.max_bytes) {
        Ok(0) => errors.push(
            "spec.sink.doris.batch.maxBytes",
            format!(
                "is {}; it must be more than 0, e.g. \"10Mi\"",
                batch.max_bytes
            ),
        ),
        Ok(_) => {}
        Err(e) => errors.push("spec.sink.doris.batch.maxBytes", e.to_string()),
    }
    positive_duration(errors, "spec.sink.doris.batch.interval", &batch.interval);
}

fn positive_duration(errors: &mut Errors, path: &str, value: &str) {
    match parse_duration(value) {
        Ok(Duration::ZERO) => errors.push(
            path,
            format!("is {value}; it must be more than 0s, e.g. \"10s\""),
        ),
        Ok(_) => {}
        Err(e) => errors.push(path, e.to_string()),
    }
}

fn table(errors: &mut Errors, path: &str, value: &str) {
    if let Err(e) = value.parse::<TableRef>() {
        errors.push(path, e.to_string());
    }
}

fn credentials(errors: &mut Errors, path: &str, credentials: &Credentials) {
    for (field, value) in [
        ("secretName", &credentials.secret_name),
        ("usernameKey", &credentials.username_key),
        ("passwordKey", &credentials.password_key),
    ] {
        if value.trim().is_empty() {
            errors.push(
                format!("{path}.{field}"),
                "is empty; name the Secret and the keys of the Doris user and password",
            );
        }
    }
}

fn tls(errors: &mut Errors, path: &str, tls: &TlsSpec) {
    if !tls.enabled {
        for (set, field) in [
            (tls.ca_bundle.is_some(), "caBundle"),
            (tls.server_name.is_some(), "serverName"),
            (tls.insecure_skip_verify, "insecureSkipVerify"),
        ] {
            if set {
                errors.push(
                    format!("{path}.{field}"),
                    "only applies with TLS on; set enabled: true, or remove it",
                );
            }
        }
    }
    if tls.insecure_skip_verify && tls.ca_bundle.is_some() {
        errors.push(
            format!("{path}.insecureSkipVerify"),
            "contradicts caBundle: keep caBundle to verify the certificates against it, or \
             remove caBundle to skip verification (testing only)",
        );
    }
    if let Some(bundle) = &tls.ca_bundle {
        let bundle_path = format!("{path}.caBundle");
        match (&bundle.secret_key_ref, &bundle.config_map_key_ref) {
            (Some(_), Some(_)) | (None, None) => errors.push(
                bundle_path.clone(),
                "set exactly one of secretKeyRef or configMapKeyRef, e.g. configMapKeyRef: \
                 {name: doris-ca, key: ca.crt}",
            ),
            _ => {}
        }
        for (r, field) in [
            (&bundle.secret_key_ref, "secretKeyRef"),
            (&bundle.config_map_key_ref, "configMapKeyRef"),
        ] {
            let Some(r) = r else { continue };
            if r.name.trim().is_empty() {
                errors.push(
                    format!("{bundle_path}.{field}.name"),
                    "is empty; name the object holding the CA bundle",
                );
            }
            if r.key.trim().is_empty() {
                errors.push(
                    format!("{bundle_path}.{field}.key"),
                    "is empty; name the key holding the PEM, e.g. ca.crt",
                );
            }
        }
    }
    if let Some(name) = &tls.server_name {
        let ok = !name.is_empty()
            && name.len() <= 253
            && !name.contains(['/', ':', '@', '?', '#'])
            && !name.chars().any(|c| c.is_whitespace() || c.is_control());
        if !ok {
            errors.push(
                format!("{path}.serverName"),
                format!(
                    "{name:?} is not a host name; write the DNS name or IP address the \
                     certificates hold, without scheme or port, e.g. \"doris.example.com\""
                ),
            );
        }
    }
}

fn port(errors: &mut Errors, path: &str, value: i32) {
    if !(1..=65535).contains(&value) {
        errors.push(path, format!("is {value}; a port is between 1 and 65535"));
    }
}

fn endpoints(errors: &mut Errors, path: &str, nodes: &[String], example: &str, required: bool) {
    if nodes.is_empty() && required {
        errors.push(
            path,
            format!("is empty; list at least one endpoint as host:port, e.g. {example:?}"),
        );
    }
    for (i, node) in nodes.iter().enumerate() {
        if !is_host_port(node) {
            errors.push(
                format!("{path}[{i}]"),
                format!("{node:?} is not host:port; write the host and the HTTP port without a scheme, e.g. {example:?}"),
            );
        }
    }
}

fn is_host_port(value: &str) -> bool {
    let Some((host, port)) = value.rsplit_once(':') else {
        return false;
    };
    let host_ok = !host.is_empty()
        && !host.contains(['/', '@', '?', '#'])
        && !host.chars().any(char::is_whitespace)
        && (!host.contains(':') || host.starts_with('[') && host.ends_with(']'));
    host_ok && port.parse::<u16>().is_ok_and(|p| p > 0)
}

fn label_part(errors: &mut Errors, path: &str, value: &str, max_len: usize) {
    if value.is_empty() {
        errors.push(path, format!("is empty; use {LABEL_CHARS}"));
    } else if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        errors.push(
            path,
            format!("{value:?} may only hold {LABEL_CHARS}, because it becomes part of Doris load labels"),
        );
    } else if value.len() > max_len {
        errors.push(
            path,
            format!(
                "is {} characters long; keep it to {max_len}, because Doris load labels hold at most \
                 {MAX_LABEL_LEN} characters",
                value.len()
            ),
        );
    }
}

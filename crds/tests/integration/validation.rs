//! Defaults after reading a minimal manifest, and the exact path and message of every rule.

use std::time::Duration;

use dcs_crds::testing::SyncBuilder;
use dcs_crds::{
    Error, IncrementType, OnOffsetExpired, SinkMode, StartupMode, StdoutFormat, TableRef,
    from_manifest, spec::quote_ident, validate,
};
use serde_json::{Value, json};

const MINIMAL: &str = r#"
apiVersion: dcs.dev/v1alpha1
kind: DorisChangelogSync
metadata:
  name: student-sync
spec:
  source:
    feNodes: ["doris-fe:8030"]
    table: test.student
    credentials: {secretName: doris}
  sink:
    doris:
      feNodes: ["sink-fe:8030"]
      table: sink_db.student
      credentials: {secretName: sink}
"#;

#[test]
fn a_minimal_manifest_gets_every_default() {
    let sync = from_manifest(MINIMAL).unwrap();
    let spec = &sync.spec;
    assert_eq!(spec.source.query_port, 9030);
    assert_eq!(spec.source.flight_sql_port, None);
    assert_eq!(spec.source.credentials.username_key, "username");
    assert_eq!(spec.source.credentials.password_key, "password");
    assert_eq!(spec.startup.mode, StartupMode::Snapshot);
    assert!(!spec.is_incremental());
    assert_eq!(spec.changelog.increment_type, IncrementType::Detail);
    assert_eq!(spec.changelog.poll_interval(), Ok(Duration::from_secs(10)));
    assert_eq!(
        spec.changelog.visible_wait_timeout(),
        Ok(Duration::from_secs(300))
    );
    assert_eq!(spec.checkpoint.interval(), Ok(Duration::from_secs(10)));
    assert_eq!(
        spec.expected_snapshot_duration(),
        Ok(Duration::from_secs(1800))
    );
    assert_eq!(spec.on_offset_expired, OnOffsetExpired::Reinitialize);
    assert!(!spec.suspend);
    assert_eq!(spec.reinit_nonce, "");
    assert_eq!(spec.offsets, None);
    assert_eq!(spec.runner, Default::default());
    let doris = spec.sink.doris.as_ref().unwrap();
    assert!(doris.auto_redirect);
    assert!(doris.enable2pc);
    assert!(doris.enable_delete);
    assert!(doris.ignore_update_before);
    assert_eq!(doris.label_prefix, "dcs");
    assert_eq!(doris.mode, SinkMode::Upsert);
    assert_eq!(doris.batch.max_rows, 50_000);
    assert_eq!(doris.batch.max_bytes(), Ok(10 * 1024 * 1024));
    assert_eq!(doris.batch.interval(), Ok(Duration::from_secs(10)));
    assert_eq!(doris.max_retries, 3);
    assert!(doris.properties.is_empty());
    assert!(doris.create_table.enabled);
    assert!(doris.create_table.properties.is_empty());
    assert_eq!(doris.create_table.auto_partition, None);
    assert_eq!(doris.schema_change, dcs_crds::SchemaChangePolicy::Evolve);
    assert_eq!(doris.dead_letter, None);
    assert_eq!(sync.consumer_id(), "student-sync");
    assert_eq!(doris.table_ref().unwrap().quoted(), "`sink_db`.`student`");

    let stdout: dcs_crds::StdoutSink = serde_json::from_value(json!({})).unwrap();
    assert_eq!(stdout.format, StdoutFormat::Json);
}

#[test]
fn rust_defaults_equal_serde_defaults() {
    let empty = || json!({});
    assert_eq!(
        serde_json::from_value::<dcs_crds::ChangelogSpec>(empty()).unwrap(),
        Default::default()
    );
    assert_eq!(
        serde_json::from_value::<dcs_crds::CheckpointSpec>(empty()).unwrap(),
        Default::default()
    );
    assert_eq!(
        serde_json::from_value::<dcs_crds::BatchSpec>(empty()).unwrap(),
        Default::default()
    );
    assert_eq!(
        serde_json::from_value::<dcs_crds::CreateTableSpec>(empty()).unwrap(),
        Default::default()
    );
    assert_eq!(
        serde_json::from_value::<dcs_crds::StartupSpec>(empty()).unwrap(),
        Default::default()
    );
}

#[test]
fn a_backtick_inside_a_name_is_doubled_when_quoted() {
    // validate() refuses such names in a spec; a TableRef built in code is quoted safely anyway.
    let table = TableRef {
        database: "we`ird".into(),
        table: "t`; DROP TABLE x; --".into(),
    };
    assert_eq!(table.quoted(), "`we``ird`.`t``; DROP TABLE x; --`");
    assert_eq!(quote_ident("a`b"), "`a``b`");
}

#[test]
fn consumer_id_prefers_the_offsets_consumer_id() {
    let sync = SyncBuilder::new()
        .name("student-sync")
        .mode(StartupMode::Initial)
        .offsets("ops.offsets", Some("legacy-flink-job"))
        .build();
    assert_eq!(sync.consumer_id(), "legacy-flink-job");
}

#[test]
fn manifests_of_another_kind_or_shape_are_refused() {
    let other = MINIMAL.replace("kind: DorisChangelogSync", "kind: ConfigMap");
    let err = from_manifest(&other).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the manifest is dcs.dev/v1alpha1/ConfigMap, not dcs.dev/v1alpha1/DorisChangelogSync"
    );
    let broken = MINIMAL.replace("table: test.student", "table: [a, b]");
    assert!(matches!(from_manifest(&broken), Err(Error::Manifest(_))));
}

#[test]
fn an_invalid_manifest_lists_every_error() {
    let bad = SyncBuilder::new()
        .name("student-sync")
        .source_table("student")
        .sink_secret("")
        .yaml();
    let err = from_manifest(&bad).unwrap_err();
    assert_eq!(err.metric_label(), "InvalidSpec");
    assert_eq!(
        err.to_string(),
        "the DorisChangelogSync is invalid:\n  \
         - spec.source.table: \"student\" is not of the form db.table; write the database and the table, e.g. \"test.student\"\n  \
         - spec.sink.doris.credentials.secretName: is empty; name the Secret and the keys of the Doris user and password"
    );
}

/// The spec of MINIMAL as JSON, to change one field at a time.
fn spec() -> Value {
    let value: Value = serde_yaml::from_str(MINIMAL).unwrap();
    value["spec"].clone()
}

fn set(mut spec: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = spec
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no {parent}"))
        .as_object_mut()
        .unwrap();
    if value.is_null() {
        target.remove(key);
    } else {
        target.insert(key.to_owned(), value);
    }
    spec
}

fn errors_of(spec: Value) -> Vec<String> {
    let spec: dcs_crds::DorisChangelogSyncSpec = serde_json::from_value(spec).unwrap();
    match validate(&spec) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn the_minimal_spec_is_valid() {
    assert_eq!(errors_of(spec()), Vec::<String>::new());
}

#[test]
fn each_rule_reports_its_path_and_message() {
    let incremental = || set(spec(), "/startup", json!({"mode": "initial"}));
    let cases: Vec<(Value, &str)> = vec![
        (
            set(spec(), "/source/table", json!("student")),
            r#"spec.source.table: "student" is not of the form db.table; write the database and the table, e.g. "test.student""#,
        ),
        (
            set(spec(), "/source/table", json!("a.b.c")),
            r#"spec.source.table: "a.b.c" is not of the form db.table; write the database and the table, e.g. "test.student""#,
        ),
        (
            set(spec(), "/source/table", json!(".student")),
            r#"spec.source.table: ".student" is not of the form db.table; write the database and the table, e.g. "test.student""#,
        ),
        (
            set(spec(), "/source/table", json!("`test`.`student`")),
            r#"spec.source.table: "`test`.`student`" holds a backtick, white space or a control character; write plain names, e.g. "test.student""#,
        ),
        (
            set(spec(), "/source/table", json!("test\u{0}.student")),
            r#"spec.source.table: "test\0.student" holds a backtick, white space or a control character; write plain names, e.g. "test.student""#,
        ),
        (
            set(spec(), "/sink/doris/table", json!("sink_db.stu\u{7}dent")),
            r#"spec.sink.doris.table: "sink_db.stu\u{7}dent" holds a backtick, white space or a control character; write plain names, e.g. "test.student""#,
        ),
        (
            set(spec(), "/sink/doris/table", json!("")),
            r#"spec.sink.doris.table: "" is not of the form db.table; write the database and the table, e.g. "test.student""#,
        ),
        (
            set(
                spec(),
                "/sink/doris/deadLetter",
                json!({"table": "t_rejected"}),
            ),
            r#"spec.sink.doris.deadLetter.table: "t_rejected" is not of the form db.table; write the database and the table, e.g. "test.student""#,
        ),
        (
            set(
                spec(),
                "/sink/doris/deadLetter",
                json!({"table": "sink_db.student"}),
            ),
            "spec.sink.doris.deadLetter.table: sink_db.student is the sink table itself; name another table, e.g. sink_db.t_rejected",
        ),
        (
            set(
                spec(),
                "/sink/doris/deadLetter",
                json!({"table": "other.t_rejected"}),
            ),
            "spec.sink.doris.deadLetter.table: other.t_rejected is not in the sink table's database sink_db (its loads share the sink's labels and two-phase commit); write it as sink_db.<table>",
        ),
        (
            set(spec(), "/source/feNodes", json!([])),
            r#"spec.source.feNodes: is empty; list at least one endpoint as host:port, e.g. "doris-fe:8030""#,
        ),
        (
            set(
                spec(),
                "/source/feNodes",
                json!(["doris-fe:8030", "http://fe:8030"]),
            ),
            r#"spec.source.feNodes[1]: "http://fe:8030" is not host:port; write the host and the HTTP port without a scheme, e.g. "doris-fe:8030""#,
        ),
        (
            set(spec(), "/source/feNodes", json!(["doris-fe"])),
            r#"spec.source.feNodes[0]: "doris-fe" is not host:port; write the host and the HTTP port without a scheme, e.g. "doris-fe:8030""#,
        ),
        (
            set(spec(), "/source/feNodes", json!(["doris-fe:0"])),
            r#"spec.source.feNodes[0]: "doris-fe:0" is not host:port; write the host and the HTTP port without a scheme, e.g. "doris-fe:8030""#,
        ),
        (
            set(spec(), "/source/queryPort", json!(70000)),
            "spec.source.queryPort: is 70000; a port is between 1 and 65535",
        ),
        (
            set(spec(), "/source/credentials", json!({"secretName": " "})),
            "spec.source.credentials.secretName: is empty; name the Secret and the keys of the Doris user and password",
        ),
        (
            set(
                spec(),
                "/source/credentials",
                json!({"secretName": "s", "passwordKey": ""}),
            ),
            "spec.source.credentials.passwordKey: is empty; name the Secret and the keys of the Doris user and password",
        ),
        (
            set(spec(), "/source/columns", json!([])),
            "spec.source.columns: is empty; list the columns to read, or remove it to read them all",
        ),
        (
            set(spec(), "/source/columns", json!(["id", "`name`"])),
            "spec.source.columns[1]: \"`name`\" is not a column name; write the plain name without backticks",
        ),
        (
            set(spec(), "/source/columns", json!(["id", "na\nme"])),
            "spec.source.columns[1]: \"na\\nme\" holds a control character, which no Doris column name has; write the name as the table's schema shows it",
        ),
        (
            set(incremental(), "/source/filter", json!("age > 18")),
            "spec.source.filter: is only allowed with startup.mode snapshot, and the mode is initial: the changelog cannot be filtered; remove the filter or use mode snapshot",
        ),
        (
            set(spec(), "/startup", json!({"mode": "fromTimestamp"})),
            r#"spec.startup.timestamp: is required with mode fromTimestamp; write where to start as "yyyy-MM-dd HH:mm:ss""#,
        ),
        (
            set(
                spec(),
                "/startup",
                json!({"mode": "latest", "timestamp": "2026-01-01 00:00:00"}),
            ),
            "spec.startup.timestamp: is only allowed with mode fromTimestamp, and the mode is latest; remove it or set mode: fromTimestamp",
        ),
        (
            set(
                spec(),
                "/startup",
                json!({"mode": "fromTimestamp", "timestamp": "2026-01-01T00:00:00"}),
            ),
            r#"spec.startup.timestamp: "2026-01-01T00:00:00" is not of the form yyyy-MM-dd HH:mm:ss, e.g. "2026-01-31 08:00:00""#,
        ),
        (
            set(
                spec(),
                "/startup",
                json!({"mode": "fromTimestamp", "timestamp": "2026-02-30 00:00:00"}),
            ),
            r#"spec.startup.timestamp: "2026-02-30 00:00:00" is not a valid date and time"#,
        ),
        (
            set(spec(), "/changelog", json!({"pollInterval": "500ms"})),
            "spec.changelog.pollInterval: is 500ms; it must be at least 1s",
        ),
        (
            set(spec(), "/changelog", json!({"pollInterval": "10"})),
            r#"spec.changelog.pollInterval: "10" has a number without a unit; add one of ms, s, m, h (e.g. "10s")"#,
        ),
        (
            set(spec(), "/changelog", json!({"visibleWaitTimeout": "1d"})),
            r#"spec.changelog.visibleWaitTimeout: "1d" uses the unknown unit "d"; use ms, s, m or h (e.g. "24h" for a day)"#,
        ),
        (
            set(
                spec(),
                "/offsets",
                json!({"table": "ops.offsets", "consumerId": "c"}),
            ),
            "spec.offsets: is only allowed with an incremental startup.mode (initial, latest or fromTimestamp), and the mode is snapshot; remove it or change the mode",
        ),
        (
            set(incremental(), "/offsets", json!({"table": "ops.offsets"})),
            r#"spec.offsets.consumerId: is required with offsets.table; name the consumer_id row to write, e.g. "student-sync""#,
        ),
        (
            set(incremental(), "/offsets", json!({"consumerId": "c"})),
            r#"spec.offsets.table: is required with offsets.consumerId; name the offset table, e.g. "ops.flink_source_offsets""#,
        ),
        (
            set(
                incremental(),
                "/offsets",
                json!({"table": "offsets", "consumerId": "c"}),
            ),
            r#"spec.offsets.table: "offsets" is not of the form db.table; write the database and the table, e.g. "test.student""#,
        ),
        (
            set(
                incremental(),
                "/offsets",
                json!({"table": "ops.offsets", "consumerId": "my.sync"}),
            ),
            r#"spec.offsets.consumerId: "my.sync" may only hold letters, digits, '_' and '-', because it becomes part of Doris load labels"#,
        ),
        (
            set(spec(), "/checkpoint", json!({"interval": "0s"})),
            r#"spec.checkpoint.interval: is 0s; it must be more than 0s, e.g. "10s""#,
        ),
        (
            set(spec(), "/sink", json!({})),
            "spec.sink: sets no sink; set exactly one of doris or stdout",
        ),
        (
            set(spec(), "/sink/stdout", json!({})),
            "spec.sink: sets both doris and stdout; set exactly one",
        ),
        (
            set(spec(), "/sink/doris/autoRedirect", json!(false)),
            r#"spec.sink.doris.beNodes: is required when autoRedirect is false; list the BE HTTP endpoints, e.g. "doris-be:8040""#,
        ),
        (
            set(spec(), "/sink/doris/beNodes", json!(["be"])),
            r#"spec.sink.doris.beNodes[0]: "be" is not host:port; write the host and the HTTP port without a scheme, e.g. "doris-be:8040""#,
        ),
        (
            set(spec(), "/sink/doris/labelPrefix", json!("my label")),
            r#"spec.sink.doris.labelPrefix: "my label" may only hold letters, digits, '_' and '-', because it becomes part of Doris load labels"#,
        ),
        (
            set(spec(), "/sink/doris/labelPrefix", json!("a".repeat(33))),
            "spec.sink.doris.labelPrefix: is 33 characters long; keep it to 32, because Doris load labels hold at most 128 characters",
        ),
        (
            set(spec(), "/sink/doris/maxRetries", json!(-1)),
            "spec.sink.doris.maxRetries: is -1; it must be 0 or more",
        ),
        (
            set(spec(), "/sink/doris/batch", json!({"maxRows": 0})),
            "spec.sink.doris.batch.maxRows: is 0; it must be more than 0, e.g. 50000",
        ),
        (
            set(spec(), "/sink/doris/batch", json!({"maxBytes": "0Mi"})),
            r#"spec.sink.doris.batch.maxBytes: is 0Mi; it must be more than 0, e.g. "10Mi""#,
        ),
        (
            set(spec(), "/sink/doris/batch", json!({"maxBytes": "10MB"})),
            r#"spec.sink.doris.batch.maxBytes: "10MB" is not a byte quantity; write a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E), e.g. "10Mi""#,
        ),
        (
            set(spec(), "/sink/doris/batch", json!({"interval": "0s"})),
            r#"spec.sink.doris.batch.interval: is 0s; it must be more than 0s, e.g. "10s""#,
        ),
        (
            set(spec(), "/sink/doris/properties", json!({"": "x"})),
            "spec.sink.doris.properties: has an empty key; write the Stream Load header name",
        ),
        (
            set(spec(), "/sink/doris/properties", json!({"label": "mine"})),
            "spec.sink.doris.properties.label: is a Stream Load header dcs sets itself: loads are labelled per checkpoint so retries and restarts are deduplicated; remove it",
        ),
        (
            set(
                spec(),
                "/sink/doris/properties",
                json!({"Two_Phase_Commit": "false"}),
            ),
            "spec.sink.doris.properties.Two_Phase_Commit: is a Stream Load header dcs sets itself: set from enable2pc; the checkpoint protocol commits the loads; remove it",
        ),
        (
            set(
                spec(),
                "/sink/doris/properties",
                json!({"max_filter_ratio": "0.1"}),
            ),
            "spec.sink.doris.properties.max_filter_ratio: is a Stream Load header dcs sets itself: a filtered row would be lost without the sync failing; remove it",
        ),
        (
            set(
                spec(),
                "/sink/doris/properties",
                json!({"strict_mode": "false"}),
            ),
            "spec.sink.doris.properties.strict_mode: is a Stream Load header dcs sets itself: dcs sets it to true, so a value the sink column cannot hold fails the load instead of becoming NULL; remove it",
        ),
        (
            set(
                spec(),
                "/sink/doris/properties",
                json!({"function_column.sequence_col": "v"}),
            ),
            "spec.sink.doris.properties.function_column.sequence_col: is a Stream Load header dcs sets itself: it would make Doris skip or change rows dcs counts as written; remove it",
        ),
        (
            set(
                set(spec(), "/sink/doris/mode", json!("changelog")),
                "/sink/doris/enable2pc",
                json!(false),
            ),
            "spec.sink.doris.enable2pc: is false with mode: changelog; a changelog-mode sink appends every event, so without two-phase commit every restart writes the events since the last checkpoint again (duplicates nobody can tell apart); set enable2pc: true (the default), or use mode: upsert",
        ),
        (
            set(
                spec(),
                "/sink/doris/createTable",
                json!({"autoPartition": {"key": "", "unit": "day"}}),
            ),
            r#"spec.sink.doris.createTable.autoPartition.key: "" is not a column name; write the date column to partition by"#,
        ),
        (
            set(spec(), "/expectedSnapshotDuration", json!("half an hour")),
            r#"spec.expectedSnapshotDuration: "half an hour" is not a duration; write whole numbers with units and nothing else, e.g. "10s", "500ms" or "1h30m""#,
        ),
        (
            set(spec(), "/runner", json!({"image": ""})),
            "spec.runner.image: is empty; remove it to use the operator's default image",
        ),
        (
            set(
                spec(),
                "/runner",
                json!({"env": [{"name": "RUST_LOG", "value": "debug"}, {"name": "DCS_METRICS_ADDR", "value": "$(POD_IP):9000"}]}),
            ),
            "spec.runner.env[1]: DCS_METRICS_ADDR is set by the operator (its --runner-metrics-addr, the chart's runner.metricsAddr) together with the port the pod's probes use; remove it",
        ),
        (
            set(
                spec(),
                "/runner",
                json!({"env": [{"name": "DCS_SINK_TLS_CA_FILE", "value": "/tmp/ca.pem"}]}),
            ),
            "spec.runner.env[0]: DCS_SINK_TLS_CA_FILE is set by the operator from tls.caBundle (the file it mounts the bundle at); remove it and name the bundle in spec.source.tls.caBundle or spec.sink.doris.tls.caBundle",
        ),
        (
            set(
                spec(),
                "/runner",
                json!({"env": [{"name": "DCS_METRICS_ADDR", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}),
            ),
            "spec.runner.env[0]: DCS_METRICS_ADDR is set by the operator (its --runner-metrics-addr, the chart's runner.metricsAddr) together with the port the pod's probes use; remove it",
        ),
        (
            set(
                spec(),
                "/runner",
                json!({"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "other-team", "key": "token"}}}]}),
            ),
            "spec.runner.env[0].valueFrom.secretKeyRef: is not allowed: the runner gets Secrets only as spec.source.credentials and spec.sink.doris.credentials, from Secrets that allow the sync (annotation dcs.dev/allowed-syncs); use a plain value or a configMapKeyRef",
        ),
        (
            set(
                spec(),
                "/runner",
                json!({"resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "512Mi"}}}),
            ),
            "spec.runner.resources.requests.memory: is 1Gi, more than the limit 512Mi (spec.runner.resources.limits.memory); Kubernetes admits no pod whose request is above its limit",
        ),
        (
            set(
                spec(),
                "/runner",
                json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}}),
            ),
            "spec.runner.resources.requests.cpu: is 2, more than the limit 1500m (spec.runner.resources.limits.cpu); Kubernetes admits no pod whose request is above its limit",
        ),
        (
            set(
                spec(),
                "/runner",
                json!({"resources": {"limits": {"memory": "512MB"}}}),
            ),
            r#"spec.runner.resources.limits.memory: "512MB" is not a quantity; write a number with an optional suffix (m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent, e.g. "250m", "0.5" or "512Mi""#,
        ),
    ];
    for (spec, expected) in cases {
        assert_eq!(
            errors_of(spec.clone()),
            vec![expected.to_owned()],
            "spec: {spec}"
        );
    }
}

#[test]
fn allowed_values_pass() {
    let cases: Vec<Value> = vec![
        set(
            spec(),
            "/sink/doris/deadLetter",
            json!({"table": "sink_db.t_rejected"}),
        ),
        set(
            spec(),
            "/changelog",
            json!({"pollInterval": "1s", "visibleWaitTimeout": "0s"}),
        ),
        set(
            spec(),
            "/source/feNodes",
            json!(["10.0.0.1:8030", "[::1]:8030", "fe-0.fe.doris.svc:8030"]),
        ),
        set(spec(), "/source/filter", json!("age > 18")),
        set(
            spec(),
            "/startup",
            json!({"mode": "fromTimestamp", "timestamp": "2024-02-29 23:59:59"}),
        ),
        set(
            spec(),
            "/sink/doris/batch",
            json!({"maxRows": 1, "maxBytes": "1", "interval": "500ms"}),
        ),
        set(
            spec(),
            "/runner",
            json!({"resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "0.5", "memory": "0.5Gi"}}}),
        ),
        set(
            spec(),
            "/runner",
            json!({"resources": {"requests": {"memory": "1G"}, "limits": {"memory": "1Gi", "cpu": 2}}}),
        ),
        set(
            spec(),
            "/runner",
            json!({"env": [{"name": "OTHER", "value": "x:1"}, {"name": "DCS_METRICS_ADDRESS", "value": "y"}]}),
        ),
        set(spec(), "/sink/doris/autoRedirect", json!(false)),
    ];
    // autoRedirect false is only valid with beNodes.
    let mut cases = cases;
    let last = cases.pop().unwrap();
    cases.push(set(last, "/sink/doris/beNodes", json!(["be:8040"])));
    for spec in cases {
        assert_eq!(
            errors_of(spec.clone()),
            Vec::<String>::new(),
            "spec: {spec}"
        );
    }
}

#[test]
fn all_errors_are_collected_in_field_order() {
    let spec = set(
        set(
            set(
                set(spec(), "/source/table", json!("student")),
                "/startup",
                json!({"mode": "fromTimestamp"}),
            ),
            "/changelog",
            json!({"pollInterval": "100ms"}),
        ),
        "/sink",
        json!({}),
    );
    let paths: Vec<String> = {
        let spec: dcs_crds::DorisChangelogSyncSpec = serde_json::from_value(spec).unwrap();
        validate(&spec)
            .unwrap_err()
            .into_iter()
            .map(|e| e.path)
            .collect()
    };
    assert_eq!(
        paths,
        [
            "spec.source.table",
            "spec.startup.timestamp",
            "spec.changelog.pollInterval",
            "spec.sink"
        ]
    );
}

#[test]
fn historical_values_are_required_by_min_delta_and_before_image_sinks() {
    let needs = |spec: Value| {
        let spec: dcs_crds::DorisChangelogSyncSpec = serde_json::from_value(spec).unwrap();
        spec.requires_historical_value()
    };
    assert!(!needs(spec()));
    assert!(needs(set(
        spec(),
        "/changelog",
        json!({"incrementType": "minDelta"})
    )));
    assert!(needs(set(spec(), "/sink/doris/mode", json!("changelog"))));
    assert!(needs(set(
        spec(),
        "/sink/doris/ignoreUpdateBefore",
        json!(false)
    )));
    assert!(!needs(set(spec(), "/sink", json!({"stdout": {}}))));
}

#[test]
fn tls_blocks_are_checked_with_their_paths() {
    let ca = json!({"configMapKeyRef": {"name": "doris-ca", "key": "ca.crt"}});
    let good = set(
        spec(),
        "/source/tls",
        json!({"enabled": true, "caBundle": ca.clone(), "serverName": "doris.example.com"}),
    );
    assert_eq!(errors_of(good), Vec::<String>::new());
    let insecure = set(
        spec(),
        "/sink/doris/tls",
        json!({"enabled": true, "insecureSkipVerify": true}),
    );
    assert_eq!(errors_of(insecure), Vec::<String>::new());

    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            set(
                spec(),
                "/source/tls",
                json!({"enabled": true, "insecureSkipVerify": true, "caBundle": ca.clone()}),
            ),
            vec![
                "spec.source.tls.insecureSkipVerify: contradicts caBundle: keep caBundle to verify the certificates against it, or remove caBundle to skip verification (testing only)",
            ],
        ),
        (
            set(
                spec(),
                "/sink/doris/tls",
                json!({"caBundle": ca.clone(), "serverName": "x"}),
            ),
            vec![
                "spec.sink.doris.tls.caBundle: only applies with TLS on; set enabled: true, or remove it",
                "spec.sink.doris.tls.serverName: only applies with TLS on; set enabled: true, or remove it",
            ],
        ),
        (
            set(
                spec(),
                "/source/tls",
                json!({"enabled": true, "caBundle": {}}),
            ),
            vec![
                "spec.source.tls.caBundle: set exactly one of secretKeyRef or configMapKeyRef, e.g. configMapKeyRef: {name: doris-ca, key: ca.crt}",
            ],
        ),
        (
            set(
                spec(),
                "/source/tls",
                json!({"enabled": true, "caBundle": {"secretKeyRef": {"name": "", "key": " "}}}),
            ),
            vec![
                "spec.source.tls.caBundle.secretKeyRef.name: is empty; name the object holding the CA bundle",
                "spec.source.tls.caBundle.secretKeyRef.key: is empty; name the key holding the PEM, e.g. ca.crt",
            ],
        ),
        (
            set(
                spec(),
                "/source/tls",
                json!({"enabled": true, "serverName": "https://doris:8030"}),
            ),
            vec![
                r#"spec.source.tls.serverName: "https://doris:8030" is not a host name; write the DNS name or IP address the certificates hold, without scheme or port, e.g. "doris.example.com""#,
            ],
        ),
    ];
    for (spec, expected) in cases {
        assert_eq!(errors_of(spec.clone()), expected, "{spec}");
    }
}

#[test]
fn snapshot_parallelism_defaults_to_one_and_is_checked_with_its_path() {
    let sync = from_manifest(MINIMAL).unwrap();
    assert_eq!(sync.spec.snapshot.parallelism, 1);
    assert!(!sync.spec.snapshot.sharded());
    let initial = || set(spec(), "/startup", json!({"mode": "initial"}));
    assert_eq!(
        errors_of(set(initial(), "/snapshot", json!({"parallelism": 4}))),
        Vec::<String>::new()
    );
    assert_eq!(
        errors_of(set(spec(), "/snapshot", json!({"parallelism": 64}))),
        Vec::<String>::new()
    );
    assert_eq!(
        errors_of(set(spec(), "/snapshot", json!({"parallelism": 0}))),
        ["spec.snapshot.parallelism: is 0; it must be between 1 and 64"]
    );
    assert_eq!(
        errors_of(set(spec(), "/snapshot", json!({"parallelism": 65}))),
        ["spec.snapshot.parallelism: is 65; it must be between 1 and 64"]
    );
    assert_eq!(
        errors_of(set(
            set(spec(), "/startup", json!({"mode": "latest"})),
            "/snapshot",
            json!({"parallelism": 4})
        )),
        [
            "spec.snapshot.parallelism: is 4, but startup.mode latest reads no snapshot; remove it or use mode snapshot or initial"
        ]
    );
    // One reader is today's behaviour, whatever the mode.
    assert_eq!(
        errors_of(set(
            set(spec(), "/startup", json!({"mode": "latest"})),
            "/snapshot",
            json!({"parallelism": 1})
        )),
        Vec::<String>::new()
    );
    assert_eq!(
        errors_of(set(
            set(
                initial(),
                "/offsets",
                json!({"table": "ops.offsets", "consumerId": "c"})
            ),
            "/snapshot",
            json!({"parallelism": 2})
        )),
        [
            "spec.snapshot.parallelism: is 2 together with offsets.table, which a sharded snapshot does not support yet (an offset-table row would skip the snapshot the shards read); remove one of them"
        ]
    );
}

#[test]
fn a_schema_change_policy_other_than_evolve_needs_every_column_read() {
    use dcs_crds::SchemaChangePolicy::{Evolve, Fail, Ignore};
    let spec = |policy, columns: Option<&[&str]>| {
        let b = SyncBuilder::new().schema_change(policy);
        match columns {
            Some(c) => b.columns(c),
            None => b,
        }
        .spec()
    };
    for policy in [Evolve, Fail, Ignore] {
        assert_eq!(validate(&spec(policy, None)), Ok(()), "{policy:?}");
    }
    assert_eq!(validate(&spec(Evolve, Some(&["id", "name"]))), Ok(()));
    let errors = validate(&spec(Fail, Some(&["id", "name"]))).unwrap_err();
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "spec.sink.doris.schemaChange: is fail, which applies only when every source column is read; remove source.columns, or schemaChange"
        ]
    );
    let errors = validate(&spec(Ignore, Some(&["id"]))).unwrap_err();
    assert_eq!(
        errors[0].to_string(),
        "spec.sink.doris.schemaChange: is ignore, which applies only when every source column is read; remove source.columns, or schemaChange"
    );
}

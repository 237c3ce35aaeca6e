//! The generated CRD: committed copy up to date, names, printer columns, subresources, CEL rules,
//! and the CEL rules themselves evaluated the way the API server would.

use dcs_crds::DorisChangelogSync;
use kube::CustomResourceExt;
use serde_json::{Value, json};

const CHART_CRD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../charts/dcs-operator/crds/dorischangelogsyncs.yaml"
);

fn schema() -> Value {
    let crd = DorisChangelogSync::crd();
    let version = &crd.spec.versions[0];
    serde_json::to_value(
        version
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap()
}

/// The CEL failures for an object, as `path: message`.
fn cel_failures(object: &Value) -> Vec<String> {
    match kube_cel::Validator::new().validate(&schema(), object, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| format!("{}: {}", e.field_path, e.message))
            .collect(),
    }
}

/// A valid object; tests change one thing at a time.
fn object() -> Value {
    json!({
        "apiVersion": "dcs.dev/v1alpha1",
        "kind": "DorisChangelogSync",
        "metadata": {"name": "student-sync", "namespace": "default"},
        "spec": {
            "source": {
                "feNodes": ["doris-fe:8030"],
                "table": "test.student",
                "credentials": {"secretName": "doris"}
            },
            "startup": {"mode": "initial"},
            "sink": {"stdout": {}}
        }
    })
}

fn with(mut object: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = object.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    if value.is_null() {
        target.remove(key);
    } else {
        target.insert(key.to_owned(), value);
    }
    object
}

#[test]
fn committed_crd_matches_the_generated_one() {
    let generated = dcs_crds::crd_yaml();
    let committed = std::fs::read_to_string(CHART_CRD).unwrap_or_default();
    assert!(
        committed == generated,
        "charts/dcs-operator/crds/dorischangelogsyncs.yaml is out of date; regenerate it with\n  \
         cargo run -p dcs-crds --bin crdgen > charts/dcs-operator/crds/dorischangelogsyncs.yaml"
    );
}

#[test]
fn names_scope_and_subresources() {
    let crd = DorisChangelogSync::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("dorischangelogsyncs.dcs.dev")
    );
    assert_eq!(crd.spec.group, "dcs.dev");
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.kind, "DorisChangelogSync");
    assert_eq!(crd.spec.names.plural, "dorischangelogsyncs");
    assert_eq!(crd.spec.names.short_names, Some(vec!["dcs".to_owned()]));
    assert_eq!(crd.spec.versions.len(), 1);
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.served && version.storage);
    let subresources = version.subresources.as_ref().expect("subresources");
    assert!(subresources.status.is_some(), "status subresource");
    assert!(subresources.scale.is_none());
}

#[test]
fn printer_columns() {
    let crd = DorisChangelogSync::crd();
    let columns: Vec<(String, String, String, i32)> = crd.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .expect("printer columns")
        .iter()
        .map(|c| {
            let priority = c.priority.unwrap_or(0);
            (
                c.name.clone(),
                c.type_.clone(),
                c.json_path.clone(),
                priority,
            )
        })
        .collect();
    let expected = [
        ("Phase", "string", ".status.phase", 0),
        // Sharded snapshots only ("3/4"); empty otherwise.
        ("Shards", "string", ".status.snapshot.shardsDone", 0),
        ("Lag", "integer", ".status.lagSeconds", 0),
        ("TTL-Headroom", "integer", ".status.ttlHeadroomSeconds", 0),
        ("Consumer", "string", ".status.consumerId", 0),
        (
            "Ready",
            "string",
            r#".status.conditions[?(@.type=="Ready")].status"#,
            0,
        ),
        // -o wide only.
        ("Restarts", "integer", ".status.runnerRestarts", 1),
        ("Age", "date", ".metadata.creationTimestamp", 0),
    ]
    .map(|(n, t, p, prio)| (n.to_owned(), t.to_owned(), p.to_owned(), prio));
    assert_eq!(columns, expected);
}

#[test]
fn cel_rules_are_in_the_schema_where_they_belong() {
    let schema = schema();
    let rules = |pointer: &str| -> Vec<String> {
        schema
            .pointer(pointer)
            .unwrap_or_else(|| panic!("no schema at {pointer}"))["x-kubernetes-validations"]
            .as_array()
            .unwrap_or_else(|| panic!("no rules at {pointer}"))
            .iter()
            .map(|r| r["rule"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        rules("/properties/spec"),
        [
            "!has(self.source.filter) || !has(self.startup) || !has(self.startup.mode) || self.startup.mode == 'snapshot'",
            "!has(self.offsets) || (has(self.startup) && has(self.startup.mode) && self.startup.mode != 'snapshot')",
            "!has(self.snapshot) || !has(self.snapshot.parallelism) || self.snapshot.parallelism == 1 || !has(self.startup) || !has(self.startup.mode) || self.startup.mode == 'snapshot' || self.startup.mode == 'initial'",
            "!has(self.source.columns) || !has(self.sink.doris) || !has(self.sink.doris.schemaChange) || self.sink.doris.schemaChange == 'evolve'",
        ]
    );
    assert_eq!(
        rules("/properties/spec/properties/startup"),
        ["has(self.timestamp) == (has(self.mode) && self.mode == 'fromTimestamp')"]
    );
    assert_eq!(
        rules("/properties/spec/properties/changelog/properties/pollInterval"),
        ["!self.matches('^([0-9]+(ms|s|m|h))+$') || duration(self) >= duration('1s')"]
    );
    assert_eq!(
        rules("/properties/spec/properties/sink"),
        ["has(self.doris) != has(self.stdout)"]
    );
    assert_eq!(
        rules("/properties/spec/properties/sink/properties/doris").len(),
        2,
        "the dead-letter rules"
    );
    assert_eq!(
        rules("/properties/spec/properties/offsets"),
        ["has(self.table) == has(self.consumerId)"]
    );
}

#[test]
fn every_cel_rule_compiles() {
    let compiled = kube_cel::compile_schema(&schema());
    let errors: Vec<String> = compiled
        .compilation_errors()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn schema_defaults_match_serde_defaults() {
    let minimal = object();
    let defaulted = kube_cel::apply_defaults(&schema(), &minimal);
    let spec = &defaulted["spec"];
    assert_eq!(spec["startup"]["mode"], "initial");
    assert_eq!(
        spec["changelog"],
        json!({"incrementType": "detail", "pollInterval": "10s", "visibleWaitTimeout": "5m"})
    );
    assert_eq!(spec["checkpoint"], json!({"interval": "10s"}));
    assert_eq!(spec["source"]["queryPort"], 9030);
    assert_eq!(spec["source"]["credentials"]["usernameKey"], "username");
    assert_eq!(spec["expectedSnapshotDuration"], "30m");
    assert_eq!(spec["onOffsetExpired"], "reinitialize");
    assert_eq!(spec["sink"]["stdout"]["format"], "json");

    // What the API server stores deserialises to what serde makes of the raw manifest.
    let from_server: DorisChangelogSync = serde_json::from_value(defaulted).unwrap();
    let from_serde: DorisChangelogSync = serde_json::from_value(minimal).unwrap();
    assert_eq!(from_server, from_serde);

    // And the same for every default of the Doris sink.
    let doris = with(
        object(),
        "/spec/sink",
        json!({"doris": {"feNodes": ["fe:8030"], "table": "a.b", "credentials": {"secretName": "s"}}}),
    );
    let from_server: DorisChangelogSync =
        serde_json::from_value(kube_cel::apply_defaults(&schema(), &doris)).unwrap();
    let from_serde: DorisChangelogSync = serde_json::from_value(doris).unwrap();
    assert_eq!(from_server, from_serde);
}

#[test]
fn cel_accepts_the_valid_object() {
    assert_eq!(cel_failures(&object()), Vec::<String>::new());
    let sharded = with(object(), "/spec/snapshot", json!({"parallelism": 4}));
    assert_eq!(cel_failures(&sharded), Vec::<String>::new());
}

#[test]
fn cel_rejects_cross_field_mistakes() {
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "timestamp without fromTimestamp",
            with(
                object(),
                "/spec/startup/timestamp",
                json!("2026-01-01 00:00:00"),
            ),
            "spec.startup: timestamp is required with mode fromTimestamp and only allowed with it",
        ),
        (
            "timestamp with the default mode",
            with(
                object(),
                "/spec/startup",
                json!({"timestamp": "2026-01-01 00:00:00"}),
            ),
            "spec.startup: timestamp is required with mode fromTimestamp and only allowed with it",
        ),
        (
            "fromTimestamp without timestamp",
            with(object(), "/spec/startup/mode", json!("fromTimestamp")),
            "spec.startup: timestamp is required with mode fromTimestamp and only allowed with it",
        ),
        (
            "pollInterval below 1s",
            with(
                object(),
                "/spec/changelog",
                json!({"pollInterval": "500ms"}),
            ),
            "spec.changelog.pollInterval: pollInterval must be at least 1s",
        ),
        (
            "filter with an incremental mode",
            with(object(), "/spec/source/filter", json!("age > 18")),
            "spec.source.filter: source.filter is only allowed with startup.mode snapshot; the changelog cannot be filtered",
        ),
        (
            "a sharded snapshot with a mode that reads none",
            with(
                with(object(), "/spec/startup/mode", json!("latest")),
                "/spec/snapshot",
                json!({"parallelism": 4}),
            ),
            "spec.snapshot.parallelism: snapshot.parallelism above 1 is only allowed with startup.mode snapshot or initial, the modes that read a snapshot",
        ),
        (
            "two sinks",
            with(
                object(),
                "/spec/sink/doris",
                json!({"feNodes": ["fe:8030"], "table": "a.b", "credentials": {"secretName": "s"}}),
            ),
            "spec.sink: set exactly one sink: doris or stdout",
        ),
        (
            "no sink",
            with(object(), "/spec/sink", json!({})),
            "spec.sink: set exactly one sink: doris or stdout",
        ),
        (
            "schemaChange fail with a fixed column list",
            with(
                with(
                    with(object(), "/spec/sink/stdout", Value::Null),
                    "/spec/sink/doris",
                    json!({"feNodes": ["fe:8030"], "table": "a.b", "credentials": {"secretName": "s"}, "schemaChange": "fail"}),
                ),
                "/spec/source/columns",
                json!(["id", "name"]),
            ),
            "spec.sink.doris.schemaChange: sink.doris.schemaChange fail and ignore apply only when every source column is read; remove source.columns, or schemaChange",
        ),
        (
            "the dead-letter table is the sink table",
            with(
                object(),
                "/spec/sink",
                json!({"doris": {"feNodes": ["fe:8030"], "table": "a.b", "credentials": {"secretName": "s"},
                                 "deadLetter": {"table": "a.b"}}}),
            ),
            "spec.sink.doris.deadLetter.table: deadLetter.table is the sink table itself; name another table, e.g. db.t_rejected",
        ),
        (
            "the dead-letter table in another database",
            with(
                object(),
                "/spec/sink",
                json!({"doris": {"feNodes": ["fe:8030"], "table": "a.b", "credentials": {"secretName": "s"},
                                 "deadLetter": {"table": "c.t_rejected"}}}),
            ),
            "spec.sink.doris.deadLetter.table: deadLetter.table must be in the sink table's database (its loads share the sink's labels and two-phase commit); write it as <sink database>.<table>",
        ),
        (
            "offset table in snapshot mode",
            with(
                with(object(), "/spec/startup", json!({})),
                "/spec/offsets",
                json!({"table": "ops.offsets", "consumerId": "c"}),
            ),
            "spec.offsets: offsets is only allowed with an incremental startup.mode (initial, latest or fromTimestamp)",
        ),
        (
            "offset table without consumer id",
            with(object(), "/spec/offsets", json!({"table": "ops.offsets"})),
            "spec.offsets: offsets.table and offsets.consumerId are set together",
        ),
        (
            "caBundle with insecureSkipVerify",
            with(
                object(),
                "/spec/source/tls",
                json!({"enabled": true, "insecureSkipVerify": true,
                       "caBundle": {"configMapKeyRef": {"name": "ca", "key": "ca.crt"}}}),
            ),
            "spec.source.tls: caBundle and insecureSkipVerify contradict each other: keep caBundle to verify the certificates, or remove it to skip verification",
        ),
        (
            "caBundle without enabled",
            with(
                object(),
                "/spec/source/tls",
                json!({"caBundle": {"secretKeyRef": {"name": "ca", "key": "ca.crt"}}}),
            ),
            "spec.source.tls: caBundle, serverName and insecureSkipVerify only apply with enabled: true",
        ),
        (
            "a caBundle naming both a Secret and a ConfigMap",
            with(
                object(),
                "/spec/source/tls",
                json!({"enabled": true, "caBundle": {
                    "secretKeyRef": {"name": "ca", "key": "ca.crt"},
                    "configMapKeyRef": {"name": "ca", "key": "ca.crt"}}}),
            ),
            "spec.source.tls.caBundle: set exactly one of secretKeyRef or configMapKeyRef",
        ),
    ];
    for (name, object, expected) in cases {
        assert_eq!(cel_failures(&object), vec![expected.to_owned()], "{name}");
    }
}

#[test]
fn cel_accepts_what_the_rules_allow() {
    let cases: Vec<(&str, Value)> = vec![
        (
            "schemaChange evolve with a fixed column list",
            with(
                with(
                    object(),
                    "/spec/sink",
                    json!({"doris": {"feNodes": ["fe:8030"], "table": "a.b", "credentials": {"secretName": "s"},
                                     "schemaChange": "evolve"}}),
                ),
                "/spec/source/columns",
                json!(["id", "name"]),
            ),
        ),
        (
            "schemaChange ignore reading every column",
            with(
                object(),
                "/spec/sink",
                json!({"doris": {"feNodes": ["fe:8030"], "table": "a.b", "credentials": {"secretName": "s"},
                                 "schemaChange": "ignore"}}),
            ),
        ),
        (
            "a dead-letter table next to the sink table",
            with(
                object(),
                "/spec/sink",
                json!({"doris": {"feNodes": ["fe:8030"], "table": "a.b", "credentials": {"secretName": "s"},
                                 "deadLetter": {"table": "a.b_rejected"}}}),
            ),
        ),
        (
            "fromTimestamp with timestamp",
            with(
                object(),
                "/spec/startup",
                json!({"mode": "fromTimestamp", "timestamp": "2026-01-01 00:00:00"}),
            ),
        ),
        (
            "pollInterval exactly 1s",
            with(object(), "/spec/changelog", json!({"pollInterval": "1s"})),
        ),
        (
            "pollInterval 1m",
            with(object(), "/spec/changelog", json!({"pollInterval": "1m"})),
        ),
        (
            "filter in snapshot mode",
            with(
                with(object(), "/spec/startup", json!({"mode": "snapshot"})),
                "/spec/source/filter",
                json!("age > 18"),
            ),
        ),
        (
            "filter with the default mode",
            with(
                with(object(), "/spec/startup", Value::Null),
                "/spec/source/filter",
                json!("age > 18"),
            ),
        ),
        (
            "offsets with initial",
            with(
                object(),
                "/spec/offsets",
                json!({"table": "ops.o", "consumerId": "c"}),
            ),
        ),
        (
            "doris sink alone",
            with(
                object(),
                "/spec/sink",
                json!({"doris": {"feNodes": ["fe:8030"], "table": "a.b", "credentials": {"secretName": "s"}}}),
            ),
        ),
    ];
    for (name, object) in cases {
        assert_eq!(cel_failures(&object), Vec::<String>::new(), "{name}");
    }
}

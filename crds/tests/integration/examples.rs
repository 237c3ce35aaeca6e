//! Every manifest in crds/examples/ reads, validates, and passes the CRD's CEL rules.

use std::path::{Path, PathBuf};

use dcs_crds::{DorisChangelogSync, StartupMode, from_manifest};
use kube::CustomResourceExt;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    files
}

fn read(name: &str) -> DorisChangelogSync {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    from_manifest(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_required_examples_exist() {
    let names: Vec<String> = examples()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for required in [
        "student-initial.yaml",
        "from-timestamp-offset-table.yaml",
        "stdout.yaml",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "missing example {required}; have {names:?}"
        );
    }
}

#[test]
fn every_example_is_a_full_valid_manifest() {
    let crd = DorisChangelogSync::crd();
    let schema = serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap();
    let validator = kube_cel::Validator::new();
    for path in examples() {
        let text = std::fs::read_to_string(&path).unwrap();
        let sync = from_manifest(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            sync.metadata.name.as_deref().is_some_and(|n| !n.is_empty()),
            "{}: metadata.name",
            path.display()
        );
        let raw: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        if let Err(errors) = validator.validate(&schema, &raw, None) {
            panic!("{}: CEL rejects it: {errors:?}", path.display());
        }
    }
}

#[test]
fn the_seed_example_reads_as_intended() {
    let sync = read("student-initial.yaml");
    assert_eq!(sync.spec.source.table, "test.student");
    assert_eq!(sync.spec.startup.mode, StartupMode::Initial);
    let doris = sync.spec.sink.doris.as_ref().unwrap();
    assert_eq!(doris.table, "sink_db.student");
    assert!(doris.enable2pc);
    assert_eq!(
        doris.dead_letter_ref().unwrap().unwrap().to_string(),
        "sink_db.student_rejected"
    );
    assert_eq!(sync.consumer_id(), "student-sync");
}

#[test]
fn the_offset_table_example_reads_as_intended() {
    let sync = read("from-timestamp-offset-table.yaml");
    assert_eq!(sync.spec.startup.mode, StartupMode::FromTimestamp);
    assert_eq!(
        sync.spec.startup.timestamp().unwrap().unwrap().to_string(),
        "2026-11-01T00:00:00"
    );
    let offsets = sync.spec.offsets.as_ref().unwrap();
    assert_eq!(offsets.table.as_deref(), Some("ops.flink_source_offsets"));
    assert_eq!(sync.consumer_id(), "orders-sync");
    assert!(sync.spec.is_incremental());
}

#[test]
fn the_stdout_example_has_only_the_stdout_sink() {
    let sync = read("stdout.yaml");
    assert!(sync.spec.sink.stdout.is_some());
    assert!(sync.spec.sink.doris.is_none());
}

//! Every test builds its syncs and checkpoints with the test kit (`dcs_crds::testing`): a
//! manifest or a checkpoint written out by hand anywhere else in the workspace fails here, so a
//! field added to the API changes one sample, not dozens.

use std::path::{Path, PathBuf};

/// Files that may spell a manifest out, and why.
const MANIFEST_TEXT_ALLOWED: &[(&str, &str)] = &[
    (
        "crds/tests/integration/crd.rs",
        "the schema's defaulting and CEL rules judge raw objects: which fields are absent is the point",
    ),
    (
        "crds/tests/integration/validation.rs",
        "a minimal manifest's defaults, and manifests of the wrong kind or shape",
    ),
    (
        "operator/tests/integration/controller.rs",
        "an object that does not deserialize",
    ),
    (
        "operator/src/reconcile/build.rs",
        "the runner's manifest itself",
    ),
    ("runner/src/demo.rs", "the demo's sync"),
    ("crds/tests/integration/kit.rs", "this check's own examples"),
];

/// Files that may spell a checkpoint out, and why.
const CHECKPOINT_TEXT_ALLOWED: &[(&str, &str)] = &[
    ("crds/src/checkpoint.rs", "the format itself"),
    ("crds/src/testing/checkpoint.rs", "the kit's sample"),
    (
        "runner/src/pipeline/checkpointing.rs",
        "the runner's checkpoints",
    ),
    ("operator/src/reconcile/shards.rs", "the shards' aggregate"),
    ("crds/tests/integration/kit.rs", "this check's own examples"),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Whether `line` (not a comment) writes a manifest's kind or a checkpoint's format version out.
fn spells(line: &str) -> (bool, bool) {
    let code = line.trim_start();
    if code.starts_with("//") {
        return (false, false);
    }
    let manifest = code == "kind: DorisChangelogSync"
        || code.contains("\\nkind: DorisChangelogSync")
        || code.contains("\"kind\": \"DorisChangelogSync\"");
    let checkpoint = code.starts_with("format_version:") || code.contains("\"formatVersion\": ");
    (manifest, checkpoint)
}

#[test]
fn syncs_and_checkpoints_in_tests_come_from_the_kit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for dir in ["crds", "runner", "operator", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let allowed = |list: &[(&str, &str)], file: &str| list.iter().any(|(f, _)| *f == file);
    let mut found = Vec::new();
    for path in &files {
        let file = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let (manifest, checkpoint) = spells(line);
            if manifest && !allowed(MANIFEST_TEXT_ALLOWED, &file) {
                found.push(format!(
                    "{file}:{}: a manifest written out; build it with dcs_crds::testing::SyncBuilder",
                    n + 1
                ));
            }
            if checkpoint && !allowed(CHECKPOINT_TEXT_ALLOWED, &file) {
                found.push(format!(
                    "{file}:{}: a checkpoint written out; build it with dcs_crds::testing::CheckpointBuilder",
                    n + 1
                ));
            }
        }
    }
    assert!(files.len() > 100, "the workspace's sources were found");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_sees_every_way_of_writing_them_out() {
    assert_eq!(spells("kind: DorisChangelogSync"), (true, false));
    assert_eq!(
        spells(r#"  "apiVersion: dcs.dev/v1alpha1\nkind: DorisChangelogSync\nmetadata""#),
        (true, false)
    );
    assert_eq!(spells(r#"  "kind": "DorisChangelogSync","#), (true, false));
    assert_eq!(spells("    format_version: FORMAT_VERSION,"), (false, true));
    assert_eq!(
        spells(r#"  "formatVersion": 1, "consumerId": "s","#),
        (false, true)
    );
    assert_eq!(spells("//! \"formatVersion\": 1,"), (false, false));
    assert_eq!(
        spells("let sync = SyncBuilder::new().yaml();"),
        (false, false)
    );
}

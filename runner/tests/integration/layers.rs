//! The runner's modules import each other in layers, never in circles (docs/ARCHITECTURE.md §3):
//! settings at the bottom, the source and the sink beside each other, the pipeline on top.
//!
//! The check (`tests/layers`, `dcs_layers::problems`) reads `runner/src` as text, unit tests
//! included: every `crate::…` path (grouped `use crate::{a, b}` included) and every `super::…`
//! path is an edge from the file's module to the module it names. It fails on a circle among
//! the top-level modules, on a circle among the children of one module, and on an import that
//! goes up or sideways across [`LAYERS`], naming the files.
//!
//! The pipeline reaches a sink through the `Sink` trait only: a pipeline file that names a
//! concrete sink (a child of `sink` with an `impl … Sink for`, other than the factory
//! [`SINK_FACTORY`]) or a sink's settings ([`SINK_SETTINGS`]) fails it too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use dcs_layers::{Layers, Read, Use};

/// The top-level modules, lowest first. A module may use those of lower layers only.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["settings", "time_zone"],
    &["checkpoint"],
    &["source", "sink", "progress"],
    &["metrics"],
    &["pipeline"],
    &["check", "demo", "launch"],
];

/// The child of `sink` that builds the configured sink from the settings: the one implementation
/// of the trait the pipeline may name.
const SINK_FACTORY: &str = "configured";

/// What names one sink's settings: the pipeline leaves them to the factory too.
const SINK_SETTINGS: &[&str] = &["doris_sink(", "DorisSinkConfig", "SinkConfig::"];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_runner_modules_import_each_other_in_layers_without_circles() {
    let src = src_dir();
    let problems = dcs_layers::problems(
        &src,
        "runner/src",
        Read::All,
        &[Layers {
            module: "",
            layers: LAYERS,
        }],
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text without line comments (doc comments included).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| line.find("//").map_or(line, |i| &line[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `code` implements the `Sink` trait (`impl Sink for`, `impl super::Sink for`, …).
fn implements_sink(code: &str) -> bool {
    code.lines().any(|line| {
        let line = line.trim_start();
        line.starts_with("impl")
            && line
                .split_whitespace()
                .any(|word| word == "Sink" || word.ends_with("::Sink"))
            && line.contains(" for ")
    })
}

/// The children of `sink` that implement the trait, the factory excepted: the concrete sinks.
fn concrete_sinks() -> BTreeSet<String> {
    let root = src_dir();
    let mut files = Vec::new();
    rust_files(&root.join("sink"), &mut files);
    files
        .iter()
        .filter(|f| implements_sink(&code_of(&std::fs::read_to_string(f).unwrap())))
        .filter_map(|f| {
            let relative = f.strip_prefix(root.join("sink")).unwrap();
            let first = relative.iter().next()?.to_string_lossy().into_owned();
            Some(first.trim_end_matches(".rs").to_owned())
        })
        .filter(|m| m != "mod.rs" && m != "mod" && m != SINK_FACTORY)
        .collect()
}

/// The concrete sinks `code` names inside a nested group, `sink::{Sink, doris::DorisSink}`,
/// which the uses (read to the group only) do not show.
fn grouped_under_sink(code: &str, concrete: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("sink::{") {
        let start = from + i + "sink::{".len();
        from = start;
        let mut depth = 0;
        let mut member = String::new();
        for c in code[start..].chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    member.clear();
                    continue;
                }
                _ => {}
            }
            member.push(c);
            let head = member.trim_start();
            if let Some(m) = head.strip_suffix("::")
                && concrete.contains(m)
            {
                found.insert(m.to_owned());
            }
        }
    }
    found
}

/// The pipeline's files that name a module of a concrete sink (`sink::<concrete>…`).
fn pipeline_reaching_past_the_trait(uses: &[Use], concrete: &BTreeSet<String>) -> Vec<String> {
    uses.iter()
        .filter(|u| {
            u.from.first().is_some_and(|m| m == "pipeline")
                && u.to.first().is_some_and(|m| m == "sink")
                && u.to.get(1).is_some_and(|m| concrete.contains(m))
        })
        .map(|u| {
            format!(
                "{} uses {}: the pipeline reaches a sink through the Sink trait only (add what it needs to the trait in runner/src/sink/mod.rs)",
                u.file,
                u.to.join("::")
            )
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[test]
fn a_pipeline_file_naming_a_concrete_sink_is_found() {
    assert!(implements_sink("impl Sink for DorisSink {"));
    assert!(implements_sink("    impl super::Sink for Kafka {"));
    assert!(implements_sink(
        "impl crate::sink::Sink for Arc<Recording> {"
    ));
    assert!(!implements_sink("impl DorisSink {"));
    assert!(!implements_sink("impl From<Sink> for X {"));
    let concrete_doris = BTreeSet::from(["doris".to_owned()]);
    assert_eq!(
        grouped_under_sink(
            "use crate::sink::{Sink, doris::{DorisSink, schema}};",
            &concrete_doris
        ),
        BTreeSet::from(["doris".to_owned()])
    );
    assert_eq!(
        grouped_under_sink(
            "use crate::sink::{Sink, encode::op, rebuild::Rebuild};\nuse dcs_doris_client::x;",
            &concrete_doris
        ),
        BTreeSet::new()
    );
    let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
    let used = |from: &[&str], to: &[&str], file: &str| Use {
        from: path(from),
        to: path(to),
        file: file.to_owned(),
    };
    let concrete = BTreeSet::from(["doris".to_owned(), "kafka".to_owned()]);
    let uses = vec![
        used(
            &["pipeline", "loads"],
            &["sink", "doris", "schema"],
            "runner/src/pipeline/loads.rs",
        ),
        used(&["pipeline"], &["sink", "kafka"], "runner/src/pipeline.rs"),
        // Through the trait, the shared modules and the factory: fine.
        used(&["pipeline"], &["sink"], "runner/src/pipeline.rs"),
        used(
            &["pipeline"],
            &["sink", "configured"],
            "runner/src/pipeline.rs",
        ),
        used(
            &["pipeline", "rows"],
            &["sink", "encode"],
            "runner/src/pipeline/rows.rs",
        ),
        // Another module using a concrete sink is not the pipeline.
        used(
            &["check"],
            &["sink", "doris", "schema"],
            "runner/src/check.rs",
        ),
    ];
    assert_eq!(
        pipeline_reaching_past_the_trait(&uses, &concrete),
        [
            "runner/src/pipeline.rs uses sink::kafka: the pipeline reaches a sink through the Sink trait only (add what it needs to the trait in runner/src/sink/mod.rs)",
            "runner/src/pipeline/loads.rs uses sink::doris::schema: the pipeline reaches a sink through the Sink trait only (add what it needs to the trait in runner/src/sink/mod.rs)",
        ]
    );
}

#[test]
fn the_pipeline_reaches_the_sinks_through_the_trait_only() {
    let concrete = concrete_sinks();
    assert_eq!(
        concrete,
        BTreeSet::from(["doris".to_owned(), "stdout".to_owned()]),
        "the concrete sinks found"
    );
    let root = src_dir();
    let uses = dcs_layers::uses(&root, "runner/src", Read::All);
    let mut problems = pipeline_reaching_past_the_trait(&uses, &concrete);
    let mut files = vec![root.join("pipeline.rs")];
    rust_files(&root.join("pipeline"), &mut files);
    for file in files {
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for m in grouped_under_sink(&code, &concrete) {
            problems.push(format!(
                "runner/src/{} uses sink::{m}: the pipeline reaches a sink through the Sink trait only (add what it needs to the trait in runner/src/sink/mod.rs)",
                file.strip_prefix(&root).unwrap().display()
            ));
        }
        for name in SINK_SETTINGS.iter().filter(|n| code.contains(*n)) {
            problems.push(format!(
                "runner/src/{} names {name}: a sink's settings are read by the sink (built in runner/src/sink/configured.rs)",
                file.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

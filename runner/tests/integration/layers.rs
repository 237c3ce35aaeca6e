//! The runner's modules import each other in layers, never in circles (docs/ARCHITECTURE.md §3):
//! settings at the bottom, the source and the sink beside each other, the pipeline on top.
//!
//! The test reads `runner/src` as text: every `crate::…` path (grouped `use crate::{a, b}`
//! included) and every `super::…` path is an edge from the file's module to the module it names.
//! It fails on a circle among the top-level modules, on a circle among the children of one
//! module, and on an import that goes up or sideways across [`LAYERS`], naming the files. The
//! pipeline reaches a sink through the `Sink` trait only: a pipeline file that names a concrete
//! sink (a child of `sink` with an `impl … Sink for`, other than the factory [`SINK_FACTORY`])
//! or a sink's settings ([`SINK_SETTINGS`]) fails it too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// A module path, e.g. `["sink", "doris", "schema"]`.
type ModPath = Vec<String>;

/// Edges between module paths, each with the files that make it.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
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

/// `sink/doris/mod.rs` → `sink::doris`; `pipeline.rs` → `pipeline`; the crate root → empty.
fn module_of(relative: &Path) -> ModPath {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// The text without comments (line comments and doc comments; block comments are not used).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            // `//` inside a string literal ("http://…") only cuts a line short: it hides no path.
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths after every `prefix` (`crate::` or `super::`): `a::b::c`, and for a group
/// `prefix{a::b, c}` each of its members.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(i) = code[from..].find(prefix) {
        let start = from + i;
        from = start + prefix.len();
        let word_before = start > 0 && {
            let c = bytes[start - 1];
            c.is_ascii_alphanumeric() || c == b'_'
        };
        if word_before {
            continue;
        }
        if code[from..].starts_with('{') {
            let mut depth = 0;
            let mut end = from;
            for (j, c) in code[from..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = from + j;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let mut depth = 0;
            let mut member = String::new();
            for c in code[from + 1..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(split_path(&member));
                        member.clear();
                        continue;
                    }
                    _ => {}
                }
                member.push(c);
            }
        } else {
            let rest: String = code[from..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(split_path(&rest));
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

fn split_path(text: &str) -> Vec<String> {
    text.split("::")
        .map(|s| {
            s.trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .take_while(|s| !s.is_empty())
        .collect()
}

/// The module a path names: its longest prefix that is a module of the crate.
fn resolve(path: &[String], modules: &BTreeSet<ModPath>) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
        .unwrap_or_default()
}

/// Every module-to-module edge of the runner's sources.
fn edges() -> (BTreeSet<ModPath>, Vec<(ModPath, ModPath, String)>) {
    let root = src_dir();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let modules: BTreeSet<ModPath> = files
        .iter()
        .map(|f| module_of(f.strip_prefix(&root).unwrap()))
        .collect();
    let mut out = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap();
        let name = format!("runner/src/{}", relative.display());
        if relative == Path::new("main.rs") {
            continue; // the binary: it uses the library by its name, `dcs_runner::`
        }
        let from = module_of(relative);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for path in paths_after(&code, "crate::") {
            out.push((from.clone(), resolve(&path, &modules), name.clone()));
        }
        for path in paths_after(&code, "super::") {
            let mut full = from[..from.len().saturating_sub(1)].to_vec();
            full.extend(path);
            out.push((from.clone(), resolve(&full, &modules), name.clone()));
        }
    }
    (modules, out)
}

/// The edges between the children of `parent` (top level when empty): `a -> b` when a file in or
/// under `parent::a` names something in or under `parent::b`.
fn child_edges(parent: &[String], all: &[(ModPath, ModPath, String)]) -> Edges {
    let mut out = Edges::new();
    let depth = parent.len();
    for (from, to, file) in all {
        let (Some(a), Some(b)) = (from.get(depth), to.get(depth)) else {
            continue;
        };
        if from.starts_with(parent) && to.starts_with(parent) && a != b {
            out.entry((a.clone(), b.clone()))
                .or_default()
                .insert(file.clone());
        }
    }
    out
}

/// A circle through the graph's nodes, if there is one, as the list of its nodes.
fn find_circle(edges: &Edges) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
    }
    fn visit<'a>(
        node: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|n| *n == node) {
            let mut circle: Vec<String> = stack[i..].iter().map(|s| (*s).to_owned()).collect();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if !done.insert(node) {
            return None;
        }
        stack.push(node);
        for n in next.get(node).into_iter().flatten() {
            if let Some(c) = visit(n, next, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    next.keys()
        .find_map(|n| visit(n, &next, &mut Vec::new(), &mut done))
}

fn describe(circle: &[String], edges: &Edges) -> String {
    circle
        .windows(2)
        .map(|w| {
            let files = &edges[&(w[0].clone(), w[1].clone())];
            format!(
                "{} -> {} ({})",
                w[0],
                w[1],
                files.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
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
        .filter_map(|f| module_of(f.strip_prefix(&root).unwrap()).get(1).cloned())
        .filter(|m| m != SINK_FACTORY)
        .collect()
}

/// The pipeline's files that name a module of a concrete sink (`sink::<concrete>…`).
fn pipeline_reaching_past_the_trait(
    all: &[(ModPath, ModPath, String)],
    concrete: &BTreeSet<String>,
) -> Vec<String> {
    all.iter()
        .filter(|(from, to, _)| {
            from.first().is_some_and(|m| m == "pipeline")
                && to.first().is_some_and(|m| m == "sink")
                && to.get(1).is_some_and(|m| concrete.contains(m))
        })
        .map(|(_, to, file)| {
            format!(
                "{file} uses {}: the pipeline reaches a sink through the Sink trait only (add what it needs to the trait in runner/src/sink/mod.rs)",
                to.join("::")
            )
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[test]
fn the_finder_sees_grouped_and_relative_imports_and_circles() {
    let code = code_of(
        "use crate::{sink::encode::{A, B}, settings};\nlet x = crate::source::tso::now(); // crate::demo\nuse super::batcher::Batcher;",
    );
    let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
    assert_eq!(
        paths_after(&code, "crate::"),
        vec![
            path(&["sink", "encode"]),
            path(&["settings"]),
            path(&["source", "tso", "now"]),
        ]
    );
    assert_eq!(
        paths_after(&code, "super::"),
        vec![path(&["batcher", "Batcher"])]
    );
    let mut circle = Edges::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        circle.insert((a.into(), b.into()), BTreeSet::from(["f.rs".to_owned()]));
    }
    assert_eq!(
        find_circle(&circle),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    circle.remove(&("c".to_owned(), "a".to_owned()));
    assert_eq!(find_circle(&circle), None);
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
    let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
    let concrete = BTreeSet::from(["doris".to_owned(), "kafka".to_owned()]);
    let edges = vec![
        (
            path(&["pipeline", "loads"]),
            path(&["sink", "doris", "schema"]),
            "runner/src/pipeline/loads.rs".to_owned(),
        ),
        (
            path(&["pipeline"]),
            path(&["sink", "kafka"]),
            "runner/src/pipeline.rs".to_owned(),
        ),
        // Through the trait, the shared modules and the factory: fine.
        (
            path(&["pipeline"]),
            path(&["sink"]),
            "runner/src/pipeline.rs".to_owned(),
        ),
        (
            path(&["pipeline"]),
            path(&["sink", "configured"]),
            "runner/src/pipeline.rs".to_owned(),
        ),
        (
            path(&["pipeline", "rows"]),
            path(&["sink", "encode"]),
            "runner/src/pipeline/rows.rs".to_owned(),
        ),
        // Another module using a concrete sink is not the pipeline.
        (
            path(&["check"]),
            path(&["sink", "doris", "schema"]),
            "runner/src/check.rs".to_owned(),
        ),
    ];
    assert_eq!(
        pipeline_reaching_past_the_trait(&edges, &concrete),
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
    let (_, all) = edges();
    let mut problems = pipeline_reaching_past_the_trait(&all, &concrete);
    let root = src_dir();
    let mut files = vec![root.join("pipeline.rs")];
    rust_files(&root.join("pipeline"), &mut files);
    for file in files {
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for name in SINK_SETTINGS.iter().filter(|n| code.contains(*n)) {
            problems.push(format!(
                "runner/src/{} names {name}: a sink's settings are read by the sink (built in runner/src/sink/configured.rs)",
                file.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_runner_modules_import_each_other_in_layers_without_circles() {
    let (modules, all) = edges();
    let mut problems = Vec::new();
    // No circle among the top-level modules, nor among the children of any module.
    for parent in &modules {
        let edges = child_edges(parent, &all);
        if let Some(circle) = find_circle(&edges) {
            let at = if parent.is_empty() {
                "the crate".to_owned()
            } else {
                parent.join("::")
            };
            problems.push(format!("a circle in {at}: {}", describe(&circle, &edges)));
        }
    }
    // Imports go down the layers only.
    let layer_of = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    for ((from, to), files) in child_edges(&[], &all) {
        match (layer_of(&from), layer_of(&to)) {
            (Some(a), Some(b)) if b < a => {}
            (Some(_), Some(_)) => problems.push(format!(
                "{from} uses {to}, which is not in a lower layer ({})",
                files.into_iter().collect::<Vec<_>>().join(", ")
            )),
            _ => problems.push(format!(
                "{from} -> {to}: add the new module to LAYERS in runner/tests/integration/layers.rs and docs/ARCHITECTURE.md §3"
            )),
        }
    }
    let top: BTreeSet<&str> = modules
        .iter()
        .filter_map(|m| m.first())
        .map(String::as_str)
        .collect();
    for m in top {
        if layer_of(m).is_none() {
            problems.push(format!("the module {m} is in no layer: add it to LAYERS"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

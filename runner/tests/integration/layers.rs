//! The runner's modules import each other in layers, never in circles (docs/ARCHITECTURE.md §3):
//! settings at the bottom, the source and the sink beside each other, the pipeline on top.
//!
//! The check (`tests/layers`, `dcs_layers::problems`) reads `runner/src` as text, unit tests
//! included: every `crate::…` path (grouped `use crate::{a, b}` included) and every `super::…`
//! path is an edge from the file's module to the module it names. It fails on a circle among
//! the top-level modules, on a circle among the children of one module, and on an import that
//! goes up or sideways across [`LAYERS`], naming the files.

use std::path::Path;

use dcs_layers::{Layers, Read};

/// The top-level modules, lowest first. A module may use those of lower layers only.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["settings", "time_zone"],
    &["checkpoint"],
    &["source", "sink", "progress"],
    &["metrics"],
    &["pipeline"],
    &["check", "demo"],
];

#[test]
fn the_runner_modules_import_each_other_in_layers_without_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
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

//! The operator's modules import each other in layers, never in circles (docs/ARCHITECTURE.md
//! §1.1, §4): the facts at the bottom, Doris's I/O above them, the reconcile above that, the
//! watch loop on top; inside the reconcile, its pure decisions below its I/O stages below its
//! shell ([`RECONCILE`]).

use std::path::Path;

use dcs_layers::{Layers, Read};

/// The top-level modules, lowest first. A module may use those of lower layers only.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["checkpoint", "facts", "sync_object", "leader", "shutdown"],
    &["probe"],
    &["cleanup"],
    &["reconcile"],
    &["metrics"],
    &["controller"],
];

/// The reconcile's modules, lowest first: the pure decisions, then the I/O stages, then the
/// shell. A module may use those of lower layers only.
const RECONCILE: &[&[&str]] = &[
    // The pure decisions.
    &["names", "stop"],
    &["observed"],
    &["shards"],
    &["plan"],
    &["status", "build"],
    // The I/O stages.
    &["context"],
    &["api", "events", "access"],
    &["shard_configmaps"],
    &["observe"],
    &["teardown"],
    &["reinit", "finalize"],
    &["apply"],
    // The shell.
    &["shell"],
];

#[test]
fn the_operator_modules_import_each_other_in_layers_without_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = dcs_layers::problems(
        &src,
        "operator/src",
        Read::Shipped,
        &[
            Layers {
                module: "",
                layers: LAYERS,
            },
            Layers {
                module: "reconcile",
                layers: RECONCILE,
            },
        ],
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

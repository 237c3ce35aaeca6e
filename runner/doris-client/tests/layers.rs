//! The client's modules import each other in layers, never in circles (docs/ARCHITECTURE.md
//! §1.1): node addresses, URLs as shown, SQL text, TLS, answers' bodies and Doris's `/api`
//! envelope at the bottom; the cluster's nodes above them; a request (following redirects within
//! the cluster) above that; what is built on requests on top.

use std::path::Path;

use dcs_layers::{Layers, Read};

/// The modules, lowest first. A module may use those of lower layers only.
const LAYERS: &[&[&str]] = &[
    &["node", "url", "sql", "tls", "body", "fe_api"],
    &["cluster"],
    &["request"],
    &["answer", "mysql"],
    &["table", "stream_load"],
    &["mysql_target"],
];

#[test]
fn the_client_modules_import_each_other_in_layers_without_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = dcs_layers::problems(
        &src,
        "runner/doris-client/src",
        Read::Shipped,
        &[Layers {
            module: "",
            layers: LAYERS,
        }],
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

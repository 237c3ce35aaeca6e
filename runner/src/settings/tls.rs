//! TLS towards the source and the sink cluster (`spec.source.tls`, `spec.sink.doris.tls`),
//! resolved once into a [`Tls`] each side's connections share.
//!
//! The CA bundle itself is not in the spec (it names a Secret or ConfigMap key): the runner reads
//! the PEM from the file named by [`SOURCE_CA_FILE_ENV`] / [`SINK_CA_FILE_ENV`], where the pod
//! mounts the key, or where a standalone user keeps it.

use std::path::PathBuf;

use dcs_crds::TlsSpec;
pub use dcs_crds::spec::{SINK_CA_FILE_ENV, SOURCE_CA_FILE_ENV};
use dcs_doris_client::tls::Tls;

use crate::{Error, Result};

/// Where the CA bundles are read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// [`SOURCE_CA_FILE_ENV`].
    pub source_ca: Option<PathBuf>,
    /// [`SINK_CA_FILE_ENV`].
    pub sink_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// The files named in the environment (`get` is the process environment in `main`).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Self {
        let path = |name: &str| get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Self {
            source_ca: path(SOURCE_CA_FILE_ENV),
            sink_ca: path(SINK_CA_FILE_ENV),
        }
    }
}

/// One side's TLS from its spec (`field` is `source.tls` or `sink.doris.tls`, `env` the
/// variable naming its CA file). Without `tls.enabled`, plaintext. With it, the CA bundle is
/// read from `ca_file` when given (required when the spec references a `caBundle`); without
/// one the public web roots are trusted.
///
/// # Errors
/// [`Error::Config`] when a `caBundle` is referenced but `env` is not set, the file cannot be
/// read or holds no certificate, or `serverName` is no name.
pub fn resolve(
    spec: Option<&TlsSpec>,
    ca_file: Option<&PathBuf>,
    field: &str,
    env: &str,
) -> Result<Tls> {
    let Some(spec) = spec.filter(|t| t.enabled) else {
        return Ok(Tls::plaintext());
    };
    let config = |reason: String| Error::Config { reason };
    let ca_bundle = match (ca_file, &spec.ca_bundle) {
        (Some(path), _) => {
            let pem = std::fs::read(path).map_err(|e| {
                config(format!(
                    "{field}: cannot read the CA bundle {} ({env}): {e}; set {env} to a readable PEM file",
                    path.display()
                ))
            })?;
            Some((path.display().to_string(), pem))
        }
        (None, Some(bundle)) => {
            return Err(config(format!(
                "{field}.caBundle is set, but {env} is not: set {env} to the path of a PEM file \
                 holding {}",
                bundle.describe()
            )));
        }
        (None, None) => None,
    };
    Tls::from_spec(Some(spec), ca_bundle).map_err(|e| config(format!("{field}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> TlsSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn off_or_absent_is_plaintext() {
        assert!(
            !resolve(None, None, "source.tls", SOURCE_CA_FILE_ENV)
                .unwrap()
                .is_on()
        );
        let off = spec(serde_json::json!({"enabled": false}));
        assert!(
            !resolve(Some(&off), None, "source.tls", SOURCE_CA_FILE_ENV)
                .unwrap()
                .is_on()
        );
    }

    #[test]
    fn a_referenced_bundle_needs_its_file() {
        let s = spec(
            serde_json::json!({"enabled": true, "caBundle": {"configMapKeyRef": {"name": "doris-ca", "key": "ca.crt"}}}),
        );
        let e = resolve(Some(&s), None, "source.tls", SOURCE_CA_FILE_ENV).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid configuration: source.tls.caBundle is set, but DCS_SOURCE_TLS_CA_FILE is not: set \
             DCS_SOURCE_TLS_CA_FILE to the path of a PEM file holding key ca.crt of ConfigMap doris-ca"
        );
        let missing = PathBuf::from("/nonexistent/ca.pem");
        let e = resolve(Some(&s), Some(&missing), "sink.doris.tls", SINK_CA_FILE_ENV).unwrap_err();
        assert!(
            e.to_string()
                .contains("cannot read the CA bundle /nonexistent/ca.pem (DCS_SINK_TLS_CA_FILE)"),
            "{e}"
        );
    }

    #[test]
    fn without_a_bundle_the_web_roots_are_trusted() {
        let s = spec(serde_json::json!({"enabled": true}));
        let t = resolve(Some(&s), None, "source.tls", SOURCE_CA_FILE_ENV).unwrap();
        assert!(t.is_on());
        assert!(t.describe().contains("public web roots"));
    }
}

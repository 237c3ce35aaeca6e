//! Reading a `DorisChangelogSync` from a YAML manifest, as the runner's standalone mode does.

use kube::Resource;

use crate::{error::Error, spec::DorisChangelogSync, validate::validate};

/// Parses a manifest, checks its apiVersion and kind, and validates the spec.
///
/// Serde fills in the defaults the API server would have applied.
///
/// # Errors
/// [`Error::Manifest`] for unreadable YAML, [`Error::WrongKind`] for another object,
/// [`Error::InvalidSpec`] with every field error.
pub fn from_manifest(yaml: &str) -> Result<DorisChangelogSync, Error> {
    let value: serde_yaml::Value = serde_yaml::from_str(yaml).map_err(Error::Manifest)?;
    let field = |name: &str| {
        value
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version != DorisChangelogSync::api_version(&()) || kind != DorisChangelogSync::kind(&())
    {
        return Err(Error::WrongKind { api_version, kind });
    }
    let sync: DorisChangelogSync = serde_yaml::from_value(value).map_err(Error::Manifest)?;
    validate(&sync.spec).map_err(Error::InvalidSpec)?;
    Ok(sync)
}

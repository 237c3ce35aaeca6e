//! The crate's error type.

use crate::validate::FieldError;

/// Why a manifest could not be turned into a valid `DorisChangelogSync`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not YAML, or does not have the shape of the resource.
    #[error("cannot read the DorisChangelogSync manifest: {0}")]
    Manifest(#[source] serde_yaml::Error),
    /// The manifest is some other kind of object.
    #[error("the manifest is {api_version}/{kind}, not dcs.dev/v1alpha1/DorisChangelogSync")]
    WrongKind {
        /// The manifest's apiVersion.
        api_version: String,
        /// The manifest's kind.
        kind: String,
    },
    /// The spec breaks rules; every broken rule is listed.
    #[error("the DorisChangelogSync is invalid:\n{}", list(.0))]
    InvalidSpec(Vec<FieldError>),
}

impl Error {
    /// A short CamelCase label for metrics and condition reasons.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Manifest(_) => "Manifest",
            Self::WrongKind { .. } => "WrongKind",
            Self::InvalidSpec(_) => "InvalidSpec",
        }
    }
}

fn list(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| format!("  - {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

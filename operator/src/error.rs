//! The crate's error type.

/// Everything that can go wrong in the operator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API call failed: {0}")]
    Kube(#[source] kube::Error),
    /// An object could not be serialized.
    #[error("cannot serialize {what}: {source}")]
    Serialize {
        /// What was being serialized.
        what: &'static str,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The sync's credentials Secret is missing or lacks a key.
    #[error("{0}")]
    Credentials(String),
    /// The finalizer machinery failed.
    #[error("finalizer failed: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// Doris state of a sync could not be cleaned up (re-initialisation waits for it).
    #[error("{0}")]
    Cleanup(String),
    /// The object has no namespace or name.
    #[error("the object has no {0}")]
    MissingMetadata(&'static str),
}

impl Error {
    /// A short CamelCase label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube(_) => "Kube",
            Self::Serialize { .. } => "Serialize",
            Self::Credentials(_) => "Credentials",
            Self::Finalizer(_) => "Finalizer",
            Self::MissingMetadata(_) => "MissingMetadata",
            Self::Cleanup(_) => "Cleanup",
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

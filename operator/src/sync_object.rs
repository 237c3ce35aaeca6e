//! A watched `DorisChangelogSync` read tolerantly ([`SyncObject`]): an object whose spec or status
//! does not match the types (e.g. a field of the wrong type stored before the schema was
//! installed) keeps its metadata and the serde error, so the watch loop and the metrics can
//! still name it while the rest keep working.

use std::{borrow::Cow, sync::Arc};

use dcs_crds::DorisChangelogSync;
use k8s_openapi::{NamespaceResourceScope, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::Resource;
use serde::{Deserialize, Deserializer};

/// A watched `DorisChangelogSync`: the typed object, or why it could not be read.
#[derive(Clone, Debug)]
pub struct SyncObject {
    /// The object's metadata (always readable).
    pub metadata: ObjectMeta,
    /// The typed object, or the deserialization error naming the field.
    pub parsed: Result<Arc<DorisChangelogSync>, String>,
}

impl SyncObject {
    /// Reads one object from JSON; only broken metadata is an error.
    ///
    /// # Errors
    /// When `metadata` itself is unreadable.
    pub fn from_value(value: serde_json::Value) -> Result<Self, serde_json::Error> {
        let metadata: ObjectMeta = serde_json::from_value(
            value
                .get("metadata")
                .cloned()
                .unwrap_or(serde_json::Value::Null),
        )?;
        let parsed = serde_path_to_error::deserialize::<_, DorisChangelogSync>(value)
            .map(Arc::new)
            .map_err(|e| {
                let path = e.path().to_string();
                if path.is_empty() || path == "." {
                    e.into_inner().to_string()
                } else {
                    format!("{path}: {}", e.into_inner())
                }
            });
        Ok(Self { metadata, parsed })
    }
}

impl<'de> Deserialize<'de> for SyncObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

impl Resource for SyncObject {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        DorisChangelogSync::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        DorisChangelogSync::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        DorisChangelogSync::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        DorisChangelogSync::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

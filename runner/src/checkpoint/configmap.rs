//! Checkpoints in a ConfigMap, for runners in a pod (`DCS_CHECKPOINT_CONFIGMAP`).
//!
//! The checkpoint JSON lives in the key [`CHECKPOINT_KEY`] of the ConfigMap the operator names, in
//! the pod's namespace. [`CheckpointStore::load`] remembers the ConfigMap's
//! `metadata.resourceVersion`; [`CheckpointStore::save`] replaces (PUT) the ConfigMap with that
//! resourceVersion as the precondition, so a save after anybody else's write answers 409 Conflict
//! and becomes [`Error::Fenced`]. A ConfigMap that does not exist is created on the first save; a
//! create that finds one (someone else was first, or this store never loaded) is fenced too.
//! Labels, annotations, owner references and other keys of the ConfigMap are kept as found.
//!
//! [`CheckpointStore::claim`] writes the annotation [`CLAIM_ANNOTATION`] (this pod and the time) the
//! same way: a runner that starts fences any runner still working from the checkpoint it loaded
//! (a pod that outlived its replacement), before it commits, aborts or loads anything.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use super::{Checkpoint, CheckpointStore};
use crate::{Error, Result};

pub use dcs_crds::checkpoint::CHECKPOINT_KEY;
/// The environment variable naming the ConfigMap.
pub const CONFIGMAP_ENV: &str = "DCS_CHECKPOINT_CONFIGMAP";
/// The environment variable with the pod's namespace (downward API).
pub const NAMESPACE_ENV: &str = "POD_NAMESPACE";
/// The annotation a starting runner writes to take the ConfigMap over: `<pod> at <time>`.
pub const CLAIM_ANNOTATION: &str = "dcs.dev/claimed-by";
/// Where a pod finds its namespace when [`NAMESPACE_ENV`] is not set.
pub const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The namespace the ConfigMap lives in: `POD_NAMESPACE`, else the service account's namespace
/// file, else `default`. Pure: the caller reads the environment and the file.
pub fn resolve_namespace(env: Option<String>, file: Option<String>) -> String {
    [env, file]
        .into_iter()
        .flatten()
        .map(|s| s.trim().to_owned())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

/// What the store knows about the ConfigMap.
#[derive(Debug, Clone)]
enum Seen {
    /// Never loaded: a save must create the ConfigMap (and is fenced if it exists).
    Unknown,
    /// Loaded, and there was none: a save creates it.
    Absent,
    /// Loaded or saved: a save replaces this object, with its resourceVersion as precondition.
    Present(Box<ConfigMap>),
}

/// A ConfigMap holding one sync's checkpoint.
#[derive(Clone)]
pub struct ConfigMapStore {
    api: Api<ConfigMap>,
    namespace: String,
    name: String,
    seen: Seen,
}

impl std::fmt::Debug for ConfigMapStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigMapStore")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ConfigMapStore {
    /// A store for ConfigMap `name` in `namespace`, through `client`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            seen: Seen::Unknown,
        }
    }

    /// A store for ConfigMap `name` in the pod's namespace (see [`resolve_namespace`]), with the
    /// in-cluster (or `KUBECONFIG`) client.
    ///
    /// # Errors
    /// [`Error::CheckpointStore`] when no Kubernetes client can be configured.
    pub async fn from_env(name: &str) -> Result<Self> {
        let namespace = resolve_namespace(
            std::env::var(NAMESPACE_ENV).ok(),
            std::fs::read_to_string(NAMESPACE_FILE).ok(),
        );
        let client = Client::try_default()
            .await
            .map_err(|e| Error::CheckpointStore {
                location: format!("configmap {namespace}/{name}"),
                reason: format!(
                    "cannot configure a Kubernetes client ({e}); run in a pod with a service account or set KUBECONFIG"
                ),
            })?;
        Ok(Self::new(client, &namespace, name))
    }

    /// `configmap <namespace>/<name>`, for messages.
    pub fn location(&self) -> String {
        format!("configmap {}/{}", self.namespace, self.name)
    }

    fn store_error(&self, doing: &str, e: &kube::Error) -> Error {
        Error::CheckpointStore {
            location: self.location(),
            reason: format!("{doing}: {e}"),
        }
    }

    /// The fenced error: the resourceVersion this store last read or wrote, and the one stored
    /// now (best effort).
    async fn fenced(&self) -> Error {
        let expected = match &self.seen {
            Seen::Present(cm) => revision(cm),
            Seen::Absent => "no ConfigMap".to_owned(),
            Seen::Unknown => "no ConfigMap (never loaded)".to_owned(),
        };
        let found = match self.api.get_opt(&self.name).await {
            Ok(Some(cm)) => revision(&cm),
            Ok(None) => "no ConfigMap (deleted)".to_owned(),
            Err(e) => format!("an unreadable ConfigMap ({e})"),
        };
        Error::Fenced { expected, found }
    }
}

/// `resourceVersion <rv>`, for messages.
fn revision(cm: &ConfigMap) -> String {
    format!(
        "resourceVersion {}",
        cm.metadata.resource_version.as_deref().unwrap_or("?")
    )
}

/// The checkpoint JSON in a ConfigMap, if the key is there.
fn stored_json(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get(CHECKPOINT_KEY).map(String::as_str)
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

impl CheckpointStore for ConfigMapStore {
    async fn load(&mut self) -> Result<Option<Checkpoint>> {
        let cm = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.store_error("reading", &e))?;
        let Some(cm) = cm else {
            self.seen = Seen::Absent;
            return Ok(None);
        };
        let checkpoint = stored_json(&cm)
            .map(|json| crate::checkpoint::parse(&self.location(), json))
            .transpose()?;
        self.seen = Seen::Present(Box::new(cm));
        Ok(checkpoint)
    }

    async fn save(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        let json = checkpoint.to_json();
        self.write(|cm| {
            cm.data
                .get_or_insert_with(BTreeMap::new)
                .insert(CHECKPOINT_KEY.to_owned(), json.clone());
        })
        .await
    }

    async fn claim(&mut self) -> Result<()> {
        let pod = std::env::var("HOSTNAME").unwrap_or_else(|_| "dcs-runner".to_owned());
        // Unique per claim (the time has nanoseconds), so a claim read back is known as this one.
        let claim = format!("{pod} at {}", jiff::Timestamp::now());
        self.write(|cm| {
            cm.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(CLAIM_ANNOTATION.to_owned(), claim.clone());
        })
        .await
    }
}

/// How often a write whose answer was lost is looked up and tried again.
const AMBIGUOUS_ATTEMPTS: u32 = 5;

impl ConfigMapStore {
    /// Writes the ConfigMap as last seen, changed by `change`: a replace with the seen
    /// resourceVersion as precondition, or a create when there was none. Anybody else's write in
    /// between (409), or a deletion (404), is [`Error::Fenced`].
    ///
    /// An answer that says nothing about the outcome (a timeout, a reset connection, a 5xx: the
    /// API server may have applied the write and the answer got lost) is never taken for a
    /// failure: the ConfigMap is read back. Holding exactly this write (data, labels and every
    /// annotation), it was applied; unchanged since the write's precondition, it was not, and the
    /// write is tried again (the precondition keeps a retry from overwriting anyone); changed by
    /// someone else in any way, the store is lost: [`Error::FencedAfterUnclearSave`]. That
    /// includes an object holding this write *and* the operator's `dcs.dev/fenced` (or another
    /// runner's claim) written after it: a fenced checkpoint is a lost claim, whatever else it
    /// holds, and the caller then neither commits nor aborts what this checkpoint lists (the new
    /// owner, or the operator's cleanup, settles it). When even the read-back gets no answer, the
    /// result is [`Error::CheckpointSaveUnknown`], with the same rule for the caller.
    async fn write(&mut self, change: impl Fn(&mut ConfigMap)) -> Result<()> {
        // Whether an earlier attempt may have been applied: a 409 may then be that attempt's own
        // write having moved the resourceVersion, so it is read back too.
        let mut maybe_applied = false;
        let mut last = String::new();
        for _ in 0..AMBIGUOUS_ATTEMPTS {
            let (wanted, result) = self.write_once(&change).await;
            match result {
                Ok(cm) => {
                    self.seen = Seen::Present(Box::new(cm));
                    return Ok(());
                }
                Err(WriteError::Refused(e)) => return Err(e),
                Err(WriteError::Fenced) if !maybe_applied => return Err(self.fenced().await),
                Err(WriteError::Fenced) => {}
                Err(WriteError::Ambiguous(e)) => {
                    last = e.to_string();
                    tracing::warn!(error = %last, "checkpoint write got no clear answer; reading it back");
                }
            }
            maybe_applied = true;
            match self.read_back(&wanted, &mut last).await {
                ReadBack::Applied(stored) => {
                    tracing::info!("the checkpoint write had been applied");
                    self.seen = Seen::Present(stored);
                    return Ok(());
                }
                // Not applied: try again under the same precondition.
                ReadBack::NotApplied => {}
                ReadBack::Overwritten(what) => {
                    return Err(Error::FencedAfterUnclearSave { found: what });
                }
                ReadBack::Unreadable => break,
            }
        }
        Err(Error::CheckpointSaveUnknown {
            location: self.location(),
            reason: last,
        })
    }

    /// Read the ConfigMap back after a write without a clear answer (a few attempts, backing
    /// off): whether it holds `wanted`, is as this store last saw it, or was written by someone
    /// else.
    async fn read_back(&self, wanted: &ConfigMap, last: &mut String) -> ReadBack {
        for attempt in 0..AMBIGUOUS_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(100 << attempt.min(5))).await;
            }
            match self.api.get_opt(&self.name).await {
                Ok(stored) if self.unchanged(stored.as_ref()) => return ReadBack::NotApplied,
                Ok(Some(stored)) => {
                    return match changed_by_others(&stored, wanted) {
                        None => ReadBack::Applied(Box::new(stored)),
                        Some(what) => {
                            ReadBack::Overwritten(format!("{} ({what})", revision(&stored)))
                        }
                    };
                }
                Ok(None) => return ReadBack::Overwritten("no ConfigMap (deleted)".to_owned()),
                Err(e) => *last = format!("{last}; reading it back: {e}"),
            }
        }
        ReadBack::Unreadable
    }

    /// One write attempt: what the ConfigMap should hold after it, and the answer.
    async fn write_once(
        &self,
        change: &impl Fn(&mut ConfigMap),
    ) -> (ConfigMap, std::result::Result<ConfigMap, WriteError>) {
        let pp = PostParams {
            field_manager: Some("dcs-runner".into()),
            ..PostParams::default()
        };
        match &self.seen {
            Seen::Present(old) => {
                let mut cm = (**old).clone();
                change(&mut cm);
                // `old` carries the resourceVersion: the API server refuses a stale one with 409.
                let result = match self.api.replace(&self.name, &pp, &cm).await {
                    Ok(cm) => Ok(cm),
                    // 409: someone wrote since; 404: someone deleted it. Either way not ours.
                    Err(e) if is_status(&e, 409) || is_status(&e, 404) => Err(WriteError::Fenced),
                    Err(e) if is_clear_refusal(&e) => {
                        Err(WriteError::Refused(self.store_error("replacing", &e)))
                    }
                    Err(e) => Err(WriteError::Ambiguous(self.store_error("replacing", &e))),
                };
                (cm, result)
            }
            Seen::Unknown | Seen::Absent => {
                let mut cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    ..ConfigMap::default()
                };
                change(&mut cm);
                let result = match self.api.create(&pp, &cm).await {
                    Ok(cm) => Ok(cm),
                    Err(e) if is_status(&e, 409) => Err(WriteError::Fenced),
                    Err(e) if is_clear_refusal(&e) => {
                        Err(WriteError::Refused(self.store_error("creating", &e)))
                    }
                    Err(e) => Err(WriteError::Ambiguous(self.store_error("creating", &e))),
                };
                (cm, result)
            }
        }
    }

    /// Whether `stored` is still what this store last saw (so a lost write was not applied).
    fn unchanged(&self, stored: Option<&ConfigMap>) -> bool {
        match (&self.seen, stored) {
            (Seen::Present(old), Some(cm)) => {
                old.metadata.resource_version.is_some()
                    && old.metadata.resource_version == cm.metadata.resource_version
            }
            (Seen::Absent | Seen::Unknown, None) => true,
            _ => false,
        }
    }
}

/// What reading the ConfigMap back after an unclear write found.
enum ReadBack {
    /// The write is there.
    Applied(Box<ConfigMap>),
    /// Nothing changed since the store last saw it.
    NotApplied,
    /// Someone else wrote (or deleted) it, maybe after this store's write: what is there now.
    Overwritten(String),
    /// No answer.
    Unreadable,
}

/// Why one write attempt did not succeed.
enum WriteError {
    /// Someone else wrote or deleted the ConfigMap.
    Fenced,
    /// Refused before anything was applied (RBAC, an invalid object).
    Refused(Error),
    /// No clear answer: it may or may not have been applied.
    Ambiguous(Error),
}

/// A refusal the API server gives before applying anything (a 4xx other than 408/429): the write
/// was certainly not applied.
fn is_clear_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 408 && s.code != 429)
}

/// What in `stored` is not this store's write `wanted` (pure): `None` when the object is exactly
/// what the write made of it (the checkpoint and every other key, labels, annotations: the
/// claim, and no fence), else what differs, e.g. `annotation dcs.dev/fenced`. Server-managed
/// fields (resourceVersion, managedFields, ...) are not compared.
fn changed_by_others(stored: &ConfigMap, wanted: &ConfigMap) -> Option<String> {
    if stored.data != wanted.data || stored.binary_data != wanted.binary_data {
        return Some(if stored_json(stored) == stored_json(wanted) {
            "other data keys".to_owned()
        } else {
            "another checkpoint".to_owned()
        });
    }
    let (a, b) = (&stored.metadata, &wanted.metadata);
    let empty = BTreeMap::new();
    let (sa, wa) = (
        a.annotations.as_ref().unwrap_or(&empty),
        b.annotations.as_ref().unwrap_or(&empty),
    );
    let annotation = sa
        .iter()
        .filter(|(k, v)| wa.get(*k) != Some(*v))
        .map(|(k, _)| k)
        .chain(wa.keys().filter(|k| !sa.contains_key(*k)))
        .next();
    if let Some(key) = annotation {
        return Some(format!("annotation {key}"));
    }
    if a.labels.as_ref().unwrap_or(&empty) != b.labels.as_ref().unwrap_or(&empty) {
        return Some("labels".to_owned());
    }
    if a.owner_references != b.owner_references || a.deletion_timestamp.is_some() {
        return Some("owner references or deletion".to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_comes_from_the_env_then_the_file_then_default() {
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(resolve_namespace(s("prod"), s("other\n")), "prod");
        assert_eq!(resolve_namespace(None, s("team-a\n")), "team-a");
        assert_eq!(resolve_namespace(s(""), s(" ")), "default");
        assert_eq!(resolve_namespace(None, None), "default");
    }

    fn cm(checkpoint: &str, annotations: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("s-checkpoint".into()),
                resource_version: Some("7".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                CHECKPOINT_KEY.to_owned(),
                checkpoint.to_owned(),
            )])),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_write_read_back_is_ours_only_when_nobody_else_changed_anything() {
        let claim = (CLAIM_ANNOTATION, "pod-a at t1");
        let wanted = cm("{cp 2}", &[claim]);
        let mut stored = cm("{cp 2}", &[claim]);
        stored.metadata.resource_version = Some("9".into());
        assert_eq!(changed_by_others(&stored, &wanted), None);
        // The operator fenced the store after the write was applied: the write is there, the
        // claim too, and it is still lost.
        let fenced = cm("{cp 2}", &[claim, ("dcs.dev/fenced", "deleted at t2")]);
        assert_eq!(
            changed_by_others(&fenced, &wanted).as_deref(),
            Some("annotation dcs.dev/fenced")
        );
        // Another runner's claim over this write.
        let claimed = cm("{cp 2}", &[(CLAIM_ANNOTATION, "pod-b at t3")]);
        assert_eq!(
            changed_by_others(&claimed, &wanted).as_deref(),
            Some("annotation dcs.dev/claimed-by")
        );
        // An annotation removed counts too.
        let unclaimed = cm("{cp 2}", &[]);
        assert_eq!(
            changed_by_others(&unclaimed, &wanted).as_deref(),
            Some("annotation dcs.dev/claimed-by")
        );
        assert_eq!(
            changed_by_others(&cm("{cp 3}", &[claim]), &wanted).as_deref(),
            Some("another checkpoint")
        );
    }
}

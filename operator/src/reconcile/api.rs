//! The few API calls every stage makes the same way: read an object that may be missing, delete
//! one that may be gone, server-side apply one, merge-patch one that may be gone.

use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use serde::{Serialize, de::DeserializeOwned};

use super::context::FIELD_MANAGER;
use crate::{Error, Result};

/// The object `name`, or `None` when there is none.
pub(super) async fn get_opt<K>(api: &Api<K>, name: &str) -> Result<Option<K>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(Error::Kube)
}

/// Deletes `name` in the background; `false` when it was already gone.
pub(super) async fn delete_quietly<K>(api: &Api<K>, name: &str) -> Result<bool>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// Server-side applies `object` as [`FIELD_MANAGER`], forcing conflicts.
pub(super) async fn server_apply<K>(api: &Api<K>, name: &str, object: &K) -> Result<()>
where
    K: Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(Error::Kube)?;
    Ok(())
}

/// Merge-patches `name` with `patch`; an object already gone counts as done.
pub(super) async fn merge_unless_gone<K>(
    api: &Api<K>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<()>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

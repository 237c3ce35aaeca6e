//! A sync's objects by name: the runner workload and its identity, the config ConfigMap and the
//! checkpoint ConfigMap, and the key of the manifest in the config ConfigMap.

/// The key of the effective manifest in the config ConfigMap.
pub const CONFIG_KEY: &str = "sync.yaml";

/// The Deployment or Job, and the ServiceAccount, Role and RoleBinding.
pub fn runner(sync: &str) -> String {
    format!("{sync}-runner")
}

/// The ConfigMap with the effective manifest.
pub fn config(sync: &str) -> String {
    format!("{sync}-runner-config")
}

/// The ConfigMap the runner writes its checkpoint to.
pub fn checkpoint(sync: &str) -> String {
    format!("{sync}-checkpoint")
}

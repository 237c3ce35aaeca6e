//! The resources the server serves: built-in kinds and those added by CustomResourceDefinitions.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

/// What one served version of a custom resource declares.
#[derive(Debug, Clone, Default)]
pub struct CrdVersion {
    /// `schema.openAPIV3Schema`, if any.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns`.
    pub printer_columns: Vec<Value>,
    /// Whether `subresources.status` is declared.
    pub status_subresource: bool,
    /// `subresources.scale`, if declared.
    pub scale: Option<Value>,
}

/// One resource (a plural of one group), with every version it is served at.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    /// API group, empty for core.
    pub group: String,
    /// Served versions, preferred first.
    pub versions: Vec<String>,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Plural resource name, e.g. `pods`.
    pub plural: String,
    /// Singular resource name.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names, e.g. `po`.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Whether `/status` is a separate subresource (the main endpoint then ignores status).
    pub status_subresource: bool,
    /// Whether `metadata.generation` is maintained.
    pub has_generation: bool,
    /// Per-version CRD data; `None` for built-in kinds.
    pub crd: Option<Arc<BTreeMap<String, CrdVersion>>>,
}

impl ResourceInfo {
    /// `plural` or `plural.group`, as errors name resources.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The store key of the resource's objects (events.k8s.io Events share core Events').
    pub fn storage_key(&self) -> String {
        if self.group == "events.k8s.io" && self.kind == "Event" {
            "events".into()
        } else {
            self.group_resource()
        }
    }

    /// `Kind` or `Kind.group`, as Invalid errors name kinds.
    pub fn kind_group(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// `apiVersion` for a version.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// Preferred (first served) version.
    pub fn preferred_version(&self) -> &str {
        &self.versions[0]
    }

    /// Whether this is a custom resource.
    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }

    /// Status subresource for a given version (CRDs may differ per version).
    pub fn has_status(&self, version: &str) -> bool {
        match &self.crd {
            Some(v) => v.get(version).is_some_and(|v| v.status_subresource),
            None => self.status_subresource,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
    generation: bool,
) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        versions: vec![version.into()],
        kind: kind.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: if ["Pod", "Service", "Deployment", "StatefulSet", "Job"].contains(&kind) {
            vec!["all".into()]
        } else {
            vec![]
        },
        status_subresource: status,
        has_generation: generation,
        crd: None,
    }
}

/// The built-in kinds.
pub fn builtins() -> Vec<ResourceInfo> {
    vec![
        builtin(
            "",
            "v1",
            "Namespace",
            "namespaces",
            false,
            &["ns"],
            true,
            false,
        ),
        builtin(
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            true,
            &["cm"],
            false,
            false,
        ),
        builtin("", "v1", "Secret", "secrets", true, &[], false, false),
        builtin("", "v1", "Pod", "pods", true, &["po"], true, true),
        builtin("", "v1", "Service", "services", true, &["svc"], true, false),
        builtin(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["sa"],
            false,
            false,
        ),
        builtin("", "v1", "Event", "events", true, &["ev"], false, false),
        builtin("", "v1", "Node", "nodes", false, &["no"], true, false),
        builtin(
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
            &["ev"],
            false,
            false,
        ),
        builtin(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            &["deploy"],
            true,
            true,
        ),
        builtin(
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            true,
            &["sts"],
            true,
            true,
        ),
        builtin("batch", "v1", "Job", "jobs", true, &[], true, true),
        builtin(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            &[],
            false,
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            true,
            &[],
            false,
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
            &[],
            false,
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
            &[],
            false,
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            &[],
            false,
            false,
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            true,
            true,
        ),
    ]
}

/// All served resources; CRDs are added and removed at run time.
#[derive(Debug)]
pub struct Registry {
    resources: RwLock<Vec<ResourceInfo>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            resources: RwLock::new(builtins()),
        }
    }
}

impl Registry {
    /// The resource served at `group/version/plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<ResourceInfo> {
        self.resources
            .read()
            .iter()
            .find(|r| {
                r.group == group && r.plural == plural && r.versions.iter().any(|v| v == version)
            })
            .cloned()
    }

    /// The resource of a group and plural, any version.
    pub fn find_plural(&self, group: &str, plural: &str) -> Option<ResourceInfo> {
        self.resources
            .read()
            .iter()
            .find(|r| r.group == group && r.plural == plural)
            .cloned()
    }

    /// Every resource.
    pub fn all(&self) -> Vec<ResourceInfo> {
        self.resources.read().clone()
    }

    /// Adds or replaces a custom resource.
    pub fn upsert(&self, info: ResourceInfo) {
        let mut r = self.resources.write();
        r.retain(|x| !(x.group == info.group && x.plural == info.plural));
        r.push(info);
    }

    /// Removes a custom resource.
    pub fn remove(&self, group: &str, plural: &str) {
        self.resources
            .write()
            .retain(|x| !(x.group == group && x.plural == plural && x.is_custom()));
    }

    /// `(group, versions)` for every group, in a stable order, core excluded.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.resources.read().iter().filter(|r| !r.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, vs)) => {
                    for v in &r.versions {
                        if !vs.contains(v) {
                            vs.push(v.clone());
                        }
                    }
                }
                None => out.push((r.group.clone(), r.versions.clone())),
            }
        }
        out
    }
}

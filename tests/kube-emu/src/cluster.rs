//! Object semantics shared by the HTTP handlers, the controllers and the kubelet: creation,
//! updates with optimistic concurrency, patches, server-side apply, deletion with finalizers.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::kinds::{Registry, ResourceInfo};
use crate::patch::{self, PatchType};
use crate::ssa::{self, Scope, Writer};
use crate::status::{ApiError, ApiResult, Cause};
use crate::store::{ObjKey, Store, Write};
use crate::{crd, now};

/// Who a bearer token authenticates as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `admin` or `system:serviceaccount:<ns>:<name>`.
    pub user: String,
    /// Groups, e.g. `system:masters`.
    pub groups: Vec<String>,
}

/// The whole emulated control plane state.
pub struct Cluster {
    /// All objects.
    pub store: Store,
    /// Served resources.
    pub registry: Registry,
    /// Bearer tokens and whom they authenticate.
    pub tokens: RwLock<HashMap<String, Identity>>,
    /// Node name pods are bound to when the kubelet runs.
    pub node_name: Option<String>,
    /// `host:port` of the API server, once listening.
    pub address: RwLock<String>,
    /// PEM of the CA the server's certificate is signed with.
    pub ca_pem: RwLock<String>,
    /// Wakes the garbage collector.
    pub gc_wake: Notify,
    /// Pod logs by `namespace/name/container`, filled by the kubelet.
    pub logs: RwLock<HashMap<String, Arc<RwLock<Vec<u8>>>>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("store", &self.store)
            .finish()
    }
}

/// Addresses an object of a resource at a version.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The resource.
    pub info: &'a ResourceInfo,
    /// The request's version.
    pub version: &'a str,
    /// Namespace ("" for cluster-scoped).
    pub ns: &'a str,
    /// Name.
    pub name: &'a str,
}

impl Target<'_> {
    fn key(&self) -> ObjKey {
        ObjKey::new(self.info.storage_key(), self.ns, self.name)
    }
}

/// How a write is made.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    /// Field manager recorded in managedFields.
    pub manager: String,
    /// Compute and validate, store nothing.
    pub dry_run: bool,
    /// `status` for the status subresource.
    pub subresource: Option<String>,
    /// Server-side apply `force`.
    pub force: bool,
    /// The object already carries the managedFields of a server-side apply.
    pub applied: bool,
    /// `fieldValidation=Strict`: unknown fields are an error instead of being dropped.
    pub strict: bool,
}

/// `propagationPolicy` of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Dependents are collected after the owner is gone.
    #[default]
    Background,
    /// The owner waits (with the `foregroundDeletion` finalizer) until its dependents are gone.
    Foreground,
    /// Dependents lose their ownerReference to the owner and stay.
    Orphan,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// Propagation policy.
    pub propagation: Propagation,
    /// `gracePeriodSeconds` (pods).
    pub grace_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// Compute only.
    pub dry_run: bool,
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// Gone now; the last state of the object.
    Now(Value),
    /// Marked for deletion, waiting on finalizers or graceful termination.
    Pending(Value),
}

const NAME_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    let mut rng = rand::rng();
    (0..5)
        .map(|_| NAME_CHARS[rng.random_range(0..NAME_CHARS.len())] as char)
        .collect()
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

/// The parts of an object whose change bumps metadata.generation.
fn spec_part(obj: &Value, status_separate: bool) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
        if status_separate {
            m.remove("status");
        }
    }
    o
}

fn without_volatile(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o["metadata"].as_object_mut() {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    o
}

impl Cluster {
    /// A fresh cluster with the default namespaces.
    pub fn new(history: usize, node_name: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            store: Store::new(history),
            registry: Registry::default(),
            tokens: RwLock::new(HashMap::new()),
            node_name,
            address: RwLock::new(String::new()),
            ca_pem: RwLock::new(String::new()),
            gc_wake: Notify::new(),
            logs: RwLock::new(HashMap::new()),
        })
    }

    /// Creates the namespaces every cluster has.
    pub fn bootstrap(&self) {
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let info = self
                .registry
                .find("", "v1", "namespaces")
                .expect("built in");
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let _ = self.create(
                &info,
                "v1",
                "",
                obj,
                &WriteOpts {
                    manager: "kube-emu".into(),
                    ..Default::default()
                },
            );
        }
        if let Some(node) = &self.node_name {
            let info = self.registry.find("", "v1", "nodes").expect("built in");
            let obj = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}], "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}});
            let _ = self.create(
                &info,
                "v1",
                "",
                obj,
                &WriteOpts {
                    manager: "kube-emu".into(),
                    ..Default::default()
                },
            );
        }
    }

    /// Registers resources of every stored CRD (after loading persisted state).
    pub fn register_stored_crds(&self) {
        for (_, crd) in self
            .store
            .list("customresourcedefinitions.apiextensions.k8s.io", None)
            .0
        {
            if let Ok(info) = crd::resource_of(&crd) {
                self.registry.upsert(info);
            }
        }
    }

    /// Presents a stored object at the requested version.
    pub fn present(info: &ResourceInfo, version: &str, obj: Value) -> Value {
        let mut obj = crate::events::from_storage(info, obj);
        obj["apiVersion"] = json!(info.api_version(version));
        obj["kind"] = json!(info.kind);
        obj
    }

    /// Reads one object.
    pub fn get(&self, t: Target<'_>) -> ApiResult<Value> {
        self.store
            .get(&t.key())
            .map(|o| Self::present(t.info, t.version, o))
            .ok_or_else(|| ApiError::not_found(&t.info.group_resource(), t.name))
    }

    fn check_namespace(&self, ns: &str, creating: bool) -> ApiResult<()> {
        match self.store.get(&ObjKey::new("namespaces", "", ns)) {
            None => Err(ApiError::not_found("namespaces", ns)),
            Some(n) if creating && n.pointer("/metadata/deletionTimestamp").is_some() => {
                Err(ApiError::forbidden(format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                )))
            }
            Some(_) => Ok(()),
        }
    }

    fn scope(info: &ResourceInfo, version: &str, subresource: Option<&str>) -> Scope {
        match (info.has_status(version), subresource) {
            (true, Some("status")) => Scope::StatusOnly,
            (true, _) => Scope::NoStatus,
            (false, _) => Scope::All,
        }
    }

    /// Creates an object.
    pub fn create(
        &self,
        info: &ResourceInfo,
        version: &str,
        ns: &str,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> ApiResult<Value> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be an object",
            ));
        }
        if let Some(kind) = obj.get("kind").and_then(Value::as_str)
            && kind != info.kind
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({})",
                obj["apiVersion"].as_str().unwrap_or_default(),
                info.api_version(version)
            )));
        }
        obj = crate::events::to_storage(info, Self::present(info, version, obj));
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        if info.namespaced {
            match str_at(&obj, "/metadata/namespace") {
                Some(n) if !n.is_empty() && n != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => obj["metadata"]["namespace"] = json!(ns),
            }
            self.check_namespace(ns, true)?;
        } else if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        let mut name = str_at(&obj, "/metadata/name")
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            match str_at(&obj, "/metadata/generateName") {
                Some(g) if !g.is_empty() => name = format!("{g}{}", random_suffix()),
                _ => {
                    return Err(ApiError::invalid(
                        &info.kind_group(),
                        "",
                        vec![Cause {
                            reason: "FieldValueRequired",
                            field: "metadata.name".into(),
                            message: "Required value: name or generateName is required".into(),
                        }],
                    ));
                }
            }
        }
        if !is_dns_subdomain(&name) {
            return Err(ApiError::invalid(
                &info.kind_group(),
                &name,
                vec![Cause {
                    reason: "FieldValueInvalid",
                    field: "metadata.name".into(),
                    message: format!(
                        "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
                    ),
                }],
            ));
        }
        let meta = obj["metadata"].as_object_mut().expect("made an object");
        meta.insert("name".into(), json!(name));
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now()));
        for k in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(k);
        }
        if !opts.applied {
            meta.remove("managedFields");
        }
        if info.has_generation {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
        if info.has_status(version)
            && info.is_custom()
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        crate::admission::admit(self, info, version, &mut obj, None, opts.strict)?;
        let av = info.api_version(version);
        if !opts.applied {
            let w = Writer {
                manager: &opts.manager,
                api_version: &av,
                subresource: "",
                now: &now(),
            };
            ssa::record_update(None, &mut obj, &w, Scope::All);
        }
        let key = ObjKey::new(info.storage_key(), ns_of(info, ns), &name);
        if opts.dry_run {
            return match self.store.get(&key) {
                Some(_) => Err(ApiError::already_exists(&info.group_resource(), &name)),
                None => Ok(obj),
            };
        }
        let gr = info.group_resource();
        let stored = self
            .store
            .mutate(&key, |cur| match cur {
                Some(_) => Err(ApiError::already_exists(&gr, &name)),
                None => Ok(Write::Put(obj)),
            })?
            .expect("put returns the object");
        self.after_write(info, &stored);
        Ok(Self::present(info, version, stored))
    }

    fn after_write(&self, info: &ResourceInfo, obj: &Value) {
        match (info.group.as_str(), info.kind.as_str()) {
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                if obj.pointer("/metadata/deletionTimestamp").is_none()
                    && let Ok(r) = crd::resource_of(obj)
                {
                    self.registry.upsert(r);
                }
            }
            ("", "Namespace") => {
                let ns = str_at(obj, "/metadata/name").unwrap_or_default();
                if obj.pointer("/metadata/deletionTimestamp").is_none()
                    && let Some(sa) = self.registry.find("", "v1", "serviceaccounts")
                {
                    let key = ObjKey::new("serviceaccounts", ns, "default");
                    if self.store.get(&key).is_none() {
                        let o = json!({"metadata": {"name": "default"}});
                        let _ = self.create(
                            &sa,
                            "v1",
                            ns,
                            o,
                            &WriteOpts {
                                manager: "kube-emu".into(),
                                ..Default::default()
                            },
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// Writes a new full object computed from the current one: the core of update and patch.
    /// `compute` returns the desired object and whether it already carries its managedFields.
    fn modify<F>(&self, t: Target<'_>, opts: &WriteOpts, compute: F) -> ApiResult<Value>
    where
        F: FnOnce(&Value) -> ApiResult<(Value, bool)>,
    {
        let info = t.info;
        let gr = info.group_resource();
        let sub = opts.subresource.as_deref();
        let scope = Self::scope(info, t.version, sub);
        let av = info.api_version(t.version);
        let ts = now();
        let writer = Writer {
            manager: &opts.manager,
            api_version: &av,
            subresource: sub.unwrap_or_default(),
            now: &ts,
        };
        let mut dry: Option<Value> = None;
        let result = self.store.mutate(&t.key(), |cur| {
            let Some(cur) = cur else { return Err(ApiError::not_found(&gr, t.name)) };
            let (mut proposed, managed_done) = compute(&Self::present(info, t.version, cur.clone()))?;
            if !proposed.is_object() {
                return Err(ApiError::bad_request("the body of the request must be an object"));
            }
            if let Some(n) = str_at(&proposed, "/metadata/name")
                && n != t.name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({})",
                        t.name
                    )));
                }
            if let Some(rv) = str_at(&proposed, "/metadata/resourceVersion")
                && !rv.is_empty() && Some(rv) != str_at(cur, "/metadata/resourceVersion") {
                    return Err(ApiError::conflict(&gr, t.name, ApiError::STALE));
                }
            // Keep what a client cannot change, and what this endpoint does not own.
            let mut new = match scope {
                Scope::StatusOnly => {
                    let mut n = cur.clone();
                    match proposed.get("status").filter(|s| !s.is_null()) {
                        Some(st) => n["status"] = st.clone(),
                        None => {
                            if let Some(m) = n.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                    if let Some(mf) = proposed.pointer("/metadata/managedFields").filter(|_| managed_done) {
                        n["metadata"]["managedFields"] = mf.clone();
                    }
                    n
                }
                Scope::NoStatus => {
                    match cur.get("status") {
                        Some(s) => proposed["status"] = s.clone(),
                        None => {
                            if let Some(m) = proposed.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                    proposed
                }
                Scope::All => proposed,
            };
            new = crate::events::to_storage(info, Self::present(info, t.version, new));
            if !new["metadata"].is_object() {
                new["metadata"] = json!({});
            }
            for k in ["name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
                match cur["metadata"].get(k) {
                    Some(v) => new["metadata"][k] = v.clone(),
                    None => {
                        if let Some(m) = new["metadata"].as_object_mut() {
                            m.remove(k);
                        }
                    }
                }
            }
            if !managed_done {
                match cur.pointer("/metadata/managedFields") {
                    Some(mf) => new["metadata"]["managedFields"] = mf.clone(),
                    None => {
                        if let Some(m) = new["metadata"].as_object_mut() {
                            m.remove("managedFields");
                        }
                    }
                }
            }
            if cur.pointer("/metadata/deletionTimestamp").is_some() {
                // Finalizers may only be removed once deletion started.
                let old_f = cur.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
                let new_f = new.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
                if new_f.iter().any(|f| !old_f.contains(f)) {
                    return Err(ApiError::forbidden(format!(
                        "{gr} \"{}\" is forbidden: no new finalizers can be added if the object is being deleted",
                        t.name
                    )));
                }
            }
            crate::admission::admit(self, info, t.version, &mut new, Some(cur), opts.strict)?;
            if info.has_generation && spec_part(cur, info.has_status(t.version)) != spec_part(&new, info.has_status(t.version)) {
                let g = cur.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
                new["metadata"]["generation"] = json!(g + 1);
            }
            if !managed_done {
                ssa::record_update(Some(cur), &mut new, &writer, scope);
            }
            let deleting = new.pointer("/metadata/deletionTimestamp").is_some();
            let finalizers_left = new.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
            if opts.dry_run {
                dry = Some(new);
                return Ok(Write::Keep);
            }
            if deleting && !finalizers_left && !(info.kind == "Pod" && info.group.is_empty() && self.node_name.is_some()) && info.kind != "Namespace" {
                return Ok(Write::Delete);
            }
            if without_volatile(&new) == without_volatile(cur) {
                return Ok(Write::Keep);
            }
            Ok(Write::Put(new))
        })?;
        if let Some(d) = dry {
            return Ok(d);
        }
        let stored = result.expect("modify returns the object");
        self.after_write(info, &stored);
        // A write that starts or ends a deletion wakes the collector at once; other changes
        // (ownerReferences among them) are seen by its periodic pass.
        if stored.pointer("/metadata/deletionTimestamp").is_some() {
            self.gc_wake.notify_one();
        }
        Ok(Self::present(info, t.version, stored))
    }

    /// Replaces an object (PUT).
    pub fn update(&self, t: Target<'_>, obj: Value, opts: &WriteOpts) -> ApiResult<Value> {
        if let Some(kind) = obj.get("kind").and_then(Value::as_str)
            && kind != t.info.kind
        {
            return Err(ApiError::bad_request(format!(
                "kind {kind} does not match {}",
                t.info.kind
            )));
        }
        self.modify(t, opts, |_| Ok((obj, false)))
    }

    /// Patches an object; a server-side apply to a missing object creates it.
    pub fn patch(
        &self,
        t: Target<'_>,
        ty: PatchType,
        body: &Value,
        opts: &WriteOpts,
    ) -> ApiResult<Value> {
        let info = t.info;
        let av = info.api_version(t.version);
        if ty == PatchType::Strategic && info.is_custom() {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        if ty == PatchType::Apply {
            if opts.manager.is_empty() {
                return Err(ApiError::bad_request(
                    "PATCH, application/apply-patch+yaml requires fieldManager to be set",
                ));
            }
            let sub = opts.subresource.as_deref();
            let scope = Self::scope(info, t.version, sub);
            if let Some(kind) = body.get("kind").and_then(Value::as_str)
                && (kind != info.kind
                    || body.get("apiVersion").and_then(Value::as_str) != Some(av.as_str()))
            {
                return Err(ApiError::bad_request(format!(
                    "invalid object type: {}, Kind={kind}",
                    body["apiVersion"].as_str().unwrap_or_default()
                )));
            }
            if self.store.get(&t.key()).is_none() && sub.is_none() {
                let ts = now();
                let w = Writer {
                    manager: &opts.manager,
                    api_version: &av,
                    subresource: "",
                    now: &ts,
                };
                let mut obj = ssa::apply(None, body, &w, opts.force, Scope::All)
                    .map_err(|_| ApiError::internal("apply"))?;
                obj["metadata"]["name"] = json!(t.name);
                let created = self.create(
                    info,
                    t.version,
                    t.ns,
                    obj,
                    &WriteOpts {
                        applied: true,
                        ..opts.clone()
                    },
                )?;
                return Ok(Self::present(info, t.version, created));
            }
            let gr = info.group_resource();
            let force = opts.force;
            let manager = opts.manager.clone();
            return self.modify(t, opts, move |cur| {
                let ts = now();
                let w = Writer {
                    manager: &manager,
                    api_version: &av,
                    subresource: sub.unwrap_or_default(),
                    now: &ts,
                };
                let mut applied = body.clone();
                if let Some(m) = applied["metadata"].as_object_mut() {
                    m.remove("resourceVersion");
                }
                let obj = ssa::apply(Some(cur), &applied, &w, force, scope)
                    .map_err(|c| ApiError::apply_conflict(&gr, t.name, &c))?;
                Ok((obj, true))
            });
        }
        self.modify(t, opts, |cur| {
            let mut obj = cur.clone();
            match ty {
                PatchType::Json => patch::json_patch(&mut obj, body)?,
                PatchType::Merge => patch::merge_patch(&mut obj, body)?,
                PatchType::Strategic => patch::strategic_merge(&mut obj, body)?,
                PatchType::Apply => unreachable!("handled above"),
            }
            // A resourceVersion in the patch is a precondition; otherwise the patch applies to
            // whatever is current.
            let patched_rv = obj.pointer("/metadata/resourceVersion").cloned();
            if patched_rv == cur.pointer("/metadata/resourceVersion").cloned()
                && let Some(m) = obj["metadata"].as_object_mut()
            {
                m.remove("resourceVersion");
            }
            Ok((obj, false))
        })
    }

    /// Deletes an object, honouring finalizers, graceful pod termination and propagation.
    pub fn delete(&self, t: Target<'_>, opts: &DeleteOpts) -> ApiResult<Deleted> {
        let info = t.info;
        let gr = info.group_resource();
        let is_pod = info.group.is_empty() && info.kind == "Pod";
        let is_ns = info.group.is_empty() && info.kind == "Namespace";
        let kubelet = self.node_name.is_some();
        if opts.propagation == Propagation::Orphan
            && !opts.dry_run
            && let Some(uid) = self
                .store
                .get(&t.key())
                .and_then(|o| str_at(&o, "/metadata/uid").map(String::from))
        {
            self.orphan_dependents(&uid);
        }
        let mut pending = false;
        let mut dry = None;
        let res = self.store.mutate(&t.key(), |cur| {
            let Some(cur) = cur else { return Err(ApiError::not_found(&gr, t.name)) };
            if let Some(uid) = &opts.uid
                && Some(uid.as_str()) != str_at(cur, "/metadata/uid") {
                    return Err(ApiError::conflict(&gr, t.name, &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        str_at(cur, "/metadata/uid").unwrap_or_default()
                    )));
                }
            if let Some(rv) = &opts.resource_version
                && Some(rv.as_str()) != str_at(cur, "/metadata/resourceVersion") {
                    return Err(ApiError::conflict(&gr, t.name, &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        str_at(cur, "/metadata/resourceVersion").unwrap_or_default()
                    )));
                }
            let mut obj = cur.clone();
            let mut finalizers: Vec<Value> = obj.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
            if opts.propagation == Propagation::Foreground && !finalizers.contains(&json!("foregroundDeletion")) {
                finalizers.push(json!("foregroundDeletion"));
                obj["metadata"]["finalizers"] = json!(finalizers);
            }
            let graceful_pod = is_pod
                && kubelet
                && opts.grace_seconds != Some(0)
                && !matches!(str_at(cur, "/status/phase"), Some("Succeeded") | Some("Failed"));
            if is_pod && kubelet && cur.pointer("/metadata/deletionTimestamp").is_some() && opts.grace_seconds == Some(0) && finalizers.is_empty() {
                // The kubelet's final delete after the containers stopped.
                if opts.dry_run {
                    dry = Some(cur.clone());
                    return Ok(Write::Keep);
                }
                return Ok(Write::Delete);
            }
            if !finalizers.is_empty() || graceful_pod || is_ns {
                pending = true;
                if obj.pointer("/metadata/deletionTimestamp").is_none() {
                    let grace = if graceful_pod {
                        opts.grace_seconds
                            .or_else(|| cur.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64))
                            .unwrap_or(30)
                    } else {
                        0
                    };
                    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(grace);
                    obj["metadata"]["deletionTimestamp"] = json!(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
                    obj["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
                    if is_ns {
                        obj["status"]["phase"] = json!("Terminating");
                    }
                } else if obj == *cur {
                    return Ok(Write::Keep);
                }
                if opts.dry_run {
                    dry = Some(obj);
                    return Ok(Write::Keep);
                }
                return Ok(Write::Put(obj));
            }
            if opts.dry_run {
                dry = Some(cur.clone());
                return Ok(Write::Keep);
            }
            Ok(Write::Delete)
        })?;
        if let Some(d) = dry {
            return Ok(if pending {
                Deleted::Pending(d)
            } else {
                Deleted::Now(d)
            });
        }
        let obj = Self::present(info, t.version, res.expect("delete returns the object"));
        self.gc_wake.notify_one();
        if pending {
            return Ok(Deleted::Pending(obj));
        }
        self.after_delete(info, &obj);
        Ok(Deleted::Now(obj))
    }

    fn after_delete(&self, info: &ResourceInfo, obj: &Value) {
        if info.group == "apiextensions.k8s.io"
            && info.kind == "CustomResourceDefinition"
            && let Ok(r) = crd::resource_of(obj)
        {
            for (k, _) in self.store.list(&r.group_resource(), None).0 {
                let _ = self.store.mutate(&k, |_| Ok(Write::Delete));
            }
            self.registry.remove(&r.group, &r.plural);
        }
    }

    /// Removes the ownerReferences to `uid` from every object.
    fn orphan_dependents(&self, uid: &str) {
        for (k, o) in self.store.all() {
            let owned = o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|r| r["uid"] == uid));
            if owned {
                let _ = self.store.mutate(&k, |cur| {
                    let Some(cur) = cur else {
                        return Ok(Write::Keep);
                    };
                    let mut c = cur.clone();
                    if let Some(refs) = c["metadata"]["ownerReferences"].as_array_mut() {
                        refs.retain(|r| r["uid"] != uid);
                    }
                    Ok(Write::Put(c))
                });
            }
        }
    }

    /// Internal write of a whole object by a controller (status included), with retries on
    /// conflicts left to the caller.
    pub fn put_internal(
        &self,
        key: &ObjKey,
        f: impl FnOnce(&mut Value),
    ) -> ApiResult<Option<Value>> {
        self.store.mutate(key, |cur| {
            let Some(cur) = cur else {
                return Ok(Write::Keep);
            };
            let mut c = cur.clone();
            f(&mut c);
            if c == *cur {
                Ok(Write::Keep)
            } else {
                Ok(Write::Put(c))
            }
        })
    }

    /// Records a core/v1 Event about an object, as the kubelet and controllers do: `component`
    /// reports it, from `host` (the node) when it runs on one — kubectl shows "kubelet, node-1".
    pub fn record_event(
        &self,
        involved: &Value,
        type_: &str,
        reason: &str,
        message: &str,
        component: &str,
        host: Option<&str>,
    ) {
        let Some(info) = self.registry.find("", "v1", "events") else {
            return;
        };
        let ns = str_at(involved, "/metadata/namespace")
            .unwrap_or("default")
            .to_string();
        let name = str_at(involved, "/metadata/name").unwrap_or_default();
        let ts = now();
        let event = json!({
            "metadata": {"name": format!("{name}.{:016x}", rand::rng().random::<u64>())},
            "involvedObject": {
                "apiVersion": involved["apiVersion"], "kind": involved["kind"], "name": name, "namespace": ns,
                "uid": involved["metadata"]["uid"], "resourceVersion": involved["metadata"]["resourceVersion"],
            },
            "reason": reason, "message": message, "type": type_,
            "source": match host {
                Some(host) => json!({"component": component, "host": host}),
                None => json!({"component": component}),
            },
            "reportingComponent": component, "reportingInstance": host.unwrap_or_default(),
            "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
        });
        let opts = WriteOpts {
            manager: component.into(),
            ..Default::default()
        };
        if let Err(e) = self.create(&info, "v1", &ns, event, &opts) {
            tracing::debug!(error = %e, "recording an event");
        }
    }

    /// Issues a token authenticating as a service account.
    pub fn service_account_token(&self, ns: &str, name: &str) -> String {
        let user = format!("system:serviceaccount:{ns}:{name}");
        let mut tokens = self.tokens.write();
        if let Some((t, _)) = tokens.iter().find(|(_, i)| i.user == user) {
            return t.clone();
        }
        let token = format!("sa-{}", uuid::Uuid::new_v4().simple());
        tokens.insert(
            token.clone(),
            Identity {
                user,
                groups: vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                ],
            },
        );
        token
    }
}

fn ns_of<'a>(info: &ResourceInfo, ns: &'a str) -> &'a str {
    if info.namespaced { ns } else { "" }
}

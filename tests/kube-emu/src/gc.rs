//! Background garbage collection of owned objects, foreground deletion, and namespace
//! finalization.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::{Cluster, DeleteOpts, Target};
use crate::store::{ObjKey, Write};

// Direct indexing, not `Value::pointer` (which allocates per path segment): a pass reads every
// stored object.
fn uid(o: &Value) -> &str {
    o["metadata"]["uid"].as_str().unwrap_or_default()
}

fn owner_uids(o: &Value) -> impl Iterator<Item = &str> {
    o["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str())
}

fn has_finalizer(o: &Value, f: &str) -> bool {
    o["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|l| l.iter().any(|x| x == f))
}

fn is_deleting(o: &Value) -> bool {
    !o["metadata"]["deletionTimestamp"].is_null()
}

fn delete_key(cluster: &Cluster, k: &ObjKey) {
    let group = k.gr.split_once('.').map(|(_, g)| g).unwrap_or("");
    let plural = k.gr.split_once('.').map(|(p, _)| p).unwrap_or(&k.gr);
    if let Some(info) = cluster.registry.find_plural(group, plural) {
        let v = info.preferred_version().to_string();
        let _ = cluster.delete(
            Target {
                info: &info,
                version: &v,
                ns: &k.ns,
                name: &k.name,
            },
            &DeleteOpts::default(),
        );
    } else {
        let _ = cluster.store.mutate(k, |_| Ok(Write::Delete));
    }
}

fn remove_finalizer(cluster: &Cluster, k: &ObjKey, f: &str) {
    let _ = cluster.store.mutate(k, |cur| {
        let Some(cur) = cur else {
            return Ok(Write::Keep);
        };
        let mut c = cur.clone();
        if let Some(l) = c["metadata"]["finalizers"].as_array_mut() {
            l.retain(|x| x != f);
        }
        let empty = c
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|l| l.is_empty());
        if empty && c.pointer("/metadata/deletionTimestamp").is_some() {
            Ok(Write::Delete)
        } else {
            Ok(Write::Put(c))
        }
    });
}

/// What one pass of the collector does, decided from one look at the store.
#[derive(Default)]
struct Work {
    /// Dependents whose owners are gone or being deleted in the foreground.
    orphans: Vec<ObjKey>,
    /// Foreground owners with no dependent left.
    released: Vec<ObjKey>,
    /// Content of terminating namespaces not yet being deleted.
    content: Vec<ObjKey>,
    /// Terminating namespaces with no content left.
    empty_namespaces: Vec<ObjKey>,
}

/// Decides a pass over every stored object, without copying any.
fn plan(all: &BTreeMap<ObjKey, Value>) -> Work {
    let live: HashSet<&str> = all.values().map(uid).collect();
    let deleting_fg: HashSet<&str> = all
        .values()
        .filter(|o| is_deleting(o) && has_finalizer(o, "foregroundDeletion"))
        .map(uid)
        .collect();
    let terminating: HashSet<&str> = all
        .iter()
        .filter(|(k, o)| k.gr == "namespaces" && is_deleting(o))
        .map(|(k, _)| k.name.as_str())
        .collect();
    let mut work = Work::default();
    let mut with_dependents: HashSet<&str> = HashSet::new();
    let mut namespaces_with_content: HashSet<&str> = HashSet::new();
    for (k, o) in all {
        let mut has_owner = false;
        let mut dangling = true;
        let mut owner_fg = false;
        for r in owner_uids(o) {
            has_owner = true;
            with_dependents.insert(r);
            dangling &= !live.contains(r);
            owner_fg |= deleting_fg.contains(r);
        }
        if !k.ns.is_empty() {
            namespaces_with_content.insert(&k.ns);
            if terminating.contains(k.ns.as_str()) && !is_deleting(o) {
                work.content.push(k.clone());
            }
        }
        if has_owner && !is_deleting(o) && (dangling || owner_fg) {
            work.orphans.push(k.clone());
        }
    }
    for (k, o) in all {
        if deleting_fg.contains(uid(o)) && !with_dependents.contains(uid(o)) {
            work.released.push(k.clone());
        }
        if k.gr == "namespaces"
            && terminating.contains(k.name.as_str())
            && !namespaces_with_content.contains(k.name.as_str())
        {
            work.empty_namespaces.push(k.clone());
        }
    }
    work
}

/// One pass of the collector.
pub fn collect(cluster: &Cluster) {
    let work = cluster.store.inspect_all(plan);
    for k in &work.orphans {
        delete_key(cluster, k);
    }
    for k in &work.released {
        remove_finalizer(cluster, k, "foregroundDeletion");
    }
    // Terminating namespaces: delete their content, then the namespace.
    for k in &work.content {
        delete_key(cluster, k);
    }
    for k in &work.empty_namespaces {
        let _ = cluster.store.mutate(k, |cur| {
            let Some(cur) = cur else {
                return Ok(Write::Keep);
            };
            let mut c = cur.clone();
            c["spec"]["finalizers"] = json!([]);
            let meta_f = c
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|l| !l.is_empty());
            if meta_f {
                Ok(Write::Put(c))
            } else {
                Ok(Write::Delete)
            }
        });
    }
}

/// Runs the collector whenever something is deleted, and every half second.
pub async fn run(cluster: Arc<Cluster>) {
    loop {
        let _ = tokio::time::timeout(Duration::from_millis(500), cluster.gc_wake.notified()).await;
        collect(&cluster);
    }
}

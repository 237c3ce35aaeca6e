//! Background garbage collection of owned objects, foreground deletion, and namespace
//! finalization.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::{Cluster, DeleteOpts, Target};
use crate::store::{ObjKey, Write};

fn uid(o: &Value) -> &str {
    o.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn owners(o: &Value) -> Vec<String> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(String::from))
        .collect()
}

fn has_finalizer(o: &Value, f: &str) -> bool {
    o.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|l| l.iter().any(|x| x == f))
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

/// One pass of the collector.
pub fn collect(cluster: &Cluster) {
    let all = cluster.store.all();
    let live: HashSet<&str> = all.iter().map(|(_, o)| uid(o)).collect();
    let deleting_fg: HashSet<&str> = all
        .iter()
        .filter(|(_, o)| {
            o.pointer("/metadata/deletionTimestamp").is_some()
                && has_finalizer(o, "foregroundDeletion")
        })
        .map(|(_, o)| uid(o))
        .collect();
    for (k, o) in &all {
        let refs = owners(o);
        if refs.is_empty() {
            continue;
        }
        let dangling = refs.iter().all(|r| !live.contains(r.as_str()));
        let owner_fg = refs.iter().any(|r| deleting_fg.contains(r.as_str()));
        if (dangling || owner_fg) && o.pointer("/metadata/deletionTimestamp").is_none() {
            delete_key(cluster, k);
        }
    }
    // Foreground owners go once no dependent is left.
    for (k, o) in &all {
        if deleting_fg.contains(uid(o)) {
            let u = uid(o);
            let dependents = all.iter().any(|(_, d)| owners(d).iter().any(|r| r == u));
            if !dependents {
                remove_finalizer(cluster, k, "foregroundDeletion");
            }
        }
    }
    // Terminating namespaces: delete their content, then the namespace.
    for (k, o) in &all {
        if k.gr != "namespaces" || o.pointer("/metadata/deletionTimestamp").is_none() {
            continue;
        }
        let ns = &k.name;
        let content: Vec<&ObjKey> = all
            .iter()
            .filter(|(ok, _)| ok.ns == *ns && !ok.ns.is_empty())
            .map(|(ok, _)| ok)
            .collect();
        for ck in &content {
            if all
                .iter()
                .any(|(k2, o2)| k2 == *ck && o2.pointer("/metadata/deletionTimestamp").is_none())
            {
                delete_key(cluster, ck);
            }
        }
        if content.is_empty() {
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
}

/// Runs the collector whenever something is deleted, and every half second.
pub async fn run(cluster: Arc<Cluster>) {
    loop {
        let _ = tokio::time::timeout(Duration::from_millis(500), cluster.gc_wake.notified()).await;
        collect(&cluster);
    }
}

//! Workload controllers: Deployment (Recreate, pods owned directly), StatefulSet (ordinal pods)
//! and Job (completions, parallelism, backoffLimit), with the status fields Kubernetes reports.

use std::cell::RefCell;
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::{Cluster, DeleteOpts, Target, WriteOpts};
use crate::kinds::ResourceInfo;
use crate::now;
use crate::store::ObjKey;

const MANAGER: &str = "kube-controller-manager";

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn template_hash(template: &Value) -> String {
    let mut h = DefaultHasher::new();
    template.to_string().hash(&mut h);
    format!("{:010x}", h.finish() & 0xff_ffff_ffff)
}

fn is_terminating(p: &Value) -> bool {
    p.pointer("/metadata/deletionTimestamp").is_some()
}

fn phase(p: &Value) -> &str {
    s(p, "/status/phase")
}

fn is_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

struct Ctl<'a> {
    cluster: &'a Cluster,
    pods: ResourceInfo,
    /// Pods by namespace and controlling owner's uid, read once per namespace and pass (a pass
    /// over many workloads would otherwise copy every pod of the namespace per workload).
    owned: RefCell<HashMap<String, HashMap<String, Vec<Value>>>>,
    /// Owners whose pods this pass created or deleted: read again, from the store, when asked.
    changed: RefCell<HashSet<(String, String)>>,
}

/// The uid of a pod's controlling owner.
fn controller_uid(p: &Value) -> Option<&str> {
    p.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r["controller"] == json!(true))
        .and_then(|r| r["uid"].as_str())
}

impl Ctl<'_> {
    fn new(cluster: &Cluster, pods: ResourceInfo) -> Ctl<'_> {
        Ctl {
            cluster,
            pods,
            owned: RefCell::new(HashMap::new()),
            changed: RefCell::new(HashSet::new()),
        }
    }

    fn owned_pods(&self, ns: &str, uid: &str) -> Vec<Value> {
        let key = (ns.to_owned(), uid.to_owned());
        if self.changed.borrow_mut().remove(&key) {
            let fresh = self
                .cluster
                .store
                .list_matching("pods", Some(ns), |p| controller_uid(p) == Some(uid))
                .into_iter()
                .map(|(_, p)| p)
                .collect::<Vec<_>>();
            if let Some(by_owner) = self.owned.borrow_mut().get_mut(ns) {
                by_owner.insert(uid.to_owned(), fresh.clone());
            }
            return fresh;
        }
        let mut owned = self.owned.borrow_mut();
        let by_owner = owned.entry(ns.to_owned()).or_insert_with(|| {
            let mut by_owner: HashMap<String, Vec<Value>> = HashMap::new();
            for (_, p) in self.cluster.store.list("pods", Some(ns)).0 {
                if let Some(owner) = controller_uid(&p) {
                    by_owner.entry(owner.to_owned()).or_default().push(p);
                }
            }
            by_owner
        });
        by_owner.get(uid).cloned().unwrap_or_default()
    }

    /// Marks the pods of `p`'s controlling owner as changed in this pass.
    fn touched(&self, ns: &str, p: &Value) {
        if let Some(owner) = controller_uid(p) {
            self.changed
                .borrow_mut()
                .insert((ns.to_owned(), owner.to_owned()));
        }
    }

    fn create_pod(&self, owner: &Value, kind: &str, api_version: &str, mut pod: Value) {
        let ns = s(owner, "/metadata/namespace").to_string();
        pod["apiVersion"] = json!("v1");
        pod["kind"] = json!("Pod");
        pod["metadata"]["ownerReferences"] = json!([{
            "apiVersion": api_version, "kind": kind, "name": s(owner, "/metadata/name"),
            "uid": s(owner, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true,
        }]);
        let opts = WriteOpts {
            manager: MANAGER.into(),
            ..Default::default()
        };
        self.touched(&ns, &pod);
        if let Err(e) = self.cluster.create(&self.pods, "v1", &ns, pod, &opts) {
            tracing::debug!(error = %e, "creating pod");
        }
    }

    fn delete_pod(&self, p: &Value) {
        let (ns, name) = (s(p, "/metadata/namespace"), s(p, "/metadata/name"));
        self.touched(ns, p);
        let t = Target {
            info: &self.pods,
            version: "v1",
            ns,
            name,
        };
        let _ = self.cluster.delete(t, &DeleteOpts::default());
    }

    /// Writes `status` when it differs (ignoring condition timestamps).
    fn write_status(&self, gr: &str, owner: &Value, status: Value) {
        let key = ObjKey::new(
            gr,
            s(owner, "/metadata/namespace"),
            s(owner, "/metadata/name"),
        );
        let uid = s(owner, "/metadata/uid").to_string();
        let _ = self.cluster.put_internal(&key, |o| {
            if s(o, "/metadata/uid") != uid {
                return;
            }
            let mut status = status;
            let strip = |v: &Value| {
                let mut v = v.clone();
                for c in v["conditions"].as_array_mut().into_iter().flatten() {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("lastTransitionTime");
                        m.remove("lastUpdateTime");
                    }
                }
                v
            };
            if strip(&o["status"]) == strip(&status) {
                return;
            }
            // Keep transition times of conditions whose status did not change.
            if let (Some(old), Some(new)) = (
                o.pointer("/status/conditions").and_then(Value::as_array),
                status["conditions"].as_array_mut(),
            ) {
                for c in new.iter_mut() {
                    if let Some(prev) = old
                        .iter()
                        .find(|p| p["type"] == c["type"] && p["status"] == c["status"])
                    {
                        c["lastTransitionTime"] = prev["lastTransitionTime"].clone();
                    }
                }
            }
            o["status"] = status;
        });
    }

    fn pod_from_template(owner: &Value, extra_labels: &[(&str, String)]) -> Value {
        let mut pod = json!({"metadata": owner.pointer("/spec/template/metadata").cloned().unwrap_or(json!({})), "spec": owner.pointer("/spec/template/spec").cloned().unwrap_or(json!({}))});
        if !pod["metadata"]["labels"].is_object() {
            pod["metadata"]["labels"] = json!({});
        }
        for (k, v) in extra_labels {
            pod["metadata"]["labels"][*k] = json!(v);
        }
        if let Some(m) = pod["metadata"].as_object_mut() {
            m.remove("name");
            m.remove("namespace");
        }
        pod
    }
}

fn condition(ty: &str, ok: bool, reason: &str, message: &str) -> Value {
    let t = now();
    json!({"type": ty, "status": if ok { "True" } else { "False" }, "reason": reason, "message": message, "lastTransitionTime": t, "lastUpdateTime": t})
}

fn reconcile_deployment(ctl: &Ctl<'_>, d: &Value) {
    if is_terminating(d) {
        return;
    }
    let uid = s(d, "/metadata/uid");
    let ns = s(d, "/metadata/namespace");
    let name = s(d, "/metadata/name");
    let replicas = d
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0) as usize;
    let hash = template_hash(&d["spec"]["template"]);
    let pods = ctl.owned_pods(ns, uid);
    let paused = d.pointer("/spec/paused") == Some(&json!(true));
    if !paused {
        let old: Vec<&Value> = pods
            .iter()
            .filter(|p| s(p, "/metadata/labels/pod-template-hash") != hash)
            .collect();
        if !old.is_empty() {
            // Recreate: every old pod is gone before a new one starts.
            for p in old.iter().filter(|p| !is_terminating(p)) {
                ctl.delete_pod(p);
            }
        } else {
            let mut live: Vec<&Value> = pods.iter().filter(|p| !is_terminating(p)).collect();
            for p in live
                .iter()
                .filter(|p| matches!(phase(p), "Failed" | "Succeeded"))
            {
                ctl.delete_pod(p);
            }
            live.retain(|p| !matches!(phase(p), "Failed" | "Succeeded"));
            if live.len() < replicas {
                for _ in live.len()..replicas {
                    let mut pod = Ctl::pod_from_template(d, &[("pod-template-hash", hash.clone())]);
                    pod["metadata"]["generateName"] = json!(format!("{name}-{hash}-"));
                    ctl.create_pod(d, "Deployment", "apps/v1", pod);
                }
            } else if live.len() > replicas {
                live.sort_by_key(|p| {
                    std::cmp::Reverse(s(p, "/metadata/creationTimestamp").to_string())
                });
                for p in live.iter().take(live.len() - replicas) {
                    ctl.delete_pod(p);
                }
            }
        }
    }
    let pods = ctl.owned_pods(ns, uid);
    let live: Vec<&Value> = pods.iter().filter(|p| !is_terminating(p)).collect();
    let updated = live
        .iter()
        .filter(|p| s(p, "/metadata/labels/pod-template-hash") == hash)
        .count();
    let ready = live.iter().filter(|p| is_ready(p)).count();
    let available = ready;
    let complete = updated == replicas && available == replicas && live.len() == replicas;
    let mut status = json!({
        "observedGeneration": d.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "replicas": live.len(), "updatedReplicas": updated, "readyReplicas": ready,
        "availableReplicas": available,
        "conditions": [
            if available >= replicas {
                condition("Available", true, "MinimumReplicasAvailable", "Deployment has minimum availability.")
            } else {
                condition("Available", false, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
            },
            if complete {
                condition("Progressing", true, "NewReplicaSetAvailable", &format!("Deployment \"{name}\" has successfully progressed."))
            } else {
                condition("Progressing", true, "ReplicaSetUpdated", &format!("Deployment \"{name}\" is progressing."))
            },
        ],
    });
    if replicas > available {
        status["unavailableReplicas"] = json!(replicas - available);
    }
    for k in [
        "readyReplicas",
        "availableReplicas",
        "updatedReplicas",
        "replicas",
    ] {
        if status[k] == json!(0)
            && let Some(m) = status.as_object_mut()
        {
            m.remove(k);
        }
    }
    ctl.write_status("deployments.apps", d, status);
}

fn reconcile_statefulset(ctl: &Ctl<'_>, st: &Value) {
    if is_terminating(st) {
        return;
    }
    let uid = s(st, "/metadata/uid");
    let ns = s(st, "/metadata/namespace");
    let name = s(st, "/metadata/name");
    let replicas = st
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0) as usize;
    let revision = format!("{name}-{}", template_hash(&st["spec"]["template"]));
    let parallel = s(st, "/spec/podManagementPolicy") == "Parallel";
    let on_delete = s(st, "/spec/updateStrategy/type") == "OnDelete";
    let pods = ctl.owned_pods(ns, uid);
    let by_ordinal = |i: usize| {
        pods.iter()
            .find(|p| s(p, "/metadata/name") == format!("{name}-{i}"))
    };
    // Failed or completed pods are replaced.
    for p in pods
        .iter()
        .filter(|p| !is_terminating(p) && matches!(phase(p), "Failed" | "Succeeded"))
    {
        ctl.delete_pod(p);
    }
    let mut blocked = false;
    for i in 0..replicas {
        match by_ordinal(i) {
            None => {
                if blocked {
                    break;
                }
                let pod_name = format!("{name}-{i}");
                let mut pod = Ctl::pod_from_template(
                    st,
                    &[
                        ("controller-revision-hash", revision.clone()),
                        ("statefulset.kubernetes.io/pod-name", pod_name.clone()),
                        ("apps.kubernetes.io/pod-index", i.to_string()),
                    ],
                );
                pod["metadata"]["name"] = json!(pod_name);
                pod["spec"]["hostname"] = json!(pod_name);
                if let Some(svc) = st.pointer("/spec/serviceName").and_then(Value::as_str) {
                    pod["spec"]["subdomain"] = json!(svc);
                }
                for t in st
                    .pointer("/spec/volumeClaimTemplates")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let claim = s(t, "/metadata/name");
                    let vols = pod["spec"]["volumes"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    if !vols.iter().any(|v| v["name"] == claim) {
                        let mut vols = vols;
                        vols.push(json!({"name": claim, "persistentVolumeClaim": {"claimName": format!("{claim}-{pod_name}")}}));
                        pod["spec"]["volumes"] = json!(vols);
                    }
                }
                ctl.create_pod(st, "StatefulSet", "apps/v1", pod);
                if !parallel {
                    blocked = true;
                }
            }
            Some(p) => {
                if !parallel && (is_terminating(p) || !is_ready(p)) {
                    blocked = true;
                }
            }
        }
    }
    // Scale down from the highest ordinal, one at a time unless Parallel.
    let mut extra: Vec<&Value> = pods
        .iter()
        .filter(|p| !is_terminating(p))
        .filter(|p| {
            s(p, "/metadata/labels/apps.kubernetes.io~1pod-index")
                .parse::<usize>()
                .map_or(true, |i| i >= replicas)
        })
        .collect();
    extra.sort_by_key(|p| {
        std::cmp::Reverse(
            s(p, "/metadata/labels/apps.kubernetes.io~1pod-index")
                .parse::<usize>()
                .unwrap_or(0),
        )
    });
    let any_terminating = pods.iter().any(is_terminating);
    for p in extra.iter().take(if parallel {
        usize::MAX
    } else if any_terminating {
        0
    } else {
        1
    }) {
        ctl.delete_pod(p);
    }
    // Rolling update: replace outdated pods from the highest ordinal down, one at a time.
    if !on_delete && extra.is_empty() && !blocked {
        let all_ready =
            (0..replicas).all(|i| by_ordinal(i).is_some_and(|p| is_ready(p) && !is_terminating(p)));
        if all_ready
            && let Some(p) = (0..replicas)
                .rev()
                .filter_map(by_ordinal)
                .find(|p| s(p, "/metadata/labels/controller-revision-hash") != revision)
        {
            ctl.delete_pod(p);
        }
    }
    let pods = ctl.owned_pods(ns, uid);
    let live: Vec<&Value> = pods.iter().filter(|p| !is_terminating(p)).collect();
    let ready = live.iter().filter(|p| is_ready(p)).count();
    let updated = live
        .iter()
        .filter(|p| s(p, "/metadata/labels/controller-revision-hash") == revision)
        .count();
    let current_revision = if updated == live.len() {
        revision.clone()
    } else {
        s(st, "/status/currentRevision").to_string()
    };
    let status = json!({
        "observedGeneration": st.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "replicas": live.len(), "readyReplicas": ready, "availableReplicas": ready,
        "currentReplicas": if current_revision == revision { updated } else { live.len() - updated },
        "updatedReplicas": updated, "currentRevision": current_revision, "updateRevision": revision,
        "collisionCount": 0,
    });
    ctl.write_status("statefulsets.apps", st, status);
}

fn reconcile_job(ctl: &Ctl<'_>, job: &Value) {
    if is_terminating(job) {
        return;
    }
    let uid = s(job, "/metadata/uid");
    let ns = s(job, "/metadata/namespace");
    let name = s(job, "/metadata/name");
    let completions = job
        .pointer("/spec/completions")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0) as usize;
    let parallelism = job
        .pointer("/spec/parallelism")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0) as usize;
    let backoff_limit = job
        .pointer("/spec/backoffLimit")
        .and_then(Value::as_i64)
        .unwrap_or(6)
        .max(0) as usize;
    let on_failure = s(job, "/spec/template/spec/restartPolicy") == "OnFailure";
    let finished = job
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter().any(|c| {
                (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True"
            })
        });
    let pods = ctl.owned_pods(ns, uid);
    let succeeded = pods.iter().filter(|p| phase(p) == "Succeeded").count();
    let restarts: usize = if on_failure {
        pods.iter()
            .flat_map(|p| {
                p.pointer("/status/containerStatuses")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|c| c["restartCount"].as_u64().unwrap_or(0) as usize)
            .sum()
    } else {
        0
    };
    let failed = pods.iter().filter(|p| phase(p) == "Failed").count() + restarts;
    let active: Vec<&Value> = pods
        .iter()
        .filter(|p| !is_terminating(p) && !matches!(phase(p), "Succeeded" | "Failed"))
        .collect();
    let mut status = job
        .get("status")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or(json!({}));
    if status.get("startTime").is_none() {
        status["startTime"] = json!(now());
    }
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    if !finished {
        if succeeded >= completions {
            for p in &active {
                ctl.delete_pod(p);
            }
            conditions.push(condition(
                "SuccessCriteriaMet",
                true,
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            ));
            conditions.push(condition(
                "Complete",
                true,
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            ));
            status["completionTime"] = json!(now());
        } else if failed > backoff_limit {
            for p in &active {
                ctl.delete_pod(p);
            }
            conditions.push(condition(
                "FailureTarget",
                true,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ));
            conditions.push(condition(
                "Failed",
                true,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ));
        } else {
            let remaining = completions.saturating_sub(succeeded);
            let want = parallelism.min(remaining);
            for _ in active.len()..want {
                let pod = Ctl::pod_from_template(
                    job,
                    &[
                        ("batch.kubernetes.io/controller-uid", uid.to_string()),
                        ("batch.kubernetes.io/job-name", name.to_string()),
                        ("controller-uid", uid.to_string()),
                        ("job-name", name.to_string()),
                    ],
                );
                let mut pod = pod;
                pod["metadata"]["generateName"] = json!(format!("{name}-"));
                ctl.create_pod(job, "Job", "batch/v1", pod);
            }
        }
    }
    let pods = ctl.owned_pods(ns, uid);
    let active_now = pods
        .iter()
        .filter(|p| !is_terminating(p) && !matches!(phase(p), "Succeeded" | "Failed"))
        .count();
    let ready = pods
        .iter()
        .filter(|p| !is_terminating(p) && is_ready(p))
        .count();
    status["conditions"] = json!(conditions);
    if conditions.is_empty()
        && let Some(m) = status.as_object_mut()
    {
        m.remove("conditions");
    }
    for (k, v) in [
        ("active", active_now),
        ("succeeded", succeeded),
        ("failed", failed),
    ] {
        if v > 0 {
            status[k] = json!(v);
        } else if let Some(m) = status.as_object_mut() {
            m.remove(k);
        }
    }
    status["ready"] = json!(ready);
    status["terminating"] = json!(pods.iter().filter(|p| is_terminating(p)).count());
    status["uncountedTerminatedPods"] = json!({});
    ctl.write_status("jobs.batch", job, status);
}

/// The workloads a pass looks at: every one, or those touched since the last pass.
enum Scope {
    All,
    Keys(HashSet<ObjKey>),
}

/// One pass over every workload.
pub fn reconcile_all(cluster: &Cluster) {
    reconcile(cluster, &Scope::All);
}

fn reconcile(cluster: &Cluster, scope: &Scope) {
    let Some(pods) = cluster.registry.find("", "v1", "pods") else {
        return;
    };
    let ctl = Ctl::new(cluster, pods);
    let wanted = |gr: &str, ns: Option<&str>| -> Vec<Value> {
        match scope {
            Scope::All => cluster
                .store
                .list(gr, ns)
                .0
                .into_iter()
                .map(|(_, v)| v)
                .collect(),
            Scope::Keys(keys) => keys
                .iter()
                .filter(|k| k.gr == gr)
                .filter_map(|k| cluster.store.get(k))
                .collect(),
        }
    };
    for d in wanted("deployments.apps", None) {
        reconcile_deployment(&ctl, &d);
    }
    for st in wanted("statefulsets.apps", None) {
        reconcile_statefulset(&ctl, &st);
    }
    for j in wanted("jobs.batch", None) {
        reconcile_job(&ctl, &j);
    }
}

/// The workload an event concerns: the workload itself, or a pod's controlling owner.
fn workload_of(event: &crate::store::Event) -> Option<ObjKey> {
    match event.key.gr.as_str() {
        "deployments.apps" | "statefulsets.apps" | "jobs.batch" => Some(event.key.clone()),
        "pods" => {
            let owner = event
                .object
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)?
                .iter()
                .find(|r| r["controller"] == json!(true))?;
            let gr = match owner["kind"].as_str()? {
                "Deployment" => "deployments.apps",
                "StatefulSet" => "statefulsets.apps",
                "Job" => "jobs.batch",
                _ => return None,
            };
            Some(ObjKey::new(gr, &event.key.ns, owner["name"].as_str()?))
        }
        _ => None,
    }
}

/// How often every workload is looked at, changed or not (time-driven decisions: back-off,
/// deadlines).
const FULL_PASS: Duration = Duration::from_secs(1);

/// Runs the workload controllers until the task is dropped: a pass over the workloads a change
/// touched (a workload or one of its pods) after every burst of changes, and over every workload
/// each second.
pub async fn run(cluster: Arc<Cluster>) {
    let mut rx = cluster.store.subscribe();
    let mut last_full = tokio::time::Instant::now();
    reconcile(&cluster, &Scope::All);
    loop {
        let mut touched: HashSet<ObjKey> = HashSet::new();
        let mut full = false;
        let deadline = tokio::time::sleep_until(last_full + FULL_PASS);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(e) => {
                        if let Some(k) = workload_of(&e) {
                            touched.insert(k);
                            // Let a burst of changes settle, then take what else arrived.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            loop {
                                match rx.try_recv() {
                                    Ok(e) => touched.extend(workload_of(&e)),
                                    Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => {
                                        full = true;
                                    }
                                    Err(_) => break,
                                }
                            }
                            break;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        full = true;
                        break;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
                _ = &mut deadline => {
                    full = true;
                    break;
                }
            }
        }
        if full || last_full.elapsed() >= FULL_PASS {
            last_full = tokio::time::Instant::now();
            reconcile(&cluster, &Scope::All);
        } else {
            reconcile(&cluster, &Scope::Keys(touched));
        }
    }
}

//! The process kubelet: runs each container of a pod bound to this node as a local process,
//! with its volumes bind-mounted in a private mount namespace, and reports its status.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::cluster::{Cluster, DeleteOpts, Target};
use crate::now;
use crate::store::ObjKey;

mod container;
mod logs;
mod mounts;
mod probes;
mod process;
mod volumes;

pub use logs::logs;

use self::container::*;
use self::mounts::*;
use self::probes::*;
use self::process::*;
use self::volumes::*;

pub(super) const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// How a pod's processes are asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// Keep running.
    No,
    /// SIGTERM, then SIGKILL after the grace period.
    Graceful(Duration),
}

pub(super) struct Shared {
    pub(super) cluster: Arc<Cluster>,
    pub(super) image_map: Vec<(String, PathBuf)>,
    pub(super) work_dir: PathBuf,
    pub(super) ips: Mutex<BTreeSet<u8>>,
    pub(super) can_mount: bool,
}

/// Pod workers by pod uid: how to stop each, and its task.
pub(super) type Workers = Arc<Mutex<HashMap<String, (watch::Sender<Stop>, JoinHandle<()>)>>>;

/// A running kubelet.
pub struct Kubelet {
    task: JoinHandle<()>,
    pods: Workers,
}

impl Kubelet {
    /// Starts the kubelet for the cluster's node.
    pub fn start(
        cluster: Arc<Cluster>,
        image_map: Vec<(String, PathBuf)>,
        work_dir: PathBuf,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(&work_dir)?;
        let can_mount = can_unshare_mounts();
        if !can_mount {
            tracing::warn!(
                "cannot create mount namespaces (not root?): volumes are materialised but not mounted"
            );
        }
        let shared = Arc::new(Shared {
            cluster,
            image_map,
            work_dir,
            ips: Mutex::new(BTreeSet::new()),
            can_mount,
        });
        let pods = Arc::new(Mutex::new(HashMap::new()));
        let task = tokio::spawn(sync_loop(shared, pods.clone()));
        Ok(Self { task, pods })
    }

    /// Stops every pod process (SIGTERM, SIGKILL after 5 s) and the kubelet.
    pub async fn shutdown(self) {
        self.task.abort();
        let handles: Vec<_> = self.pods.lock().drain().collect();
        for (_, (stop, _)) in &handles {
            let _ = stop.send(Stop::Graceful(Duration::from_secs(5)));
        }
        for (_, (_, h)) in handles {
            let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.task.abort();
        for (_, (_, h)) in self.pods.lock().drain() {
            // Aborting drops the children, which are killed on drop.
            h.abort();
        }
    }
}

pub(super) fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

pub(super) async fn sync_loop(shared: Arc<Shared>, pods: Workers) {
    let mut rx = shared.cluster.store.subscribe();
    let mut started: HashSet<String> = HashSet::new();
    let node = shared.cluster.node_name.clone().unwrap_or_default();
    loop {
        let (list, _) = shared.cluster.store.list("pods", None);
        let mut present = HashSet::new();
        for (_, pod) in list {
            if s(&pod, "/spec/nodeName") != node {
                continue;
            }
            let uid = s(&pod, "/metadata/uid").to_string();
            present.insert(uid.clone());
            let deleting = pod.pointer("/metadata/deletionTimestamp").is_some();
            let terminal = matches!(s(&pod, "/status/phase"), "Succeeded" | "Failed");
            let mut map = pods.lock();
            if deleting {
                let grace = pod
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(30)
                    .max(0) as u64;
                match map.get(&uid) {
                    Some((stop, h)) if !h.is_finished() => {
                        if *stop.borrow() == Stop::No {
                            let _ = stop.send(Stop::Graceful(Duration::from_secs(grace)));
                        }
                    }
                    _ => {
                        if started.insert(format!("deleted:{uid}")) {
                            let c = shared.cluster.clone();
                            let (ns, name) = (
                                s(&pod, "/metadata/namespace").to_string(),
                                s(&pod, "/metadata/name").to_string(),
                            );
                            tokio::spawn(async move { final_delete(&c, &ns, &name, &uid) });
                        }
                    }
                }
            } else if !terminal && !started.contains(&uid) {
                started.insert(uid.clone());
                let (tx, rx) = watch::channel(Stop::No);
                let h = tokio::spawn(run_pod(shared.clone(), pod.clone(), rx));
                map.insert(uid, (tx, h));
            }
        }
        {
            let mut map = pods.lock();
            map.retain(|uid, (stop, h)| {
                if !present.contains(uid) && !h.is_finished() {
                    let _ = stop.send(Stop::Graceful(Duration::ZERO));
                }
                present.contains(uid) || !h.is_finished()
            });
        }
        tokio::select! {
            r = rx.recv() => {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r {
                    return;
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

pub(super) fn final_delete(cluster: &Cluster, ns: &str, name: &str, uid: &str) {
    if let Some(info) = cluster.registry.find("", "v1", "pods") {
        let opts = DeleteOpts {
            grace_seconds: Some(0),
            uid: Some(uid.to_string()),
            ..Default::default()
        };
        let _ = cluster.delete(
            Target {
                info: &info,
                version: "v1",
                ns,
                name,
            },
            &opts,
        );
    }
}

impl Shared {
    fn alloc_ip(&self) -> String {
        let mut ips = self.ips.lock();
        let n = (2u8..=254).find(|n| !ips.contains(n)).unwrap_or(254);
        ips.insert(n);
        format!("127.0.0.{n}")
    }

    fn free_ip(&self, ip: &str) {
        if let Some(n) = ip.rsplit('.').next().and_then(|n| n.parse().ok()) {
            self.ips.lock().remove(&n);
        }
    }

    fn get(&self, gr: &str, ns: &str, name: &str) -> Option<Value> {
        self.cluster.store.get(&ObjKey::new(gr, ns, name))
    }
}

/// What the pod worker knows about its containers, published as the pod status.
pub(super) struct PodState {
    pub(super) ns: String,
    pub(super) name: String,
    pub(super) uid: String,
    pub(super) ip: String,
    pub(super) start_time: String,
    pub(super) statuses: Vec<Value>,
    /// Containers that will not run again.
    pub(super) finished: Vec<bool>,
    pub(super) failure: Option<(String, String)>,
}

impl PodState {
    fn phase(&self) -> &'static str {
        if self.failure.is_some() {
            return "Pending";
        }
        let running = self.statuses.iter().any(|c| {
            c.pointer("/state/running").is_some()
                || c.pointer("/state/waiting").is_some()
                    && c["restartCount"].as_i64().unwrap_or(0) > 0
        });
        if self.finished.iter().all(|f| *f) && !self.finished.is_empty() {
            let ok = self.statuses.iter().all(|c| {
                c.pointer("/state/terminated/exitCode")
                    .and_then(Value::as_i64)
                    == Some(0)
            });
            return if ok { "Succeeded" } else { "Failed" };
        }
        if running { "Running" } else { "Pending" }
    }

    fn status(&self) -> Value {
        let ready =
            !self.statuses.is_empty() && self.statuses.iter().all(|c| c["ready"] == json!(true));
        let phase = self.phase();
        let t = now();
        let cond = |ty: &str, ok: bool| json!({"type": ty, "status": if ok { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": t});
        let mut status = json!({
            "phase": phase,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": self.ip,
            "podIPs": [{"ip": self.ip}],
            "startTime": self.start_time,
            "qosClass": "BestEffort",
            "conditions": [cond("PodScheduled", true), cond("Initialized", true), cond("ContainersReady", ready), cond("Ready", ready)],
            "containerStatuses": self.statuses,
        });
        if let Some((reason, message)) = &self.failure {
            status["reason"] = json!(reason);
            status["message"] = json!(message);
        }
        status
    }
}

pub(super) struct PodCtx {
    pub(super) shared: Arc<Shared>,
    pub(super) pod: Value,
    pub(super) state: Mutex<PodState>,
    pub(super) changed: Notify,
    pub(super) dir: PathBuf,
    pub(super) mounts: HashMap<String, PathBuf>,
}

impl PodCtx {
    /// Records an Event about the pod, from the kubelet.
    pub(super) fn event(&self, type_: &str, reason: &str, message: &str) {
        let mut involved = self.pod.clone();
        involved["apiVersion"] = json!("v1");
        involved["kind"] = json!("Pod");
        let cluster = &self.shared.cluster;
        let node = cluster.node_name.as_deref().filter(|n| !n.is_empty());
        cluster.record_event(&involved, type_, reason, message, "kubelet", node);
    }

    /// Writes the pod status, keeping conditions' transition times when unchanged.
    fn publish(&self) {
        let status = self.state.lock().status();
        let (ns, name, uid) = {
            let st = self.state.lock();
            (st.ns.clone(), st.name.clone(), st.uid.clone())
        };
        let _ = self
            .shared
            .cluster
            .put_internal(&ObjKey::new("pods", &ns, &name), |pod| {
                if s(pod, "/metadata/uid") != uid {
                    return;
                }
                let mut status = status;
                if let (Some(old), Some(new)) = (
                    pod.pointer("/status/conditions").and_then(Value::as_array),
                    status["conditions"].as_array_mut(),
                ) {
                    for c in new.iter_mut() {
                        if let Some(o) = old
                            .iter()
                            .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
                        {
                            c["lastTransitionTime"] = o["lastTransitionTime"].clone();
                        }
                    }
                }
                pod["status"] = status;
            });
        self.changed.notify_waiters();
    }
}

pub(super) fn log_buffer(cluster: &Cluster, key: &str) -> Arc<RwLock<Vec<u8>>> {
    cluster
        .logs
        .write()
        .entry(key.to_string())
        .or_default()
        .clone()
}

pub(super) async fn run_pod(shared: Arc<Shared>, pod: Value, stop: watch::Receiver<Stop>) {
    let ns = s(&pod, "/metadata/namespace").to_string();
    let name = s(&pod, "/metadata/name").to_string();
    let uid = s(&pod, "/metadata/uid").to_string();
    let ip = shared.alloc_ip();
    let dir = shared.work_dir.join("pods").join(&uid);
    let containers: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let statuses = containers
        .iter()
        .map(|c| json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": false, "started": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}))
        .collect();
    let state = PodState {
        ns: ns.clone(),
        name: name.clone(),
        uid: uid.clone(),
        ip: ip.clone(),
        start_time: now(),
        statuses,
        finished: vec![false; containers.len()],
        failure: None,
    };
    let mut pod_with_ip = pod.clone();
    pod_with_ip["status"]["podIP"] = json!(ip);
    let mounts = match materialize_volumes(&shared, &pod_with_ip, &dir) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(pod = %name, error = %e, "volume setup failed");
            HashMap::new()
        }
    };
    let ctx = Arc::new(PodCtx {
        shared: shared.clone(),
        pod: pod_with_ip,
        state: Mutex::new(state),
        changed: Notify::new(),
        dir: dir.clone(),
        mounts,
    });
    ctx.publish();

    // Init containers run one after the other, to completion.
    let inits: Vec<Value> = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for init in &inits {
        let key = format!("{ns}/{name}/{}", s(init, "/name"));
        let code = match prepare(&ctx, init) {
            Ok(prep) => match spawn(&ctx, &prep, &key) {
                Ok(mut child) => {
                    let mut stop = stop.clone();
                    tokio::select! {
                        r = child.wait() => r.ok().and_then(|s| s.code()).unwrap_or(1),
                        _ = stop.changed() => { terminate(&mut child, Duration::ZERO).await; 137 }
                    }
                }
                Err(_) => 1,
            },
            Err(_) => 1,
        };
        if code != 0 {
            ctx.state.lock().failure = Some((
                "InitContainerFailed".into(),
                format!("init container {} exited with {code}", s(init, "/name")),
            ));
            ctx.publish();
            let mut stop = stop.clone();
            let _ = stop.wait_for(|s| *s != Stop::No).await;
            finish(&ctx, &ip).await;
            return;
        }
    }

    let mut handles = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        handles.push(tokio::spawn(run_container(
            ctx.clone(),
            i,
            c.clone(),
            stop.clone(),
        )));
    }
    for h in handles {
        let _ = h.await;
    }
    // Keep the pod (terminal) until it is deleted; then remove it.
    let mut stop = stop.clone();
    let _ = stop.wait_for(|s| *s != Stop::No).await;
    finish(&ctx, &ip).await;
}

pub(super) async fn finish(ctx: &PodCtx, ip: &str) {
    ctx.shared.free_ip(ip);
    let (ns, name, uid) = {
        let st = ctx.state.lock();
        (st.ns.clone(), st.name.clone(), st.uid.clone())
    };
    let _ = std::fs::remove_dir_all(&ctx.dir);
    let pod = ctx.shared.get("pods", &ns, &name);
    if pod.is_some_and(|p| {
        s(&p, "/metadata/uid") == uid && p.pointer("/metadata/deletionTimestamp").is_some()
    }) {
        final_delete(&ctx.shared.cluster, &ns, &name, &uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_drop_registry_and_tag() {
        assert_eq!(image_name("ghcr.io/dcs-dev/dcs-runner:0.1.0"), "dcs-runner");
        assert_eq!(image_name("busybox"), "busybox");
        assert_eq!(image_name("r/x@sha256:abc"), "x");
    }

    #[test]
    fn variable_references_expand() {
        let env = vec![("A".to_string(), "1".to_string())];
        assert_eq!(expand("x$(A)y $(B) $$(A)", &env), "x1y $(B) $(A)");
    }

    #[test]
    fn downward_api_paths() {
        let pod = json!({"metadata": {"name": "p", "namespace": "n", "labels": {"b": "2", "a": "1"}}, "status": {"podIP": "127.0.0.3"}});
        assert_eq!(
            field_ref(&pod, "metadata.labels['a']").as_deref(),
            Some("1")
        );
        assert_eq!(
            field_ref(&pod, "metadata.labels").as_deref(),
            Some("a=\"1\"\nb=\"2\"")
        );
        assert_eq!(
            field_ref(&pod, "status.podIP").as_deref(),
            Some("127.0.0.3")
        );
    }
}

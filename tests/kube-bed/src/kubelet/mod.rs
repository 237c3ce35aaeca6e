//! The process kubelet: a client of the API server that registers a Node, runs each container of
//! the pods the scheduler binds to it as a local process (volumes bind-mounted in a private mount
//! namespace), reports their status, and serves their logs to the API server.
//!
//! It authenticates as `system:node:<name>` (group `system:nodes`), so the API server's Node
//! authorizer and NodeRestriction admission hold it to what a kubelet may do: its own Node and
//! Lease, the pods bound to it, and the Secrets, ConfigMaps and service-account tokens those pods
//! reference.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::watcher;
use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::Error;
use crate::control_plane::ControlPlane;

mod container;
mod logs;
mod mounts;
mod node;
mod probes;
mod process;
mod security;
mod server;
mod status;
mod volumes;

use self::container::*;
use self::logs::LogBuf;
use self::mounts::*;
use self::probes::*;
use self::process::*;
use self::volumes::*;

/// The current time as Kubernetes writes timestamps (RFC 3339, seconds).
pub(crate) fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// How a pod's processes are asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// Keep running.
    No,
    /// SIGTERM, then SIGKILL after the grace period.
    Graceful(Duration),
}

/// How to run a kubelet.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// The Node's name.
    pub node_name: String,
    /// Image name (registry and tag ignored) → local binary.
    pub image_map: Vec<(String, PathBuf)>,
    /// Where pod volumes and claim directories live.
    pub work_dir: PathBuf,
    /// Pods of these namespaces reach the API server at this address instead (their
    /// `KUBERNETES_SERVICE_HOST`/`_PORT`): a [`crate::FaultProxy`] in front of it.
    pub api_via: Option<(Vec<String>, std::net::SocketAddr)>,
}

pub(super) struct Shared {
    pub(super) client: kube::Client,
    pub(super) node: String,
    /// The API server's host and port, for `KUBERNETES_SERVICE_HOST`/`_PORT`.
    pub(super) api_host: String,
    pub(super) api_port: u16,
    /// Namespaces whose pods reach the API server elsewhere, and where.
    pub(super) api_via: Option<(Vec<String>, std::net::SocketAddr)>,
    pub(super) image_map: Vec<(String, PathBuf)>,
    pub(super) work_dir: PathBuf,
    pub(super) ips: Mutex<BTreeSet<u8>>,
    pub(super) can_mount: bool,
    /// Container logs by `ns/pod/container` (and `.../previous`).
    pub(super) logs: RwLock<HashMap<String, Arc<LogBuf>>>,
    /// The pods bound to this node as last seen, by `ns/name`.
    pub(super) pods: RwLock<HashMap<String, Value>>,
}

/// Pod workers by pod uid: how to stop each, and its task.
pub(super) type Workers = Arc<Mutex<HashMap<String, (watch::Sender<Stop>, JoinHandle<()>)>>>;

/// A running kubelet. [`Kubelet::shutdown`] stops its pods; dropping it kills them.
pub struct Kubelet {
    /// The Node's name.
    pub node_name: String,
    /// Where the kubelet's HTTPS endpoint listens (`/containerLogs`).
    pub address: std::net::SocketAddr,
    tasks: Vec<JoinHandle<()>>,
    pods: Workers,
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

impl Kubelet {
    /// Registers the Node with `cp` and starts running the pods bound to it. Returns once the
    /// Node is Ready.
    pub async fn start(cp: &ControlPlane, cfg: KubeletConfig) -> Result<Self, Error> {
        std::fs::create_dir_all(&cfg.work_dir)?;
        {
            // Pods run as their runAsUser: their volumes below must be reachable.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&cfg.work_dir, std::fs::Permissions::from_mode(0o755))?;
        }
        let can_mount = can_unshare_mounts();
        if !can_mount {
            tracing::warn!(
                "cannot create mount namespaces (not root?): volumes are materialised but not mounted"
            );
        }
        let node_user = format!("system:node:{}", cfg.node_name);
        let client_cert = cp.ca.client(&node_user, &["system:nodes"])?;
        let client = crate::control_plane::client_from_kubeconfig(&crate::pki::kubeconfig(
            &cp.url,
            &cp.ca.cert_pem,
            &client_cert,
            "default",
        ))
        .await?;
        let serving = cp
            .ca
            .serving(&cfg.node_name, &["127.0.0.1", "localhost", &cfg.node_name])?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            client,
            node: cfg.node_name.clone(),
            api_host: cp.address.ip().to_string(),
            api_port: cp.address.port(),
            api_via: cfg.api_via,
            image_map: cfg.image_map,
            work_dir: cfg.work_dir,
            ips: Mutex::new(BTreeSet::new()),
            can_mount,
            logs: RwLock::new(HashMap::new()),
            pods: RwLock::new(HashMap::new()),
        });
        let tls = server::tls_config(&serving, &cp.ca.cert_pem)?;
        let mut tasks = vec![tokio::spawn(server::serve(listener, tls, shared.clone()))];
        node::register(&shared, address.port()).await?;
        tasks.push(tokio::spawn(node::heartbeat(
            shared.clone(),
            address.port(),
        )));
        let pods = Arc::new(Mutex::new(HashMap::new()));
        tasks.push(tokio::spawn(sync_loop(shared.clone(), pods.clone())));
        Ok(Self {
            node_name: shared.node.clone(),
            address,
            tasks,
            pods,
        })
    }

    /// Stops every pod process (SIGTERM, SIGKILL after 5 s) and the kubelet. The Node stays
    /// registered (NotReady once its Lease runs out), as when a real kubelet stops.
    pub async fn shutdown(self) {
        for t in &self.tasks {
            t.abort();
        }
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
        for t in &self.tasks {
            t.abort();
        }
        for (_, (_, h)) in self.pods.lock().drain() {
            // Aborting drops the children, which are killed on drop.
            h.abort();
        }
    }
}

pub(super) fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

/// Watches the pods bound to this node and starts, stops and finally deletes their workers.
pub(super) async fn sync_loop(shared: Arc<Shared>, pods: Workers) {
    let api: Api<Pod> = Api::all(shared.client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", shared.node));
    let mut stream = watcher(api, cfg).boxed();
    let mut known: HashMap<String, Value> = HashMap::new();
    let mut init: Option<HashMap<String, Value>> = None;
    let mut started: HashSet<String> = HashSet::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            ev = stream.next() => match ev {
                None => return,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "pod watch");
                    continue;
                }
                Some(Ok(ev)) => match ev {
                    watcher::Event::Apply(p) => { known.insert(key_of(&p), to_value(&p)); }
                    watcher::Event::Delete(p) => { known.remove(&key_of(&p)); }
                    watcher::Event::Init => init = Some(HashMap::new()),
                    watcher::Event::InitApply(p) => {
                        if let Some(m) = init.as_mut() { m.insert(key_of(&p), to_value(&p)); }
                    }
                    watcher::Event::InitDone => {
                        if let Some(m) = init.take() { known = m; }
                    }
                },
            },
            _ = tick.tick() => {}
        }
        *shared.pods.write() = known.clone();
        reconcile(&shared, &pods, &known, &mut started);
    }
}

fn key_of(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

fn to_value(p: &Pod) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}

fn reconcile(
    shared: &Arc<Shared>,
    pods: &Workers,
    known: &HashMap<String, Value>,
    started: &mut HashSet<String>,
) {
    let mut present = HashSet::new();
    let mut map = pods.lock();
    for pod in known.values() {
        let uid = s(pod, "/metadata/uid").to_string();
        present.insert(uid.clone());
        let deleting = pod.pointer("/metadata/deletionTimestamp").is_some();
        let terminal = matches!(s(pod, "/status/phase"), "Succeeded" | "Failed");
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
                        let shared = shared.clone();
                        let (ns, name) = (
                            s(pod, "/metadata/namespace").to_string(),
                            s(pod, "/metadata/name").to_string(),
                        );
                        tokio::spawn(async move { final_delete(&shared, &ns, &name, &uid).await });
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
    map.retain(|uid, (stop, h)| {
        if !present.contains(uid) && !h.is_finished() {
            let _ = stop.send(Stop::Graceful(Duration::ZERO));
        }
        present.contains(uid) || !h.is_finished()
    });
}

/// Removes the pod object once its containers are gone (the kubelet's last word on a pod).
pub(super) async fn final_delete(shared: &Shared, ns: &str, name: &str, uid: &str) {
    let api: Api<Pod> = Api::namespaced(shared.client.clone(), ns);
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..Default::default()
    };
    for attempt in 0..10u32 {
        match api.delete(name, &dp).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => return,
            Err(e) => {
                tracing::debug!(pod = %name, error = %e, attempt, "deleting the pod");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Whether an API error says the object does not exist (as opposed to a transient failure).
pub(super) fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
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

    /// A ConfigMap's data; `Ok(None)` when it does not exist.
    pub(super) async fn configmap(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<Option<Vec<(String, Vec<u8>)>>, String> {
        match Api::<ConfigMap>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
        {
            Ok(cm) => Ok(Some(configmap_data(
                &serde_json::to_value(cm).unwrap_or_default(),
            ))),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(format!("configmap \"{name}\": {e}")),
        }
    }

    /// A Secret's data; `Ok(None)` when it does not exist.
    pub(super) async fn secret(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<Option<Vec<(String, Vec<u8>)>>, String> {
        match Api::<Secret>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
        {
            Ok(sec) => Ok(Some(secret_data(
                &serde_json::to_value(sec).unwrap_or_default(),
            ))),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(format!("secret \"{name}\": {e}")),
        }
    }
}

/// What the pod worker knows about its containers, published as the pod status.
pub(super) struct PodState {
    pub(super) ip: String,
    pub(super) start_time: String,
    pub(super) statuses: Vec<Value>,
    /// Containers that will not run again.
    pub(super) finished: Vec<bool>,
    /// Init containers all succeeded.
    pub(super) initialized: bool,
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

    /// The pod status to publish (transition times are filled in by the status writer).
    pub(super) fn status(&self) -> Value {
        let ready = self.initialized
            && !self.statuses.is_empty()
            && self.statuses.iter().all(|c| c["ready"] == json!(true));
        let phase = self.phase();
        let cond = |ty: &str, ok: bool| json!({"type": ty, "status": if ok { "True" } else { "False" }, "lastProbeTime": null});
        let mut status = json!({
            "phase": phase,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": self.ip,
            "podIPs": [{"ip": self.ip}],
            "startTime": self.start_time,
            "conditions": [cond("PodScheduled", true), cond("Initialized", self.initialized), cond("ContainersReady", ready), cond("Ready", ready)],
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
    publisher: status::Publisher,
}

impl PodCtx {
    /// Records an Event about the pod, from the kubelet on this node.
    pub(super) fn event(&self, type_: &str, reason: &str, message: &str) {
        tokio::spawn(node::event(
            self.shared.clone(),
            self.pod.clone(),
            type_.to_string(),
            reason.to_string(),
            message.to_string(),
        ));
    }

    /// Schedules a status write with the current state (writes are ordered and coalesced).
    fn publish(&self) {
        self.publisher.publish(self.state.lock().status());
        self.changed.notify_waiters();
    }
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
    let inits: Vec<Value> = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let statuses = containers
        .iter()
        .map(|c| json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": false, "started": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}))
        .collect();
    let state = PodState {
        ip: ip.clone(),
        start_time: now(),
        statuses,
        finished: vec![false; containers.len()],
        initialized: inits.is_empty(),
        failure: None,
    };
    let mut pod_with_ip = pod.clone();
    pod_with_ip["status"]["podIP"] = json!(ip);
    let publisher = status::Publisher::start(shared.clone(), &ns, &name, &uid);
    publisher.publish(state.status());

    // As the kubelet, volumes are retried until they can be set up (a ConfigMap created after
    // the pod, the Node authorizer's graph not yet knowing the pod's references).
    let mut backoff = Duration::from_millis(200);
    let mut stop_rx = stop.clone();
    let mounts = loop {
        match materialize_volumes(&shared, &pod_with_ip, &dir).await {
            Ok(m) => break m,
            Err(e) => {
                tracing::debug!(pod = %name, error = %e, "volume setup failed; retrying");
                let message = format!("MountVolume.SetUp failed: {e}");
                if backoff >= Duration::from_secs(2) {
                    node::event(
                        shared.clone(),
                        pod_with_ip.clone(),
                        "Warning".into(),
                        "FailedMount".into(),
                        message,
                    )
                    .await;
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop_rx.changed() => {
                        shared.free_ip(&ip);
                        let _ = std::fs::remove_dir_all(&dir);
                        final_delete(&shared, &ns, &name, &uid).await;
                        return;
                    }
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    };
    let ctx = Arc::new(PodCtx {
        shared: shared.clone(),
        pod: pod_with_ip,
        state: Mutex::new(state),
        changed: Notify::new(),
        dir: dir.clone(),
        mounts,
        publisher,
    });
    ctx.publish();

    // Init containers run one after the other, to completion.
    for init in &inits {
        let key = format!("{ns}/{name}/{}", s(init, "/name"));
        let code = match prepare(&ctx, init).await {
            Ok(prep) => match spawn(&ctx, &prep, &key) {
                Ok(mut proc) => {
                    let mut stop = stop.clone();
                    tokio::select! {
                        r = proc.wait() => r,
                        _ = stop.changed() => { terminate(&mut proc, Duration::ZERO).await; 137 }
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
    if !inits.is_empty() {
        ctx.state.lock().initialized = true;
        ctx.publish();
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
    ctx.publisher.flush().await;
    let _ = std::fs::remove_dir_all(&ctx.dir);
    let (ns, name, uid) = (
        s(&ctx.pod, "/metadata/namespace").to_string(),
        s(&ctx.pod, "/metadata/name").to_string(),
        s(&ctx.pod, "/metadata/uid").to_string(),
    );
    let deleting = ctx
        .shared
        .pods
        .read()
        .get(&format!("{ns}/{name}"))
        .is_some_and(|p| {
            s(p, "/metadata/uid") == uid && p.pointer("/metadata/deletionTimestamp").is_some()
        });
    if deleting {
        final_delete(&ctx.shared, &ns, &name, &uid).await;
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

    #[test]
    fn a_failed_init_container_leaves_the_pod_pending_and_not_initialized() {
        let st = PodState {
            ip: "127.0.0.2".into(),
            start_time: now(),
            statuses: vec![
                json!({"name": "main", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}),
            ],
            finished: vec![false],
            initialized: false,
            failure: Some((
                "InitContainerFailed".into(),
                "init container a exited with 3".into(),
            )),
        };
        let status = st.status();
        assert_eq!(status["phase"], "Pending");
        assert_eq!(status["reason"], "InitContainerFailed");
        assert_eq!(
            status["conditions"][1],
            json!({"type": "Initialized", "status": "False", "lastProbeTime": null})
        );
    }
}

//! Many syncs: `DCS_BENCH_SYNCS` DorisChangelogSyncs (default 1 000) reconciled by the real
//! `dcs-operator` binary, run as a child process against a control plane of the bench's own
//! (the test bed's genuine etcd, kube-apiserver, kube-controller-manager and kube-scheduler; no
//! kubelet: runner pods are created by the real ReplicaSet controller and stay Pending) with one
//! doris-emu source table. The runners are stubbed by the
//! bench: once a sync's runner Deployment appears, the bench writes a streaming checkpoint
//! (crds/src/checkpoint.rs, offset 10 s behind Doris's clock) into its checkpoint ConfigMap, which
//! is what a started runner does first, and the operator turns it into `Ready=True`/`Streaming`.
//!
//! Prints:
//! - the time from the operator's start (the syncs already exist, as after an operator restart or
//!   upgrade) until every runner Deployment exists and until every sync is Ready, and how many
//!   reconciles that took and how many of them failed (from the operator's /metrics);
//! - the API writes during an idle window (`DCS_BENCH_IDLE_SECS`, default 75 s: longer than the
//!   operator's 60 s requeue, so every sync is reconciled at least once in it). Doris's clock
//!   stands still for the whole run, as for runners that keep up, so nothing the operator
//!   reports changes: etcd's revision (a list's resourceVersion) counts every write of the whole
//!   cluster (the controllers' too); watches of the namespace's syncs, ConfigMaps, Deployments,
//!   ReplicaSets, Pods and Events break them down by resource, and status writes that only move lagSeconds and
//!   ttlHeadroomSeconds are told apart from any other write (target: no write at all);
//! - the operator's memory: VmHWM and VmRSS from `/proc/<child pid>/status` (the operator is a
//!   separate process), and the same of etcd, kube-apiserver, kube-controller-manager and
//!   kube-scheduler; doris-emu and the stubs live in the bench process, reported apart.
//!
//! `cargo bench -p dcs-operator --bench many_syncs` measures; without `--bench` (as `cargo test
//! --all-targets` runs it) it runs 10 syncs with a 3 s idle window as a smoke test, which fails
//! if they do not all become Ready.

use std::{
    collections::{BTreeMap, HashSet},
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

#[path = "../tests/integration/common/mod.rs"]
mod common;

use anyhow::{Context as _, Result, bail};
use dcs_crds::checkpoint::Checkpoint;
use dcs_crds::testing::{CheckpointBuilder, SyncBuilder, offset};
use dcs_crds::{DorisChangelogSync, StartupMode};
use dcs_doris_emu::{RunningEmulator, clock::Clock};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::{Value, json};

const NS: &str = "default";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A field of a `/proc/<pid>/status` line, in KiB.
fn proc_status_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(
        || "n/a".to_owned(),
        |k| format!("{:.1} MiB", k as f64 / 1024.0),
    )
}

async fn client_for(cp: &dcs_kube_bed::ControlPlane) -> Result<Client> {
    let kc = kube::config::Kubeconfig::from_yaml(&cp.kubeconfig(NS))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    // The control plane shares two cores with the operator: be patient (the operator keeps kube's
    // defaults).
    config.connect_timeout = Some(Duration::from_secs(300));
    config.read_timeout = None;
    Ok(Client::try_from(config)?)
}

/// The CRD, the Secret the syncs name and a changelog-enabled source table `db.t`.
async fn set_up(client: &Client) -> Result<RunningEmulator> {
    common::install_crd(client).await?;
    common::create_doris_secret(client).await?;
    common::doris_with_tables(&[
        "CREATE TABLE db.t (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
         PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.ttl_seconds\" = \"86400\")",
    ])
    .await
}

fn sync_object(name: &str, fe_http: u16, query: u16) -> DorisChangelogSync {
    SyncBuilder::new()
        .name(name)
        .namespace(NS)
        .source_fe(&format!("127.0.0.1:{fe_http}"))
        .query_port(query)
        .source_table("db.t")
        .source_secret("doris")
        .mode(StartupMode::Initial)
        .expected_snapshot_duration("30m")
        .stdout()
        .build()
}

/// The checkpoint a runner streaming 10 s behind Doris's clock would save.
fn streaming_checkpoint(consumer: &str, clock: &Clock) -> Checkpoint {
    let epoch_ms = clock.now_ms() - 10_000;
    let timestamp = jiff::Timestamp::from_millisecond(epoch_ms)
        .expect("a valid instant")
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string();
    CheckpointBuilder::new()
        .consumer(consumer)
        .id(1)
        .saved_at(&jiff::Timestamp::now().to_string())
        .changelog_at(offset(&timestamp, epoch_ms))
        .start_point(offset(&timestamp, epoch_ms))
        .label_scheme(1)
        .build()
}

/// Plays every runner: a checkpoint into `<sync>-checkpoint` once `<sync>-runner` exists.
async fn stub_runners(client: Client, clock: Arc<Clock>, started: Arc<AtomicUsize>) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let configmaps: Api<ConfigMap> = Api::namespaced(client, NS);
    let mut seen = HashSet::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(32));
    let stream = watcher(
        deployments,
        watcher::Config::default().labels("app.kubernetes.io/managed-by=dcs-operator"),
    )
    .default_backoff()
    .applied_objects();
    futures::pin_mut!(stream);
    while let Some(item) = stream.next().await {
        let d = match item {
            Ok(d) => d,
            Err(e) => {
                eprintln!("stub runners: watch error ({e}); the watcher retries");
                continue;
            }
        };
        let Some(sync) = d.name_any().strip_suffix("-runner").map(str::to_owned) else {
            continue;
        };
        if !seen.insert(sync.clone()) {
            continue;
        }
        let permit = slots.clone().acquire_owned().await?;
        let (configmaps, clock, started) = (configmaps.clone(), clock.clone(), started.clone());
        tokio::spawn(async move {
            let checkpoint = streaming_checkpoint(&sync, &clock).to_json();
            let patch = json!({"data": {"checkpoint.json": checkpoint}});
            // The operator creates the checkpoint ConfigMap before the Deployment.
            for _ in 0..50 {
                match configmaps
                    .patch(
                        &format!("{sync}-checkpoint"),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                {
                    Ok(_) => {
                        started.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Err(e) => {
                        eprintln!("stub runner {sync}: {e}; retrying");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
            drop(permit);
        });
    }
    Ok(())
}

fn is_ready(s: &DorisChangelogSync) -> bool {
    s.status
        .as_ref()
        .is_some_and(|st| dcs_crds::conditions::is_true(&st.conditions, "Ready"))
}

/// Writes seen in a window, by resource and event type, with status refreshes told apart.
#[derive(Default)]
struct Writes {
    by_kind: BTreeMap<String, u64>,
    lag_refreshes: u64,
    other_sync_writes: Vec<String>,
    /// Which fields the other writes changed, with how often.
    other_changes: BTreeMap<String, u64>,
    /// The writes of s0000, for a look (DCS_BENCH_KEEP).
    trace: Vec<String>,
    missed: u64,
}

/// The JSON paths where `a` and `b` differ (leaves, or where the shapes differ).
fn diff_paths(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let path = format!("{at}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => diff_paths(p, q, &path, out),
                    _ => out.push(path),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                // Conditions are keyed by type: name the path after it.
                let key = p
                    .get("type")
                    .and_then(Value::as_str)
                    .map_or_else(|| i.to_string(), str::to_owned);
                diff_paths(p, q, &format!("{at}[{key}]"), out);
            }
        }
        _ if a != b => out.push(at.to_owned()),
        _ => {}
    }
}

/// The sync without what a lag/headroom refresh changes.
fn without_refresh_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    if let Some(s) = v.get_mut("status").and_then(Value::as_object_mut) {
        s.remove("lagSeconds");
        s.remove("ttlHeadroomSeconds");
    }
    v
}

/// etcd's revision: the resourceVersion of a list, which counts every write in the cluster.
async fn revision(client: &Client) -> Result<u64> {
    let list = Api::<ConfigMap>::namespaced(client.clone(), NS)
        .list_metadata(&ListParams::default().limit(1))
        .await?;
    Ok(list
        .metadata
        .resource_version
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

/// Counts the writes to `K` in the namespace from a watch, keeping each object's previous state
/// to classify sync writes. Returns once the watch has listed what exists (which is not counted).
async fn count_writes<K>(
    api: Api<K>,
    what: &'static str,
    writes: Arc<Mutex<Writes>>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Send
        + Sync
        + 'static,
{
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        let mut known: BTreeMap<String, Value> = BTreeMap::new();
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            let Ok(ev) = ev else {
                writes.lock().expect("writes lock").missed += 1;
                continue;
            };
            match ev {
                watcher::Event::InitApply(o) => {
                    known.insert(o.name_any(), serde_json::to_value(&o).unwrap_or_default());
                }
                watcher::Event::Init => {}
                watcher::Event::InitDone => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
                watcher::Event::Delete(o) => {
                    known.remove(&o.name_any());
                    *writes
                        .lock()
                        .expect("writes lock")
                        .by_kind
                        .entry(format!("{what} DELETED"))
                        .or_default() += 1;
                }
                watcher::Event::Apply(o) => {
                    let name = o.name_any();
                    let object = serde_json::to_value(&o).unwrap_or_default();
                    let previous = known.insert(name.clone(), object.clone());
                    classify(&writes, what, &name, &object, previous.as_ref());
                }
            }
        }
    });
    let _ = ready_rx.await;
    task
}

fn classify(
    writes: &Mutex<Writes>,
    what: &str,
    name: &str,
    object: &Value,
    previous: Option<&Value>,
) {
    let mut w = writes.lock().expect("writes lock");
    let kind = if previous.is_some() {
        "MODIFIED"
    } else {
        "ADDED"
    };
    *w.by_kind.entry(format!("{what} {kind}")).or_default() += 1;
    if what != "dorischangelogsyncs.dcs.dev" {
        return;
    }
    if name == "s0000" {
        w.trace.push(format!(
            "{} rv {} lag {} ready.ltt {} snapshot.startedAt {} (before: lag {} ready.ltt {})",
            jiff::Timestamp::now(),
            object
                .pointer("/metadata/resourceVersion")
                .unwrap_or(&Value::Null),
            object.pointer("/status/lagSeconds").unwrap_or(&Value::Null),
            object
                .pointer("/status/conditions/0/lastTransitionTime")
                .unwrap_or(&Value::Null),
            object
                .pointer("/status/snapshot/startedAt")
                .unwrap_or(&Value::Null),
            previous
                .and_then(|p| p.pointer("/status/lagSeconds"))
                .unwrap_or(&Value::Null),
            previous
                .and_then(|p| p.pointer("/status/conditions/0/lastTransitionTime"))
                .unwrap_or(&Value::Null),
        ));
    }
    let same =
        previous.is_some_and(|p| without_refresh_fields(p) == without_refresh_fields(object));
    if same {
        w.lag_refreshes += 1;
    } else {
        w.other_sync_writes.push(name.to_owned());
        let mut paths = Vec::new();
        if let Some(p) = previous {
            diff_paths(
                &without_refresh_fields(p),
                &without_refresh_fields(object),
                "",
                &mut paths,
            );
        }
        for path in paths {
            *w.other_changes.entry(path).or_default() += 1;
        }
    }
}

/// Watches every kind the operator (or the controllers acting on its objects) writes here.
async fn watch_writes(
    client: &Client,
    writes: Arc<Mutex<Writes>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod, events::v1::Event};
    vec![
        count_writes(
            Api::<DorisChangelogSync>::namespaced(client.clone(), NS),
            "dorischangelogsyncs.dcs.dev",
            writes.clone(),
        )
        .await,
        count_writes(
            Api::<ConfigMap>::namespaced(client.clone(), NS),
            "configmaps",
            writes.clone(),
        )
        .await,
        count_writes(
            Api::<Deployment>::namespaced(client.clone(), NS),
            "deployments.apps",
            writes.clone(),
        )
        .await,
        count_writes(
            Api::<ReplicaSet>::namespaced(client.clone(), NS),
            "replicasets.apps",
            writes.clone(),
        )
        .await,
        count_writes(
            Api::<Pod>::namespaced(client.clone(), NS),
            "pods",
            writes.clone(),
        )
        .await,
        count_writes(
            Api::<Event>::namespaced(client.clone(), NS),
            "events.events.k8s.io",
            writes,
        )
        .await,
    ]
}

#[tokio::main]
async fn main() -> Result<()> {
    let measuring = std::env::args().any(|a| a == "--bench");
    let n = env_u64("DCS_BENCH_SYNCS", if measuring { 1000 } else { 10 }) as usize;
    let idle = Duration::from_secs(env_u64(
        "DCS_BENCH_IDLE_SECS",
        if measuring { 75 } else { 3 },
    ));
    let timeout = Duration::from_secs(env_u64("DCS_BENCH_TIMEOUT_SECS", 900));

    let cp = tokio::task::spawn_blocking(|| dcs_kube_bed::ControlPlane::start(None)).await??;
    let client = client_for(&cp).await?;
    let doris = set_up(&client).await?;
    let ports = doris.ports();
    // Doris's time stands still for the whole run, as for runners that keep up (their offset
    // moves with Doris's clock, so lag and headroom stay put): every sync's lag is 10 s from its
    // first status on, so nothing the operator reports ever changes and any write it makes in the
    // idle window is waste. (Freezing only once all were Ready left the early syncs with a lag
    // measured before, refreshed once at their next requeue inside the window.)
    doris.doris.clock.freeze();

    // The syncs exist before the operator starts (an operator restart or upgrade over 1 000
    // syncs): creating them while it runs measures the API server's saturation more than the
    // operator.
    let api: Api<DorisChangelogSync> = Api::namespaced(client.clone(), NS);
    let c0 = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let sync = sync_object(&format!("s{i:04}"), ports.fe_http_port, ports.query_port);
                api.create(&PostParams::default(), &sync).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    println!(
        "many_syncs: {n} syncs created in {:.2} s, in one namespace; a genuine control plane (no \
         kubelet) and doris-emu in this process; runners stubbed by the bench",
        c0.elapsed().as_secs_f64()
    );

    let dir = std::env::temp_dir().join(format!("dcs-many-syncs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cp.kubeconfig(NS))?;
    let log_path = dir.join("operator.log");
    let log = std::fs::File::create(&log_path)?;
    let metrics_port = free_port()?;
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let http = dcs_doris_client::tls::plain_http_client(reqwest::Client::builder()).unwrap();

    let started = Arc::new(AtomicUsize::new(0));
    let stubs = tokio::spawn(stub_runners(
        client.clone(),
        doris.doris.clock.clone(),
        started.clone(),
    ));

    let t0 = Instant::now();
    let mut operator = tokio::process::Command::new(env!("CARGO_BIN_EXE_dcs-operator"))
        .env("KUBECONFIG", &kubeconfig)
        .env(
            "RUST_LOG",
            std::env::var("DCS_BENCH_RUST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .args([
            "--metrics-addr",
            &metrics_addr,
            "--runner-image",
            "dcs-runner:bench",
            "--log-format",
            "text",
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting the dcs-operator binary")?;
    let pid = operator.id().context("the operator's pid")?.to_string();
    println!(
        "operator {} started as a child process (pid {pid}); times below are from its start",
        env!("CARGO_BIN_EXE_dcs-operator")
    );

    let mut all_started = None;
    let mut list_errors = 0u32;
    let mut next_progress = Duration::from_secs(30);
    let ready_at = loop {
        if let Some(status) = operator.try_wait()? {
            bail!(
                "the operator exited ({status}); its log: {}",
                log_path.display()
            );
        }
        if all_started.is_none() && started.load(Ordering::Relaxed) >= n {
            all_started = Some(t0.elapsed());
        }
        // The control plane shares the two cores with the operator and the stubs: a list may fail to
        // connect while the API server is saturated; that is not the operator's doing.
        let ready = match api.list(&ListParams::default()).await {
            Ok(list) => list.items.iter().filter(|s| is_ready(s)).count(),
            Err(e) => {
                list_errors += 1;
                eprintln!("listing the syncs failed ({e}); trying again");
                0
            }
        };
        if ready == n {
            break t0.elapsed();
        }
        if measuring && t0.elapsed() >= next_progress {
            next_progress += Duration::from_secs(30);
            println!(
                "  {:>5.0} s: {ready} of {n} Ready, {} runner Deployments, operator VmRSS {}",
                t0.elapsed().as_secs_f64(),
                started.load(Ordering::Relaxed),
                mib(proc_status_kib(&pid, "VmRSS:"))
            );
        }
        if t0.elapsed() > timeout {
            if let Some((reconciles, errors, kinds)) = reconcile_counts(&http, metrics_port).await {
                println!("the operator ran {reconciles} reconciles; {errors} failed ({kinds})");
            }
            println!(
                "operator memory: VmHWM {}, VmRSS {}",
                mib(proc_status_kib(&pid, "VmHWM:")),
                mib(proc_status_kib(&pid, "VmRSS:"))
            );
            bail!(
                "only {ready} of {n} syncs Ready after {timeout:?} ({} runners stubbed); operator log: {}",
                started.load(Ordering::Relaxed),
                log_path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(if measuring { 2000 } else { 250 })).await;
    };
    let all_started = all_started.unwrap_or(ready_at);
    println!(
        "all {n} runner Deployments created (and checkpointed by the stubs) after {:.2} s",
        all_started.as_secs_f64()
    );
    println!(
        "all {n} syncs Ready (Streaming) after {:.2} s ({:.1} syncs/s)",
        ready_at.as_secs_f64(),
        n as f64 / ready_at.as_secs_f64()
    );
    let rss_ready = proc_status_kib(&pid, "VmRSS:");
    if let Some((reconciles, errors, kinds)) = reconcile_counts(&http, metrics_port).await {
        println!(
            "until then the operator ran {reconciles} reconciles; {errors} failed and were retried ({kinds})"
        );
    }
    if list_errors > 0 {
        println!(
            "(the bench's own list of the syncs failed {list_errors} times on the saturated API server)"
        );
    }

    // Settle: the last transitions' events and status writes; then nothing should move.
    let settle_start = Instant::now();
    let mut last = revision(&client).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = revision(&client).await?;
        if now == last || settle_start.elapsed() > Duration::from_secs(30) {
            break;
        }
        last = now;
    }

    let writes = Arc::new(Mutex::new(Writes::default()));
    let counter = watch_writes(&client, writes.clone()).await;
    let rv0 = revision(&client).await?;
    let counts0 = reconcile_counts(&http, metrics_port).await;
    tokio::time::sleep(idle).await;
    let rv1 = revision(&client).await?;
    let counts1 = reconcile_counts(&http, metrics_port).await;
    for c in counter {
        c.abort();
    }
    {
        let w = writes.lock().expect("writes lock");
        println!(
            "idle window {:.0} s (after {:.1} s settling): {} writes in the whole cluster (etcd revision {rv0} -> {rv1})",
            idle.as_secs_f64(),
            settle_start.elapsed().as_secs_f64() - idle.as_secs_f64(),
            rv1 - rv0
        );
        if let (Some((r0, e0, _)), Some((r1, e1, _))) = (counts0, counts1) {
            println!(
                "  the operator ran {} reconciles in the window ({} failed), /metrics",
                r1 - r0,
                e1 - e0
            );
        }
        for (kind, count) in &w.by_kind {
            println!("  {kind}: {count}");
        }
        let mut others: Vec<_> = w.other_sync_writes.clone();
        others.sort();
        others.dedup();
        println!(
            "  of the sync writes: {} only moved lagSeconds/ttlHeadroomSeconds (by >= 5 s), {} changed anything else{}",
            w.lag_refreshes,
            w.other_sync_writes.len(),
            if others.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} syncs, e.g. {})",
                    others.len(),
                    others
                        .iter()
                        .take(5)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
        for (path, count) in &w.other_changes {
            println!("    {path} changed {count} times");
        }
        if w.missed > 0 {
            println!(
                "  {} events were not classified (the event stream lagged)",
                w.missed
            );
        }
    }

    println!(
        "operator memory (child process /proc/{pid}/status): VmHWM {}, VmRSS {} when all were Ready, VmRSS {} now",
        mib(proc_status_kib(&pid, "VmHWM:")),
        mib(rss_ready),
        mib(proc_status_kib(&pid, "VmRSS:")),
    );
    for (name, pid) in cp.pids() {
        let pid = pid.to_string();
        println!(
            "{name} memory: VmHWM {}, VmRSS {}",
            mib(proc_status_kib(&pid, "VmHWM:")),
            mib(proc_status_kib(&pid, "VmRSS:"))
        );
    }
    let me = std::process::id().to_string();
    println!(
        "bench process (doris-emu + stubs, not the operator): VmHWM {}",
        mib(proc_status_kib(&me, "VmHWM:"))
    );

    if std::env::var_os("DCS_BENCH_KEEP").is_some() {
        // For a look at what the operator wrote: every sync as stored at the end.
        let list = api.list(&ListParams::default()).await?;
        std::fs::write(
            dir.join("syncs.json"),
            serde_json::to_string_pretty(&list.items)?,
        )?;
        let trace = writes.lock().expect("writes lock").trace.join("\n");
        std::fs::write(dir.join("s0000-writes.txt"), trace)?;
    }
    stubs.abort();
    operator.start_kill()?;
    let _ = operator.wait().await;
    drop(doris);
    tokio::task::spawn_blocking(move || cp.stop()).await?;
    if std::env::var_os("DCS_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("kept {}", dir.display());
    }
    Ok(())
}

/// A free port on 127.0.0.1 for the operator's metrics (bound, read, released).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `dcs_operator_reconciles_total` and the sum of `dcs_operator_reconcile_errors_total` from the
/// operator's /metrics.
async fn reconcile_counts(http: &reqwest::Client, port: u16) -> Option<(u64, u64, String)> {
    let text = http
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let mut reconciles = None;
    let mut errors = 0;
    let mut kinds = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        if line.starts_with("dcs_operator_reconciles_total ") {
            reconciles = value.map(|v| v as u64);
        } else if line.starts_with("dcs_operator_reconcile_errors_total") {
            let v = value.map_or(0, |v| v as u64);
            errors += v;
            if v > 0 {
                let kind = line.split('"').nth(1).unwrap_or("?");
                kinds.push(format!("{kind} {v}"));
            }
        }
    }
    Some((reconciles?, errors, kinds.join(", ")))
}

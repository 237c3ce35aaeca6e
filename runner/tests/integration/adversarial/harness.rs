//! The adversarial harness: the real `dcs-runner run` binary against doris-emu while faults are
//! injected in a seeded random order and timing, and after each run the invariants a user relies
//! on are checked. Shared by the short suite (`cargo test`, `adversarial::`) and the long one
//! (`cargo bench -p dcs-runner --bench adversarial`, run count as a knob).
//!
//! One run: a `demo.student` source (UNIQUE KEY, changelog DETAIL, TTL 600 s) with 1,500 rows,
//! a sink that is an upsert table or a changelog-mode (audit) table, both with 2PC, a checkpoint
//! store that is a directory or a ConfigMap on the genuine API server (through a proxy that can
//! lose answers), and two FE stand-ins in front of the emulator's FE. Then, step by step, one
//! fault of these classes at a time while a writer changes the source:
//!
//! | class | what |
//! |---|---|
//! | `kill` | SIGKILL at a random moment, restart after 0–0.8 s |
//! | `kill-after-save` | SIGKILL right after a checkpoint was saved (between save and commit) |
//! | `clock-short` | Doris's clock moves 5–150 s on, staying inside the TTL with room |
//! | `clock-past-ttl` | Doris's clock moves past the TTL: the runner must stop with exit 3 |
//! | `ttl-lowered` | `changelog.ttl_seconds` lowered while running: to 300 (room left) or to 20 (no room: exit 3) |
//! | `sink-5xx` | the next 1–3 Stream Loads answer 500/503 or `Fail` |
//! | `doris-refuses` | every Doris port refuses connections for 0.5–3 s |
//! | `doris-stalls` | every Doris HTTP answer is held 0.5–3 s (long runs: also 65 s, past the sink's 60 s client timeout) |
//! | `fe-down` | one of the two FEs is down for the step |
//! | `ambiguous-save` | the next checkpoint save is applied by the API server and its answer lost (ConfigMap store) |
//! | `tablets-replaced` | a re-initialisation (a new consumer) whose snapshot is caught mid-read (its first splits held) by a TRUNCATE and new rows: the runner must stop with exit 5 (`SnapshotTabletsChanged`) within a bound, answered with another new consumer |
//! | `fence-ambiguous-save` | the next checkpoint save is applied, then the store is fenced as the operator fences it (`dcs.dev/fenced`), then the save's answer is lost: the runner must stop with exit 4 within a bound, committing and aborting nothing (ConfigMap store) |
//! | `audit-writes` | a re-initialisation (a new consumer) whose snapshot splits are held while a burst of 20–60 changes is written (into tablets not read yet), then let go: the changes are after T0, so a changelog sink must hold them once, as changes, and never in its snapshot |
//! | `schema-change` | the source gains a column `x<n>` and rows get values in it, the runner is SIGKILLed 0–0.8 s later (anywhere between the rows before the change, the sink's ALTER and the checkpoint after it), and while it is down the column the previous `schema-change` added is dropped; then it restarts (`schemaChange: evolve`, the default) |
//!
//! An exit 3 (OffsetExpired) is answered as the operator would: a new consumer id (`adv-r<n>`),
//! a fresh checkpoint, a fresh sink table, the TTL back at 600 s. Any other exit is a crash the
//! kubelet would restart: the runner is started again on its checkpoint.
//!
//! The writer changes the source all along, through every snapshot too.
//!
//! Checked after every run, for the last consumer: an upsert sink equals the source (every column:
//! the sink followed each `schema-change`); a changelog sink's data columns are the source's, and it
//! holds the table as of T0 (over `demo.student`'s first four columns: Doris's `FOR VERSION AS OF` T0, whatever was written while the
//! snapshot ran) and then every change after T0 exactly once; no pre-committed
//! load of that consumer is left open. Checked during the run: every move of the clock past the
//! TTL and every TTL lowered below the runner's safety margin ended in exit 3 within a bound
//! (never a silent advance), no exit 3 happened without such a fault, and no process panicked.
//! A failing run prints its seed; `DCS_TEST_SEED=<seed>` replays the same faults in the same
//! order with the same parameters (the writer draws from its own generator, so timing cannot
//! shift them); where each lands among the runner's steps still depends on the machine.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dcs_crds::StartupMode;
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::faults::StreamLoadFault;
use dcs_kube_bed::{FaultProxy, TestNamespace};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::source_support::fe_proxy::FeProxy;
use crate::source_support::process::Runner;
use crate::source_support::{
    Rng, SOURCE_DDL, STUDENT_EVENTS_SINK_DDL, column_names, exec, expected_student_events,
    mysql_rows, row_values, student_sync,
};

/// The TTL the source starts with, in seconds.
const TTL_S: i64 = 600;
/// The runner's safety margin before a window start's expiry (`source::retention`), in seconds.
const MARGIN_S: i64 = 30;
/// Rows in the source before the first run.
const ROWS: u32 = 1_500;
/// How long an expiry may take to end in exit 3 (a poll, a snapshot checkpoint, a loaded machine).
const EXPIRY_BOUND: Duration = Duration::from_secs(120);
/// How long a runner fenced during an unclear save may take to stop with exit 4.
const FENCE_BOUND: Duration = Duration::from_secs(60);
/// How long a held checkpoint save may take to come (a checkpoint every second).
const SAVE_BOUND: Duration = Duration::from_secs(10);
/// How long the last consumer may take to catch up with the last write.
const CATCH_UP_BOUND: Duration = Duration::from_secs(240);

const UPSERT_SINK_DDL: &str = "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64), \
     score DECIMAL(10,2), updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 \
     PROPERTIES (\"replication_num\" = \"1\")";

/// The sink's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkMode {
    /// A UNIQUE KEY table kept equal to the source.
    Upsert,
    /// A DUPLICATE KEY table that receives every change as a row.
    Changelog,
}

/// The checkpoint store's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// `--checkpoint-dir`.
    Directory,
    /// `DCS_CHECKPOINT_CONFIGMAP` on the genuine API server.
    ConfigMap,
}

/// The knobs of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Fault steps per run.
    pub steps: u32,
    /// Whether `doris-stalls` may hold answers past the sink's client timeout (65 s).
    pub long_stalls: bool,
    /// The sink kind; random when `None`.
    pub sink: Option<SinkMode>,
    /// The store kind; random when `None`.
    pub store: Option<StoreKind>,
}

/// What runs did and found, summed over runs.
#[derive(Debug, Default)]
pub struct Report {
    /// Runs finished.
    pub runs: u32,
    /// Faults injected, by class.
    pub faults: BTreeMap<&'static str, u32>,
    /// Invariant checks made.
    pub checks: u32,
    /// Exits 3 after an expiring fault, each answered with a new consumer.
    pub expiries: u32,
    /// Exits 4 after a fence during an unclear save.
    pub fenced_exits: u32,
    /// Exits 5 after a TRUNCATE mid-snapshot, each answered with a new consumer.
    pub tablets_replaced: u32,
    /// Other exits of the runner (restarted on the same checkpoint), by exit code and the
    /// reason the runner logged.
    pub error_exits: BTreeMap<String, u32>,
    /// Runs by sink and store kind.
    pub kinds: BTreeMap<String, u32>,
    /// What went wrong, each with its seed.
    pub failures: Vec<String>,
}

impl Report {
    /// A table for a person (and BENCHMARKS/RELIABILITY records).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "runs {}, invariant checks {}, expiries answered {}, fenced saves stopped {}, snapshots with moved tablets re-read {}, failures {}\n",
            self.runs,
            self.checks,
            self.expiries,
            self.fenced_exits,
            self.tablets_replaced,
            self.failures.len()
        );
        s += &format!("runs by kind: {:?}\n", self.kinds);
        s += &format!(
            "faults injected ({} in all): {:?}\n",
            self.faults.values().sum::<u32>(),
            self.faults
        );
        s += &format!("other runner exits (restarted): {:?}\n", self.error_exits);
        for f in &self.failures {
            s += &format!("FAILURE: {f}\n");
        }
        s
    }
}

/// The fault classes, in the table's order.
const CLASSES: [&str; 14] = [
    "kill",
    "kill-after-save",
    "clock-short",
    "clock-past-ttl",
    "ttl-lowered",
    "sink-5xx",
    "doris-refuses",
    "doris-stalls",
    "fe-down",
    "ambiguous-save",
    "fence-ambiguous-save",
    "tablets-replaced",
    "audit-writes",
    "schema-change",
];

/// Where the runner keeps its checkpoint.
enum Store {
    Directory(PathBuf),
    ConfigMap {
        ns: TestNamespace,
        proxy: FaultProxy,
        kubeconfig: PathBuf,
    },
}

/// One consumer's life: from its start to its exit 3 or the end of the run.
struct Consumer {
    n: u32,
    /// An expiring fault was injected: exit 3 is due.
    expiry_due: bool,
    /// The table was truncated during this consumer's snapshot: exit 5 is due.
    tablets_due: bool,
    /// The store was fenced during an unclear save, leaving this resourceVersion: the runner must
    /// stop without writing the store again.
    fence_due: Option<String>,
    /// Doris's clock moved on by this much since the consumer started (ms).
    advanced_ms: i64,
    /// The TTL now (s).
    ttl_s: i64,
    /// The clock was moved at this emulator time; no further clock fault until the runner's
    /// offset passed it (so the moves never add up to an expiry nobody meant).
    settling_after: Option<i64>,
}

struct Run {
    seed: u64,
    /// The faults' choices: the same for a seed however the run's timing goes.
    rng: Rng,
    /// The writer's choices (how many writes fit in a step depends on timing).
    write_rng: Rng,
    emu: Arc<RunningEmulator>,
    dir: tempfile::TempDir,
    fes: [FeProxy; 2],
    store: Store,
    sink: SinkMode,
    opts: Options,
    consumer: Consumer,
    runner: Option<Runner>,
    /// The writer's state.
    next_id: u32,
    version: u64,
    deleted: Vec<u32>,
    writes: u64,
    /// `schema-change` faults so far, and the column the last one added.
    schema_changes: u32,
    added_column: Option<String>,
}

/// Runs one seeded run and adds what it found to `report`.
pub async fn run(seed: u64, opts: &Options, report: &mut Report) {
    let mut rng = Rng(seed);
    let sink = opts.sink.unwrap_or(if rng.range(0, 2) == 0 {
        SinkMode::Upsert
    } else {
        SinkMode::Changelog
    });
    let store_kind = opts.store.unwrap_or(if rng.range(0, 2) == 0 {
        StoreKind::Directory
    } else {
        StoreKind::ConfigMap
    });
    *report
        .kinds
        .entry(format!("{sink:?}/{store_kind:?}"))
        .or_default() += 1;
    let emu = Arc::new(crate::source_support::emu().await);
    exec(
        &emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            SOURCE_DDL,
            &format!("ALTER TABLE demo.student SET (\"changelog.ttl_seconds\" = \"{TTL_S}\")"),
        ],
    )
    .await;
    let values: Vec<String> = (1..=ROWS).map(row_values).collect();
    for chunk in values.chunks(500) {
        exec(
            &emu,
            &[&format!(
                "INSERT INTO demo.student VALUES {}",
                chunk.join(", ")
            )],
        )
        .await;
    }
    let fe: SocketAddr = emu.fe_http_addr().parse().unwrap();
    let fes = [FeProxy::start(fe).await, FeProxy::start(fe).await];
    let dir = tempfile::tempdir().unwrap();
    let store = match store_kind {
        StoreKind::Directory => Store::Directory(dir.path().join("cp")),
        StoreKind::ConfigMap => {
            let ns = dcs_kube_bed::namespace("adversarial").await.unwrap();
            let proxy = FaultProxy::start(ns.cp.address).await.unwrap();
            let kubeconfig = dir.path().join("kubeconfig");
            std::fs::write(&kubeconfig, ns.cp.kubeconfig_via(&ns.name, proxy.address)).unwrap();
            Store::ConfigMap {
                ns,
                proxy,
                kubeconfig,
            }
        }
    };
    let mut run = Run {
        seed,
        write_rng: Rng(seed ^ 0x5EED),
        rng,
        emu,
        dir,
        fes,
        store,
        sink,
        opts: opts.clone(),
        consumer: Consumer::new(1),
        runner: None,
        next_id: ROWS + 1,
        version: 0,
        deleted: Vec::new(),
        schema_changes: 0,
        added_column: None,
        writes: 0,
    };
    let outcome = run.go(report).await;
    report.runs += 1;
    if let Err(why) = outcome {
        // The whole log outlives the run's directory.
        let kept = std::env::temp_dir().join(format!("dcs-adversarial-{seed}.log"));
        let _ = std::fs::copy(run.log_path(), &kept);
        report.failures.push(format!(
            "seed {seed} ({sink:?}/{store_kind:?}): {why}\n--- runner log (last lines; all of it in {}) ---\n{}",
            kept.display(),
            run.logs()
        ));
    }
}

impl Consumer {
    fn new(n: u32) -> Self {
        Self {
            n,
            expiry_due: false,
            fence_due: None,
            tablets_due: false,
            advanced_ms: 0,
            ttl_s: TTL_S,
            settling_after: None,
        }
    }

    fn name(&self) -> String {
        format!("adv-r{}", self.n)
    }
}

impl Run {
    async fn go(&mut self, report: &mut Report) -> Result<(), String> {
        self.begin_consumer().await;
        for _ in 0..self.opts.steps {
            let class = self.pick_fault(report).await?;
            *report.faults.entry(class).or_default() += 1;
            if std::env::var_os("DCS_ADVERSARIAL_TRACE").is_some() {
                eprintln!(
                    "{} seed {}: {class} ({})",
                    jiff::Timestamp::now(),
                    self.seed,
                    self.consumer.name()
                );
            }
            self.inject(class, report).await?;
        }
        self.finish(report).await
    }

    fn manifest(&self) -> String {
        let [a, b] = [self.fes[0].node(), self.fes[1].node()];
        student_sync(&self.emu, StartupMode::Initial)
            .name(&self.consumer.name())
            .source_fe_nodes(&[&a, &b])
            .sink_fe_nodes(&[&b, &a])
            .sink_mode(match self.sink {
                SinkMode::Upsert => dcs_crds::SinkMode::Upsert,
                SinkMode::Changelog => dcs_crds::SinkMode::Changelog,
            })
            .yaml()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("runner.log")
    }

    fn logs(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// The runner's threads' stacks (gdb), when `DCS_ADVERSARIAL_BACKTRACE` is set: for a runner
    /// that neither moves nor exits.
    fn backtraces(&self) -> String {
        let Some(runner) = &self.runner else {
            return String::new();
        };
        if std::env::var_os("DCS_ADVERSARIAL_BACKTRACE").is_none() {
            return String::new();
        }
        match std::process::Command::new("gdb")
            .args([
                "-p",
                &runner.pid().to_string(),
                "-batch",
                "-ex",
                "thread apply all bt",
            ])
            .output()
        {
            Ok(out) => format!(
                "\n--- the runner's threads ---\n{}",
                String::from_utf8_lossy(&out.stdout)
            ),
            Err(e) => format!("\n(no backtraces: {e})"),
        }
    }

    /// The `reason` of the runner's last logged exit, else its last ERROR line.
    fn last_reason(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let reason = text
            .lines()
            .rev()
            .find(|l| l.contains("exit_code"))
            .and_then(|l| l.split("reason=\"").nth(1))
            .and_then(|r| r.split('"').next());
        let error = || {
            text.lines()
                .rev()
                .find(|l| l.contains("ERROR"))
                .map(|l| l.split("ERROR").nth(1).unwrap_or(l).trim())
        };
        reason
            .or_else(error)
            .unwrap_or_default()
            .chars()
            .take(160)
            .collect()
    }

    fn start_runner(&mut self) {
        let manifest = self
            .dir
            .path()
            .join(format!("{}.yaml", self.consumer.name()));
        std::fs::write(&manifest, self.manifest()).unwrap();
        let cp_dir = match &self.store {
            Store::Directory(d) => Some(d.join(self.consumer.name())),
            Store::ConfigMap { .. } => None,
        };
        let env = match &self.store {
            Store::Directory(_) => Vec::new(),
            Store::ConfigMap { ns, kubeconfig, .. } => vec![
                ("KUBECONFIG".to_owned(), kubeconfig.display().to_string()),
                ("DCS_CHECKPOINT_CONFIGMAP".to_owned(), self.consumer.name()),
                ("POD_NAMESPACE".to_owned(), ns.name.clone()),
                (
                    "POD_NAME".to_owned(),
                    format!("{}-pod", self.consumer.name()),
                ),
            ],
        };
        self.runner = Some(Runner::start_with(
            &manifest,
            cp_dir.as_deref(),
            &self.log_path(),
            &env,
        ));
    }

    /// The saved checkpoint of the current consumer, as JSON.
    async fn checkpoint(&self) -> Option<serde_json::Value> {
        let text = match &self.store {
            Store::Directory(d) => {
                std::fs::read_to_string(d.join(self.consumer.name()).join("checkpoint.json"))
                    .ok()?
            }
            Store::ConfigMap { ns, .. } => {
                let api: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
                let cm = api.get_opt(&self.consumer.name()).await.ok()??;
                cm.data?.get(dcs_crds::checkpoint::CHECKPOINT_KEY)?.clone()
            }
        };
        serde_json::from_str(&text).ok()
    }

    async fn phase(&self) -> String {
        self.checkpoint()
            .await
            .and_then(|c| c["position"]["phase"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    async fn offset_ms(&self) -> Option<i64> {
        self.checkpoint().await?["position"]["offset"]["epochMs"].as_i64()
    }

    /// A new consumer: fresh sink table, fresh checkpoint, TTL back.
    async fn begin_consumer(&mut self) {
        exec(
            &self.emu,
            &[&format!(
                "ALTER TABLE demo.student SET (\"changelog.ttl_seconds\" = \"{TTL_S}\")"
            )],
        )
        .await;
        exec(&self.emu, &["DROP TABLE IF EXISTS sink.student"]).await;
        let ddl = match self.sink {
            SinkMode::Upsert => UPSERT_SINK_DDL,
            SinkMode::Changelog => STUDENT_EVENTS_SINK_DDL,
        };
        exec(&self.emu, &[ddl]).await;
        self.start_runner();
    }

    /// One random change to the source (new keys, re-used deleted keys, updates, deletes).
    async fn write_one(&mut self) {
        self.version += 1;
        let v = self.version;
        let stmt = match self.write_rng.range(0, 10) {
            0..=2 => {
                self.next_id += 1;
                format!("{INSERT} {}", row_values(self.next_id - 1))
            }
            3 if !self.deleted.is_empty() => {
                let i = self.write_rng.range(0, self.deleted.len() as u64) as usize;
                let id = self.deleted.swap_remove(i);
                format!("{INSERT} {}", row_values(id))
            }
            3..=6 => {
                let id = self.write_rng.range(1, u64::from(self.next_id));
                let name = if v.is_multiple_of(5) {
                    "NULL".to_owned()
                } else {
                    format!("'upd-{v}'")
                };
                format!(
                    "UPDATE demo.student SET name = {name}, score = {}.5 WHERE id = {id}",
                    v % 1000
                )
            }
            _ => {
                let id = self.write_rng.range(1, u64::from(self.next_id)) as u32;
                self.deleted.push(id);
                format!("DELETE FROM demo.student WHERE id = {id}")
            }
        };
        exec(&self.emu, &[&stmt]).await;
        self.writes += 1;
    }

    /// Writes for `dwell` while watching the runner; handles its exits.
    async fn dwell(&mut self, dwell: Duration, report: &mut Report) -> Result<(), String> {
        let end = Instant::now() + dwell;
        while Instant::now() < end {
            self.write_one().await;
            self.watch_exit(report).await?;
            tokio::time::sleep(Duration::from_millis(self.write_rng.range(10, 40))).await;
        }
        Ok(())
    }

    /// When the runner has exited: exit 3 must be due, and starts a new consumer; any other exit
    /// is restarted on the same checkpoint (a panic is a failure).
    async fn watch_exit(&mut self, report: &mut Report) -> Result<(), String> {
        let Some(status) = self.runner.as_mut().and_then(Runner::exited) else {
            return Ok(());
        };
        self.runner = None;
        match status.code() {
            Some(3) => {
                if !self.consumer.expiry_due {
                    return Err(format!(
                        "exit 3 (OffsetExpired) for {} without an expiring fault",
                        self.consumer.name()
                    ));
                }
                report.expiries += 1;
                let next = self.consumer.n + 1;
                self.consumer = Consumer::new(next);
                self.begin_consumer().await;
            }
            Some(2) => return Err("exit 2: the runner found its configuration invalid".into()),
            Some(5) => {
                if !self.consumer.tablets_due {
                    return Err(format!(
                        "exit 5 (SnapshotTabletsChanged) for {} without a TRUNCATE in its snapshot",
                        self.consumer.name()
                    ));
                }
                report.tablets_replaced += 1;
                let next = self.consumer.n + 1;
                self.consumer = Consumer::new(next);
                self.begin_consumer().await;
            }
            Some(code) if code != 101 && self.consumer.fence_due.is_some() => {
                // Whatever it was doing, the fenced runner must not have written its store since
                // the fence (a save there would be followed by commits past it).
                let fence = self.consumer.fence_due.take();
                if let Store::ConfigMap { ns, .. } = &self.store {
                    let api: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
                    let now = api
                        .get_opt(&self.consumer.name())
                        .await
                        .map_err(|e| e.to_string())?
                        .and_then(|c| c.metadata.resource_version);
                    if now != fence {
                        return Err(format!(
                            "the runner wrote its store after the operator's fence (resourceVersion {fence:?} became {now:?}), then exited {code}"
                        ));
                    }
                }
                if code == 4 {
                    report.fenced_exits += 1;
                }
                // The operator would start a new runner; it claims the store and settles the
                // fenced save's loads.
                tokio::time::sleep(Duration::from_millis(500)).await;
                self.start_runner();
            }
            Some(101) | None => {
                return Err(format!("the runner died: {status}"));
            }
            Some(code) => {
                let why = self.last_reason();
                *report
                    .error_exits
                    .entry(format!("{code} {why}"))
                    .or_default() += 1;
                // As the kubelet would, not at once.
                tokio::time::sleep(Duration::from_millis(500)).await;
                self.start_runner();
            }
        }
        Ok(())
    }

    /// Whether the consumer has saved its start point (a clock moved before it takes one expires
    /// nothing) and caught up with the last move of the clock.
    async fn clock_settled(&mut self) -> bool {
        let started = self
            .checkpoint()
            .await
            .is_some_and(|c| !c["startPoint"].is_null());
        if !started {
            return false;
        }
        let Some(at) = self.consumer.settling_after else {
            return true;
        };
        if self.offset_ms().await.is_some_and(|o| o > at) {
            self.consumer.settling_after = None;
            return true;
        }
        false
    }

    /// The next fault class. Clock and TTL faults are rarer than the rest (so a run has time
    /// between expiries) and wait until the runner has a start point and caught up with the last
    /// move of the clock.
    async fn pick_fault(&mut self, report: &mut Report) -> Result<&'static str, String> {
        loop {
            let class = CLASSES[self.rng.range(0, CLASSES.len() as u64) as usize];
            let ok = match class {
                "clock-short" | "clock-past-ttl" | "ttl-lowered" => self.rng.range(0, 3) == 0,
                "ambiguous-save" | "fence-ambiguous-save" => {
                    matches!(self.store, Store::ConfigMap { .. })
                }
                _ => true,
            };
            if !ok {
                continue;
            }
            if matches!(class, "clock-short" | "clock-past-ttl" | "ttl-lowered") {
                let start = Instant::now();
                while !self.clock_settled().await {
                    if start.elapsed() > CATCH_UP_BOUND {
                        return Err(format!(
                            "{} did not catch up with a move of the clock within {CATCH_UP_BOUND:?}",
                            self.consumer.name()
                        ));
                    }
                    self.dwell(Duration::from_millis(100), report).await?;
                }
            }
            return Ok(class);
        }
    }

    async fn inject(&mut self, class: &'static str, report: &mut Report) -> Result<(), String> {
        let dwell = Duration::from_millis(self.rng.range(300, 2500));
        match class {
            "kill" => {
                if let Some(mut r) = self.runner.take() {
                    r.sigkill();
                }
                let gap = Duration::from_millis(self.rng.range(0, 800));
                self.dwell(gap, report).await?;
                self.start_runner();
                self.dwell(dwell, report).await?;
            }
            "kill-after-save" => {
                let before = self.checkpoint().await.map(|c| c["checkpointId"].clone());
                let deadline = Instant::now() + Duration::from_secs(10);
                while Instant::now() < deadline && self.runner.is_some() {
                    if self.checkpoint().await.map(|c| c["checkpointId"].clone()) != before {
                        break;
                    }
                    self.watch_exit(report).await?;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                if let Some(mut r) = self.runner.take() {
                    r.sigkill();
                }
                self.start_runner();
                self.dwell(dwell, report).await?;
            }
            "clock-short" => {
                let room =
                    self.consumer.ttl_s * 1000 - (MARGIN_S + 90) * 1000 - self.consumer.advanced_ms;
                if room > 5_000 {
                    let ms = self.rng.range(5_000, room.min(150_000) as u64) as i64;
                    self.emu.doris.clock.advance_ms(ms);
                    self.consumer.advanced_ms += ms;
                    self.consumer.settling_after = Some(self.emu.doris.clock.now_ms());
                }
                self.dwell(dwell, report).await?;
            }
            "clock-past-ttl" => {
                let ms = self.consumer.ttl_s * 1000 + self.rng.range(1_000, 300_000) as i64;
                self.emu.doris.clock.advance_ms(ms);
                self.await_expiry("the clock moved past the TTL", report)
                    .await?;
            }
            "ttl-lowered" => {
                let roomy = self.consumer.advanced_ms < 300_000 - (MARGIN_S + 150) * 1000;
                if roomy && self.rng.range(0, 2) == 0 {
                    self.set_ttl(300).await;
                    self.dwell(dwell, report).await?;
                } else {
                    self.set_ttl(MARGIN_S - 10).await;
                    self.await_expiry("the TTL was lowered below the margin", report)
                        .await?;
                }
            }
            "sink-5xx" => {
                let count = self.rng.range(1, 4) as u32;
                let fault = match self.rng.range(0, 3) {
                    0 => StreamLoadFault {
                        count,
                        http_status: Some(500),
                        status: None,
                        message: None,
                    },
                    1 => StreamLoadFault {
                        count,
                        http_status: Some(503),
                        status: None,
                        message: None,
                    },
                    _ => StreamLoadFault {
                        count,
                        http_status: None,
                        status: Some("Fail".into()),
                        message: Some("injected by the adversarial harness".into()),
                    },
                };
                self.emu
                    .doris
                    .faults
                    .update(|f| f.stream_load = Some(fault));
                self.dwell(dwell, report).await?;
                self.emu.doris.faults.update(|f| f.stream_load = None);
            }
            "doris-refuses" => {
                let ms = self.rng.range(500, 3000);
                self.emu
                    .doris
                    .faults
                    .update(|f| f.refuse_connections_ms = Some(ms));
                self.dwell(Duration::from_millis(ms) + dwell, report)
                    .await?;
            }
            "doris-stalls" => {
                let ms = if self.opts.long_stalls && self.rng.range(0, 4) == 0 {
                    65_000
                } else {
                    self.rng.range(500, 3000)
                };
                self.emu.doris.faults.update(|f| f.http_delay_ms = ms);
                self.dwell(Duration::from_millis(ms) + dwell, report)
                    .await?;
                self.emu.doris.faults.update(|f| f.http_delay_ms = 0);
            }
            "fe-down" => {
                let i = self.rng.range(0, 2) as usize;
                self.fes[i].set_up(false);
                self.dwell(dwell * 2, report).await?;
                self.fes[i].set_up(true);
            }
            "ambiguous-save" => {
                if let Store::ConfigMap { proxy, .. } = &self.store {
                    proxy.drop_next_response();
                }
                self.dwell(dwell * 2, report).await?;
            }
            "fence-ambiguous-save" => self.fence_during_a_save(report).await?,
            "tablets-replaced" => self.replace_tablets_mid_snapshot(report).await?,
            "audit-writes" => self.write_through_a_snapshot(dwell, report).await?,
            "schema-change" => self.change_the_columns(dwell, report).await?,
            other => unreachable!("fault class {other}"),
        }
        Ok(())
    }

    /// `schema-change`: a column added to the source and written, the runner killed shortly
    /// after, the previous fault's column dropped while it is down, then a restart.
    async fn change_the_columns(
        &mut self,
        dwell: Duration,
        report: &mut Report,
    ) -> Result<(), String> {
        self.schema_changes += 1;
        let column = format!("x{}", self.schema_changes);
        exec(
            &self.emu,
            &[
                &format!("ALTER TABLE demo.student ADD COLUMN {column} INT"),
                &format!(
                    "UPDATE demo.student SET {column} = id WHERE id <= {}",
                    self.rng.range(5, 200)
                ),
            ],
        )
        .await;
        let gap = Duration::from_millis(self.rng.range(0, 800));
        self.dwell(gap, report).await?;
        if let Some(mut r) = self.runner.take() {
            r.sigkill();
        }
        if let Some(previous) = self.added_column.replace(column) {
            exec(
                &self.emu,
                &[&format!("ALTER TABLE demo.student DROP COLUMN {previous}")],
            )
            .await;
        }
        self.start_runner();
        self.dwell(dwell, report).await
    }

    /// The next request of the runner (a checkpoint save) is held once the API server applied
    /// it; the store is fenced as the operator fences it; then the answer is lost. When the held
    /// request was a write (the ConfigMap moved), the runner must stop with exit 4 within
    /// [`FENCE_BOUND`] (a runner that took its own write back and went on would save and commit
    /// past the fence); a read (a restarting runner's load) is let go unfenced.
    async fn fence_during_a_save(&mut self, report: &mut Report) -> Result<(), String> {
        let Store::ConfigMap { ns, .. } = &self.store else {
            return Ok(());
        };
        let api: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
        let name = self.consumer.name();
        let revision = |cm: Option<ConfigMap>| cm.and_then(|c| c.metadata.resource_version);
        let before = revision(api.get_opt(&name).await.map_err(|e| e.to_string())?);
        let Store::ConfigMap { proxy, .. } = &self.store else {
            return Ok(());
        };
        let mut held = proxy.hold_next_response();
        let deadline = Instant::now() + SAVE_BOUND;
        let applied = loop {
            if let Ok(applied) =
                tokio::time::timeout(Duration::from_millis(50), held.applied()).await
            {
                break applied;
            }
            if Instant::now() > deadline {
                break false;
            }
            self.dwell(Duration::from_millis(10), report).await?;
        };
        if !applied {
            if let Store::ConfigMap { proxy, .. } = &self.store {
                proxy.disarm();
            }
            return Ok(());
        }
        let now = revision(api.get_opt(&name).await.map_err(|e| e.to_string())?);
        if now == before {
            held.release();
            return Ok(());
        }
        let patch = serde_json::json!({"metadata": {"annotations": {"dcs.dev/fenced": format!("adversarial at {}", jiff::Timestamp::now())}}});
        let fenced = api
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .map_err(|e| e.to_string())?;
        self.consumer.fence_due = fenced.metadata.resource_version;
        held.release();
        let start = Instant::now();
        while self.consumer.fence_due.is_some() {
            if start.elapsed() > FENCE_BOUND {
                return Err(format!(
                    "{name}'s store was fenced during its unclear save, and the runner went on for {FENCE_BOUND:?} without exit 4 (checkpoint {:?})",
                    self.checkpoint().await
                ));
            }
            let now = revision(api.get_opt(&name).await.map_err(|e| e.to_string())?);
            if self.consumer.fence_due.is_some() && now != self.consumer.fence_due {
                return Err(format!(
                    "{name}'s runner wrote its store after the operator's fence during its unclear save (resourceVersion {:?} became {now:?})",
                    self.consumer.fence_due
                ));
            }
            self.dwell(Duration::from_millis(50), report).await?;
        }
        Ok(())
    }

    /// As the operator re-initialises: the runner stopped, a new consumer whose snapshot splits
    /// are held while 20–60 changes are written (into tablets not read yet), then let go. The
    /// final check holds the changelog sink to the table as of T0 and each change after it once.
    async fn write_through_a_snapshot(
        &mut self,
        dwell: Duration,
        report: &mut Report,
    ) -> Result<(), String> {
        if let Some(mut r) = self.runner.take() {
            r.sigkill();
        }
        let stalled = self.emu.doris.counters.get("sql_stalled");
        self.emu.doris.faults.update(|f| {
            f.sql_stall = Some(dcs_doris_emu::faults::SqlStall {
                contains: " TABLET(".into(),
                applied: true,
            });
        });
        self.consumer = Consumer::new(self.consumer.n + 1);
        self.begin_consumer().await;
        let start = Instant::now();
        while self.emu.doris.counters.get("sql_stalled") == stalled {
            if start.elapsed() > EXPIRY_BOUND {
                return Err(format!(
                    "{} never read a snapshot split",
                    self.consumer.name()
                ));
            }
            self.dwell(Duration::from_millis(20), report).await?;
        }
        for _ in 0..self.rng.range(20, 61) {
            self.write_one().await;
        }
        self.emu.doris.faults.update(|f| f.sql_stall = None);
        self.dwell(dwell, report).await
    }

    /// As the operator re-initialises: the runner stopped, a new consumer whose snapshot's first
    /// splits are held; then the table is truncated (new tablets) and refilled, the splits let
    /// go. The runner must stop with exit 5 within [`EXPIRY_BOUND`]; another new consumer
    /// answers it (what the operator does).
    async fn replace_tablets_mid_snapshot(&mut self, report: &mut Report) -> Result<(), String> {
        if let Some(mut r) = self.runner.take() {
            r.sigkill();
        }
        let stalled = self.emu.doris.counters.get("sql_stalled");
        self.emu.doris.faults.update(|f| {
            f.sql_stall = Some(dcs_doris_emu::faults::SqlStall {
                contains: " TABLET(".into(),
                applied: true,
            });
        });
        self.consumer = Consumer::new(self.consumer.n + 1);
        self.consumer.tablets_due = true;
        self.begin_consumer().await;
        let start = Instant::now();
        while self.emu.doris.counters.get("sql_stalled") == stalled {
            if start.elapsed() > EXPIRY_BOUND {
                return Err(format!(
                    "{} never read a snapshot split",
                    self.consumer.name()
                ));
            }
            self.dwell(Duration::from_millis(20), report).await?;
        }
        let rows: Vec<String> = (0..20).map(|i| row_values(self.next_id + i)).collect();
        self.next_id += 20;
        exec(
            &self.emu,
            &[
                "TRUNCATE TABLE demo.student",
                &format!("{INSERT} {}", rows.join(", ")),
            ],
        )
        .await;
        self.deleted.clear();
        self.emu.doris.faults.update(|f| f.sql_stall = None);
        let n = self.consumer.n;
        let start = Instant::now();
        while self.consumer.n == n {
            if start.elapsed() > EXPIRY_BOUND {
                return Err(format!(
                    "the table was truncated during {}'s snapshot, and it went on for {EXPIRY_BOUND:?} without exit 5 (checkpoint {:?})",
                    self.consumer.name(),
                    self.checkpoint().await
                ));
            }
            self.dwell(Duration::from_millis(100), report).await?;
        }
        Ok(())
    }

    async fn set_ttl(&mut self, ttl_s: i64) {
        exec(
            &self.emu,
            &[&format!(
                "ALTER TABLE demo.student SET (\"changelog.ttl_seconds\" = \"{ttl_s}\")"
            )],
        )
        .await;
        self.consumer.ttl_s = ttl_s;
    }

    /// After an expiring fault: the consumer must end in exit 3 within [`EXPIRY_BOUND`].
    async fn await_expiry(&mut self, what: &str, report: &mut Report) -> Result<(), String> {
        self.consumer.expiry_due = true;
        let n = self.consumer.n;
        let start = Instant::now();
        while self.consumer.n == n {
            if start.elapsed() > EXPIRY_BOUND {
                return Err(format!(
                    "{what}, and {} went on for {EXPIRY_BOUND:?} without exit 3 (checkpoint {:?}){}",
                    self.consumer.name(),
                    self.checkpoint().await,
                    self.backtraces()
                ));
            }
            if self.runner.is_none() {
                // Defensive: every step that stops the runner starts it again.
                self.start_runner();
            }
            self.dwell(Duration::from_millis(100), report).await?;
        }
        Ok(())
    }

    /// Faults off, the last consumer catches up past the last write and stops; then the checks.
    async fn finish(&mut self, report: &mut Report) -> Result<(), String> {
        self.emu.doris.faults.clear();
        for fe in &self.fes {
            fe.set_up(true);
        }
        if self.runner.is_none() {
            self.start_runner();
        }
        // Some writes in the changelog phase, so the last consumer has changes to carry.
        let start = Instant::now();
        while self.phase().await != "changelog" {
            if start.elapsed() > CATCH_UP_BOUND {
                return Err(format!(
                    "{} never reached the changelog phase (checkpoint {:?})",
                    self.consumer.name(),
                    self.checkpoint().await
                ));
            }
            self.dwell(Duration::from_millis(100), report).await?;
        }
        for _ in 0..30 {
            self.write_one().await;
        }
        let last_write = self.emu.doris.clock.now_ms();
        let n = self.consumer.n;
        let start = Instant::now();
        while self.offset_ms().await.is_none_or(|o| o <= last_write) {
            if start.elapsed() > CATCH_UP_BOUND {
                return Err(format!(
                    "{} did not catch up with the last write within {CATCH_UP_BOUND:?} \
                     (checkpoint {:?})",
                    self.consumer.name(),
                    self.checkpoint().await
                ));
            }
            self.watch_exit(report).await?;
            if self.consumer.n != n {
                return Err("a new consumer started after the faults had stopped".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut runner = self.runner.take().expect("a runner");
        runner.sigterm();
        let code = runner.wait_exit(Duration::from_secs(60)).await;
        if code != Some(0) {
            return Err(format!("SIGTERM ended the runner with {code:?}, not 0"));
        }
        self.check(report).await
    }

    async fn check(&mut self, report: &mut Report) -> Result<(), String> {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        report.checks += 1;
        if log.contains("panicked") {
            return Err("a runner panicked (see its log)".into());
        }
        // No pre-committed load of the last consumer is left open.
        report.checks += 1;
        let txns: Vec<serde_json::Value> = dcs_doris_client::tls::plain_get(format!(
            "http://{}/_emu/txns",
            self.emu.fe_http_addr()
        ))
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
        let mine = format!("-{}-", self.consumer.name());
        let open: Vec<&serde_json::Value> = txns
            .iter()
            .filter(|t| t["state"] == "PRECOMMITTED" || t["state"] == "PREPARE")
            .filter(|t| t["label"].as_str().is_some_and(|l| l.contains(&mine)))
            .collect();
        if !open.is_empty() {
            return Err(format!("pre-committed loads left open: {open:?}"));
        }
        report.checks += 1;
        let sink = mysql_rows(&self.emu, "SELECT * FROM sink.student ORDER BY id").await;
        // The sink's data columns are the source's (the `schema-change` faults followed).
        report.checks += 1;
        let (source_columns, mut sink_columns) = (
            column_names(&self.emu, "demo", "student").await,
            column_names(&self.emu, "sink", "student").await,
        );
        sink_columns.retain(|c| !c.starts_with("dcs_"));
        if source_columns != sink_columns {
            return Err(format!(
                "the sink's columns {sink_columns:?} are not the source's {source_columns:?}"
            ));
        }
        match self.sink {
            SinkMode::Upsert => {
                let source = mysql_rows(&self.emu, "SELECT * FROM demo.student ORDER BY id").await;
                if source != sink {
                    return Err(format!(
                        "the upsert sink differs from the source: {}",
                        crate::source_support::row_diff(&source, &sink)
                    ));
                }
            }
            SinkMode::Changelog => {
                let json = self.checkpoint().await.ok_or("no checkpoint")?;
                let cp = dcs_runner::checkpoint::parse("checkpoint", &json.to_string())
                    .map_err(|e| e.to_string())?;
                let t0 = cp.start_point.as_ref().ok_or("no T0")?;
                let snapshot = mysql_rows(
                    &self.emu,
                    &format!(
                        "SELECT id, name, score, updated FROM demo.student FOR VERSION AS OF {} ORDER BY id",
                        t0.tso
                    ),
                )
                .await;
                let expected = expected_student_events(&self.emu, snapshot, &cp).await;
                let mut sink = mysql_rows(
                    &self.emu,
                    "SELECT id, name, score, updated, dcs_op, dcs_tso, dcs_lsn FROM sink.student",
                )
                .await;
                sink.sort();
                if expected != sink {
                    return Err(format!(
                        "the changelog sink is not every change after T0 exactly once: {}",
                        crate::source_support::row_diff(&expected, &sink)
                    ));
                }
            }
        }
        println!(
            "seed {}: {:?} sink, {} consumer(s), {} writes: ok",
            self.seed, self.sink, self.consumer.n, self.writes
        );
        Ok(())
    }
}

/// The writer's INSERT: with its columns named, so that the columns `schema-change` adds take
/// their default.
const INSERT: &str = "INSERT INTO demo.student (id, name, score, updated) VALUES";

/// The seeds of `runs` runs from a base seed (each run replays alone with its own seed).
#[allow(dead_code)] // the long version (bench) uses it
pub fn seeds(base: u64, runs: u32) -> Vec<u64> {
    let mut rng = Rng(base);
    (0..runs).map(|_| rng.next()).collect()
}

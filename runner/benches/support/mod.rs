//! What the end-to-end benches share: the runner binary in a child process, its peak memory, and
//! statements run on the emulator in this process.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::sql::{self, Session};

/// A field of a `/proc/<pid>/status` line, in KiB.
pub fn proc_status_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// KiB as MiB, for printing.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Run `stmts` on the emulator as root; a failed statement fails the bench.
pub async fn exec(emu: &RunningEmulator, stmts: &[&str]) {
    let mut s = Session::new("root");
    for stmt in stmts {
        if let Err(e) = sql::execute(&emu.doris, &mut s, stmt).await {
            panic!("statement failed: {stmt}: {e}");
        }
    }
}

/// The runner's run: wall time, peak RSS (KiB) and the rows it read (its last checkpoint's).
pub struct RunnerRun {
    pub wall: Duration,
    pub peak_kib: u64,
    pub rows_read: u64,
}

/// Runs `dcs-runner run` on `manifest` until it exits, or until `done` says the sink has it all
/// (then it is stopped with SIGTERM, as Kubernetes stops a pod).
pub async fn run_runner(
    emu: &RunningEmulator,
    manifest: &str,
    done: impl AsyncFn(&RunningEmulator) -> bool,
) -> RunnerRun {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sync.yaml");
    std::fs::write(&file, manifest).unwrap();
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
        .args(["run", "--metrics-addr", "127.0.0.1:0", "-f"])
        .arg(&file)
        .arg("--checkpoint-dir")
        .arg(dir.path().join("cp"))
        .env("DCS_SOURCE_USERNAME", "root")
        .env("DCS_SOURCE_PASSWORD", "")
        .env("DCS_SINK_USERNAME", "root")
        .env("DCS_SINK_PASSWORD", "")
        .env("RUST_LOG", "warn")
        .env_remove("DCS_CHECKPOINT_CONFIGMAP")
        .env_remove("DCS_METRICS_ADDR")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let mut peak_kib = 0;
    let mut checked = Instant::now();
    let mut wall = None;
    let status = loop {
        if let Some(kib) = proc_status_kib(&pid, "VmHWM:") {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if wall.is_none() && checked.elapsed() > Duration::from_millis(500) {
            checked = Instant::now();
            if done(emu).await {
                wall = Some(start.elapsed());
                let _ = Command::new("kill").args(["-TERM", &pid]).status();
            }
        }
        if start.elapsed() > Duration::from_secs(1800) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the sync took more than 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(status.success(), "dcs-runner exited with {status}");
    let checkpoint: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("cp").join("checkpoint.json")).unwrap(),
    )
    .unwrap();
    RunnerRun {
        wall: wall.unwrap_or_else(|| start.elapsed()),
        peak_kib,
        rows_read: checkpoint["counters"]["rowsRead"].as_u64().unwrap(),
    }
}

//! `dcs-runner run` as a process: started on a manifest and a checkpoint directory, killed with
//! SIGKILL or stopped with SIGTERM, its checkpoint and logs read back.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `dcs-runner run` process; killed (SIGKILL) and reaped when dropped.
pub struct Runner {
    child: Child,
}

impl Runner {
    pub fn start(manifest: &Path, dir: &Path, log: &Path) -> Self {
        Self::start_with(manifest, Some(dir), log, &[])
    }

    /// [`Runner::start`] with more environment, and without `--checkpoint-dir` when `dir` is
    /// `None` (a ConfigMap checkpoint store named in `env`).
    pub fn start_with(
        manifest: &Path,
        dir: Option<&Path>,
        log: &Path,
        env: &[(String, String)],
    ) -> Self {
        Self::start_with_args(manifest, dir, log, env, &[])
    }

    /// [`Runner::start_with`] with more arguments to `run` (e.g. `--shard 2`).
    pub fn start_with_args(
        manifest: &Path,
        dir: Option<&Path>,
        log: &Path,
        env: &[(String, String)],
        args: &[String],
    ) -> Self {
        let log = File::options().create(true).append(true).open(log).unwrap();
        // A port of its own: 9464 on the host is where the test bed's runner pods serve probes.
        let child = Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
            .args(["run", "--metrics-addr", "127.0.0.1:0", "-f"])
            .arg(manifest)
            .args(
                dir.map(|d| [std::ffi::OsStr::new("--checkpoint-dir"), d.as_os_str()])
                    .into_iter()
                    .flatten(),
            )
            .args(args)
            .env("DCS_SOURCE_USERNAME", "root")
            .env("DCS_SOURCE_PASSWORD", "")
            .env("DCS_SINK_USERNAME", "root")
            .env("DCS_SINK_PASSWORD", "")
            // `DCS_TEST_RUNNER_LOG=debug` to see more of a failing run.
            .env(
                "RUST_LOG",
                std::env::var("DCS_TEST_RUNNER_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("NO_COLOR", "1")
            .env_remove("DCS_CHECKPOINT_CONFIGMAP")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Self { child }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn sigkill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    pub async fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(s) = self.exited() {
                return s.code();
            }
            assert!(start.elapsed() < within, "the runner did not exit");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's files: manifest, checkpoint directory and the runners' logs.
pub struct Files {
    _dir: tempfile::TempDir,
    /// The manifest file.
    pub manifest: PathBuf,
    /// The checkpoint directory.
    pub checkpoints: PathBuf,
    /// Where the runners write their logs.
    pub log: PathBuf,
}

impl Files {
    pub fn new(manifest: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sync.yaml");
        std::fs::write(&path, manifest).unwrap();
        Self {
            manifest: path,
            checkpoints: dir.path().join("cp"),
            log: dir.path().join("runner.log"),
            _dir: dir,
        }
    }

    pub fn start(&self) -> Runner {
        Runner::start(&self.manifest, &self.checkpoints, &self.log)
    }

    pub fn checkpoint(&self) -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(self.checkpoints.join("checkpoint.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    pub fn phase(&self) -> String {
        self.checkpoint()
            .and_then(|c| c["position"]["phase"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "none".into())
    }

    pub fn logs(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// Wait (bounded) until the saved checkpoint satisfies `ok`; the runner must keep running.
    pub async fn wait_checkpoint(
        &self,
        runner: &mut Runner,
        what: &str,
        ok: impl Fn(&serde_json::Value) -> bool,
    ) {
        let start = Instant::now();
        loop {
            if self.checkpoint().is_some_and(|c| ok(&c)) {
                return;
            }
            if let Some(status) = runner.exited() {
                panic!(
                    "the runner exited ({status}) waiting for {what}:\n{}",
                    self.logs()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "timed out waiting for {what}; checkpoint {:?}\n{}",
                self.checkpoint(),
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

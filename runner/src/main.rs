//! `dcs-runner`: the dcs data plane's command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use dcs_runner::Error;
use dcs_runner::checkpoint::configmap::CONFIGMAP_ENV;
use dcs_runner::checkpoint::{CheckpointStore, ConfigMapStore, FileStore, ReadOnlyDir};
use dcs_runner::error::exit_code;
use dcs_runner::launch::{self, StoreChoice};
use dcs_runner::pipeline::{self, Control, Outcome};
use dcs_runner::settings::{Credentials, PipelineConfig, TlsFiles};

const EXIT_CODES: &str = "\
Exit codes:
  0  done: snapshot mode (or a shard) finished, or stopped by SIGTERM/SIGINT after a last
     checkpoint (a shard stopped before it is done exits 1)
  1  any other failure (the message says what Doris answered)
  2  configuration error: manifest, environment or command line
  3  the changelog offset expired (minDelta's \"offset has expired\" error)
  4  fenced: another runner holds or wrote the checkpoint, or pre-committed a label this one sends";

/// Keeps a Doris table's changes flowing into a sink, as declared by a DorisChangelogSync.
#[derive(Debug, Parser)]
#[command(name = "dcs-runner", version, after_help = EXIT_CODES)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one DorisChangelogSync manifest until it is done, stopped or fails.
    ///
    /// Credentials come only from the environment: DCS_SOURCE_USERNAME, DCS_SOURCE_PASSWORD,
    /// DCS_SINK_USERNAME, DCS_SINK_PASSWORD. SIGTERM finishes the current checkpoint and exits 0;
    /// a second signal (or the grace period passing) exits at once with 1.
    #[command(after_help = EXIT_CODES)]
    Run {
        /// The DorisChangelogSync manifest (YAML).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Directory holding the checkpoint (created; locked while the runner runs).
        /// [default: ./dcs-checkpoints/<consumer id>]
        #[arg(long)]
        checkpoint_dir: Option<PathBuf>,
        /// Longest time a stop request may take before the runner exits anyway.
        #[arg(long, default_value = "25s", value_parser = parse_duration)]
        grace_period: Duration,
        /// Read shard INDEX of a snapshot read by shards (spec.snapshot.parallelism above 1):
        /// its tablets at the manifest's T0 (annotation dcs.dev/snapshot-t0), under its own
        /// consumer id and checkpoint (DIR/shard-INDEX, or ConfigMap <name>-shard-INDEX), then
        /// exit 0. In an Indexed Job's pod JOB_COMPLETION_INDEX gives it. Without it, a sharded
        /// initial sync reads the changelog from T0 once every shard's checkpoint says done.
        #[arg(long, value_name = "INDEX")]
        shard: Option<u32>,
        /// Where /metrics, /healthz and /readyz are served. In a pod the operator probes port
        /// 9464; where pods share one network (a test kubelet), `$(POD_IP):9464` keeps them apart.
        #[arg(long, env = "DCS_METRICS_ADDR", default_value = "0.0.0.0:9464")]
        metrics_addr: SocketAddr,
    },
    /// Print what `run` would do with a manifest (start point, increment type, TTL, sink table)
    /// and every problem in the way with its fix. Exits 0 when there is none, 2 otherwise.
    Check {
        /// The DorisChangelogSync manifest (YAML).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Directory holding the checkpoint, read without taking its lock.
        /// [default: ./dcs-checkpoints/<consumer id>]
        #[arg(long)]
        checkpoint_dir: Option<PathBuf>,
    },
    /// Sync an embedded Doris emulator's table while changing it, then compare source and sink.
    #[cfg(feature = "demo")]
    Demo {
        /// How long the source keeps changing.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        duration: Duration,
        /// Rows in the source table before the sync starts.
        #[arg(long, default_value_t = 5000)]
        rows: u32,
    },
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    dcs_crds::duration::parse_duration(s).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Run { .. } => "info",
        Command::Check { .. } => "warn",
        #[cfg(feature = "demo")]
        Command::Demo { .. } => "warn",
    };
    init_logging(cli.log_format, default_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dcs-runner: cannot start the async runtime: {e}");
            return ExitCode::from(exit_code::FAILURE);
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Run {
                file,
                checkpoint_dir,
                grace_period,
                shard,
                metrics_addr,
            } => run(file, checkpoint_dir, grace_period, shard, metrics_addr).await,
            Command::Check {
                file,
                checkpoint_dir,
            } => check(file, checkpoint_dir).await,
            #[cfg(feature = "demo")]
            Command::Demo { duration, rows } => demo(duration, rows).await,
        }
    });
    ExitCode::from(code)
}

fn init_logging(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Report an error that stops the runner and turn it into the exit code.
fn fail(e: &Error) -> u8 {
    tracing::error!(reason = e.reason(), exit_code = e.exit_code(), "{e}");
    e.exit_code()
}

async fn run(
    file: PathBuf,
    checkpoint_dir: Option<PathBuf>,
    grace: Duration,
    shard: Option<u32>,
    metrics_addr: SocketAddr,
) -> u8 {
    let mut config = match load_config(&file) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let env = |k: &str| std::env::var(k).ok();
    let launch = match launch::prepare(&mut config, shard, checkpoint_dir, env).await {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    match launch.store {
        StoreChoice::ConfigMap(name) => {
            let mut store = match ConfigMapStore::from_env(&name).await {
                Ok(s) => s,
                Err(e) => return fail(&e),
            };
            tracing::info!(sync = %config.sync_name, consumer = %config.consumer_id, checkpoint = %store.location(), "starting");
            run_with(config, &mut store, grace, metrics_addr, launch.shards_done).await
        }
        StoreChoice::Dir(dir) => {
            let mut store = match FileStore::open(&dir) {
                Ok(s) => s,
                Err(e) => return fail(&e),
            };
            tracing::info!(sync = %config.sync_name, consumer = %config.consumer_id, checkpoint_dir = %dir.display(), "starting");
            run_with(config, &mut store, grace, metrics_addr, launch.shards_done).await
        }
    }
}

async fn run_with<S: CheckpointStore>(
    config: PipelineConfig,
    store: &mut S,
    grace: Duration,
    metrics_addr: SocketAddr,
    shards_done: Option<Result<(), String>>,
) -> u8 {
    let shard = config.sharding.shard().is_some();
    let (mut control, handle) = Control::new();
    control.shards_done = shards_done;
    let health = dcs_runner::metrics::Health::new();
    let labels = dcs_runner::metrics::Labels {
        sync: config.sync_name.clone(),
        consumer: config.consumer_id.clone(),
    };
    // Metrics are for watching the sync, not a reason to stop it: a port in use only warns.
    match dcs_runner::metrics::serve(metrics_addr, labels, handle.progress, health.clone()).await {
        Ok((addr, _task)) => tracing::info!(%addr, "serving /metrics, /healthz and /readyz"),
        Err(e) => tracing::warn!(%metrics_addr, "cannot serve metrics: {e}"),
    }
    tokio::spawn(watch_signals(handle.shutdown, grace));
    let result = pipeline::run(config, store, control).await;
    if result.is_err() {
        health.mark_failed();
    }
    match result {
        Ok(Outcome::Done) => {
            tracing::info!("snapshot finished");
            exit_code::DONE
        }
        // A shard stopped before its tablets are done must not look done: in an Indexed Job exit
        // 0 completes the index, and nobody would read the rest of its tablets.
        Ok(Outcome::Stopped) if shard => {
            tracing::warn!(
                "stopped after a last checkpoint, before the shard was done: exit 1 so that it runs again"
            );
            exit_code::FAILURE
        }
        Ok(Outcome::Stopped) => {
            tracing::info!("stopped after a last checkpoint");
            exit_code::DONE
        }
        // The pipeline has logged the error already.
        Err(e) => e.exit_code(),
    }
}

fn load_config(file: &PathBuf) -> dcs_runner::Result<PipelineConfig> {
    let yaml = std::fs::read_to_string(file).map_err(|e| Error::Config {
        reason: format!("cannot read {}: {e}", file.display()),
    })?;
    let sync = dcs_crds::from_manifest(&yaml).map_err(|e| Error::Config {
        reason: e.to_string(),
    })?;
    let creds = Credentials::from_env(|k| std::env::var(k).ok(), sync.spec.sink.doris.is_some())?;
    PipelineConfig::from_sync_tls(&sync, creds, &TlsFiles::from_env(|k| std::env::var(k).ok()))
}

/// `check`: gather, plan, print; 0 without problems, 2 with.
async fn check(file: PathBuf, checkpoint_dir: Option<PathBuf>) -> u8 {
    use dcs_runner::check::{CheckReport, check_report, gather};
    let loaded = std::fs::read_to_string(&file)
        .map_err(|e| Error::Config {
            reason: format!("cannot read {}: {e}", file.display()),
        })
        .and_then(|yaml| {
            dcs_crds::from_manifest(&yaml).map_err(|e| Error::Config {
                reason: e.to_string(),
            })
        })
        .and_then(|sync| {
            let creds =
                Credentials::from_env(|k| std::env::var(k).ok(), sync.spec.sink.doris.is_some())?;
            let config = PipelineConfig::from_sync_tls(
                &sync,
                creds,
                &TlsFiles::from_env(|k| std::env::var(k).ok()),
            )?;
            Ok((sync, config))
        });
    let (sync, config) = match loaded {
        Ok(v) => v,
        Err(e) => {
            let report = CheckReport {
                lines: Vec::new(),
                problems: vec![dcs_runner::check::Problem {
                    problem: e.to_string(),
                    fix: "fix the manifest or the environment as the message says".into(),
                }],
            };
            print!("{}", report.render());
            return report.exit_code();
        }
    };
    // The checkpoint `run` would read: the ConfigMap in a pod, else the directory.
    let configmap = std::env::var(CONFIGMAP_ENV).ok().filter(|v| !v.is_empty());
    let input = match (configmap, checkpoint_dir) {
        (Some(name), None) => {
            let store = ConfigMapStore::from_env(&name)
                .await
                .map(|s| (s.location(), s))
                .map_err(|e| dcs_runner::check::Problem {
                    problem: e.to_string(),
                    fix: format!("check {CONFIGMAP_ENV} and the pod's access to the ConfigMap"),
                });
            gather(&sync, &config, store).await
        }
        (_, dir) => {
            let dir =
                dir.unwrap_or_else(|| PathBuf::from("dcs-checkpoints").join(&config.consumer_id));
            let store = Ok((dir.display().to_string(), ReadOnlyDir::new(&dir)));
            gather(&sync, &config, store).await
        }
    };
    let report = check_report(&input);
    print!("{}", report.render());
    report.exit_code()
}

/// First SIGTERM/SIGINT: ask for a graceful stop, and exit anyway after `grace`. Second: exit now.
async fn watch_signals(shutdown: tokio::sync::watch::Sender<bool>, grace: Duration) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers; SIGTERM will stop the runner at once");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!(?grace, "stop requested: finishing the current checkpoint");
    let _ = shutdown.send(true);
    tokio::select! {
        _ = term.recv() => tracing::warn!("second stop signal: exiting now"),
        _ = int.recv() => tracing::warn!("second stop signal: exiting now"),
        () = tokio::time::sleep(grace) => tracing::warn!("grace period over: exiting now"),
    }
    std::process::exit(i32::from(exit_code::FAILURE));
}

#[cfg(feature = "demo")]
async fn demo(duration: Duration, rows: u32) -> u8 {
    let options = dcs_runner::demo::DemoOptions { duration, rows };
    match dcs_runner::demo::run(options).await {
        Ok(true) => exit_code::DONE,
        Ok(false) => exit_code::FAILURE,
        Err(e) => {
            eprintln!("dcs-runner demo: {e}");
            e.exit_code()
        }
    }
}

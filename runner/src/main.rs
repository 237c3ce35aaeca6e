//! `dcs-runner`: the dcs data plane's command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use dcs_runner::Error;
use dcs_runner::checkpoint::FileStore;
use dcs_runner::error::exit_code;
use dcs_runner::pipeline::{self, Control, Credentials, Outcome, PipelineConfig};

const EXIT_CODES: &str = "\
Exit codes:
  0  done: snapshot mode finished, or stopped by SIGTERM/SIGINT after a last checkpoint
  1  any other failure (the message says what Doris answered)
  2  configuration error: manifest, environment or command line
  3  the changelog offset expired (minDelta's \"offset has expired\" error)
  4  fenced: another runner holds or wrote the checkpoint";

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
            } => run(file, checkpoint_dir, grace_period).await,
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

async fn run(file: PathBuf, checkpoint_dir: Option<PathBuf>, grace: Duration) -> u8 {
    let config = match load_config(&file) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let dir = checkpoint_dir
        .unwrap_or_else(|| PathBuf::from("dcs-checkpoints").join(&config.consumer_id));
    let mut store = match FileStore::open(&dir) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    tracing::info!(sync = %config.sync_name, consumer = %config.consumer_id, checkpoint_dir = %dir.display(), "starting");
    let (control, handle) = Control::new();
    tokio::spawn(watch_signals(handle.shutdown, grace));
    match pipeline::run(config, &mut store, control).await {
        Ok(Outcome::Done) => {
            tracing::info!("snapshot finished");
            exit_code::DONE
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
    if std::env::var_os("DCS_CHECKPOINT_CONFIGMAP").is_some() {
        return Err(Error::Config {
            reason: "DCS_CHECKPOINT_CONFIGMAP is set, but the ConfigMap checkpoint store is not implemented yet; run with --checkpoint-dir instead".into(),
        });
    }
    let yaml = std::fs::read_to_string(file).map_err(|e| Error::Config {
        reason: format!("cannot read {}: {e}", file.display()),
    })?;
    let sync = dcs_crds::from_manifest(&yaml).map_err(|e| Error::Config {
        reason: e.to_string(),
    })?;
    let creds = Credentials::from_env(|k| std::env::var(k).ok(), sync.spec.sink.doris.is_some())?;
    PipelineConfig::from_sync(&sync, creds)
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

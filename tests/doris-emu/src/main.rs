//! `dcs-doris-emu`: start a one-FE, one-BE Doris emulator and serve until killed.

use std::io::Write;

use clap::Parser;
use dcs_doris_emu::{EmuConfig, start};

/// A Doris 5.0 stand-in for tests: MySQL protocol, FE/BE HTTP (Stream Load, 2PC, /api/tso,
/// statement API), Arrow Flight SQL with `@incr`, an emulated clock and fault injection.
///
/// On start it prints one JSON line with the bound ports to stdout, then logs to stderr.
/// Port 0 picks a free port. The control API lives under http://HOST:FE_HTTP_PORT/_emu/
/// (see tests/doris-emu/README.md).
#[derive(Debug, Parser)]
#[command(name = "dcs-doris-emu", version)]
struct Args {
    /// Address every port binds to.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// FE HTTP port (Stream Load entry, /api/tso, statement API, /_emu control API).
    #[arg(long, default_value_t = 8030)]
    fe_http_port: u16,
    /// BE HTTP port (Stream Load, 2PC).
    #[arg(long, default_value_t = 8040)]
    be_http_port: u16,
    /// MySQL protocol port.
    #[arg(long, default_value_t = 9030)]
    query_port: u16,
    /// FE Arrow Flight SQL port.
    #[arg(long, default_value_t = 8070)]
    fe_flight_port: u16,
    /// BE Arrow Flight port.
    #[arg(long, default_value_t = 8050)]
    be_flight_port: u16,
    /// The one user.
    #[arg(long, default_value = "root")]
    user: String,
    /// Its password (empty by default, as in a fresh Doris).
    #[arg(
        long,
        default_value = "",
        env = "DORIS_EMU_PASSWORD",
        hide_env_values = true
    )]
    password: String,
    /// Emulate `enable_feature_changelog` in fe.conf; `false` makes changelog tables fail to create.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    feature_changelog: bool,
    /// The FE host's time zone: where a session's `time_zone` starts (a real FE: its host zone).
    #[arg(long, default_value = "UTC")]
    time_zone: String,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let config = EmuConfig {
        host: args.host,
        fe_http_port: args.fe_http_port,
        be_http_port: args.be_http_port,
        query_port: args.query_port,
        fe_flight_port: args.fe_flight_port,
        be_flight_port: args.be_flight_port,
        user: args.user,
        password: args.password,
        feature_changelog: args.feature_changelog,
        time_zone: args.time_zone,
    };
    let emu = match start(config).await {
        Ok(emu) => emu,
        Err(e) => {
            eprintln!("dcs-doris-emu: {e}");
            std::process::exit(1);
        }
    };
    let ports = emu.ports();
    let line = serde_json::to_string(&ports).expect("ports serialise");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    drop(out);
    tracing::info!(?ports, "Arrow Flight SQL service is started");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler installs");
    tokio::select! {
        _ = emu.wait() => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

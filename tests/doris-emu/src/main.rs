//! `dcs-doris-emu`: start a one-FE, one-BE Doris emulator and serve until killed.

use std::io::Write;

use std::path::{Path, PathBuf};

use clap::Parser;
use dcs_doris_emu::tls::cert::{LOCAL_NAMES, TestPki};
use dcs_doris_emu::{EmuConfig, EmuTls, Ports, start};

/// A Doris 5.0 stand-in for tests: MySQL protocol, FE/BE HTTP (Stream Load, 2PC, /api/tso,
/// statement API), Arrow Flight SQL with `@incr`, an emulated clock and fault injection.
///
/// On start it prints one JSON line with the bound ports and `"tls": true|false` to stdout, then
/// logs to stderr.
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
    /// Serve TLS, and only TLS, on every port with this PEM certificate chain (leaf first):
    /// HTTPS, gRPC over TLS (`grpc+tls://` locations), the MySQL SSL upgrade.
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        conflicts_with = "tls_self_signed"
    )]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of `--tls-cert`.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Generate a test CA and a certificate it signs for localhost, 127.0.0.1, ::1 and `--host`,
    /// write them to DIR as ca.pem, cert.pem and key.pem, and serve TLS with them.
    #[arg(long, value_name = "DIR")]
    tls_self_signed: Option<PathBuf>,
}

/// The TLS setting the flags ask for.
fn tls_from(args: &Args) -> Result<Option<EmuTls>, String> {
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let read = |flag: &str, p: &Path| {
            std::fs::read(p).map_err(|e| format!("cannot read {flag} {}: {e}", p.display()))
        };
        return Ok(Some(EmuTls {
            cert_chain_pem: read("--tls-cert", cert)?,
            key_pem: read("--tls-key", key)?,
        }));
    }
    let Some(dir) = &args.tls_self_signed else {
        return Ok(None);
    };
    let extra: Vec<&str> = [args.host.as_str()]
        .into_iter()
        .filter(|h| !h.is_empty() && !LOCAL_NAMES.contains(h))
        .collect();
    // A name of its own: two emulators' CAs must not pass for each other.
    let ca_name = format!(
        "dcs-doris-emu test CA {}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let pki = TestPki::generate(&ca_name, &extra)
        .map_err(|e| format!("cannot generate a test certificate: {e}"))?;
    pki.write_to(dir)
        .map_err(|e| format!("--tls-self-signed: {e}"))?;
    Ok(Some(pki.emu_tls()))
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
    let tls = match tls_from(&args) {
        Ok(tls) => tls,
        Err(e) => {
            eprintln!("dcs-doris-emu: {e}");
            std::process::exit(1);
        }
    };
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
        tls,
    };
    let emu = match start(config).await {
        Ok(emu) => emu,
        Err(e) => {
            eprintln!("dcs-doris-emu: {e}");
            std::process::exit(1);
        }
    };
    let ports = emu.ports();
    let line = start_line(ports, emu.tls_on());
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

/// The line printed on start: the ports and whether they serve TLS.
#[derive(serde::Serialize)]
struct StartLine {
    #[serde(flatten)]
    ports: Ports,
    tls: bool,
}

fn start_line(ports: Ports, tls: bool) -> String {
    serde_json::to_string(&StartLine { ports, tls }).expect("the start line serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_line_holds_ports_and_tls() {
        let ports = Ports {
            fe_http_port: 1,
            be_http_port: 2,
            query_port: 3,
            fe_flight_port: 4,
            be_flight_port: 5,
        };
        assert_eq!(
            start_line(ports, true),
            r#"{"fe_http_port":1,"be_http_port":2,"query_port":3,"fe_flight_port":4,"be_flight_port":5,"tls":true}"#
        );
    }

    #[test]
    fn unreadable_certificate_is_named() {
        let args = Args::parse_from([
            "dcs-doris-emu",
            "--tls-cert",
            "/nonexistent/cert.pem",
            "--tls-key",
            "/nonexistent/key.pem",
        ]);
        let e = tls_from(&args).unwrap_err();
        assert!(
            e.starts_with("cannot read --tls-cert /nonexistent/cert.pem: "),
            "{e}"
        );
    }
}

//! dcs-doris-emu: a single process that behaves, on the wire, like a one-FE, one-BE Doris 5.0 with
//! the changelog feature enabled. It is a test bed: what it answers follows
//! docs/doris-protocols.md, including exact status strings and error messages.
//!
//! Start one in-process with [`start`]; the `dcs-doris-emu` binary wraps the same function.
#![forbid(unsafe_code)]

pub mod clock;
pub mod engine;
pub mod error;
pub mod faults;
pub mod flight;
pub mod http;
pub mod mysql;
pub mod sql;
pub mod tls;
pub mod types;

use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::engine::Engine;
use crate::faults::{Counters, Faults};
pub use crate::tls::EmuTls;

/// How to start the emulator. Port 0 picks a free port.
#[derive(Debug, Clone)]
pub struct EmuConfig {
    /// Address every port binds to.
    pub host: String,
    /// FE HTTP (Stream Load entry, /api/tso, statement API, control API).
    pub fe_http_port: u16,
    /// BE HTTP (Stream Load).
    pub be_http_port: u16,
    /// MySQL protocol.
    pub query_port: u16,
    /// FE Arrow Flight SQL.
    pub fe_flight_port: u16,
    /// BE Arrow Flight.
    pub be_flight_port: u16,
    /// The one user.
    pub user: String,
    /// Its password.
    pub password: String,
    /// `enable_feature_changelog` on the FE.
    pub feature_changelog: bool,
    /// The zone a new session's `time_zone` starts in: a real FE's host zone (`UTC` here by
    /// default, so a client that never sets `time_zone` gets away with it unless a test says
    /// otherwise).
    pub time_zone: String,
    /// Serve TLS, and only TLS, on every port with this certificate (HTTPS, gRPC over TLS, the
    /// MySQL SSL upgrade); `None` serves plaintext.
    pub tls: Option<EmuTls>,
}

impl Default for EmuConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            fe_http_port: 8030,
            be_http_port: 8040,
            query_port: 9030,
            fe_flight_port: 8070,
            be_flight_port: 8050,
            user: "root".into(),
            password: String::new(),
            feature_changelog: true,
            time_zone: sql::DEFAULT_TIME_ZONE.into(),
            tls: None,
        }
    }
}

impl EmuConfig {
    /// Defaults with every port 0, for tests that run several emulators at once.
    pub fn ephemeral() -> Self {
        Self {
            fe_http_port: 0,
            be_http_port: 0,
            query_port: 0,
            fe_flight_port: 0,
            be_flight_port: 0,
            ..Self::default()
        }
    }
}

/// The bound ports, printed as one JSON line on start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ports {
    /// FE HTTP.
    pub fe_http_port: u16,
    /// BE HTTP.
    pub be_http_port: u16,
    /// MySQL.
    pub query_port: u16,
    /// FE Flight SQL.
    pub fe_flight_port: u16,
    /// BE Flight.
    pub be_flight_port: u16,
}

/// Shared state of one emulated cluster, handed to every front end.
pub struct Doris {
    /// The configuration it was started with (ports may be 0 there; see [`Doris::ports`]).
    pub config: EmuConfig,
    /// Bound ports.
    pub ports: Ports,
    /// Emulated clock and TSO.
    pub clock: Arc<Clock>,
    /// Catalog, data, transactions, changelog.
    pub engine: Engine,
    /// Armed faults.
    pub faults: Faults,
    /// Requests received per endpoint.
    pub counters: Counters,
    /// Bearer tokens and query results shared by the FE and BE Flight servers.
    pub(crate) flight: Arc<flight::FlightState>,
    /// TLS acceptors when `config.tls` is set.
    pub(crate) tls: Option<tls::Acceptors>,
}

impl Doris {
    /// True when `user`/`password` match the configured account.
    pub fn authenticate(&self, user: &str, password: &str) -> bool {
        user == self.config.user && password == self.config.password
    }

    /// True when every port serves TLS.
    pub fn tls_on(&self) -> bool {
        self.tls.is_some()
    }

    /// The scheme of the HTTP URLs handed out (`Location`, `ErrorURL`).
    pub fn http_scheme(&self) -> &'static str {
        if self.tls_on() { "https" } else { "http" }
    }

    /// The scheme of the Flight locations handed out.
    pub fn flight_scheme(&self) -> &'static str {
        if self.tls_on() {
            "grpc+tls"
        } else {
            "grpc+tcp"
        }
    }
}

/// A running emulator; dropping it stops every server.
pub struct RunningEmulator {
    /// Shared state (tests may inspect the engine or arm faults directly).
    pub doris: Arc<Doris>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningEmulator {
    /// Bound ports.
    pub fn ports(&self) -> Ports {
        self.doris.ports
    }

    /// `host:port` of the FE HTTP server.
    pub fn fe_http_addr(&self) -> String {
        format!(
            "{}:{}",
            self.doris.config.host, self.doris.ports.fe_http_port
        )
    }

    /// True when every port serves TLS.
    pub fn tls_on(&self) -> bool {
        self.doris.tls_on()
    }

    /// Wait until a server task ends (normally never).
    pub async fn wait(mut self) {
        if let Some(first) = self.tasks.pop() {
            let _ = first.await;
        }
    }
}

impl Drop for RunningEmulator {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn bind(host: &str, port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind((host, port))
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot bind {host}:{port}: {e}")))
}

fn port_of(l: &TcpListener) -> std::io::Result<u16> {
    l.local_addr().map(|a: SocketAddr| a.port())
}

/// Bind every port and start the servers. A TLS certificate or key that cannot be served fails
/// here, before any port is bound.
pub async fn start(config: EmuConfig) -> std::io::Result<RunningEmulator> {
    let tls = config.tls.as_ref().map(tls::Acceptors::new).transpose()?;
    let fe_http = bind(&config.host, config.fe_http_port).await?;
    let be_http = bind(&config.host, config.be_http_port).await?;
    let query = bind(&config.host, config.query_port).await?;
    let fe_flight = bind(&config.host, config.fe_flight_port).await?;
    let be_flight = bind(&config.host, config.be_flight_port).await?;
    let ports = Ports {
        fe_http_port: port_of(&fe_http)?,
        be_http_port: port_of(&be_http)?,
        query_port: port_of(&query)?,
        fe_flight_port: port_of(&fe_flight)?,
        be_flight_port: port_of(&be_flight)?,
    };
    let clock = Arc::new(Clock::new());
    let doris = Arc::new(Doris {
        engine: Engine::new(clock.clone(), config.feature_changelog),
        config,
        ports,
        clock,
        faults: Faults::default(),
        counters: Counters::default(),
        flight: Arc::default(),
        tls,
    });
    let tasks = vec![
        tokio::spawn(http::serve_fe(fe_http, doris.clone())),
        tokio::spawn(http::serve_be(be_http, doris.clone())),
        tokio::spawn(mysql::serve(query, doris.clone())),
        tokio::spawn(flight::serve_fe(fe_flight, doris.clone())),
        tokio::spawn(flight::serve_be(be_flight, doris.clone())),
    ];
    Ok(RunningEmulator { doris, tasks })
}

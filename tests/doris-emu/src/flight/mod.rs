//! Arrow Flight SQL front ends: the FE Flight SQL port and the BE Flight port
//! (docs/doris-protocols.md §3).
//!
//! - FE ([`serve_fe`]): Arrow auth2 header auth (`Basic` → `Bearer <token>`, one session per
//!   token), `GetFlightInfo` runs the statement at once. Query results are stored for the BE and
//!   answered with one endpoint at the BE Flight port; FE-local results (SET, USE, SHOW, DDL,
//!   INSERT) with an endpoint at the FE itself.
//! - BE ([`serve_be`]): no auth; `DoGet` streams a stored result once, then forgets it.
//!
//! With TLS configured both ports serve gRPC over TLS only, and the locations the FE hands out
//! say `grpc+tls://`.
//!
//! The FE and BE of one emulator share a [`FlightState`] (`Doris::flight`).

pub mod arrow_convert;
mod auth;
mod be;
mod catalog;
mod fe;
pub mod ticket;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_flight::flight_service_server::FlightServiceServer;
use arrow_schema::SchemaRef;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::net::TcpListener;

use crate::Doris;
use crate::sql::Session;
use crate::tls::{self, EmuStream};
use ticket::QueryId;

/// gRPC message size limit on both ports (Doris clients must raise the 16 MiB default too).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// How long an unfetched result is kept (Doris's FE result cache keeps them 10 minutes).
const RESULT_TTL: Duration = Duration::from_secs(600);

/// Serve the FE Flight SQL port.
pub async fn serve_fe(l: TcpListener, d: Arc<Doris>) {
    let state = state_for(&d);
    let svc = FlightServiceServer::new(fe::FeService {
        doris: d.clone(),
        state: state.clone(),
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let svc = auth::FeAuth {
        inner: svc,
        doris: d.clone(),
        state,
    };
    let r = tonic::transport::Server::builder()
        .add_service(svc)
        .serve_with_incoming(incoming(l, d, "fe_flight"))
        .await;
    if let Err(e) = r {
        tracing::error!("FE Flight SQL server stopped: {e}");
    }
}

/// Serve the BE Flight port.
pub async fn serve_be(l: TcpListener, d: Arc<Doris>) {
    let state = state_for(&d);
    let svc = FlightServiceServer::new(be::BeService {
        doris: d.clone(),
        state,
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let svc = auth::BeNoAuth { inner: svc };
    tracing::info!(host = %d.config.host, port = d.ports.be_flight_port, "Arrow Flight Service bind to host");
    let r = tonic::transport::Server::builder()
        .add_service(svc)
        .serve_with_incoming(incoming(l, d, "be_flight"))
        .await;
    if let Err(e) = r {
        tracing::error!("BE Flight server stopped: {e}");
    }
}

/// Accepted connections, minus those dropped while `refuse_connections` is armed; over TLS
/// (ALPN `h2`) when it is configured.
fn incoming(
    l: TcpListener,
    d: Arc<Doris>,
    port: &'static str,
) -> impl futures::Stream<Item = std::io::Result<EmuStream>> + Send + 'static {
    let acceptor = d.tls.as_ref().map(|t| t.grpc.clone());
    tls::incoming(l, d, acceptor, port).map(|(conn, _)| Ok(conn))
}

/// A result waiting to be fetched.
#[derive(Debug, Clone)]
pub(crate) struct StoredResult {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub created: Instant,
}

impl StoredResult {
    pub fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        Self {
            schema,
            batches,
            created: Instant::now(),
        }
    }
}

/// One bearer token: its user and its session (current db, variables).
pub(crate) struct TokenEntry {
    pub user: String,
    pub session: tokio::sync::Mutex<Session>,
    /// Emulated-clock creation time (tokens expire `arrow_flight_token_alive_time` later).
    pub created_ms: i64,
    /// Use stamp for LRU eviction (higher = more recent).
    pub last_used: std::sync::atomic::AtomicU64,
}

/// State shared by the FE and BE Flight servers of one emulator.
#[derive(Default)]
pub(crate) struct FlightState {
    /// Live bearer tokens.
    pub tokens: Mutex<HashMap<String, Arc<TokenEntry>>>,
    /// Query results held by the BE, by query id.
    pub be_results: Mutex<HashMap<QueryId, StoredResult>>,
    /// FE-local results, per peer identity (token), by query id.
    pub fe_results: Mutex<HashMap<String, HashMap<String, StoredResult>>>,
    /// Prepared statements: handle → SQL.
    pub prepared: Mutex<HashMap<String, String>>,
    /// Source of token use stamps.
    pub use_clock: std::sync::atomic::AtomicU64,
}

impl FlightState {
    /// Store a BE result (dropping results nobody fetched in time).
    pub fn put_be_result(&self, id: QueryId, r: StoredResult) {
        let mut m = self.be_results.lock();
        m.retain(|_, v| v.created.elapsed() < RESULT_TTL);
        m.insert(id, r);
    }

    /// Take a BE result (a result can be fetched once).
    pub fn take_be_result(&self, id: &QueryId) -> Option<StoredResult> {
        self.be_results.lock().remove(id)
    }

    /// Store an FE-local result for `peer`.
    pub fn put_fe_result(&self, peer: &str, query_id: &str, r: StoredResult) {
        self.fe_results
            .lock()
            .entry(peer.to_string())
            .or_default()
            .insert(query_id.to_string(), r);
    }

    /// Drop `peer`'s unfetched FE-local results (each new statement resets the channel).
    pub fn reset_fe_results(&self, peer: &str) {
        self.fe_results.lock().remove(peer);
    }

    /// Take an FE-local result.
    pub fn take_fe_result(&self, peer: &str, query_id: &str) -> Option<StoredResult> {
        self.fe_results.lock().get_mut(peer)?.remove(query_id)
    }

    /// The token's entry, if live.
    pub fn token(&self, token: &str) -> Option<Arc<TokenEntry>> {
        self.tokens.lock().get(token).cloned()
    }
}

/// The Flight state of the emulator `d` (shared by its FE and BE).
pub(crate) fn state_for(d: &Arc<Doris>) -> Arc<FlightState> {
    d.flight.clone()
}

/// Number of results waiting on the BE of `d` (for tests).
pub fn pending_be_results(d: &Arc<Doris>) -> usize {
    state_for(d).be_results.lock().len()
}

/// Number of live bearer tokens on the FE of `d` (for tests).
pub fn live_tokens(d: &Arc<Doris>) -> usize {
    state_for(d).tokens.lock().len()
}

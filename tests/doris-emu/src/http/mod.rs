//! The FE and BE HTTP ports (docs/doris-protocols.md §1.2, §2.3, §2.4, §3.4, §4).
//!
//! FE: `/api/tso`, the statement API, `_schema`, `_query_plan`, the Stream Load and 2PC entries
//! (307 to the BE) and the `/_emu` control API. BE: Stream Load, 2PC and the load error log.
//! With TLS configured both serve HTTPS only (`crate::tls`). Both ports apply the armed faults:
//! connections are refused (accepted and closed at once) while `refuse_connections` is set, and
//! every `/api` answer waits `http_delay_ms` first.

pub mod auth;
pub mod be;
pub mod body;
pub mod control;
pub mod fe;
pub mod response;
pub mod stream_load;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Weak};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use tokio::net::TcpListener;

use crate::Doris;
use crate::tls::{self, EmuStream};

/// Error logs kept per emulator (oldest dropped first).
const MAX_ERROR_LOGS: usize = 256;

/// One Stream Load transaction the BE began (for `/_emu/txns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRecord {
    /// Transaction id.
    pub txn_id: i64,
    /// Label.
    pub label: String,
    /// Database.
    pub db: String,
    /// Table.
    pub table: String,
}

/// State the HTTP front ends share (per emulator).
#[derive(Debug, Default)]
pub struct HttpState {
    error_logs: Mutex<VecDeque<(String, String)>>,
    txns: Mutex<Vec<TxnRecord>>,
}

impl HttpState {
    /// Keep an error log under `file`.
    pub fn put_error_log(&self, file: String, content: String) {
        let mut logs = self.error_logs.lock();
        if logs.len() >= MAX_ERROR_LOGS {
            logs.pop_front();
        }
        logs.push_back((file, content));
    }

    /// An error log by file name.
    pub fn error_log(&self, file: &str) -> Option<String> {
        self.error_logs
            .lock()
            .iter()
            .find(|(f, _)| f == file)
            .map(|(_, c)| c.clone())
    }

    /// Remember a begun transaction.
    pub fn record_txn(&self, rec: TxnRecord) {
        self.txns.lock().push(rec);
    }

    /// Every begun transaction, oldest first.
    pub fn txns(&self) -> Vec<TxnRecord> {
        self.txns.lock().clone()
    }
}

type Registry = Mutex<HashMap<usize, (Weak<Doris>, Arc<HttpState>)>>;
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The HTTP state of one emulator (shared by its FE and BE ports).
pub fn state_of(d: &Arc<Doris>) -> Arc<HttpState> {
    let key = Arc::as_ptr(d) as usize;
    let mut reg = REGISTRY.lock();
    reg.retain(|_, (w, _)| w.strong_count() > 0);
    if let Some((w, s)) = reg.get(&key)
        && w.upgrade().is_some_and(|x| Arc::ptr_eq(&x, d))
    {
        return s.clone();
    }
    let s = Arc::new(HttpState::default());
    reg.insert(key, (Arc::downgrade(d), s.clone()));
    s
}

/// What every handler gets.
#[derive(Clone)]
pub struct Ctx {
    /// The cluster.
    pub doris: Arc<Doris>,
    /// Shared HTTP state.
    pub state: Arc<HttpState>,
}

impl Ctx {
    /// The host to put in URLs we hand out (`Location`, `ErrorURL`, routings): the configured
    /// host, or the request's `Host` when bound to a wildcard address.
    pub fn public_host(&self, headers: &HeaderMap) -> String {
        let h = self.doris.config.host.as_str();
        if h != "0.0.0.0" && h != "::" && !h.is_empty() {
            return h.to_string();
        }
        headers
            .get(axum::http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(|v| match v.rsplit_once(':') {
                Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host.to_string(),
                _ => v.to_string(),
            })
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "127.0.0.1".to_string())
    }
}

/// A listener that drops new connections while `refuse_connections` is armed and, when TLS is
/// on, hands out connections whose TLS handshake is done (`crate::tls::incoming`).
pub struct RefusingListener {
    incoming: Pin<Box<dyn Stream<Item = (EmuStream, SocketAddr)> + Send>>,
    local: SocketAddr,
}

impl RefusingListener {
    fn new(l: TcpListener, doris: Arc<Doris>, port: &'static str) -> std::io::Result<Self> {
        let local = l.local_addr()?;
        let acceptor = doris.tls.as_ref().map(|t| t.http.clone());
        Ok(Self {
            incoming: Box::pin(tls::incoming(l, doris, acceptor, port)),
            local,
        })
    }
}

impl axum::serve::Listener for RefusingListener {
    type Io = EmuStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (EmuStream, SocketAddr) {
        match self.incoming.next().await {
            Some(conn) => conn,
            // `tls::incoming` never ends.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// The client's address, for `ConnectInfo<Peer>` (`remote_ip` in Doris's messages).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl Peer {
    /// The client's IP as text.
    pub fn ip(&self) -> String {
        self.0.ip().to_string()
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, RefusingListener>>
    for Peer
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, RefusingListener>) -> Self {
        Peer(*stream.remote_addr())
    }
}

async fn delay_layer(State(ctx): State<Ctx>, req: Request, next: Next) -> Response {
    if !req.uri().path().starts_with("/_emu")
        && let Some(d) = ctx.doris.faults.http_delay()
    {
        tokio::time::sleep(d).await;
    }
    next.run(req).await
}

async fn not_found(req: Request) -> Response {
    let body = response::Obj::new()
        .n("status", 404)
        .s("error", "Not Found")
        .s("path", req.uri().path())
        .compact();
    response::json(StatusCode::NOT_FOUND, body)
}

async fn serve(l: TcpListener, d: Arc<Doris>, router: Router<Ctx>, port: &'static str) {
    let ctx = Ctx {
        state: state_of(&d),
        doris: d.clone(),
    };
    let app = router
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(ctx.clone(), delay_layer))
        .with_state(ctx);
    let listener = match RefusingListener::new(l, d, port) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("{port} server cannot start: {e}");
            return;
        }
    };
    if let Err(e) = axum::serve(listener, app.into_make_service_with_connect_info::<Peer>()).await {
        tracing::error!("http server stopped: {e}");
    }
}

/// Serve the FE HTTP port.
pub async fn serve_fe(l: TcpListener, d: Arc<Doris>) {
    serve(l, d, fe::router().merge(control::router()), "fe_http").await
}

/// Serve the BE HTTP port.
pub async fn serve_be(l: TcpListener, d: Arc<Doris>) {
    serve(l, d, be::router(), "be_http").await
}

/// A header's value as text (lossy for non-UTF-8 bytes); `None` when absent.
pub fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).map(|v| match v.to_str() {
        Ok(s) => s.to_string(),
        Err(_) => String::from_utf8_lossy(v.as_bytes()).into_owned(),
    })
}

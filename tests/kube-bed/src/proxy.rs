//! A fault-injecting TCP proxy in front of the API server, for tests of ambiguous answers: a
//! request the server applied whose response never arrives.
//!
//! It forwards bytes both ways (TLS passes through untouched; the serving certificate covers
//! `127.0.0.1`, so a kubeconfig pointing at the proxy verifies as one pointing at the server).
//! [`FaultProxy::drop_next_response`] arms it: the next request that any client sends is
//! forwarded, the proxy waits until the server starts answering it (so the server has applied
//! it), discards the answer and resets the client's connection. [`FaultProxy::set_delay`]
//! holds every answer back for a while (a slow network; client timeouts fire while the server
//! has done the work). A client sees a connection reset or a timeout, never the server's answer.
//! [`FaultProxy::hold_next_response`] does what `drop_next_response` does, but holds the lost
//! answer until the test has acted: the test learns when the server applied the request, does
//! something in between (the operator's fence, another runner's claim), then lets the client see
//! the reset. An ordering a test plays exactly, not a race it hopes to win.
//!
//! ```no_run
//! # async fn f() -> Result<(), dcs_kube_bed::Error> {
//! let cp = dcs_kube_bed::shared().await?;
//! let proxy = dcs_kube_bed::FaultProxy::start(cp.address).await?;
//! let client = dcs_kube_bed::control_plane::client_from_kubeconfig(
//!     &cp.kubeconfig_via("default", proxy.address)).await?;
//! proxy.drop_next_response();
//! // the next request `client` makes is applied by the server, and fails for the client
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::Error;

#[derive(Debug, Default)]
struct State {
    drop_next: AtomicBool,
    delay: Mutex<Duration>,
    dropped: AtomicU64,
    /// An armed hold: the next request's answer is held back until released, then lost.
    hold_next: Mutex<Option<Hold>>,
}

/// The proxy's side of a held answer.
#[derive(Debug)]
struct Hold {
    applied: tokio::sync::oneshot::Sender<()>,
    release: tokio::sync::oneshot::Receiver<()>,
}

/// The test's side of [`FaultProxy::hold_next_response`].
#[derive(Debug)]
pub struct HeldResponse {
    applied: tokio::sync::oneshot::Receiver<()>,
    release: Option<tokio::sync::oneshot::Sender<()>>,
}

impl HeldResponse {
    /// Resolves once the server has answered the held request (it has applied it); the client
    /// has not seen anything yet. `false` if the proxy went away first.
    pub async fn applied(&mut self) -> bool {
        (&mut self.applied).await.is_ok()
    }

    /// Lets the client see its connection reset (the answer is lost).
    pub fn release(mut self) {
        if let Some(tx) = self.release.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for HeldResponse {
    fn drop(&mut self) {
        if let Some(tx) = self.release.take() {
            let _ = tx.send(());
        }
    }
}

/// A running proxy; dropping it stops accepting (open connections end with their peers).
#[derive(Debug)]
pub struct FaultProxy {
    /// Where clients connect.
    pub address: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<Self, Error> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let state = Arc::new(State::default());
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        relay(client, server, st).await;
                    }
                });
            }
        });
        Ok(Self {
            address,
            state,
            task,
        })
    }

    /// The next request is applied by the server and its response lost (connection reset).
    pub fn drop_next_response(&self) {
        self.state.drop_next.store(true, Ordering::SeqCst);
    }

    /// The next request is applied by the server and its response lost, as with
    /// [`drop_next_response`](Self::drop_next_response), but the loss waits for
    /// [`HeldResponse::release`] (or the handle's drop): between [`HeldResponse::applied`] and the
    /// release the test acts while the client still waits for its answer.
    pub fn hold_next_response(&self) -> HeldResponse {
        let (applied_tx, applied_rx) = tokio::sync::oneshot::channel();
        let (release_tx, release_rx) = tokio::sync::oneshot::channel();
        *self.state.hold_next.lock() = Some(Hold {
            applied: applied_tx,
            release: release_rx,
        });
        HeldResponse {
            applied: applied_rx,
            release: Some(release_tx),
        }
    }

    /// Whether an armed [`drop_next_response`](Self::drop_next_response) (or
    /// [`hold_next_response`](Self::hold_next_response)) is still waiting for its request.
    pub fn armed(&self) -> bool {
        self.state.drop_next.load(Ordering::SeqCst) || self.state.hold_next.lock().is_some()
    }

    /// Disarms [`drop_next_response`](Self::drop_next_response) and
    /// [`hold_next_response`](Self::hold_next_response) that are still waiting for a request.
    pub fn disarm(&self) {
        self.state.drop_next.store(false, Ordering::SeqCst);
        self.state.hold_next.lock().take();
    }

    /// Holds every chunk of every answer back by `delay` (zero: no delay).
    pub fn set_delay(&self, delay: Duration) {
        *self.state.delay.lock() = delay;
    }

    /// How many responses were dropped so far.
    pub fn dropped(&self) -> u64 {
        self.state.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(mut client: TcpStream, mut server: TcpStream, st: Arc<State>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let mut doomed = false;
    let mut held: Option<Hold> = None;
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        tokio::select! {
            r = client.read(&mut up) => {
                let n = match r { Ok(0) | Err(_) => return, Ok(n) => n };
                if !doomed {
                    if let Some(hold) = st.hold_next.lock().take() {
                        held = Some(hold);
                        doomed = true;
                    } else if st.drop_next.swap(false, Ordering::SeqCst) {
                        doomed = true;
                    }
                }
                if server.write_all(&up[..n]).await.is_err() {
                    return;
                }
            }
            r = server.read(&mut down) => {
                let n = match r { Ok(0) | Err(_) => return, Ok(n) => n };
                if doomed {
                    // The server answers the doomed request: it has been applied. Lose the
                    // answer and reset the client's connection (RST, not FIN) — once the test
                    // let go of a held one.
                    if let Some(hold) = held.take() {
                        let _ = hold.applied.send(());
                        let _ = hold.release.await;
                    }
                    st.dropped.fetch_add(1, Ordering::SeqCst);
                    let _ = client.set_zero_linger();
                    return;
                }
                let delay = *st.delay.lock();
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                if client.write_all(&down[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// A plain-HTTP control endpoint for a [`FaultProxy`], so that scripts (the e2e suite) can play
/// [`FaultProxy::hold_next_response`] too. Every answer is a JSON object
/// `{"armed","applied","dropped"}`: a hold waiting for its request, whether the server has
/// answered the held one (it applied it) while the client still waits, and how many answers were
/// lost so far.
///
/// - `GET /`: the state.
/// - `POST /hold`: the next request's answer is held once the server has answered it (an earlier
///   hold still unreleased is released first).
/// - `POST /release`: the held answer is lost: the client sees its connection reset.
/// - `POST /disarm`: a hold still waiting for its request is dropped (and one held is released).
#[derive(Debug)]
pub struct ProxyControl {
    proxy: FaultProxy,
    applied: Arc<AtomicBool>,
    release: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl ProxyControl {
    /// Serves `proxy`'s control endpoint on `listener` until the task is aborted.
    pub async fn serve(proxy: FaultProxy, listener: TcpListener) {
        let control = Arc::new(Self {
            proxy,
            applied: Arc::new(AtomicBool::new(false)),
            release: Mutex::new(None),
        });
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let control = control.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let control = control.clone();
                    async move { Ok::<_, std::convert::Infallible>(control.handle(&req)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                    .await;
            });
        }
    }

    fn let_go(&self) -> bool {
        self.release
            .lock()
            .take()
            .is_some_and(|tx| tx.send(()).is_ok())
    }

    fn handle<B>(
        &self,
        req: &http::Request<B>,
    ) -> http::Response<http_body_util::Full<bytes::Bytes>> {
        let status = match (req.method().as_str(), req.uri().path()) {
            ("GET", "/") => http::StatusCode::OK,
            ("POST", "/hold") => {
                self.let_go();
                self.applied.store(false, Ordering::SeqCst);
                let mut held = self.proxy.hold_next_response();
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                *self.release.lock() = Some(tx);
                let applied = self.applied.clone();
                tokio::spawn(async move {
                    if held.applied().await {
                        applied.store(true, Ordering::SeqCst);
                    }
                    let _ = rx.await;
                    held.release();
                });
                http::StatusCode::OK
            }
            ("POST", "/release") => {
                if self.let_go() {
                    http::StatusCode::OK
                } else {
                    http::StatusCode::CONFLICT
                }
            }
            ("POST", "/disarm") => {
                self.proxy.disarm();
                self.let_go();
                http::StatusCode::OK
            }
            _ => http::StatusCode::NOT_FOUND,
        };
        let body = serde_json::json!({
            "armed": self.proxy.armed(),
            "applied": self.applied.load(Ordering::SeqCst),
            "dropped": self.proxy.dropped(),
        });
        http::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .expect("valid response")
    }
}

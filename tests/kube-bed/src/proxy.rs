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

    /// Whether an armed [`drop_next_response`](Self::drop_next_response) is still waiting for
    /// its request.
    pub fn armed(&self) -> bool {
        self.state.drop_next.load(Ordering::SeqCst)
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
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        tokio::select! {
            r = client.read(&mut up) => {
                let n = match r { Ok(0) | Err(_) => return, Ok(n) => n };
                if !doomed && st.drop_next.swap(false, Ordering::SeqCst) {
                    doomed = true;
                }
                if server.write_all(&up[..n]).await.is_err() {
                    return;
                }
            }
            r = server.read(&mut down) => {
                let n = match r { Ok(0) | Err(_) => return, Ok(n) => n };
                if doomed {
                    // The server answers the doomed request: it has been applied. Lose the
                    // answer and reset the client's connection (RST, not FIN).
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

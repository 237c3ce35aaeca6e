//! A TCP forwarder that stands for one FE of a cluster: two of them in front of one emulator's FE
//! HTTP port make a two-FE cluster in which one FE can be taken down and brought back.
//!
//! Down means: open connections are cut and new ones are accepted and closed at once (what a
//! client sees of an FE process that died and of a port nobody serves on behind a load balancer).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// One FE stand-in; stops forwarding when dropped.
pub struct FeProxy {
    /// Where clients connect (`127.0.0.1:<port>`).
    pub address: SocketAddr,
    up: Arc<watch::Sender<bool>>,
    task: JoinHandle<()>,
}

impl FeProxy {
    /// Listens on a free port and forwards to `upstream`; starts up.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let up = Arc::new(watch::channel(true).0);
        let state = up.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !*state.borrow() {
                    drop(client);
                    continue;
                }
                let mut watch = state.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let mut client = client;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = watch.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Self { address, up, task }
    }

    /// Takes this FE down (`false`) or brings it back (`true`).
    pub fn set_up(&self, up: bool) {
        self.up.send_replace(up);
    }

    /// `host:port` as a manifest's `feNodes` names it.
    pub fn node(&self) -> String {
        self.address.to_string()
    }
}

impl Drop for FeProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

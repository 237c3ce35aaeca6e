//! kube-emu: a Kubernetes API server and a process kubelet for testing the dcs operator end to
//! end on machines with no cluster and no container engine.
//!
//! Start one in-process with [`KubeEmu::start`], or run the `dcs-kube-emu` binary.
#![forbid(unsafe_code)]

pub mod admission;
pub mod api;
pub mod cel;
pub mod cluster;
pub mod controllers;
pub mod crd;
pub mod discovery;
pub mod events;
pub mod gc;
pub mod kinds;
pub mod kubelet;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod rbac;
pub mod scale;
pub mod selectors;
pub mod ssa;
pub mod status;
pub mod store;
pub mod table;
pub mod tls;
pub mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub use cluster::Cluster;

/// The current time as Kubernetes writes timestamps (RFC 3339, seconds).
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding or I/O failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// Certificates could not be made.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// Persisted state could not be read.
    #[error("reading persisted state: {0}")]
    State(String),
}

/// How to run the emulator.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on.
    pub host: String,
    /// Port, 0 for a free one.
    pub port: u16,
    /// Run pods as local processes.
    pub kubelet: bool,
    /// Image name (registry and tag stripped) → local binary.
    pub image_map: Vec<(String, PathBuf)>,
    /// Persist state here across restarts.
    pub data_dir: Option<PathBuf>,
    /// Events kept for watches to resume from; older resourceVersions get 410.
    pub watch_history: usize,
    /// Interval between watch bookmarks.
    pub bookmark_every: Duration,
    /// Where pod volumes and logs live (a temporary directory when unset).
    pub work_dir: Option<PathBuf>,
    /// Enforce RBAC for every token but the admin's.
    pub authorize: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 0,
            kubelet: false,
            image_map: Vec::new(),
            data_dir: None,
            watch_history: 10_000,
            bookmark_every: Duration::from_secs(5),
            work_dir: None,
            authorize: false,
        }
    }
}

/// A running emulator. Dropping it stops the server, the controllers and every pod process.
pub struct KubeEmu {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `https://host:port`.
    pub url: String,
    /// CA certificate (PEM) the serving certificate is signed by.
    pub ca_pem: String,
    /// Admin bearer token.
    pub token: String,
    /// The state, for tests that look inside.
    pub cluster: Arc<Cluster>,
    tasks: JoinSet<()>,
    kubelet: Option<kubelet::Kubelet>,
    data_dir: Option<PathBuf>,
    /// A work directory made for this run, removed on shutdown.
    temp_work_dir: Option<PathBuf>,
}

impl std::fmt::Debug for KubeEmu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeEmu").field("url", &self.url).finish()
    }
}

fn load_or_make_pki(cfg: &Config) -> Result<(tls::Pki, String), Error> {
    let b64 = base64::engine::general_purpose::STANDARD;
    if let Some(dir) = &cfg.data_dir {
        let path = dir.join("pki.json");
        if let Ok(raw) = std::fs::read(&path) {
            let v: serde_json::Value =
                serde_json::from_slice(&raw).map_err(|e| Error::State(e.to_string()))?;
            let get = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            let pki = tls::Pki {
                ca_pem: get("ca"),
                cert_der: b64
                    .decode(get("cert"))
                    .map_err(|e| Error::State(e.to_string()))?,
                key_der: b64
                    .decode(get("key"))
                    .map_err(|e| Error::State(e.to_string()))?,
            };
            return Ok((pki, get("token")));
        }
    }
    let pki = tls::Pki::generate(&cfg.host)?;
    let token = format!("admin-{}", uuid::Uuid::new_v4().simple());
    if let Some(dir) = &cfg.data_dir {
        std::fs::create_dir_all(dir)?;
        let v = json!({"ca": pki.ca_pem, "cert": b64.encode(&pki.cert_der), "key": b64.encode(&pki.key_der), "token": token});
        std::fs::write(dir.join("pki.json"), v.to_string())?;
    }
    Ok((pki, token))
}

impl KubeEmu {
    /// Starts the API server (and the kubelet, when configured).
    pub async fn start(cfg: Config) -> Result<Self, Error> {
        let node = cfg.kubelet.then(|| "kube-emu-node".to_string());
        let cluster = Cluster::new(cfg.watch_history, node);
        if let Some(dir) = &cfg.data_dir
            && let Ok(raw) = std::fs::read(dir.join("state.json"))
        {
            let v: serde_json::Value =
                serde_json::from_slice(&raw).map_err(|e| Error::State(e.to_string()))?;
            cluster.store.import(&v);
            cluster.register_stored_crds();
        }
        cluster.bootstrap();
        let (pki, token) = load_or_make_pki(&cfg)?;
        let tls_cfg = pki.server_config()?;
        let listener = TcpListener::bind((cfg.host.as_str(), cfg.port)).await?;
        let addr = listener.local_addr()?;
        let host = if cfg.host == "0.0.0.0" {
            "127.0.0.1".to_string()
        } else {
            cfg.host.clone()
        };
        let url = format!("https://{host}:{}", addr.port());
        *cluster.address.write() = format!("{host}:{}", addr.port());
        *cluster.ca_pem.write() = pki.ca_pem.clone();
        let api_cfg = Arc::new(api::ApiConfig {
            admin_token: token.clone(),
            bookmark_every: cfg.bookmark_every,
            authorize: cfg.authorize,
        });
        let mut tasks = JoinSet::new();
        tasks.spawn(serve(listener, tls_cfg, cluster.clone(), api_cfg));
        tasks.spawn(gc::run(cluster.clone()));
        tasks.spawn(controllers::run(cluster.clone()));
        if let Some(dir) = cfg.data_dir.clone() {
            tasks.spawn(persist(cluster.clone(), dir));
        }
        let mut temp_work_dir = None;
        let kubelet = if cfg.kubelet {
            let work = match &cfg.work_dir {
                Some(d) => d.clone(),
                None => {
                    let d = std::env::temp_dir()
                        .join(format!("kube-emu-{}", uuid::Uuid::new_v4().simple()));
                    temp_work_dir = Some(d.clone());
                    d
                }
            };
            Some(kubelet::Kubelet::start(
                cluster.clone(),
                cfg.image_map.clone(),
                work,
            )?)
        } else {
            None
        };
        Ok(Self {
            addr,
            url,
            ca_pem: pki.ca_pem,
            token,
            cluster,
            tasks,
            kubelet,
            data_dir: cfg.data_dir,
            temp_work_dir,
        })
    }

    /// A kubeconfig for this server, admin token, default namespace `namespace`.
    pub fn kubeconfig(&self, namespace: &str) -> String {
        tls::kubeconfig(&self.url, &self.ca_pem, &self.token, namespace)
    }

    /// Stops everything, terminating pod processes and saving state.
    pub async fn shutdown(mut self) {
        if let Some(k) = self.kubelet.take() {
            k.shutdown().await;
        }
        self.tasks.shutdown().await;
        if let Some(dir) = &self.data_dir {
            let _ = std::fs::write(
                dir.join("state.json"),
                self.cluster.store.export().to_string(),
            );
        }
        if let Some(dir) = &self.temp_work_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

async fn persist(cluster: Arc<Cluster>, dir: PathBuf) {
    let mut saved = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rv = cluster.store.current_rv();
        if rv != saved {
            let tmp = dir.join("state.json.tmp");
            if std::fs::write(&tmp, cluster.store.export().to_string()).is_ok() {
                let _ = std::fs::rename(&tmp, dir.join("state.json"));
                saved = rv;
            }
        }
    }
}

async fn serve(
    listener: TcpListener,
    tls_cfg: Arc<rustls::ServerConfig>,
    cluster: Arc<Cluster>,
    cfg: Arc<api::ApiConfig>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_cfg);
    let mut conns = JoinSet::new();
    loop {
        let (tcp, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        while conns.try_join_next().is_some() {}
        let acceptor = acceptor.clone();
        let cluster = cluster.clone();
        let cfg = cfg.clone();
        conns.spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let svc = service_fn(move |req| {
                let cluster = cluster.clone();
                let cfg = cfg.clone();
                async move { Ok::<_, std::convert::Infallible>(api::handle(cluster, cfg, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), svc).await;
        });
    }
}

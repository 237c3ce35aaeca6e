//! The Kubernetes test bed: a genuine control plane (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler built from their Go modules) started for a test run,
//! a process kubelet that runs the pods scheduled to its Node as local processes, and a
//! fault-injecting proxy in front of the API server.
//!
//! Rust tests share one control plane per test binary and take a namespace each:
//!
//! ```no_run
//! # async fn f() -> Result<(), dcs_kube_bed::Error> {
//! let ns = dcs_kube_bed::namespace("my-test").await?; // `my-test-<random>`, ready for pods
//! let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(ns.client.clone(), &ns.name);
//! # Ok(()) }
//! ```
//!
//! [`kubelet_namespace`] also starts the binary's shared kubelet, so pods there run. Scripts
//! use the `dcs-kube-bed` binary, which starts the same bed and prints its kubeconfig.

pub mod control_plane;
pub mod kubelet;
pub mod lifeline;
pub mod pki;
pub mod proxy;

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::Api;
use kube::api::PostParams;

pub use control_plane::ControlPlane;
pub use kubelet::{Kubelet, KubeletConfig};
pub use proxy::{FaultProxy, HeldResponse, ProxyControl};

/// Errors of the test bed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or socket operation failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// Certificates could not be made.
    #[error("generating certificates: {0}")]
    Pki(#[from] rcgen::Error),
    /// TLS could not be configured.
    #[error("configuring TLS: {0}")]
    Tls(String),
    /// Building the Go binaries failed.
    #[error("building the control plane: {0}")]
    Build(String),
    /// A component did not start or become ready.
    #[error("starting the control plane: {0}")]
    Start(String),
    /// The API server answered with an error, or a client could not be made.
    #[error("Kubernetes API: {0}")]
    Kube(String),
    /// A start of the shared bed failed earlier in this process.
    #[error("the shared test bed did not start: {0}")]
    Shared(String),
}

/// The control plane this process shares among its tests, started on first use.
pub async fn shared() -> Result<&'static ControlPlane, Error> {
    static CP: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
    let cp = tokio::task::spawn_blocking(|| {
        CP.get_or_init(|| ControlPlane::start(None).map_err(|e| e.to_string()))
    })
    .await
    .map_err(|e| Error::Shared(e.to_string()))?;
    cp.as_ref().map_err(|e| Error::Shared(e.clone()))
}

/// The name of the shared kubelet's Node.
pub const NODE_NAME: &str = "dcs-node";

/// The kubelet this process shares among its tests (on a runtime of its own, so it outlives
/// every test's runtime), started on first use.
pub async fn shared_kubelet() -> Result<(), Error> {
    static KUBELET: OnceLock<Result<(), String>> = OnceLock::new();
    let cp = shared().await?;
    let r = tokio::task::spawn_blocking(move || {
        KUBELET
            .get_or_init(|| {
                let (tx, rx) = std::sync::mpsc::channel();
                let work_dir = cp.dir.join("kubelet");
                std::thread::Builder::new()
                    .name("shared-kubelet".into())
                    .spawn(move || {
                        let rt = tokio::runtime::Builder::new_multi_thread()
                            .worker_threads(2)
                            .enable_all()
                            .build()
                            .expect("kubelet runtime");
                        rt.block_on(async move {
                            let cfg = KubeletConfig {
                                node_name: NODE_NAME.into(),
                                image_map: Vec::new(),
                                work_dir,
                                api_via: None,
                            };
                            match Kubelet::start(cp, cfg).await {
                                Ok(k) => {
                                    let _ = tx.send(Ok(()));
                                    // Lives as long as the process.
                                    std::future::pending::<()>().await;
                                    drop(k);
                                }
                                Err(e) => {
                                    let _ = tx.send(Err(e.to_string()));
                                }
                            }
                        });
                    })
                    .map_err(|e| e.to_string())?;
                rx.recv().map_err(|e| e.to_string())?
            })
            .clone()
    })
    .await
    .map_err(|e| Error::Shared(e.to_string()))?;
    r.map_err(Error::Shared)
}

/// A namespace of the shared control plane for one test.
#[derive(Clone)]
pub struct TestNamespace {
    /// Its name: the prefix given and a random suffix.
    pub name: String,
    /// An admin client whose default namespace is this one.
    pub client: kube::Client,
    /// The control plane.
    pub cp: &'static ControlPlane,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TestNamespace {
    /// An admin kubeconfig whose default namespace is this one.
    pub fn kubeconfig(&self) -> String {
        self.cp.kubeconfig(&self.name)
    }

    /// [`kubeconfig`](Self::kubeconfig) written to a file in the control plane's directory.
    pub fn kubeconfig_file(&self) -> Result<std::path::PathBuf, Error> {
        let path = self.cp.dir.join(format!("{}.kubeconfig", self.name));
        std::fs::write(&path, self.kubeconfig())?;
        Ok(path)
    }

    /// Deletes the namespace (and, through the namespace controller, everything in it).
    pub async fn delete(&self) -> Result<(), Error> {
        Api::<Namespace>::all(self.client.clone())
            .delete(&self.name, &Default::default())
            .await
            .map(|_| ())
            .map_err(|e| Error::Kube(e.to_string()))
    }
}

/// A new namespace `<prefix>-<random>` on the shared control plane, with its `default`
/// ServiceAccount and `kube-root-ca.crt` ConfigMap in place (pods can be created at once).
pub async fn namespace(prefix: &str) -> Result<TestNamespace, Error> {
    namespace_with_labels(prefix, &[]).await
}

/// [`namespace`] with labels (e.g. `pod-security.kubernetes.io/enforce=restricted`).
pub async fn namespace_with_labels(
    prefix: &str,
    labels: &[(&str, &str)],
) -> Result<TestNamespace, Error> {
    let cp = shared().await?;
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let name = format!("{}-{suffix}", prefix.to_lowercase().replace('_', "-"));
    let client = cp.client(&name).await?;
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": labels.iter().cloned().collect::<std::collections::BTreeMap<_, _>>()},
    }))
    .map_err(|e| Error::Kube(e.to_string()))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(|e| Error::Kube(format!("creating namespace {name}: {e}")))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let sa = Api::<ServiceAccount>::namespaced(client.clone(), &name)
            .get_opt("default")
            .await;
        let ca = Api::<ConfigMap>::namespaced(client.clone(), &name)
            .get_opt("kube-root-ca.crt")
            .await;
        if matches!((&sa, &ca), (Ok(Some(_)), Ok(Some(_)))) {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::Kube(format!(
                "namespace {name}: no default ServiceAccount and kube-root-ca.crt after 60 s ({sa:?}, {ca:?})"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(TestNamespace { name, client, cp })
}

/// [`namespace`], with the shared kubelet running (pods there are run).
pub async fn kubelet_namespace(prefix: &str) -> Result<TestNamespace, Error> {
    shared_kubelet().await?;
    namespace(prefix).await
}

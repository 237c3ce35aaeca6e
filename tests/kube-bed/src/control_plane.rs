//! A genuine Kubernetes control plane on this machine: etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler, built from their Go modules by
//! `tests/go-tools/build.sh` and started the way envtest starts them.
//!
//! The API server serves HTTPS on 127.0.0.1 with a certificate of the bed's own CA (SANs
//! `127.0.0.1`, `localhost` and the `kubernetes.default.svc` names), authenticates client
//! certificates and service-account tokens (ES256, issuer `https://kubernetes.default.svc`),
//! authorizes with `Node,RBAC`, admits with its default plugins plus `NodeRestriction` (the
//! defaults include `PodSecurity`, `ServiceAccount`, `NamespaceLifecycle`), and reaches kubelets
//! at their node's InternalIP with a client certificate, checking their serving certificate
//! against the CA. The controller manager runs every default controller, each with its own
//! service-account credentials, and publishes `kube-root-ca.crt` in every namespace.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::Error;
use crate::lifeline;
use crate::pki::{self, Ca, CertKey};

/// The service CIDR; the API server's own Service gets its first address.
pub const SERVICE_CIDR: &str = "10.0.0.0/24";

/// How long each component may take to become ready (generous: CI machines are loaded).
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// Where the binaries are: `DCS_KUBE_CONTROL_PLANE_BIN`, else `target/kube-control-plane/bin` of
/// this workspace (where `tests/go-tools/build.sh` puts them).
pub fn bin_dir() -> PathBuf {
    match std::env::var_os("DCS_KUBE_CONTROL_PLANE_BIN") {
        Some(d) => PathBuf::from(d),
        None => workspace_root().join("target/kube-control-plane/bin"),
    }
}

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// Runs `tests/go-tools/build.sh WHAT` (quick when the binaries are up to date), unless
/// `DCS_KUBE_CONTROL_PLANE_BIN` names prebuilt binaries.
pub fn build(what: &str) -> Result<(), Error> {
    if what == "kube-control-plane" && std::env::var_os("DCS_KUBE_CONTROL_PLANE_BIN").is_some() {
        return Ok(());
    }
    let script = workspace_root().join("tests/go-tools/build.sh");
    let status = Command::new("bash")
        .arg(&script)
        .arg(what)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| Error::Build(format!("{}: {e}", script.display())))?;
    if !status.success() {
        return Err(Error::Build(format!(
            "{} {what} failed ({status}); its output is above",
            script.display()
        )));
    }
    Ok(())
}

fn free_port() -> Result<u16, Error> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running control plane. [`ControlPlane::stop`] (or process exit) ends it.
pub struct ControlPlane {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The API server's address.
    pub address: SocketAddr,
    /// The work directory: certificates, kubeconfigs, etcd's data, the components' logs.
    pub dir: PathBuf,
    /// The cluster CA; kubelets get their certificates from it.
    pub ca: Ca,
    admin: CertKey,
    children: Mutex<Vec<(&'static str, Child)>>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("url", &self.url)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Writes `dir/name`; private keys and kubeconfigs (which hold one) readable by the owner only:
/// pods run as other users on this machine.
fn write(dir: &Path, name: &str, data: &str) -> Result<PathBuf, Error> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, data)?;
    if name.ends_with(".key") || name.ends_with(".kubeconfig") {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(path)
}

fn arg(name: &str, value: impl AsRef<std::ffi::OsStr>) -> std::ffi::OsString {
    let mut s = std::ffi::OsString::from(format!("--{name}="));
    s.push(value.as_ref());
    s
}

impl ControlPlane {
    /// Builds (if needed) and starts a control plane in a new directory under `parent`
    /// (removed at exit when `parent` is `None`: a temporary directory). Blocks until the API
    /// server answers `/readyz` and the controllers have made the `default` ServiceAccount.
    pub fn start(parent: Option<&Path>) -> Result<Self, Error> {
        build("kube-control-plane")?;
        let bin = bin_dir();
        let dir = match parent {
            Some(p) => {
                std::fs::create_dir_all(p)?;
                p.to_path_buf()
            }
            None => {
                let d = std::env::temp_dir()
                    .join(format!("dcs-kube-bed-{}", uuid::Uuid::new_v4().simple()));
                std::fs::create_dir_all(&d)?;
                lifeline::remove_at_exit(d.clone());
                d
            }
        };
        let started = Instant::now();
        let ca = Ca::generate()?;
        let ca_file = write(&dir, "ca.crt", &ca.cert_pem)?;
        let serving = ca.serving(
            "kube-apiserver",
            &[
                "127.0.0.1",
                "localhost",
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
        )?;
        let serving_cert = write(&dir, "apiserver.crt", &serving.cert_pem)?;
        let serving_key = write(&dir, "apiserver.key", &serving.key_pem)?;
        let kubelet_client = ca.client("kube-apiserver-kubelet-client", &["system:masters"])?;
        let kubelet_client_cert = write(
            &dir,
            "apiserver-kubelet-client.crt",
            &kubelet_client.cert_pem,
        )?;
        let kubelet_client_key = write(
            &dir,
            "apiserver-kubelet-client.key",
            &kubelet_client.key_pem,
        )?;
        let (sa_key, sa_pub) = pki::service_account_key()?;
        let sa_key_file = write(&dir, "sa.key", &sa_key)?;
        let sa_pub_file = write(&dir, "sa.pub", &sa_pub)?;
        let admin = ca.client("dcs-test-admin", &["system:masters"])?;

        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let api_port = free_port()?;
        let address: SocketAddr = ([127, 0, 0, 1], api_port).into();
        let url = format!("https://{address}");
        let mut cp = Self {
            url: url.clone(),
            address,
            dir: dir.clone(),
            ca,
            admin,
            children: Mutex::new(Vec::new()),
        };
        write(&dir, "admin.kubeconfig", &cp.kubeconfig("default"))?;

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Command::new(bin.join("etcd"));
        etcd.arg(arg("name", "dcs-test"))
            .arg(arg("data-dir", dir.join("etcd")))
            .arg(arg("listen-client-urls", &etcd_url))
            .arg(arg("advertise-client-urls", &etcd_url))
            .arg(arg("listen-peer-urls", &peer_url))
            .arg(arg("initial-advertise-peer-urls", &peer_url))
            .arg(arg("initial-cluster", format!("dcs-test={peer_url}")))
            // A test cluster lives for one run: losing writes on a power cut is fine, waiting
            // for fsync on a loaded disk is not.
            .arg("--unsafe-no-fsync")
            .arg(arg("log-level", "warn"));
        cp.spawn("etcd", etcd)?;

        let mut apiserver = Command::new(bin.join("kube-apiserver"));
        apiserver
            .arg(arg("etcd-servers", &etcd_url))
            .arg(arg("bind-address", "127.0.0.1"))
            .arg(arg("advertise-address", "127.0.0.1"))
            // The `kubernetes` Service's endpoints may not be a loopback address, and nothing
            // routes its cluster IP here anyway: clients use the address itself.
            .arg(arg("endpoint-reconciler-type", "none"))
            .arg(arg("secure-port", api_port.to_string()))
            .arg(arg("tls-cert-file", &serving_cert))
            .arg(arg("tls-private-key-file", &serving_key))
            .arg(arg("client-ca-file", &ca_file))
            .arg(arg("service-cluster-ip-range", SERVICE_CIDR))
            .arg(arg(
                "service-account-issuer",
                "https://kubernetes.default.svc",
            ))
            .arg(arg("service-account-key-file", &sa_pub_file))
            .arg(arg("service-account-signing-key-file", &sa_key_file))
            .arg(arg("authorization-mode", "Node,RBAC"))
            .arg(arg("enable-admission-plugins", "NodeRestriction"))
            .arg(arg("allow-privileged", "true"))
            .arg(arg("kubelet-client-certificate", &kubelet_client_cert))
            .arg(arg("kubelet-client-key", &kubelet_client_key))
            .arg(arg("kubelet-certificate-authority", &ca_file))
            .arg(arg("kubelet-preferred-address-types", "InternalIP"))
            .arg(arg("cert-dir", dir.join("apiserver-certs")))
            .arg(arg("profiling", "false"))
            .arg(arg("v", "1"));
        cp.spawn("kube-apiserver", apiserver)?;
        cp.wait_for(started, "kube-apiserver", "/readyz")?;

        let kcm_kubeconfig =
            cp.component_kubeconfig("kube-controller-manager", "system:kube-controller-manager")?;
        let mut kcm = Command::new(bin.join("kube-controller-manager"));
        kcm.arg(arg("kubeconfig", &kcm_kubeconfig))
            .arg(arg("authentication-kubeconfig", &kcm_kubeconfig))
            .arg(arg("authorization-kubeconfig", &kcm_kubeconfig))
            .arg(arg("bind-address", "127.0.0.1"))
            .arg(arg("secure-port", free_port()?.to_string()))
            .arg(arg("cert-dir", dir.join("kcm-certs")))
            .arg(arg("leader-elect", "false"))
            .arg(arg("use-service-account-credentials", "true"))
            .arg(arg("service-account-private-key-file", &sa_key_file))
            .arg(arg("root-ca-file", &ca_file))
            .arg(arg("service-cluster-ip-range", SERVICE_CIDR))
            .arg(arg("allocate-node-cidrs", "false"))
            .arg(arg("profiling", "false"))
            .arg(arg("v", "1"));
        cp.spawn("kube-controller-manager", kcm)?;

        let sched_kubeconfig =
            cp.component_kubeconfig("kube-scheduler", "system:kube-scheduler")?;
        let mut sched = Command::new(bin.join("kube-scheduler"));
        sched
            .arg(arg("kubeconfig", &sched_kubeconfig))
            .arg(arg("authentication-kubeconfig", &sched_kubeconfig))
            .arg(arg("authorization-kubeconfig", &sched_kubeconfig))
            .arg(arg("bind-address", "127.0.0.1"))
            .arg(arg("secure-port", free_port()?.to_string()))
            .arg(arg("leader-elect", "false"))
            .arg(arg("profiling", "false"))
            .arg(arg("v", "1"));
        cp.spawn("kube-scheduler", sched)?;
        cp.wait_for(
            started,
            "the controllers (the default ServiceAccount)",
            "/api/v1/namespaces/default/serviceaccounts/default",
        )?;
        tracing::info!(url = %cp.url, dir = %dir.display(), seconds = started.elapsed().as_secs_f64(), "control plane ready");
        Ok(cp)
    }

    fn component_kubeconfig(&self, name: &str, user: &str) -> Result<PathBuf, Error> {
        let cert = self.ca.client(user, &[])?;
        write(
            &self.dir,
            &format!("{name}.kubeconfig"),
            &pki::kubeconfig(&self.url, &self.ca.cert_pem, &cert, "default"),
        )
    }

    fn spawn(&mut self, name: &'static str, mut cmd: Command) -> Result<(), Error> {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log")))?;
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = lifeline::spawn(cmd).map_err(|e| {
            Error::Start(format!("{name}: {e} (built by tests/go-tools/build.sh?)"))
        })?;
        self.children.lock().expect("lock").push((name, child));
        Ok(())
    }

    /// Fails when a component has exited, with the end of its log.
    fn check_alive(&self) -> Result<(), Error> {
        let mut children = self.children.lock().expect("lock");
        for (name, child) in children.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(Error::Start(format!(
                    "{name} exited ({status}); the end of {}:\n{}",
                    self.dir.join(format!("{name}.log")).display(),
                    tail(&self.dir.join(format!("{name}.log")), 30)
                )));
            }
        }
        Ok(())
    }

    /// Polls GET `path` with the admin client until it answers 200.
    fn wait_for(&self, started: Instant, what: &str, path: &str) -> Result<(), Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let client = rt.block_on(self.client("default"))?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            self.check_alive()?;
            let request = http::Request::get(path)
                .body(Vec::new())
                .map_err(|e| Error::Kube(e.to_string()))?;
            let answer = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), client.request_text(request)).await
            });
            if let Ok(Ok(_)) = answer {
                tracing::debug!(what, seconds = started.elapsed().as_secs_f64(), "ready");
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Start(format!(
                    "{what} not ready after {} s (last answer: {answer:?}); logs in {}",
                    READY_TIMEOUT.as_secs(),
                    self.dir.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// An admin kubeconfig (group `system:masters`) with default namespace `namespace`.
    pub fn kubeconfig(&self, namespace: &str) -> String {
        pki::kubeconfig(&self.url, &self.ca.cert_pem, &self.admin, namespace)
    }

    /// An admin kubeconfig for the API server reached through `address` (a [`crate::FaultProxy`]).
    pub fn kubeconfig_via(&self, namespace: &str, address: SocketAddr) -> String {
        pki::kubeconfig(
            &format!("https://{address}"),
            &self.ca.cert_pem,
            &self.admin,
            namespace,
        )
    }

    /// The admin kubeconfig file (default namespace `default`).
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// A kube-rs client with admin rights.
    pub async fn client(&self, namespace: &str) -> Result<kube::Client, Error> {
        client_from_kubeconfig(&self.kubeconfig(namespace)).await
    }

    /// The PIDs of the components, by name (for benchmarks reading their memory).
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        self.children
            .lock()
            .expect("lock")
            .iter()
            .map(|(n, c)| (*n, c.id()))
            .collect()
    }

    /// Stops the components, newest first: SIGTERM, SIGKILL after 10 s.
    pub fn stop(&self) {
        let mut children = self.children.lock().expect("lock");
        while let Some((name, mut child)) = children.pop() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if matches!(child.try_wait(), Ok(None)) {
                tracing::warn!(component = name, "did not stop on SIGTERM; SIGKILL");
                let _ = child.kill();
            }
            let _ = child.wait();
            lifeline::forget_group(child.id());
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A kube-rs client from a kubeconfig's YAML.
pub async fn client_from_kubeconfig(yaml: &str) -> Result<kube::Client, Error> {
    let kc = kube::config::Kubeconfig::from_yaml(yaml).map_err(|e| Error::Kube(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| Error::Kube(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| Error::Kube(e.to_string()))
}

fn tail(path: &Path, lines: usize) -> String {
    let Ok(f) = std::fs::File::open(path) else {
        return String::new();
    };
    let all: Vec<String> = BufReader::new(f).lines().map_while(Result::ok).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

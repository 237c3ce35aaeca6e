//! TLS on every port (docs/doris-protocols.md §8): the certificate the emulator serves with, the
//! rustls server configurations built from it (ring, never OpenSSL or aws-lc), and the accept
//! loop the HTTP and Flight ports share, which runs each TLS handshake in its own task so a slow
//! or failing client holds up nobody else.
//!
//! The MySQL port upgrades in-protocol instead (`mysql/ssl.rs`).

pub mod cert;

use std::fmt;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::Doris;

/// A rustls client configuration (ring) that trusts nothing: for the plaintext HTTP clients of
/// tests and tools. reqwest is built without a crypto provider of its own (the workspace's
/// `rustls-no-provider`), so each client is given a configuration
/// (`reqwest::ClientBuilder::tls_backend_preconfigured`) instead of a process-wide default.
pub fn plain_client_config() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
}

/// How long a client gets to finish its TLS handshake before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate every port serves when TLS is on: a PEM certificate chain (leaf first) and
/// its PEM private key (PKCS#8, PKCS#1 or SEC1).
#[derive(Clone)]
pub struct EmuTls {
    /// The certificate chain, PEM.
    pub cert_chain_pem: Vec<u8>,
    /// The private key, PEM.
    pub key_pem: Vec<u8>,
}

impl fmt::Debug for EmuTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmuTls")
            .field(
                "cert_chain_pem",
                &format_args!("{} bytes", self.cert_chain_pem.len()),
            )
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// A certificate or key that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The chain holds no `CERTIFICATE` block, or one that does not parse.
    #[error("TLS certificate: {0}")]
    Certificate(String),
    /// The key is missing or does not parse.
    #[error("TLS private key: {0}")]
    Key(String),
    /// rustls refused the pair (e.g. the key does not match the certificate).
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

impl From<TlsError> for std::io::Error {
    fn from(e: TlsError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
    }
}

impl EmuTls {
    /// A rustls server configuration offering `alpn` (most preferred first).
    pub fn server_config(&self, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, TlsError> {
        let chain = CertificateDer::pem_slice_iter(&self.cert_chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Certificate(e.to_string()))?;
        if chain.is_empty() {
            return Err(TlsError::Certificate(
                "no CERTIFICATE block in the PEM".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key_pem)
            .map_err(|e| TlsError::Key(e.to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }
}

/// The acceptors of one emulator, one per protocol (they differ in ALPN).
#[derive(Clone)]
pub struct Acceptors {
    /// FE and BE HTTP: `http/1.1`.
    pub http: TlsAcceptor,
    /// FE and BE Flight: `h2` (gRPC clients insist on it).
    pub grpc: TlsAcceptor,
    /// MySQL: no ALPN.
    pub mysql: TlsAcceptor,
}

impl Acceptors {
    /// Build every acceptor, failing on a certificate or key that cannot be served.
    pub fn new(tls: &EmuTls) -> Result<Self, TlsError> {
        Ok(Self {
            http: TlsAcceptor::from(tls.server_config(&[b"http/1.1"])?),
            grpc: TlsAcceptor::from(tls.server_config(&[b"h2"])?),
            mysql: TlsAcceptor::from(tls.server_config(&[])?),
        })
    }
}

/// An accepted connection: plain TCP, or TLS once its handshake is done.
pub enum EmuStream {
    /// No TLS configured.
    Plain(TcpStream),
    /// TLS configured, handshake done.
    Tls(Box<TlsStream<TcpStream>>),
}

impl EmuStream {
    /// The TCP connection underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            EmuStream::Plain(s) => s,
            EmuStream::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for EmuStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            EmuStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            EmuStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for EmuStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            EmuStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            EmuStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            EmuStream::Plain(s) => Pin::new(s).poll_flush(cx),
            EmuStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            EmuStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            EmuStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            EmuStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            EmuStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            EmuStream::Plain(s) => s.is_write_vectored(),
            EmuStream::Tls(s) => s.is_write_vectored(),
        }
    }
}

impl tonic::transport::server::Connected for EmuStream {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.tcp().connect_info()
    }
}

/// Accepted connections on `l`: those arriving while `refuse_connections` is armed are closed at
/// once; with `acceptor`, each is yielded after its TLS handshake, and one whose handshake fails
/// or times out is logged, counted (`tls_handshake_failed`) and dropped. The stream never ends.
pub fn incoming(
    l: TcpListener,
    doris: Arc<Doris>,
    acceptor: Option<TlsAcceptor>,
    port: &'static str,
) -> impl Stream<Item = (EmuStream, SocketAddr)> + Send + 'static {
    let state = Accepting {
        l,
        doris,
        acceptor,
        port,
        handshakes: JoinSet::new(),
    };
    futures::stream::unfold(state, |mut s| async move {
        let next = s.next().await;
        Some((next, s))
    })
}

struct Accepting {
    l: TcpListener,
    doris: Arc<Doris>,
    acceptor: Option<TlsAcceptor>,
    port: &'static str,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl Accepting {
    async fn next(&mut self) -> (EmuStream, SocketAddr) {
        loop {
            tokio::select! {
                accepted = self.l.accept() => {
                    let (stream, addr) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // Out of file descriptors and the like: wait instead of spinning.
                            tracing::warn!(port = self.port, error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    if self.doris.faults.refuse_connections() {
                        drop(stream);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    match &self.acceptor {
                        None => return (EmuStream::Plain(stream), addr),
                        Some(acceptor) => {
                            let acceptor = acceptor.clone();
                            let doris = self.doris.clone();
                            let port = self.port;
                            self.handshakes.spawn(async move {
                                handshake(&acceptor, stream, addr, &doris, port).await
                            });
                        }
                    }
                }
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some((stream, addr))) = done {
                        return (EmuStream::Tls(Box::new(stream)), addr);
                    }
                }
            }
        }
    }
}

/// One server-side TLS handshake, bounded by [`HANDSHAKE_TIMEOUT`]; a failure is logged and
/// counted, never raised.
async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    addr: SocketAddr,
    doris: &Doris,
    port: &str,
) -> Option<(TlsStream<TcpStream>, SocketAddr)> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some((tls, addr)),
        Ok(Err(e)) => {
            doris.counters.hit("tls_handshake_failed");
            tracing::warn!(port, peer = %addr, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            doris.counters.hit("tls_handshake_failed");
            tracing::warn!(port, peer = %addr, "TLS handshake timed out");
            None
        }
    }
}

//! TLS towards one Doris cluster, set up once from the spec's `tls` block and used by every
//! connection to it: HTTP ([`Tls::http_client`], [`Tls::url`]), MySQL ([`Tls::mysql_ssl_opts`])
//! and gRPC ([`Tls::grpc_config`]).
//!
//! rustls with the ring provider, chosen per configuration (never a process-wide default, so no
//! client panics for want of one). Trust: the CA bundle when one is given (and nothing else),
//! else the public web roots compiled in (`webpki-roots`). `serverName` replaces the dialled
//! host in the certificate check; `insecureSkipVerify` accepts any certificate. Plaintext is
//! [`Tls::plaintext`]: `http://`, no MySQL upgrade, `http://` gRPC — and a TLS configuration
//! never falls back to it.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why a TLS configuration could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsConfigError {
    /// The CA bundle holds no certificate, or one that does not parse.
    #[error(
        "the CA bundle {origin} {problem}; give a PEM file with at least one CERTIFICATE block"
    )]
    CaBundle {
        /// Where the bundle came from (a file path).
        origin: String,
        /// What is wrong with it.
        problem: String,
    },
    /// `serverName` is not a DNS name or IP address.
    #[error("serverName {name:?} is not a DNS name or an IP address")]
    ServerName {
        /// The name as given.
        name: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(String),
}

/// What a [`Tls`] is made from.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// The CA bundle (PEM) and where it came from; the public web roots when `None`.
    pub ca_bundle: Option<(String, Vec<u8>)>,
    /// The name certificates must hold instead of the dialled host.
    pub server_name: Option<String>,
    /// Accept any certificate.
    pub insecure_skip_verify: bool,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca_bundle", &self.ca_bundle.as_ref().map(|(o, _)| o))
            .field("server_name", &self.server_name)
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish()
    }
}

/// TLS (or plaintext) for every connection to one cluster. Cheap to clone.
#[derive(Clone, Default)]
pub struct Tls {
    on: Option<Arc<On>>,
}

struct On {
    options: TlsOptions,
    /// The certificate check every connection uses.
    verifier: Arc<dyn ServerCertVerifier>,
    provider: Arc<CryptoProvider>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.on {
            None => f.write_str("Tls(plaintext)"),
            Some(on) => write!(f, "Tls({:?})", on.options),
        }
    }
}

fn ring() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Tls {
    /// No TLS: `http://`, plaintext MySQL and gRPC.
    pub fn plaintext() -> Self {
        Self { on: None }
    }

    /// TLS with `options`.
    ///
    /// # Errors
    /// When the CA bundle holds no usable certificate or `serverName` is no name.
    pub fn new(options: TlsOptions) -> Result<Self, TlsConfigError> {
        let provider = ring();
        if let Some(name) = &options.server_name {
            ServerName::try_from(name.as_str())
                .map_err(|_| TlsConfigError::ServerName { name: name.clone() })?;
        }
        let verifier: Arc<dyn ServerCertVerifier> = if options.insecure_skip_verify {
            Arc::new(AcceptAnything {
                provider: provider.clone(),
            })
        } else {
            let roots = roots(options.ca_bundle.as_ref())?;
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| TlsConfigError::Rustls(e.to_string()))?;
            match &options.server_name {
                None => webpki,
                Some(name) => Arc::new(NameOverride {
                    inner: webpki,
                    // Checked above.
                    name: ServerName::try_from(name.clone())
                        .map_err(|_| TlsConfigError::ServerName { name: name.clone() })?,
                }),
            }
        };
        let tls = Self {
            on: Some(Arc::new(On {
                options,
                verifier,
                provider,
            })),
        };
        // Fails now rather than at the first connection.
        tls.client_config(&[])?;
        Ok(tls)
    }

    /// One side's TLS as its spec (`spec.source.tls`, `spec.sink.doris.tls`) says: plaintext
    /// unless `enabled`; else verified against `ca_bundle` (its origin and PEM) when given, the
    /// public web roots when not, with the spec's `serverName` and `insecureSkipVerify`. The
    /// bundle the spec references is read by the caller (the runner from a file, the operator
    /// from the Secret or ConfigMap).
    ///
    /// # Errors
    /// As [`Tls::new`].
    pub fn from_spec(
        spec: Option<&dcs_crds::TlsSpec>,
        ca_bundle: Option<(String, Vec<u8>)>,
    ) -> Result<Self, TlsConfigError> {
        match spec.filter(|t| t.enabled) {
            None => Ok(Self::plaintext()),
            Some(spec) => Self::new(TlsOptions {
                ca_bundle,
                server_name: spec.server_name.clone(),
                insecure_skip_verify: spec.insecure_skip_verify,
            }),
        }
    }

    /// Whether TLS is on.
    pub fn is_on(&self) -> bool {
        self.on.is_some()
    }

    /// Whether certificates go unchecked (`insecureSkipVerify`).
    pub fn skips_verification(&self) -> bool {
        self.on
            .as_ref()
            .is_some_and(|o| o.options.insecure_skip_verify)
    }

    /// The options TLS was built from; `None` for plaintext.
    pub fn options(&self) -> Option<&TlsOptions> {
        self.on.as_ref().map(|o| &o.options)
    }

    /// `https` or `http`.
    pub fn http_scheme(&self) -> &'static str {
        if self.is_on() { "https" } else { "http" }
    }

    /// `http(s)://{node}{path}` for a `host:port` node (a scheme already on `node` is replaced).
    pub fn url(&self, node: &str, path: &str) -> String {
        let node = node
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        format!("{}://{node}{path}", self.http_scheme())
    }

    /// One line for `check` and logs: `plaintext`, or TLS with what is trusted.
    pub fn describe(&self) -> String {
        let Some(on) = &self.on else {
            return "plaintext".to_owned();
        };
        let o = &on.options;
        let mut text = if o.insecure_skip_verify {
            "TLS WITHOUT CERTIFICATE VERIFICATION (insecureSkipVerify: any server is accepted, \
             credentials can be read by anyone on the path)"
                .to_owned()
        } else {
            match &o.ca_bundle {
                Some((origin, _)) => {
                    format!("TLS, certificates verified against the CA bundle {origin}")
                }
                None => "TLS, certificates verified against the public web roots".to_owned(),
            }
        };
        if let Some(name) = &o.server_name {
            text.push_str(&format!(", server name {name}"));
        }
        text
    }

    /// A rustls client configuration offering `alpn`; `None` for plaintext.
    ///
    /// # Errors
    /// When rustls refuses the protocol versions (it does not for ring).
    pub fn client_config(
        &self,
        alpn: &[&[u8]],
    ) -> Result<Option<rustls::ClientConfig>, TlsConfigError> {
        let Some(on) = &self.on else {
            return Ok(None);
        };
        let mut config = rustls::ClientConfig::builder_with_provider(on.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsConfigError::Rustls(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(on.verifier.clone())
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Some(config))
    }

    /// A configuration for gRPC (ALPN `h2`, which gRPC servers require); `None` for plaintext.
    ///
    /// # Errors
    /// As [`Tls::client_config`].
    pub fn grpc_config(&self) -> Result<Option<Arc<rustls::ClientConfig>>, TlsConfigError> {
        Ok(self.client_config(&[b"h2"])?.map(Arc::new))
    }

    /// The name a TLS connection to `host` presents (SNI) and, without `serverName`, checks.
    ///
    /// # Errors
    /// When `host` is neither a DNS name nor an IP address.
    pub fn server_name_for(&self, host: &str) -> Result<ServerName<'static>, TlsConfigError> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        ServerName::try_from(host.to_owned()).map_err(|_| TlsConfigError::ServerName {
            name: host.to_owned(),
        })
    }

    /// A reqwest client from `builder`, over rustls with this configuration (plaintext: the
    /// same stack, but only `http://` URLs are built). Every reqwest client of dcs comes from
    /// here: reqwest is built without a crypto provider of its own.
    ///
    /// # Errors
    /// reqwest's, or the configuration's.
    pub fn http_client(&self, builder: reqwest::ClientBuilder) -> Result<reqwest::Client, String> {
        let config = match self
            .client_config(&[b"http/1.1"])
            .map_err(|e| e.to_string())?
        {
            Some(c) => c,
            None => plain_config(),
        };
        builder
            .tls_backend_preconfigured(config)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))
    }

    /// MySQL's SSL options (the upgrade is then required: a server that does not offer it is
    /// refused); `None` for plaintext.
    pub fn mysql_ssl_opts(&self) -> Option<mysql_async::SslOpts> {
        let on = self.on.as_ref()?;
        let o = &on.options;
        let mut ssl = mysql_async::SslOpts::default();
        if o.insecure_skip_verify {
            ssl = ssl
                .with_danger_accept_invalid_certs(true)
                .with_danger_skip_domain_validation(true);
        }
        if let Some((_, pem)) = &o.ca_bundle {
            ssl = ssl
                .with_root_certs(vec![pem.clone().into()])
                .with_disable_built_in_roots(true);
        }
        if let Some(name) = &o.server_name {
            ssl = ssl.with_danger_tls_hostname_override(Some(name.clone()));
        }
        Some(ssl)
    }
}

/// A plaintext-capable reqwest client (`http://` only) for callers without a TLS setting — the
/// process builds no client without a preconfigured TLS stack ([`Tls::http_client`]).
///
/// # Errors
/// As [`Tls::http_client`].
pub fn plain_http_client(builder: reqwest::ClientBuilder) -> Result<reqwest::Client, String> {
    Tls::plaintext().http_client(builder)
}

/// `GET url` with a plaintext client ([`plain_http_client`]): `reqwest::get` for tests and tools,
/// which would need a process-wide crypto provider.
///
/// # Errors
/// reqwest's.
pub async fn plain_get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::Response> {
    reqwest::Client::builder()
        .tls_backend_preconfigured(plain_config())
        .build()?
        .get(url)
        .send()
        .await
}

/// The configuration of plaintext clients: never used for a handshake (only `http://` URLs are
/// built), given so reqwest needs no provider of its own.
fn plain_config() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(ring())
        .with_safe_default_protocol_versions()
        // ring supports every default protocol version: this cannot fail.
        .expect("ring supports the default TLS versions")
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth()
}

fn roots(bundle: Option<&(String, Vec<u8>)>) -> Result<RootCertStore, TlsConfigError> {
    let mut roots = RootCertStore::empty();
    let Some((origin, pem)) = bundle else {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    };
    let bad = |problem: String| TlsConfigError::CaBundle {
        origin: origin.clone(),
        problem,
    };
    let mut seen = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| bad(format!("does not parse as PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| bad(format!("holds a certificate that is not a CA: {e}")))?;
        seen += 1;
    }
    if seen == 0 {
        return Err(bad("holds no CERTIFICATE block".to_owned()));
    }
    Ok(roots)
}

/// Checks certificates for one fixed name, whatever host was dialled (`serverName`).
#[derive(Debug)]
struct NameOverride {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for NameOverride {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _dialled: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `insecureSkipVerify`: any certificate is accepted (the handshake's signatures are still
/// checked, so the connection is encrypted to whoever holds the certificate's key).
#[derive(Debug)]
struct AcceptAnything {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS reason inside an error chain (a rustls error, e.g. `invalid peer certificate:
/// UnknownIssuer`), if the failure was TLS's. Walks `source()`, and looks inside I/O errors,
/// whose `source()` skips the error they wrap.
pub fn tls_reason(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(r.to_string());
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            if let Some(r) = inner.downcast_ref::<rustls::Error>() {
                return Some(r.to_string());
            }
            if let Some(r) = tls_reason(inner) {
                return Some(r);
            }
        }
        next = err.source();
    }
    None
}

/// A message for a connection that failed: `TLS to {role} {node} ({protocol}): {reason}` when
/// TLS failed, else `{fallback}`.
pub fn describe_failure(
    role: &str,
    node: &str,
    protocol: &str,
    e: &(dyn std::error::Error + 'static),
    fallback: impl FnOnce() -> String,
) -> String {
    match tls_reason(e) {
        Some(reason) => format!("TLS to {role} {node} ({protocol}): {reason}"),
        None => fallback(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_builds_http_urls_and_no_ssl() {
        let t = Tls::plaintext();
        assert_eq!(t.url("fe:8030", "/api/tso"), "http://fe:8030/api/tso");
        assert!(t.mysql_ssl_opts().is_none());
        assert_eq!(t.describe(), "plaintext");
        plain_http_client(reqwest::Client::builder()).unwrap();
    }

    #[test]
    fn tls_builds_https_urls_and_clients() {
        let t = Tls::new(TlsOptions::default()).unwrap();
        assert_eq!(t.url("http://fe:8030", "/x"), "https://fe:8030/x");
        assert!(t.mysql_ssl_opts().is_some());
        t.http_client(reqwest::Client::builder()).unwrap();
        assert!(t.grpc_config().unwrap().is_some());
        assert!(t.describe().contains("public web roots"));
    }

    #[test]
    fn a_bad_bundle_or_name_is_refused_with_what_to_do() {
        let e = Tls::new(TlsOptions {
            ca_bundle: Some(("/etc/ca.pem".into(), b"garbage".to_vec())),
            ..TlsOptions::default()
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the CA bundle /etc/ca.pem holds no CERTIFICATE block; give a PEM file with at least one CERTIFICATE block"
        );
        let e = Tls::new(TlsOptions {
            server_name: Some("not a name".into()),
            ..TlsOptions::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("not a name"), "{e}");
    }

    #[test]
    fn skip_verify_is_described_loudly() {
        let t = Tls::new(TlsOptions {
            insecure_skip_verify: true,
            ..TlsOptions::default()
        })
        .unwrap();
        assert!(t.skips_verification());
        assert!(t.describe().contains("WITHOUT CERTIFICATE VERIFICATION"));
    }

    #[test]
    fn the_rustls_reason_is_found_inside_io_errors() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(
            tls_reason(&io).as_deref(),
            Some("invalid peer certificate: UnknownIssuer")
        );
        let plain = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(tls_reason(&plain), None);
    }
}

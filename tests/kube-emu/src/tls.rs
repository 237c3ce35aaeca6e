//! The server's own CA and serving certificate, and the kubeconfig clients use.

use std::sync::Arc;

use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA and a serving certificate signed by it.
#[derive(Debug, Clone)]
pub struct Pki {
    /// CA certificate, PEM.
    pub ca_pem: String,
    /// Serving certificate, DER.
    pub cert_der: Vec<u8>,
    /// Serving key, PKCS#8 DER.
    pub key_der: Vec<u8>,
}

/// Errors of certificate generation.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen failed.
    #[error("generating certificates: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// rustls rejected the material.
    #[error("configuring TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

impl Pki {
    /// Generates a CA and a serving certificate for localhost, 127.0.0.1, the given host and
    /// the in-cluster service names.
    pub fn generate(host: &str) -> Result<Self, TlsError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "kube-emu-ca");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let mut names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            "kubernetes.default.svc.cluster.local".to_string(),
        ];
        if !names.iter().any(|n| n == host) && !host.is_empty() && host != "0.0.0.0" {
            names.push(host.to_string());
        }
        let mut params = CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Self {
            ca_pem: ca_cert.pem(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        })
    }

    /// A rustls server configuration (ring provider, HTTP/1.1).
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(self.cert_der.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
            )?;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }
}

/// A kubeconfig for the server: CA data and a bearer token.
pub fn kubeconfig(server_url: &str, ca_pem: &str, token: &str, namespace: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-emu\n  cluster:\n    server: {server_url}\n    certificate-authority-data: {ca}\nusers:\n- name: kube-emu-admin\n  user:\n    token: {token}\ncontexts:\n- name: kube-emu\n  context:\n    cluster: kube-emu\n    user: kube-emu-admin\n    namespace: {namespace}\ncurrent-context: kube-emu\n"
    )
}

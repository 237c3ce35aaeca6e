//! The test cluster's PKI, as envtest makes it: one CA that signs the API server's serving
//! certificate, every client certificate (admin, controller manager, scheduler, the API server's
//! client for kubelets, each node) and the kubelet's serving certificate; and the service-account
//! signing key.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::Error;

/// A certificate and its private key, both PEM (the key as PKCS#8).
#[derive(Debug, Clone)]
pub struct CertKey {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PKCS#8 PEM.
    pub key_pem: String,
}

/// The cluster's certificate authority.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM (what clients and the API server trust).
    pub cert_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// A new self-signed CA.
    pub fn generate() -> Result<Self, Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "dcs-test-cluster-ca");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let cert_pem = params.self_signed(&key)?.pem();
        Ok(Self {
            issuer: Issuer::new(params, key),
            cert_pem,
        })
    }

    /// A serving certificate for `names` (DNS names and IP addresses).
    pub fn serving(&self, common_name: &str, names: &[&str]) -> Result<CertKey, Error> {
        self.sign(
            common_name,
            &[],
            names,
            &[ExtendedKeyUsagePurpose::ServerAuth],
        )
    }

    /// A client certificate: Kubernetes reads the user from the common name and the groups from
    /// the organisations.
    pub fn client(&self, user: &str, groups: &[&str]) -> Result<CertKey, Error> {
        self.sign(user, groups, &[], &[ExtendedKeyUsagePurpose::ClientAuth])
    }

    fn sign(
        &self,
        common_name: &str,
        organisations: &[&str],
        names: &[&str],
        usages: &[ExtendedKeyUsagePurpose],
    ) -> Result<CertKey, Error> {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        for o in organisations {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = usages.to_vec();
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A key pair for signing service-account tokens (ES256): private and public key, PEM.
pub fn service_account_key() -> Result<(String, String), Error> {
    let key = KeyPair::generate()?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

/// A kubeconfig with the cluster's CA, a client certificate and a default namespace.
pub fn kubeconfig(server: &str, ca_pem: &str, user: &CertKey, namespace: &str) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: dcs-test
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: dcs-test-user
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: dcs-test
  context:
    cluster: dcs-test
    user: dcs-test-user
    namespace: {namespace}
current-context: dcs-test
",
        ca = b64(ca_pem),
        cert = b64(&user.cert_pem),
        key = b64(&user.key_pem),
    )
}

//! Every port over TLS (docs/doris-protocols.md §8), each with a real client: hyper over rustls
//! for HTTPS, tonic's TLS channel for Flight SQL, mysql_async with rustls for the MySQL SSL
//! upgrade. Each checks that the right CA works, that a wrong CA fails, and that a plaintext
//! client gets nothing from the TLS port.

mod flight;
mod http;
mod mysql;

use std::sync::Arc;

use dcs_doris_emu::tls::cert::TestPki;
use dcs_doris_emu::{EmuConfig, RunningEmulator};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// An emulator serving TLS with a fresh test CA; the CA comes back for the clients.
pub async fn tls_emu() -> (RunningEmulator, TestPki) {
    tls_emu_with(|_| {}).await
}

/// [`tls_emu`] with a configuration changed by `f`.
pub async fn tls_emu_with(f: impl FnOnce(&mut EmuConfig)) -> (RunningEmulator, TestPki) {
    let pki = TestPki::generate("emu test CA", &[]).expect("test PKI");
    let mut c = EmuConfig::ephemeral();
    f(&mut c);
    c.tls = Some(pki.emu_tls());
    let emu = dcs_doris_emu::start(c).await.expect("emulator starts");
    assert!(emu.tls_on());
    (emu, pki)
}

/// A CA the emulator's certificate does not chain to.
pub fn wrong_ca() -> String {
    TestPki::generate("some other CA", &[])
        .expect("test PKI")
        .ca_pem
}

/// A rustls client configuration (ring) trusting `ca_pem` only.
pub fn client_config(ca_pem: &str, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.expect("CA PEM")).expect("CA certificate");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

#[tokio::test]
async fn a_certificate_that_does_not_parse_fails_start() {
    let mut c = EmuConfig::ephemeral();
    c.tls = Some(dcs_doris_emu::EmuTls {
        cert_chain_pem: b"garbage".to_vec(),
        key_pem: b"garbage".to_vec(),
    });
    let e = dcs_doris_emu::start(c).await.err().expect("start fails");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(
        e.to_string(),
        "TLS certificate: no CERTIFICATE block in the PEM"
    );
}

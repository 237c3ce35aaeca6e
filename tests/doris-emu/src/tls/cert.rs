//! A throw-away PKI for tests: a CA and a serving certificate it signs for the local host
//! (`localhost`, `127.0.0.1`, `::1` and any extra names), as `--tls-self-signed DIR` writes it.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::EmuTls;

/// The names every generated serving certificate holds.
pub const LOCAL_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A CA and a serving certificate signed by it, all PEM.
#[derive(Clone)]
pub struct TestPki {
    /// The CA certificate: what clients trust.
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for TestPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestPki").finish_non_exhaustive()
    }
}

impl TestPki {
    /// A new CA (common name `ca_name`) and a serving certificate for [`LOCAL_NAMES`] plus
    /// `extra_names` (DNS names or IP addresses).
    pub fn generate(ca_name: &str, extra_names: &[&str]) -> Result<Self, rcgen::Error> {
        Self::generate_with(ca_name, extra_names, |_| {})
    }

    /// As [`TestPki::generate`], but the serving certificate expired yesterday (valid from
    /// 2020-01-01): what a client must refuse.
    pub fn generate_expired(ca_name: &str, extra_names: &[&str]) -> Result<Self, rcgen::Error> {
        Self::generate_with(ca_name, extra_names, |params| {
            let yesterday = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24);
            let d = yesterday.to_zoned(jiff::tz::TimeZone::UTC).date();
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(
                i32::from(d.year()),
                u8::try_from(d.month()).unwrap_or(1),
                u8::try_from(d.day()).unwrap_or(1),
            );
        })
    }

    fn generate_with(
        ca_name: &str,
        extra_names: &[&str],
        serving: impl FnOnce(&mut CertificateParams),
    ) -> Result<Self, rcgen::Error> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, ca_name);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_pem = ca_params.self_signed(&ca_key)?.pem();
        let issuer = Issuer::new(ca_params, ca_key);

        let names: Vec<String> = LOCAL_NAMES
            .iter()
            .chain(extra_names)
            .map(|n| n.to_string())
            .collect();
        let mut params = CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "dcs-doris-emu");
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving(&mut params);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Self {
            ca_pem,
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// What the emulator serves with.
    pub fn emu_tls(&self) -> EmuTls {
        EmuTls {
            cert_chain_pem: self.cert_pem.clone().into_bytes(),
            key_pem: self.key_pem.clone().into_bytes(),
        }
    }

    /// Write `ca.pem`, `cert.pem` and `key.pem` into `dir` (created if missing; the key is
    /// readable by its owner only).
    pub fn write_to(&self, dir: &Path) -> std::io::Result<()> {
        let ctx = |what: &str, e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("cannot write {what}: {e}"))
        };
        std::fs::create_dir_all(dir).map_err(|e| ctx(&dir.display().to_string(), e))?;
        for (name, pem) in [("ca.pem", &self.ca_pem), ("cert.pem", &self.cert_pem)] {
            let p = dir.join(name);
            std::fs::write(&p, pem).map_err(|e| ctx(&p.display().to_string(), e))?;
        }
        let p = dir.join("key.pem");
        write_private(&p, self.key_pem.as_bytes()).map_err(|e| ctx(&p.display().to_string(), e))
    }
}

#[cfg(unix)]
fn write_private(p: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(p)?;
    f.write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(p: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(p, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_pair_builds_a_server_config() {
        let pki = TestPki::generate("test CA", &["emu.test"]).unwrap();
        assert!(pki.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        pki.emu_tls().server_config(&[b"h2"]).unwrap();
    }

    #[test]
    fn a_mismatched_key_or_garbage_is_refused_with_a_message() {
        let a = TestPki::generate("a", &[]).unwrap();
        let b = TestPki::generate("b", &[]).unwrap();
        let mut mixed = a.emu_tls();
        mixed.key_pem = b.key_pem.into_bytes();
        let e = mixed.server_config(&[]).unwrap_err().to_string();
        assert!(e.starts_with("TLS configuration: "), "{e}");

        let mut garbage = a.emu_tls();
        garbage.cert_chain_pem = b"not a certificate".to_vec();
        let e = garbage.server_config(&[]).unwrap_err().to_string();
        assert_eq!(e, "TLS certificate: no CERTIFICATE block in the PEM");

        let mut no_key = a.emu_tls();
        no_key.key_pem = Vec::new();
        let e = no_key.server_config(&[]).unwrap_err().to_string();
        assert!(e.starts_with("TLS private key: "), "{e}");
    }
}

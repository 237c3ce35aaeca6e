//! How the operator reaches one side's Doris cluster on a sync's behalf ([`DorisAccess`]): the
//! credentials from the Secret the spec names, and TLS from its `tls` block with the CA bundle
//! from the Secret or ConfigMap key it names. A Secret is used only when it allows the sync
//! (`dcs_crds::access`), whether it holds credentials or a CA bundle; a ConfigMap needs no
//! consent (a CA bundle is public, and nothing of it is sent anywhere). A credentials Secret
//! that pins its hosts (`dcs.dev/allowed-hosts`) is used only when every host the side names is
//! one of them, so the probe never sends its password to a host the spec's editor chose.
//!
//! The reads only fetch; what the fetched objects mean ([`credentials_from`],
//! [`ca_bundle_from`], [`access_from`]) is pure and tested here. Every error says too whether
//! the object is out of reach for good (it does not exist, or does not allow the sync), which a
//! cleanup needs to know.

use dcs_crds::{
    TlsSpec,
    conditions::reasons,
    spec::{CaBundleRef, Credentials, DorisSink, SourceSpec},
};
use dcs_doris_client::tls::Tls;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};

use dcs_crds::conditions::reasons::CREDENTIALS_MISSING;

use crate::facts::ProbeFailure;
use crate::probe::{DorisAccess, DorisCredentials};

/// Why a side cannot be reached.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Failure {
    /// The reason and message.
    pub failure: ProbeFailure,
    /// The object out of reach for good (`Secret ns/name`, `ConfigMap ns/name`): it does not
    /// exist or does not allow the sync, so retrying cannot help until someone changes it.
    pub gone: Option<String>,
}

fn failure(reason: &'static str, message: String, gone: Option<String>) -> Failure {
    Failure {
        failure: ProbeFailure { reason, message },
        gone,
    }
}

/// One side of a sync: what it names and where in the spec.
#[derive(Clone, Copy)]
pub(super) struct Side<'a> {
    /// The credentials Secret.
    pub credentials: &'a Credentials,
    /// The `tls` block.
    pub tls: Option<&'a TlsSpec>,
    /// `spec.source` or `spec.sink.doris`.
    pub field: &'static str,
    /// `feNodes`.
    pub fe_nodes: &'a [String],
    /// `beNodes` (the sink's; the source names none).
    pub be_nodes: &'a [String],
}

impl<'a> Side<'a> {
    /// Every node the side names, with the spec path that names it (`spec.source.feNodes[0]`).
    pub fn nodes(&self) -> Vec<(String, &'a str)> {
        let fe = self
            .fe_nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("{}.feNodes[{i}]", self.field), n.as_str()));
        let be = self
            .be_nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("{}.beNodes[{i}]", self.field), n.as_str()));
        fe.chain(be).collect()
    }

    /// The source side.
    pub fn source(spec: &'a SourceSpec) -> Self {
        Self {
            credentials: &spec.credentials,
            tls: spec.tls.as_ref(),
            field: "spec.source",
            fe_nodes: &spec.fe_nodes,
            be_nodes: &[],
        }
    }

    /// The Doris sink side.
    pub fn sink(spec: &'a DorisSink) -> Self {
        Self {
            credentials: &spec.credentials,
            tls: spec.tls.as_ref(),
            field: "spec.sink.doris",
            fe_nodes: &spec.fe_nodes,
            be_nodes: spec.be_nodes.as_deref().unwrap_or_default(),
        }
    }
}

/// The access to one side of sync `sync` in namespace `ns`.
///
/// # Errors
/// As [`access_from`], or when an object cannot be read (not for good).
pub(super) async fn read_access(
    client: &Client,
    ns: &str,
    sync: &str,
    side: Side<'_>,
) -> Result<DorisAccess, Failure> {
    let field = format!("{}.credentials", side.field);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let name = &side.credentials.secret_name;
    let secret = secrets.get_opt(name).await.map_err(|e| {
        failure(
            CREDENTIALS_MISSING,
            format!("cannot read Secret {ns}/{name}: {e}"),
            None,
        )
    })?;
    let credentials = credentials_from(secret, ns, sync, side, &field)?;
    let bundle = match side
        .tls
        .filter(|t| t.enabled)
        .and_then(|t| t.ca_bundle.as_ref())
    {
        None => None,
        Some(bundle) => Some(read_ca_bundle(client, ns, sync, bundle, side.field).await?),
    };
    access_from(credentials, side, bundle)
}

/// The PEM the `bundle` reference names, with where it came from.
async fn read_ca_bundle(
    client: &Client,
    ns: &str,
    sync: &str,
    bundle: &CaBundleRef,
    side: &str,
) -> Result<(String, Vec<u8>), Failure> {
    let unreadable = |what: &str, e: kube::Error| {
        failure(
            reasons::CA_BUNDLE_UNAVAILABLE,
            format!("cannot read {what} named in {side}.tls.caBundle: {e}"),
            None,
        )
    };
    let found = match (&bundle.secret_key_ref, &bundle.config_map_key_ref) {
        (Some(r), _) => {
            let api: Api<Secret> = Api::namespaced(client.clone(), ns);
            let secret = api
                .get_opt(&r.name)
                .await
                .map_err(|e| unreadable(&format!("Secret {ns}/{}", r.name), e))?;
            Found::Secret(secret)
        }
        (None, Some(r)) => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            let cm = api
                .get_opt(&r.name)
                .await
                .map_err(|e| unreadable(&format!("ConfigMap {ns}/{}", r.name), e))?;
            Found::ConfigMap(cm)
        }
        (None, None) => Found::Nothing,
    };
    ca_bundle_from(found, ns, sync, bundle, side)
}

/// What a CA bundle reference was found to be.
#[derive(Debug)]
pub(super) enum Found {
    /// The Secret it names (`None`: it does not exist).
    Secret(Option<Secret>),
    /// The ConfigMap it names (`None`: it does not exist).
    ConfigMap(Option<ConfigMap>),
    /// It names nothing (validation refuses that).
    Nothing,
}

/// The PEM `bundle` names, from what was `found` in namespace `ns`, for sync `sync` whose
/// `side` (`spec.source`, `spec.sink.doris`) names it (pure). Its origin reads
/// `key ca.crt of Secret ns/doris-ca`.
///
/// # Errors
/// [`reasons::CA_BUNDLE_NOT_ALLOWED`] (for good) when the Secret does not allow the sync;
/// [`reasons::CA_BUNDLE_UNAVAILABLE`] when the object (for good) or its key is missing.
pub(super) fn ca_bundle_from(
    found: Found,
    ns: &str,
    sync: &str,
    bundle: &CaBundleRef,
    side: &str,
) -> Result<(String, Vec<u8>), Failure> {
    let field = format!("{side}.tls.caBundle");
    let unavailable = |message: String, gone: Option<String>| {
        failure(reasons::CA_BUNDLE_UNAVAILABLE, message, gone)
    };
    let (kind, key_ref, data) = match (found, &bundle.secret_key_ref, &bundle.config_map_key_ref) {
        (Found::Secret(secret), Some(r), _) => {
            let Some(secret) = secret else {
                return Err(unavailable(
                    format!(
                        "Secret {ns}/{} named in {field}.secretKeyRef does not exist; create it \
                         with key {} holding the PEM",
                        r.name, r.key
                    ),
                    Some(format!("Secret {ns}/{}", r.name)),
                ));
            };
            if !dcs_crds::access::secret_allows(secret.metadata.annotations.as_ref(), sync) {
                return Err(failure(
                    reasons::CA_BUNDLE_NOT_ALLOWED,
                    dcs_crds::access::secret_not_allowed_message(
                        ns,
                        &r.name,
                        sync,
                        &format!("{field}.secretKeyRef"),
                    ),
                    Some(format!("Secret {ns}/{}", r.name)),
                ));
            }
            let data = secret.data.unwrap_or_default().remove(&r.key).map(|b| b.0);
            ("Secret", r, data)
        }
        (Found::ConfigMap(cm), None, Some(r)) => {
            let Some(cm) = cm else {
                return Err(unavailable(
                    format!(
                        "ConfigMap {ns}/{} named in {field}.configMapKeyRef does not exist; create \
                         it with key {} holding the PEM",
                        r.name, r.key
                    ),
                    Some(format!("ConfigMap {ns}/{}", r.name)),
                ));
            };
            let data = cm
                .data
                .unwrap_or_default()
                .remove(&r.key)
                .map(String::into_bytes)
                .or_else(|| {
                    cm.binary_data
                        .unwrap_or_default()
                        .remove(&r.key)
                        .map(|b| b.0)
                });
            ("ConfigMap", r, data)
        }
        _ => {
            return Err(unavailable(
                format!("{field} names neither a Secret nor a ConfigMap key; set exactly one"),
                None,
            ));
        }
    };
    let origin = format!("key {} of {kind} {ns}/{}", key_ref.key, key_ref.name);
    match data {
        Some(pem) => Ok((origin, pem)),
        None => Err(unavailable(
            format!(
                "{kind} {ns}/{} has no key {:?}; add the PEM under it or fix {field}",
                key_ref.name, key_ref.key
            ),
            None,
        )),
    }
}

/// The access to a side from its `credentials` and the PEM of its CA bundle, if any (pure).
///
/// # Errors
/// [`reasons::CA_BUNDLE_UNAVAILABLE`] when the bundle holds no certificate or the spec's
/// `serverName` is no name; it lasts until the object changes.
pub(super) fn access_from(
    credentials: DorisCredentials,
    side: Side<'_>,
    bundle: Option<(String, Vec<u8>)>,
) -> Result<DorisAccess, Failure> {
    let tls = Tls::from_spec(side.tls, bundle).map_err(|e| {
        failure(
            reasons::CA_BUNDLE_UNAVAILABLE,
            format!("{}.tls: {e}", side.field),
            None,
        )
    })?;
    Ok(DorisAccess { credentials, tls })
}

/// The credentials `side` names in `secret` (as read from namespace `ns`; `None` when it does
/// not exist) for sync `sync`, whose field `field` names it (pure). Out of reach for good when
/// the Secret does not exist, does not allow the sync, or pins hosts the side does not keep to.
pub(super) fn credentials_from(
    secret: Option<Secret>,
    ns: &str,
    sync: &str,
    side: Side<'_>,
    field: &str,
) -> Result<DorisCredentials, Failure> {
    let credentials = side.credentials;
    let name = &credentials.secret_name;
    let gone = Some(format!("Secret {ns}/{name}"));
    let Some(secret) = secret else {
        return Err(failure(
            CREDENTIALS_MISSING,
            format!(
                "Secret {ns}/{name} named in {field} does not exist; create it with keys {} and {}",
                credentials.username_key, credentials.password_key
            ),
            gone,
        ));
    };
    // The keys are read, and sent anywhere, only when the Secret opted in to this sync; a Secret
    // that did not is, for cleanup, as good as gone (nothing may be done with it).
    if !dcs_crds::access::secret_allows(secret.metadata.annotations.as_ref(), sync) {
        return Err(failure(
            reasons::CREDENTIALS_NOT_ALLOWED,
            dcs_crds::access::secret_not_allowed_message(ns, name, sync, field),
            gone,
        ));
    }
    // Before any key is read: a host the Secret does not allow gets nothing, not even a probe.
    if let Err(message) = dcs_crds::access::hosts_allowed(
        secret.metadata.annotations.as_ref(),
        ns,
        name,
        &side.nodes(),
    ) {
        return Err(failure(
            reasons::CREDENTIALS_HOST_NOT_ALLOWED,
            message,
            gone,
        ));
    }
    let data = secret.data.unwrap_or_default();
    let value = |key: &str| {
        data.get(key)
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .ok_or_else(|| {
                failure(
                    CREDENTIALS_MISSING,
                    format!("Secret {ns}/{name} has no key {key:?}; add it or set {field}"),
                    None,
                )
            })
    };
    Ok(DorisCredentials {
        username: value(&credentials.username_key)?,
        password: value(&credentials.password_key)?,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use dcs_crds::testing::{SyncBuilder, tls_ca_config_map};
    use k8s_openapi::{ByteString, apimachinery::pkg::apis::meta::v1::ObjectMeta};

    use super::*;

    fn source_spec() -> SourceSpec {
        SyncBuilder::new()
            .source_fe_nodes(&["fe-0.doris.svc:8030", "10.0.0.5:8030"])
            .source_table("db.t")
            .spec()
            .source
    }

    fn creds_from(secret: Option<Secret>) -> Result<DorisCredentials, Failure> {
        credentials_from(secret, "ns", "orders", Side::source(&source_spec()), FIELD)
    }

    fn meta(name: &str, allowed: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            annotations: allowed
                .map(|a| BTreeMap::from([("dcs.dev/allowed-syncs".to_owned(), a.to_owned())])),
            ..ObjectMeta::default()
        }
    }

    fn secret(allowed: Option<&str>, keys: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: meta("src-creds", allowed),
            data: Some(
                keys.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    const FIELD: &str = "spec.source.credentials";

    #[test]
    fn a_missing_secret_is_gone_for_good_and_says_which_keys_to_create() {
        let Failure { failure, gone } = creds_from(None).unwrap_err();
        assert_eq!(gone.as_deref(), Some("Secret ns/src-creds"));
        assert_eq!(failure.reason, CREDENTIALS_MISSING);
        assert_eq!(
            failure.message,
            "Secret ns/src-creds named in spec.source.credentials does not exist; create it with keys username and password"
        );
    }

    #[test]
    fn a_secret_that_does_not_allow_the_sync_is_not_read_and_counts_as_gone() {
        let s = secret(Some("other"), &[("username", "u"), ("password", "p")]);
        let Failure { failure, gone } = creds_from(Some(s)).unwrap_err();
        assert_eq!(gone.as_deref(), Some("Secret ns/src-creds"));
        assert_eq!(failure.reason, reasons::CREDENTIALS_NOT_ALLOWED);
        assert_eq!(
            failure.message,
            dcs_crds::access::secret_not_allowed_message("ns", "src-creds", "orders", FIELD)
        );
        let unannotated = secret(None, &[("username", "u"), ("password", "p")]);
        assert!(creds_from(Some(unannotated)).is_err());
    }

    #[test]
    fn a_missing_key_can_be_fixed_so_it_is_not_gone() {
        let s = secret(Some("orders"), &[("username", "u")]);
        let Failure { failure, gone } = creds_from(Some(s)).unwrap_err();
        assert_eq!(gone, None);
        assert_eq!(failure.reason, CREDENTIALS_MISSING);
        assert_eq!(
            failure.message,
            "Secret ns/src-creds has no key \"password\"; add it or set spec.source.credentials"
        );
    }

    #[test]
    fn an_allowing_secret_gives_its_keys() {
        let s = secret(
            Some("a, orders"),
            &[("username", "root"), ("password", "pw")],
        );
        let c = creds_from(Some(s)).unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("root", "pw"));
    }

    fn pinned(hosts: &str) -> Secret {
        let mut s = secret(Some("orders"), &[("username", "u"), ("password", "p")]);
        s.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert("dcs.dev/allowed-hosts".to_owned(), hosts.to_owned());
        s
    }

    #[test]
    fn a_secret_that_pins_its_hosts_is_not_read_for_a_side_naming_another() {
        let c = creds_from(Some(pinned("*.doris.svc, 10.0.0.5"))).unwrap();
        assert_eq!(c.username, "u");
        let Failure { failure, gone } = creds_from(Some(pinned("*.doris.svc"))).unwrap_err();
        assert_eq!(gone.as_deref(), Some("Secret ns/src-creds"));
        assert_eq!(failure.reason, "CredentialsHostNotAllowed");
        assert!(
            failure.message.starts_with(
                "spec.source.feNodes[1] names host 10.0.0.5, which Secret ns/src-creds does not let its credentials reach"
            ),
            "{}",
            failure.message
        );
        // The sink's beNodes count too.
        let sink: DorisSink = SyncBuilder::new()
            .sink_fe("fe-0.doris.svc:8030")
            .be_nodes(&["be-9.elsewhere:8040"])
            .sink_table("db.t")
            .sink_secret("src-creds")
            .spec()
            .sink
            .doris
            .unwrap();
        let Failure { failure, .. } = credentials_from(
            Some(pinned("*.doris.svc")),
            "ns",
            "orders",
            Side::sink(&sink),
            "spec.sink.doris.credentials",
        )
        .unwrap_err();
        assert!(
            failure
                .message
                .starts_with("spec.sink.doris.beNodes[0] names host be-9.elsewhere"),
            "{}",
            failure.message
        );
    }

    fn bundle_ref(json: serde_json::Value) -> CaBundleRef {
        serde_json::from_value(json).unwrap()
    }

    fn ca_secret(allowed: Option<&str>, key: &str, pem: &str) -> Secret {
        Secret {
            metadata: meta("doris-ca", allowed),
            data: Some(BTreeMap::from([(
                key.to_owned(),
                ByteString(pem.as_bytes().to_vec()),
            )])),
            ..Secret::default()
        }
    }

    #[test]
    fn a_ca_secret_is_read_only_when_it_allows_the_sync() {
        let r =
            bundle_ref(serde_json::json!({"secretKeyRef": {"name": "doris-ca", "key": "ca.crt"}}));
        let found = Found::Secret(Some(ca_secret(Some("orders"), "ca.crt", "PEM")));
        let (origin, pem) = ca_bundle_from(found, "ns", "orders", &r, "spec.source").unwrap();
        assert_eq!(origin, "key ca.crt of Secret ns/doris-ca");
        assert_eq!(pem, b"PEM");

        let found = Found::Secret(Some(ca_secret(None, "ca.crt", "PEM")));
        let Failure { failure, gone } =
            ca_bundle_from(found, "ns", "orders", &r, "spec.source").unwrap_err();
        assert_eq!(gone.as_deref(), Some("Secret ns/doris-ca"));
        assert_eq!(failure.reason, reasons::CA_BUNDLE_NOT_ALLOWED);
        assert_eq!(
            failure.message,
            dcs_crds::access::secret_not_allowed_message(
                "ns",
                "doris-ca",
                "orders",
                "spec.source.tls.caBundle.secretKeyRef"
            )
        );

        let Failure { failure, gone } =
            ca_bundle_from(Found::Secret(None), "ns", "orders", &r, "spec.sink.doris").unwrap_err();
        assert_eq!(gone.as_deref(), Some("Secret ns/doris-ca"));
        assert_eq!(failure.reason, reasons::CA_BUNDLE_UNAVAILABLE);
        assert_eq!(
            failure.message,
            "Secret ns/doris-ca named in spec.sink.doris.tls.caBundle.secretKeyRef does not exist; create it with key ca.crt holding the PEM"
        );
        let found = Found::Secret(Some(ca_secret(Some("*"), "tls.crt", "PEM")));
        let Failure { failure, gone } =
            ca_bundle_from(found, "ns", "orders", &r, "spec.source").unwrap_err();
        assert_eq!(gone, None);
        assert_eq!(
            failure.message,
            "Secret ns/doris-ca has no key \"ca.crt\"; add the PEM under it or fix spec.source.tls.caBundle"
        );
    }

    #[test]
    fn a_ca_configmap_needs_no_consent_and_binary_data_counts() {
        let r = bundle_ref(
            serde_json::json!({"configMapKeyRef": {"name": "doris-ca", "key": "ca.crt"}}),
        );
        let cm = ConfigMap {
            metadata: meta("doris-ca", None),
            data: Some(BTreeMap::from([("ca.crt".to_owned(), "PEM".to_owned())])),
            ..ConfigMap::default()
        };
        let (origin, pem) = ca_bundle_from(
            Found::ConfigMap(Some(cm)),
            "ns",
            "orders",
            &r,
            "spec.source",
        )
        .unwrap();
        assert_eq!(origin, "key ca.crt of ConfigMap ns/doris-ca");
        assert_eq!(pem, b"PEM");
        let binary = ConfigMap {
            metadata: meta("doris-ca", None),
            binary_data: Some(BTreeMap::from([(
                "ca.crt".to_owned(),
                ByteString(b"BIN".to_vec()),
            )])),
            ..ConfigMap::default()
        };
        let (_, pem) = ca_bundle_from(
            Found::ConfigMap(Some(binary)),
            "ns",
            "orders",
            &r,
            "spec.source",
        )
        .unwrap();
        assert_eq!(pem, b"BIN");
        let Failure { failure, gone } =
            ca_bundle_from(Found::ConfigMap(None), "ns", "orders", &r, "spec.source").unwrap_err();
        assert_eq!(gone.as_deref(), Some("ConfigMap ns/doris-ca"));
        assert_eq!(failure.reason, reasons::CA_BUNDLE_UNAVAILABLE);
    }

    #[test]
    fn a_bundle_without_a_certificate_fails_the_access_naming_the_field() {
        let spec = SyncBuilder::new()
            .source_table("db.t")
            .source_tls(tls_ca_config_map("doris-ca", "ca.crt"))
            .spec()
            .source;
        let c = DorisCredentials {
            username: "u".into(),
            password: "p".into(),
        };
        let bundle = Some((
            "key ca.crt of ConfigMap ns/doris-ca".to_owned(),
            b"junk".to_vec(),
        ));
        let Failure { failure, gone } =
            access_from(c.clone(), Side::source(&spec), bundle).unwrap_err();
        assert_eq!(gone, None);
        assert_eq!(failure.reason, reasons::CA_BUNDLE_UNAVAILABLE);
        assert_eq!(
            failure.message,
            "spec.source.tls: the CA bundle key ca.crt of ConfigMap ns/doris-ca holds no CERTIFICATE block; give a PEM file with at least one CERTIFICATE block"
        );
        // Without TLS, plaintext whatever is given.
        let plain = SyncBuilder::new().source_table("db.t").spec().source;
        let access = access_from(c, Side::source(&plain), None).unwrap();
        assert!(!access.tls.is_on());
    }
}

//! What a sync may make the operator do on its behalf (docs/ARCHITECTURE.md §4.2): whoever can
//! create a `DorisChangelogSync` must not be able to borrow the operator's rights.
//!
//! - A credentials Secret is used only when it opts in: its annotation
//!   [`ALLOWED_SYNCS_ANNOTATION`] names the syncs (of its namespace) that may use it,
//!   comma-separated, or `*` for all of them ([`secret_allows`]). Otherwise the operator reads
//!   none of its keys, sends nothing anywhere and gives the runner pod no reference to it.
//! - A credentials Secret may also pin the hosts its credentials may reach: its annotation
//!   [`ALLOWED_HOSTS_ANNOTATION`] lists host patterns ([`host_matches`]); when it is there, a
//!   sync whose side names another host (`feNodes`, `beNodes`) is refused before anything is
//!   sent ([`hosts_allowed`]). Whoever may edit the sync can then no longer point it at a host
//!   they control to collect the password.
//! - `spec.runner.image` and `spec.runner.serviceAccountName` are honoured only within what the
//!   operator was configured to allow ([`RunnerPolicy`]).
//!
//! Pure: the operator hands in the Secret's annotations and its own settings.

use std::collections::BTreeMap;

use crate::spec::DorisChangelogSyncSpec;

/// The Secret annotation that lets syncs use it: `"orders,audit"` or `"*"`.
pub const ALLOWED_SYNCS_ANNOTATION: &str = "dcs.dev/allowed-syncs";

/// Whether a Secret with these annotations lets the sync named `sync` (same namespace) use it.
pub fn secret_allows(annotations: Option<&BTreeMap<String, String>>, sync: &str) -> bool {
    annotations
        .and_then(|a| a.get(ALLOWED_SYNCS_ANNOTATION))
        .is_some_and(|v| v.split(',').map(str::trim).any(|n| n == "*" || n == sync))
}

/// What to tell the owner of a sync whose Secret has not opted in.
pub fn secret_not_allowed_message(ns: &str, secret: &str, sync: &str, field: &str) -> String {
    format!(
        "Secret {ns}/{secret} named in {field} does not allow sync {sync} to use it: add the annotation {ALLOWED_SYNCS_ANNOTATION}: \"{sync}\" (names separated by commas, or \"*\" for every sync of the namespace), e.g. kubectl -n {ns} annotate secret {secret} {ALLOWED_SYNCS_ANNOTATION}={sync}"
    )
}

/// The Secret annotation that pins the hosts its credentials may reach:
/// `"fe-0.doris.svc,*.doris.svc.cluster.local,10.0.0.5"`.
pub const ALLOWED_HOSTS_ANNOTATION: &str = "dcs.dev/allowed-hosts";

/// Whether `host` matches one entry of [`ALLOWED_HOSTS_ANNOTATION`] (pure). An entry is an exact
/// host (a DNS name, an IPv4 address, or an IPv6 address with or without brackets), or
/// `*.<suffix>`: every host that ends with `.<suffix>` and has at least one label before it
/// (`*.doris.svc` matches `fe-0.doris.svc`, not `doris.svc` nor `evildoris.svc`). Names compare
/// without case; there are no other wildcards.
pub fn host_matches(entry: &str, host: &str) -> bool {
    let entry = entry.trim().trim_start_matches('[').trim_end_matches(']');
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match entry.strip_prefix("*.") {
        Some(suffix) => {
            host.len() > suffix.len() + 1
                && host
                    .get(host.len() - suffix.len() - 1..)
                    .is_some_and(|tail| tail.eq_ignore_ascii_case(&format!(".{suffix}")))
        }
        None => !entry.is_empty() && entry.eq_ignore_ascii_case(host),
    }
}

/// `Err` with the message to block the sync with when the credentials Secret `ns/secret` pins
/// its hosts ([`ALLOWED_HOSTS_ANNOTATION`]) and one of `nodes` — each the spec path that names
/// it (`spec.source.feNodes[0]`) and the node — is on no allowed host, or an entry of the
/// annotation is malformed (pure). Without the annotation every host is allowed.
///
/// # Errors
/// The message: the host, the field, the Secret and the annotation to change.
pub fn hosts_allowed(
    annotations: Option<&BTreeMap<String, String>>,
    ns: &str,
    secret: &str,
    nodes: &[(String, &str)],
) -> Result<(), String> {
    let Some(value) = annotations.and_then(|a| a.get(ALLOWED_HOSTS_ANNOTATION)) else {
        return Ok(());
    };
    let entries: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if let Some(bad) = entries
        .iter()
        .find(|e| e.strip_prefix("*.").unwrap_or(**e).contains('*'))
    {
        return Err(format!(
            "Secret {ns}/{secret} annotation {ALLOWED_HOSTS_ANNOTATION} has the entry {bad:?}, which is no host pattern; its credentials are sent nowhere until it is fixed: write exact hosts or \"*.<domain>\" (a leading \"*.\" is the only wildcard), separated by commas"
        ));
    }
    for (field, node) in nodes {
        let host = crate::node::host_of(node);
        if !entries.iter().any(|e| host_matches(e, host)) {
            return Err(format!(
                "{field} names host {host}, which Secret {ns}/{secret} does not let its credentials reach (annotation {ALLOWED_HOSTS_ANNOTATION}: {value:?}); nothing was sent to it: point {field} at a host of the cluster, or, if {host} is one, add it to the annotation, e.g. kubectl -n {ns} annotate --overwrite secret {secret} {ALLOWED_HOSTS_ANNOTATION}={:?}",
                entries
                    .iter()
                    .copied()
                    .chain([host])
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    Ok(())
}

/// The runner images and service accounts the operator lets a sync choose (chart values
/// `runner.allowedImages`, `runner.allowedServiceAccounts`; operator flags
/// `--allowed-runner-images`, `--allowed-runner-service-accounts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerPolicy {
    /// Images a sync may name in `spec.runner.image`, besides the operator's own runner image.
    /// An entry ending in `*` allows every image that starts with what is before it.
    pub allowed_images: Vec<String>,
    /// Service accounts a sync may name in `spec.runner.serviceAccountName` (none by default:
    /// the operator then makes one per sync with exactly the rights a runner needs).
    pub allowed_service_accounts: Vec<String>,
}

impl RunnerPolicy {
    /// A comma-separated flag value as a list (empty entries dropped).
    pub fn list(value: &str) -> Vec<String> {
        value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// `Err` naming the field and the setting when `spec` asks for a runner image or service
    /// account the operator does not allow; `default_image` (the operator's runner image) is
    /// always allowed.
    ///
    /// # Errors
    /// The message to block the sync with.
    pub fn check(&self, spec: &DorisChangelogSyncSpec, default_image: &str) -> Result<(), String> {
        if let Some(image) = &spec.runner.image {
            let allowed = image == default_image
                || self
                    .allowed_images
                    .iter()
                    .any(|a| match a.strip_suffix('*') {
                        Some(prefix) => image.starts_with(prefix),
                        None => a == image,
                    });
            if !allowed {
                return Err(format!(
                    "spec.runner.image {image:?} is not allowed by the operator: remove it to use the operator's runner image {default_image:?}, or ask the platform team to add it to the chart value runner.allowedImages"
                ));
            }
        }
        if let Some(sa) = &spec.runner.service_account_name
            && !self.allowed_service_accounts.iter().any(|a| a == sa)
        {
            return Err(format!(
                "spec.runner.serviceAccountName {sa:?} is not allowed by the operator: remove it to let the operator make the runner's service account, or ask the platform team to add it to the chart value runner.allowedServiceAccounts"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SyncBuilder;

    fn annotated(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(ALLOWED_SYNCS_ANNOTATION.to_owned(), value.to_owned())])
    }

    #[test]
    fn a_secret_is_used_only_by_the_syncs_it_names() {
        assert!(!secret_allows(None, "orders"));
        assert!(!secret_allows(Some(&BTreeMap::new()), "orders"));
        assert!(secret_allows(Some(&annotated("*")), "orders"));
        assert!(secret_allows(Some(&annotated("audit, orders")), "orders"));
        assert!(!secret_allows(Some(&annotated("audit,orders-2")), "orders"));
        assert!(!secret_allows(Some(&annotated("")), "orders"));
        let m = secret_not_allowed_message("team-a", "doris", "orders", "spec.source.credentials");
        assert!(
            m.contains("kubectl -n team-a annotate secret doris dcs.dev/allowed-syncs=orders"),
            "{m}"
        );
    }

    #[test]
    fn a_host_pattern_is_an_exact_host_or_a_leading_wildcard_label() {
        assert!(host_matches("fe-0.doris.svc", "FE-0.Doris.svc"));
        assert!(host_matches("10.0.0.5", "10.0.0.5"));
        assert!(host_matches("[fd00::7]", "fd00::7"));
        assert!(host_matches("fd00::7", "[fd00::7]"));
        assert!(!host_matches("10.0.0.5", "10.0.0.50"));
        assert!(host_matches("*.doris.svc", "fe-0.doris.svc"));
        assert!(host_matches("*.doris.svc", "a.b.doris.svc"));
        assert!(!host_matches("*.doris.svc", "doris.svc"));
        assert!(!host_matches("*.doris.svc", "evildoris.svc"));
        assert!(!host_matches("*.doris.svc", "fe-0.doris.svc.evil.example"));
        assert!(!host_matches("", "fe"));
    }

    fn pinned(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(ALLOWED_HOSTS_ANNOTATION.to_owned(), value.to_owned())])
    }

    #[test]
    fn pinned_credentials_reach_only_the_hosts_listed() {
        let nodes = [
            ("spec.source.feNodes[0]".to_owned(), "fe-0.doris.svc:8030"),
            ("spec.source.feNodes[1]".to_owned(), "[fd00::7]:8030"),
        ];
        // No annotation: every host.
        assert_eq!(hosts_allowed(None, "ns", "doris", &nodes), Ok(()));
        assert_eq!(
            hosts_allowed(Some(&annotated("*")), "ns", "doris", &nodes),
            Ok(())
        );
        let ok = pinned("*.doris.svc, fd00::7");
        assert_eq!(hosts_allowed(Some(&ok), "ns", "doris", &nodes), Ok(()));
        let only_fe = pinned("*.doris.svc");
        assert_eq!(
            hosts_allowed(Some(&only_fe), "ns", "doris", &nodes).unwrap_err(),
            "spec.source.feNodes[1] names host fd00::7, which Secret ns/doris does not let its credentials reach (annotation dcs.dev/allowed-hosts: \"*.doris.svc\"); nothing was sent to it: point spec.source.feNodes[1] at a host of the cluster, or, if fd00::7 is one, add it to the annotation, e.g. kubectl -n ns annotate --overwrite secret doris dcs.dev/allowed-hosts=\"*.doris.svc,fd00::7\""
        );
        // Present but empty: no host at all.
        assert!(hosts_allowed(Some(&pinned(" ")), "ns", "doris", &nodes).is_err());
        let bad =
            hosts_allowed(Some(&pinned("fe-*.doris.svc")), "ns", "doris", &nodes).unwrap_err();
        assert!(
            bad.starts_with("Secret ns/doris annotation dcs.dev/allowed-hosts has the entry \"fe-*.doris.svc\", which is no host pattern"),
            "{bad}"
        );
    }

    fn spec(runner: serde_json::Value) -> DorisChangelogSyncSpec {
        SyncBuilder::new()
            .source_table("db.t")
            .source_secret("s")
            .mode(crate::StartupMode::Snapshot)
            .stdout()
            .with_spec(|spec| spec.runner = serde_json::from_value(runner).unwrap())
            .spec()
    }

    #[test]
    fn a_runner_image_or_service_account_must_be_allowed() {
        let none = RunnerPolicy::default();
        assert_eq!(
            none.check(&spec(serde_json::json!({})), "dcs-runner:1"),
            Ok(())
        );
        assert_eq!(
            none.check(
                &spec(serde_json::json!({"image": "dcs-runner:1"})),
                "dcs-runner:1"
            ),
            Ok(())
        );
        let e = none
            .check(
                &spec(serde_json::json!({"image": "evil:latest"})),
                "dcs-runner:1",
            )
            .unwrap_err();
        assert!(
            e.starts_with("spec.runner.image \"evil:latest\" is not allowed"),
            "{e}"
        );
        assert!(e.contains("runner.allowedImages"), "{e}");
        let e = none
            .check(
                &spec(serde_json::json!({"serviceAccountName": "admin"})),
                "dcs-runner:1",
            )
            .unwrap_err();
        assert!(e.contains("runner.allowedServiceAccounts"), "{e}");

        let some = RunnerPolicy {
            allowed_images: RunnerPolicy::list("registry.example/dcs-runner:*, mirror/dcs:2"),
            allowed_service_accounts: RunnerPolicy::list("dcs-runner"),
        };
        for ok in ["registry.example/dcs-runner:1.2", "mirror/dcs:2"] {
            assert_eq!(
                some.check(&spec(serde_json::json!({"image": ok})), "x"),
                Ok(())
            );
        }
        assert!(
            some.check(&spec(serde_json::json!({"image": "mirror/dcs:3"})), "x")
                .is_err()
        );
        assert_eq!(
            some.check(
                &spec(serde_json::json!({"serviceAccountName": "dcs-runner"})),
                "x"
            ),
            Ok(())
        );
    }
}

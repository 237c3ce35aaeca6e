//! What a sync may make the operator do on its behalf (docs/ARCHITECTURE.md §4.2): whoever can
//! create a `DorisChangelogSync` must not be able to borrow the operator's rights.
//!
//! - A credentials Secret is used only when it opts in: its annotation
//!   [`ALLOWED_SYNCS_ANNOTATION`] names the syncs (of its namespace) that may use it,
//!   comma-separated, or `*` for all of them ([`secret_allows`]). Otherwise the operator reads
//!   none of its keys, sends nothing anywhere and gives the runner pod no reference to it.
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

    fn spec(runner: serde_json::Value) -> DorisChangelogSyncSpec {
        serde_json::from_value(serde_json::json!({
            "source": {"feNodes": ["fe:8030"], "table": "db.t", "credentials": {"secretName": "s"}},
            "sink": {"stdout": {}},
            "runner": runner,
        }))
        .unwrap()
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

//! What the process kubelet honours of a container's securityContext (merged over the pod's):
//! `runAsUser`/`runAsGroup` (when the kubelet runs as root: the process gets that uid and gid,
//! gid 0 when only the user is given, as container runtimes do, and no supplementary groups),
//! `runAsNonRoot` (refused, as the kubelet refuses, when the process would run as uid 0),
//! `allowPrivilegeEscalation: false` (`PR_SET_NO_NEW_PRIVS`) and `readOnlyRootFilesystem` (the
//! root mount is read-only in the container's mount namespace, volumes stay writable). A
//! non-root uid has no capabilities, which is what `capabilities.drop: [ALL]` asks; capabilities
//! of uid 0, `seccompProfile`, `fsGroup` and SELinux/AppArmor options are not applied.

use serde_json::Value;

/// The security settings the kubelet applies to a container's process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Security {
    /// (uid, gid) to switch to.
    pub(super) user: Option<(u32, u32)>,
    pub(super) no_new_privs: bool,
    pub(super) read_only_root: bool,
}

fn field<'a>(pod: &'a Value, container: &'a Value, name: &str) -> Option<&'a Value> {
    container
        .pointer(&format!("/securityContext/{name}"))
        .or_else(|| pod.pointer(&format!("/spec/securityContext/{name}")))
        .filter(|v| !v.is_null())
}

/// The container's effective settings, or the reason it may not start
/// (`CreateContainerConfigError`). `kubelet_uid` is the uid the process runs as when no
/// `runAsUser` is honoured.
pub(super) fn resolve(
    pod: &Value,
    container: &Value,
    kubelet_uid: u32,
) -> Result<Security, String> {
    let uid = field(pod, container, "runAsUser").and_then(Value::as_u64);
    let gid = field(pod, container, "runAsGroup").and_then(Value::as_u64);
    let non_root = field(pod, container, "runAsNonRoot").and_then(Value::as_bool) == Some(true);
    let name = container["name"].as_str().unwrap_or_default();
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let to_u32 =
        |v: u64, what: &str| u32::try_from(v).map_err(|_| format!("{what} {v} is out of range"));
    let user = match uid {
        Some(u) if kubelet_uid == 0 => Some((
            to_u32(u, "runAsUser")?,
            to_u32(gid.unwrap_or(0), "runAsGroup")?,
        )),
        _ => None,
    };
    let effective = user.map(|(u, _)| u).unwrap_or(kubelet_uid);
    if non_root && effective == 0 {
        return Err(match uid {
            Some(0) => format!(
                "container's runAsUser breaks non-root policy (pod: \"{pod_name}\", container: {name})"
            ),
            _ => format!(
                "container has runAsNonRoot and image will run as root (pod: \"{pod_name}\", container: {name})"
            ),
        });
    }
    Ok(Security {
        user,
        no_new_privs: container.pointer("/securityContext/allowPrivilegeEscalation")
            == Some(&Value::Bool(false)),
        read_only_root: container.pointer("/securityContext/readOnlyRootFilesystem")
            == Some(&Value::Bool(true)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(sc: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"securityContext": sc}})
    }

    #[test]
    fn the_containers_settings_override_the_pods() {
        let p = pod(json!({"runAsUser": 1000, "runAsGroup": 1000}));
        let c = json!({"name": "c", "securityContext": {"runAsUser": 65532, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true}});
        assert_eq!(
            resolve(&p, &c, 0),
            Ok(Security {
                user: Some((65532, 1000)),
                no_new_privs: true,
                read_only_root: true
            })
        );
        assert_eq!(
            resolve(&p, &json!({"name": "c"}), 0).unwrap().user,
            Some((1000, 1000))
        );
        assert_eq!(
            resolve(&pod(json!({"runAsUser": 7})), &json!({"name": "c"}), 0)
                .unwrap()
                .user,
            Some((7, 0))
        );
    }

    #[test]
    fn run_as_non_root_refuses_uid_zero() {
        let c = json!({"name": "c", "securityContext": {"runAsNonRoot": true}});
        let e = resolve(&pod(json!({})), &c, 0).unwrap_err();
        assert_eq!(
            e,
            "container has runAsNonRoot and image will run as root (pod: \"p\", container: c)"
        );
        let e = resolve(&pod(json!({"runAsUser": 0})), &c, 0).unwrap_err();
        assert!(
            e.starts_with("container's runAsUser breaks non-root policy"),
            "{e}"
        );
        assert!(resolve(&pod(json!({"runAsUser": 10})), &c, 0).is_ok());
        // A kubelet that is not root runs everything as itself, a non-root user.
        assert_eq!(
            resolve(&pod(json!({"runAsUser": 10})), &c, 1000)
                .unwrap()
                .user,
            None
        );
        assert!(resolve(&pod(json!({})), &c, 1000).is_ok());
    }
}

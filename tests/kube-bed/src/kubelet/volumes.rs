//! Pod volumes: configMap, secret, emptyDir, downwardAPI, projected, hostPath and claims,
//! written under the pod's directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use std::os::unix::fs::PermissionsExt;

use base64::Engine;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::*;

/// The file mode of projected and key-to-path volumes when none is given (0644).
const DEFAULT_MODE: u32 = 0o644;

pub(super) fn write_file(dir: &Path, rel: &str, data: &[u8], mode: u32) -> std::io::Result<()> {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&path, data)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
}

/// An item's `mode`, else the volume's `defaultMode`, else 0644.
fn mode_of(item: &Value, default: Option<u32>) -> u32 {
    item["mode"]
        .as_u64()
        .map(|m| m as u32)
        .or(default)
        .unwrap_or(DEFAULT_MODE)
}

pub(super) fn decode_b64(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap_or_default())
        .unwrap_or_default()
}

pub(super) fn key_items(
    src: &Value,
    data: &[(String, Vec<u8>)],
    dir: &Path,
    default_mode: Option<u32>,
) -> Result<(), String> {
    let default_mode = src["defaultMode"]
        .as_u64()
        .map(|m| m as u32)
        .or(default_mode);
    match src["items"].as_array() {
        Some(items) => {
            for it in items {
                let key = s(it, "/key");
                let Some((_, v)) = data.iter().find(|(k, _)| k == key) else {
                    if src["optional"] == json!(true) {
                        continue;
                    }
                    return Err(format!("key {key} not found"));
                };
                write_file(dir, s(it, "/path"), v, mode_of(it, default_mode))
                    .map_err(|e| e.to_string())?;
            }
        }
        None => {
            for (k, v) in data {
                write_file(dir, k, v, default_mode.unwrap_or(DEFAULT_MODE))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

pub(super) fn configmap_data(cm: &Value) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = cm["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_str().unwrap_or_default().as_bytes().to_vec(),
            )
        })
        .collect();
    out.extend(
        cm["binaryData"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), decode_b64(v))),
    );
    out
}

pub(super) fn secret_data(sec: &Value) -> Vec<(String, Vec<u8>)> {
    sec["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), decode_b64(v)))
        .collect()
}

/// Resolves a downward API `fieldRef.fieldPath`.
pub(super) fn field_ref(pod: &Value, path: &str) -> Option<String> {
    let map_entry = |field: &str, rest: &str| -> Option<String> {
        let key = rest.strip_prefix("['")?.strip_suffix("']")?;
        pod.pointer(&format!("/metadata/{field}"))?
            .get(key)?
            .as_str()
            .map(String::from)
    };
    let map_all = |field: &str| -> String {
        let mut lines: Vec<String> = pod
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={:?}", v.as_str().unwrap_or_default()))
            .collect();
        lines.sort();
        lines.join("\n")
    };
    match path {
        "metadata.name" | "metadata.namespace" | "metadata.uid" => {
            Some(s(pod, &format!("/metadata/{}", &path[9..])).to_string())
        }
        "metadata.labels" => Some(map_all("labels")),
        "metadata.annotations" => Some(map_all("annotations")),
        "spec.nodeName" => Some(s(pod, "/spec/nodeName").to_string()),
        "spec.serviceAccountName" => Some(s(pod, "/spec/serviceAccountName").to_string()),
        "status.podIP" => Some(s(pod, "/status/podIP").to_string()),
        "status.podIPs" => Some(s(pod, "/status/podIP").to_string()),
        "status.hostIP" | "status.hostIPs" => Some("127.0.0.1".into()),
        p => {
            if let Some(rest) = p.strip_prefix("metadata.labels") {
                map_entry("labels", rest)
            } else if let Some(rest) = p.strip_prefix("metadata.annotations") {
                map_entry("annotations", rest)
            } else {
                None
            }
        }
    }
}

/// A token for the pod's service account from the TokenRequest API, bound to the pod.
async fn request_token(shared: &Shared, pod: &Value, src: &Value) -> Result<String, String> {
    let ns = s(pod, "/metadata/namespace");
    let sa = service_account(pod);
    let mut spec = json!({
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": s(pod, "/metadata/name"), "uid": s(pod, "/metadata/uid")},
        "expirationSeconds": src["expirationSeconds"].as_i64().unwrap_or(3600),
        "audiences": [],
    });
    if let Some(aud) = src["audience"].as_str().filter(|a| !a.is_empty()) {
        spec["audiences"] = json!([aud]);
    }
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": spec})).map_err(|e| e.to_string())?;
    let answer = Api::<ServiceAccount>::namespaced(shared.client.clone(), ns)
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .map_err(|e| format!("requesting a token for service account {ns}/{sa}: {e}"))?;
    answer.status.map(|st| st.token).ok_or_else(|| {
        format!("the token request for service account {ns}/{sa} came back without a token")
    })
}

pub(super) async fn materialize_source(
    shared: &Shared,
    pod: &Value,
    src: &Value,
    dir: &Path,
    default_mode: Option<u32>,
) -> Result<(), String> {
    let ns = s(pod, "/metadata/namespace");
    if let Some(cm) = src.get("configMap") {
        let name = s(cm, "/name");
        match shared.configmap(ns, name).await? {
            Some(data) => key_items(cm, &data, dir, default_mode)?,
            None if cm["optional"] == json!(true) => {}
            None => return Err(format!("configmap \"{name}\" not found")),
        }
    }
    if let Some(sec) = src.get("secret") {
        let name = sec
            .get("secretName")
            .or_else(|| sec.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        match shared.secret(ns, name).await? {
            Some(data) => key_items(sec, &data, dir, default_mode)?,
            None if sec["optional"] == json!(true) => {}
            None => return Err(format!("secret \"{name}\" not found")),
        }
    }
    if let Some(d) = src.get("downwardAPI") {
        let default_mode = d["defaultMode"].as_u64().map(|m| m as u32).or(default_mode);
        for it in d["items"].as_array().into_iter().flatten() {
            if let Some(fp) = it.pointer("/fieldRef/fieldPath").and_then(Value::as_str) {
                let v = field_ref(pod, fp).ok_or_else(|| format!("unsupported fieldPath {fp}"))?;
                write_file(dir, s(it, "/path"), v.as_bytes(), mode_of(it, default_mode))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    if let Some(t) = src.get("serviceAccountToken") {
        let token = request_token(shared, pod, t).await?;
        write_file(
            dir,
            t["path"].as_str().unwrap_or("token"),
            token.as_bytes(),
            default_mode.unwrap_or(DEFAULT_MODE),
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

pub(super) fn service_account(pod: &Value) -> &str {
    match s(pod, "/spec/serviceAccountName") {
        "" => "default",
        sa => sa,
    }
}

/// Writes every volume of the pod under `dir/volumes/<name>`; returns volume name → host path.
/// The service-account credentials come as the projected volume the API server's
/// ServiceAccount admission adds (`kube-api-access-*`: a TokenRequest token, `kube-root-ca.crt`,
/// the namespace).
pub(super) async fn materialize_volumes(
    shared: &Shared,
    pod: &Value,
    dir: &Path,
) -> Result<HashMap<String, PathBuf>, String> {
    let mut out = HashMap::new();
    for v in pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = s(v, "/name").to_string();
        if let Some(hp) = v.pointer("/hostPath/path").and_then(Value::as_str) {
            out.insert(name, PathBuf::from(hp));
            continue;
        }
        if let Some(claim) = v
            .pointer("/persistentVolumeClaim/claimName")
            .and_then(Value::as_str)
        {
            // Claims outlive pods: one directory per claim, kept until the kubelet's work
            // directory is removed.
            let pdir = shared
                .work_dir
                .join("claims")
                .join(s(pod, "/metadata/namespace"))
                .join(claim);
            std::fs::create_dir_all(&pdir).map_err(|e| e.to_string())?;
            out.insert(name, pdir);
            continue;
        }
        let vdir = dir.join("volumes").join(&name);
        // Written afresh on every attempt: a retry after a failure starts clean.
        let _ = std::fs::remove_dir_all(&vdir);
        std::fs::create_dir_all(&vdir).map_err(|e| e.to_string())?;
        if v.get("emptyDir").is_some() {
            // As the kubelet's emptyDir: writable by whatever user the container runs as.
            std::fs::set_permissions(&vdir, std::fs::Permissions::from_mode(0o777))
                .map_err(|e| e.to_string())?;
        }
        if let Some(p) = v.get("projected") {
            let default_mode = p["defaultMode"].as_u64().map(|m| m as u32);
            for src in p["sources"].as_array().into_iter().flatten() {
                materialize_source(shared, pod, src, &vdir, default_mode).await?;
            }
        } else {
            materialize_source(shared, pod, v, &vdir, None).await?;
        }
        out.insert(name, vdir);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_modes_override_the_default_mode() {
        let dir =
            std::env::temp_dir().join(format!("kube-bed-modes-{}", uuid::Uuid::new_v4().simple()));
        let src = json!({"defaultMode": 0o600, "items": [{"key": "a", "path": "x/a"}, {"key": "b", "path": "b", "mode": 0o640}]});
        let data = vec![
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ];
        key_items(&src, &data, &dir, None).unwrap();
        let mode = |p: &str| std::fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("x/a"), mode("b")), (0o600, 0o640));
        assert_eq!(std::fs::read(dir.join("x/a")).unwrap(), b"1");
        let missing = key_items(
            &json!({"items": [{"key": "c", "path": "c"}]}),
            &data,
            &dir,
            None,
        );
        assert_eq!(missing, Err("key c not found".into()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

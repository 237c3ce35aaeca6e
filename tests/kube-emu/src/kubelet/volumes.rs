//! Pod volumes: configMap, secret, emptyDir, downwardAPI, projected, hostPath and claims,
//! written under the pod's directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Value, json};

use super::*;

pub(super) fn write_file(dir: &Path, rel: &str, data: &[u8]) -> std::io::Result<()> {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, data)
}

pub(super) fn decode_b64(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap_or_default())
        .unwrap_or_default()
}

pub(super) fn key_items(src: &Value, data: &[(String, Vec<u8>)], dir: &Path) -> Result<(), String> {
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
                write_file(dir, s(it, "/path"), v).map_err(|e| e.to_string())?;
            }
        }
        None => {
            for (k, v) in data {
                write_file(dir, k, v).map_err(|e| e.to_string())?;
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

pub(super) fn materialize_source(
    shared: &Shared,
    pod: &Value,
    src: &Value,
    dir: &Path,
) -> Result<(), String> {
    let ns = s(pod, "/metadata/namespace");
    if let Some(cm) = src.get("configMap") {
        let name = s(cm, "/name");
        match shared.get("configmaps", ns, name) {
            Some(obj) => key_items(cm, &configmap_data(&obj), dir)?,
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
        match shared.get("secrets", ns, name) {
            Some(obj) => key_items(sec, &secret_data(&obj), dir)?,
            None if sec["optional"] == json!(true) => {}
            None => return Err(format!("secret \"{name}\" not found")),
        }
    }
    if let Some(d) = src.get("downwardAPI") {
        for it in d["items"].as_array().into_iter().flatten() {
            if let Some(fp) = it.pointer("/fieldRef/fieldPath").and_then(Value::as_str) {
                let v = field_ref(pod, fp).ok_or_else(|| format!("unsupported fieldPath {fp}"))?;
                write_file(dir, s(it, "/path"), v.as_bytes()).map_err(|e| e.to_string())?;
            }
        }
    }
    if let Some(t) = src.get("serviceAccountToken") {
        let token = shared
            .cluster
            .service_account_token(ns, service_account(pod));
        write_file(dir, t["path"].as_str().unwrap_or("token"), token.as_bytes())
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
pub(super) fn materialize_volumes(
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
        std::fs::create_dir_all(&vdir).map_err(|e| e.to_string())?;
        if let Some(p) = v.get("projected") {
            for src in p["sources"].as_array().into_iter().flatten() {
                materialize_source(shared, pod, src, &vdir)?;
            }
        } else {
            materialize_source(shared, pod, v, &vdir)?;
        }
        out.insert(name, vdir);
    }
    if pod.pointer("/spec/automountServiceAccountToken") != Some(&json!(false)) {
        let sa = dir.join("serviceaccount");
        std::fs::create_dir_all(&sa).map_err(|e| e.to_string())?;
        let ns = s(pod, "/metadata/namespace");
        let token = shared
            .cluster
            .service_account_token(ns, service_account(pod));
        write_file(&sa, "token", token.as_bytes()).map_err(|e| e.to_string())?;
        write_file(&sa, "ca.crt", shared.cluster.ca_pem.read().as_bytes())
            .map_err(|e| e.to_string())?;
        write_file(&sa, "namespace", ns.as_bytes()).map_err(|e| e.to_string())?;
        out.insert(String::from("\0serviceaccount"), sa);
    }
    Ok(out)
}

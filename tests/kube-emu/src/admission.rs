//! Admission: the defaults and checks each kind gets on every write (what Kubernetes' defaulting
//! and validation do for the kinds served here), plus custom resource schemas.

use base64::Engine;
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::crd;
use crate::kinds::ResourceInfo;
use crate::now;
use crate::status::{ApiError, ApiResult, Cause};

fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

/// Kind-specific defaulting and validation, run on every write.
pub fn admit(
    cluster: &Cluster,
    info: &ResourceInfo,
    version: &str,
    obj: &mut Value,
    old: Option<&Value>,
    strict: bool,
) -> ApiResult<()> {
    let name = str_at(obj, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    if info.is_custom() {
        crd::admit(info, version, obj, strict)?;
    }
    match (info.group.as_str(), info.kind.as_str()) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            crd::resource_of(obj)?;
            if old.is_none() || obj.pointer("/status/conditions").is_none() {
                obj["status"] = crd::established_status(obj, &now());
            }
        }
        ("", "Secret") => {
            // stringData is write-only: it lands in data, base64-encoded.
            if let Some(Value::Object(sd)) =
                obj.as_object_mut().and_then(|m| m.remove("stringData"))
            {
                for (k, v) in sd {
                    let enc = base64::engine::general_purpose::STANDARD
                        .encode(v.as_str().unwrap_or_default());
                    obj["data"][k] = json!(enc);
                }
            }
        }
        ("", "Service") => {
            let spec = &mut obj["spec"];
            if spec.get("type").is_none() {
                spec["type"] = json!("ClusterIP");
            }
            let kept = old.and_then(|o| o.pointer("/spec/clusterIP")).cloned();
            if let (None, Some(ip)) = (spec.get("clusterIP"), kept) {
                spec["clusterIPs"] = json!([ip]);
                spec["clusterIP"] = ip;
            }
            if spec["type"] != "ExternalName" && spec.get("clusterIP").is_none() {
                // Addresses from the service range; nothing routes them.
                let n = cluster.store.current_rv();
                let ip = format!("10.96.{}.{}", (n / 250) % 250, n % 250 + 2);
                spec["clusterIP"] = json!(ip);
                spec["clusterIPs"] = json!([ip]);
            }
            for p in spec["ports"].as_array_mut().into_iter().flatten() {
                if p.get("protocol").is_none() {
                    p["protocol"] = json!("TCP");
                }
                if p.get("targetPort").is_none() {
                    p["targetPort"] = p["port"].clone();
                }
            }
            if spec.get("sessionAffinity").is_none() {
                spec["sessionAffinity"] = json!("None");
            }
        }
        ("", "Namespace") => {
            if obj.pointer("/status/phase").is_none() {
                obj["status"] = json!({"phase": "Active"});
            }
            if obj.pointer("/spec/finalizers").is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
        }
        ("", "Pod") => {
            let spec = &mut obj["spec"];
            let containers = spec["containers"].as_array().map_or(0, Vec::len);
            if containers == 0 {
                return Err(ApiError::invalid(
                    "Pod",
                    &name,
                    vec![Cause {
                        reason: "FieldValueRequired",
                        field: "spec.containers".into(),
                        message: "Required value".into(),
                    }],
                ));
            }
            for (k, v) in [
                ("restartPolicy", json!("Always")),
                ("terminationGracePeriodSeconds", json!(30)),
                ("dnsPolicy", json!("ClusterFirst")),
                ("schedulerName", json!("default-scheduler")),
                ("serviceAccountName", json!("default")),
            ] {
                if spec.get(k).is_none() {
                    spec[k] = v;
                }
            }
            if let (None, Some(node)) = (spec.get("nodeName"), &cluster.node_name) {
                spec["nodeName"] = json!(node);
            }
            if old.is_none() {
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
        }
        ("apps", "Deployment") | ("apps", "StatefulSet") => {
            if obj.pointer("/spec/replicas").is_none() {
                obj["spec"]["replicas"] = json!(1);
            }
            let sel = obj
                .pointer("/spec/selector")
                .cloned()
                .unwrap_or(Value::Null);
            let labels = obj
                .pointer("/spec/template/metadata/labels")
                .cloned()
                .unwrap_or(json!({}));
            if !sel.is_object() || !crate::selectors::label_selector_matches(&sel, &labels) {
                return Err(ApiError::invalid(
                    &info.kind_group(),
                    &name,
                    vec![Cause {
                        reason: "FieldValueInvalid",
                        field: "spec.template.metadata.labels".into(),
                        message: format!(
                            "Invalid value: {labels}: `selector` does not match template `labels`"
                        ),
                    }],
                ));
            }
        }
        ("batch", "Job") => {
            if obj.pointer("/spec/selector").is_none() {
                let uid = str_at(obj, "/metadata/uid").unwrap_or_default().to_string();
                obj["spec"]["selector"] =
                    json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
                for (k, v) in [
                    ("batch.kubernetes.io/controller-uid", uid.clone()),
                    ("batch.kubernetes.io/job-name", name.clone()),
                    ("controller-uid", uid.clone()),
                    ("job-name", name.clone()),
                ] {
                    obj["spec"]["template"]["metadata"]["labels"][k] = json!(v);
                }
            }
            for (k, v) in [("completions", 1), ("parallelism", 1), ("backoffLimit", 6)] {
                if obj.pointer(&format!("/spec/{k}")).is_none() {
                    obj["spec"][k] = json!(v);
                }
            }
            if obj.pointer("/spec/template/spec/restartPolicy").is_none() {
                return Err(ApiError::invalid(
                    "Job.batch",
                    &name,
                    vec![Cause {
                        reason: "FieldValueRequired",
                        field: "spec.template.spec.restartPolicy".into(),
                        message: "Required value: valid values: \"OnFailure\", \"Never\"".into(),
                    }],
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

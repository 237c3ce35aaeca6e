//! The Node: registration, its status, the Lease heartbeat; and the kubelet's Events.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{Shared, now, s};
use crate::Error;

/// The Kubernetes version the bed's control plane is built at (from its go.mod, without the
/// `v`), which the kubelet reports as its own.
pub fn kubernetes_version() -> &'static str {
    static GO_MOD: &str = include_str!("../../../kube-control-plane/go.mod");
    GO_MOD
        .lines()
        .map(|l| l.trim().trim_start_matches("require").trim())
        .find_map(|l| {
            l.strip_prefix("k8s.io/kubernetes v")
                .filter(|_| !l.contains("=>"))
        })
        .map(|v| &v[..v.find(|c: char| c.is_whitespace()).unwrap_or(v.len())])
        .unwrap_or("v0.0.0")
}

/// How often the Lease is renewed (the kubelet's default) and the Node status re-posted.
const LEASE_RENEW: Duration = Duration::from_secs(10);
const LEASE_SECONDS: i32 = 40;
const STATUS_EVERY: Duration = Duration::from_secs(60);

fn node_status(port: u16) -> Value {
    let t = now();
    let cond = |ty: &str, status: &str, reason: &str, message: &str| {
        json!({"type": ty, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": t, "lastTransitionTime": t})
    };
    let resources =
        json!({"cpu": "64", "memory": "256Gi", "pods": "1000", "ephemeral-storage": "1Ti"});
    json!({
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "the process kubelet is posting ready status"),
        ],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": "localhost"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "",
            "kernelVersion": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
            "osImage": "local processes", "containerRuntimeVersion": "process://dcs-kube-bed",
            "kubeletVersion": format!("v{}", kubernetes_version()), "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
        },
    })
}

/// Creates the Node (or takes over an existing one of the same name) and posts a Ready status.
pub(super) async fn register(shared: &Shared, port: u16) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(shared.client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": shared.node, "labels": {
            "kubernetes.io/hostname": shared.node, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
        }},
        "status": node_status(port),
    }))
    .map_err(|e| Error::Kube(e.to_string()))?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => {
            return Err(Error::Kube(format!(
                "registering node {}: {e}",
                shared.node
            )));
        }
    }
    post_status(shared, port).await?;
    renew_lease(shared).await?;
    Ok(())
}

async fn post_status(shared: &Shared, port: u16) -> Result<(), Error> {
    Api::<Node>::all(shared.client.clone())
        .patch_status(
            &shared.node,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": node_status(port)})),
        )
        .await
        .map_err(|e| Error::Kube(format!("posting the status of node {}: {e}", shared.node)))?;
    Ok(())
}

fn micro_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

async fn renew_lease(shared: &Shared) -> Result<(), Error> {
    let leases: Api<Lease> = Api::namespaced(shared.client.clone(), "kube-node-lease");
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": shared.node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": shared.node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro_now()},
    });
    leases
        .patch(
            &shared.node,
            &PatchParams::apply("kubelet").force(),
            &Patch::Apply(&lease),
        )
        .await
        .map_err(|e| Error::Kube(format!("renewing the lease of node {}: {e}", shared.node)))?;
    Ok(())
}

/// Renews the Lease every 10 s and re-posts the Node status every minute, until aborted.
pub(super) async fn heartbeat(shared: Arc<Shared>, port: u16) {
    let mut last_status = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(LEASE_RENEW).await;
        if let Err(e) = renew_lease(&shared).await {
            tracing::warn!(error = %e, "node heartbeat");
        }
        if last_status.elapsed() >= STATUS_EVERY {
            match post_status(&shared, port).await {
                Ok(()) => last_status = tokio::time::Instant::now(),
                Err(e) => tracing::warn!(error = %e, "node status"),
            }
        }
    }
}

/// Records a core Event about `pod` from the kubelet of this node.
pub(super) async fn event(
    shared: Arc<Shared>,
    pod: Value,
    type_: String,
    reason: String,
    message: String,
) {
    let ns = s(&pod, "/metadata/namespace").to_string();
    let t = now();
    let ev = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": format!("{}.", s(&pod, "/metadata/name")), "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns,
            "name": s(&pod, "/metadata/name"), "uid": s(&pod, "/metadata/uid")},
        "type": type_, "reason": reason, "message": message,
        "source": {"component": "kubelet", "host": shared.node},
        "reportingComponent": "kubelet", "reportingInstance": shared.node,
        "firstTimestamp": t, "lastTimestamp": t, "count": 1,
    });
    let Ok(ev) = serde_json::from_value::<Event>(ev) else {
        return;
    };
    if let Err(e) = Api::<Event>::namespaced(shared.client.clone(), &ns)
        .create(&PostParams::default(), &ev)
        .await
    {
        tracing::debug!(error = %e, %reason, "recording an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reported_version_is_the_control_planes() {
        let v = kubernetes_version();
        assert!(v.starts_with("1."), "{v}");
    }
}

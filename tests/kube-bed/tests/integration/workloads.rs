//! Deployment, StatefulSet and Job controllers driving pods on the process kubelet.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use anyhow::Result;
use common::{WAIT, eventually};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn sleeper(labels: serde_json::Value, marker: &str) -> serde_json::Value {
    json!({"metadata": {"labels": labels}, "spec": {"terminationGracePeriodSeconds": 1, "containers": [
        {"name": "main", "image": "x", "command": ["/bin/sleep", "1000"], "env": [{"name": "MARK", "value": marker}]}]}})
}

#[tokio::test]
async fn deployment_recreates_pods_one_generation_at_a_time() -> Result<()> {
    let bed = dcs_kube_bed::kubelet_namespace("workloads").await?;
    let client = bed.client.clone();
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), &bed.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &bed.name);
    deploys.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": {"app": "web"}},
            "template": sleeper(json!({"app": "web"}), "v1")},
    }))?).await?;
    eventually("2 available replicas", || async {
        deploys
            .get("web")
            .await
            .ok()
            .and_then(|d| d.status)
            .is_some_and(|s| s.available_replicas == Some(2) && s.ready_replicas == Some(2))
    })
    .await?;
    let d = deploys.get("web").await?;
    let st = d.status.unwrap();
    assert_eq!(st.observed_generation, Some(1));
    assert!(
        st.conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Available" && c.status == "True")
    );
    let first: HashSet<String> = pods
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(first.len(), 2);
    for p in pods
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items
    {
        // The real Deployment controller owns its pods through a ReplicaSet.
        assert_eq!(p.owner_references()[0].kind, "ReplicaSet");
    }

    // A template change: no new pod exists while an old one still runs. As in Kubernetes'
    // Recreate strategy, an old pod whose containers have all exited (phase Succeeded or
    // Failed) no longer counts, even while its object waits for the kubelet's final delete.
    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "main", "env": [{"name": "MARK", "value": "v2"}]}]}}}})),
        )
        .await?;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let listed = pods
            .list(&ListParams::default().labels("app=web"))
            .await?
            .items;
        let phase = |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default()
        };
        let names: HashSet<String> = listed.iter().map(|p| p.name_any()).collect();
        let old_live: Vec<String> = listed
            .iter()
            .filter(|p| first.contains(&p.name_any()))
            .filter(|p| !matches!(phase(p).as_str(), "Succeeded" | "Failed"))
            .map(|p| format!("{} ({})", p.name_any(), phase(p)))
            .collect();
        let old = names.intersection(&first).count();
        let new = names.difference(&first).count();
        assert!(
            old_live.is_empty() || new == 0,
            "a new pod exists while old ones still run: {old_live:?} among {names:?}"
        );
        let s = deploys.get("web").await?.status.unwrap_or_default();
        if old == 0 && new == 2 && s.ready_replicas == Some(2) && s.updated_replicas == Some(2) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout did not finish"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let d = deploys.get("web").await?;
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(d.status.unwrap().observed_generation, Some(2));
    let p = &pods
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items[0];
    let env = p.spec.as_ref().unwrap().containers[0].env.clone().unwrap();
    assert_eq!(
        env[0].value.as_deref(),
        Some("v2"),
        "strategic merge patch merged the env list by name"
    );
    Ok(())
}

#[tokio::test]
async fn statefulset_runs_ordinal_pods_in_order() -> Result<()> {
    let bed = dcs_kube_bed::kubelet_namespace("workloads").await?;
    let client = bed.client.clone();
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), &bed.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &bed.name);
    sts.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                "template": sleeper(json!({"app": "db"}), "v1")},
        }))?,
    )
    .await?;
    // OrderedReady: db-1 never exists before db-0 is ready.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let list = pods
            .list(&ListParams::default().labels("app=db"))
            .await?
            .items;
        let ready = |n: &str| {
            list.iter().any(|p| {
                p.name_any() == n
                    && p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
        };
        let exists = |n: &str| list.iter().any(|p| p.name_any() == n);
        assert!(
            !exists("db-1") || ready("db-0") || exists("db-2"),
            "db-1 started before db-0 was ready"
        );
        if sts
            .get("db")
            .await?
            .status
            .is_some_and(|s| s.ready_replicas == Some(3))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "statefulset never got ready"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut names: Vec<String> = pods
        .list(&ListParams::default().labels("app=db"))
        .await?
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    names.sort();
    assert_eq!(names, vec!["db-0", "db-1", "db-2"]);
    let p = pods.get("db-1").await?;
    assert_eq!(p.spec.as_ref().unwrap().hostname.as_deref(), Some("db-1"));
    assert_eq!(p.labels()["apps.kubernetes.io/pod-index"], "1");
    sts.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await?;
    eventually("scale down to db-0", || async {
        pods.list(&ListParams::default().labels("app=db"))
            .await
            .is_ok_and(|l| l.items.len() == 1 && l.items[0].name_any() == "db-0")
    })
    .await?;
    eventually("status replicas 1", || async {
        sts.get("db")
            .await
            .ok()
            .and_then(|s| s.status)
            .is_some_and(|s| s.replicas == 1)
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn jobs_complete_or_fail_by_backoff_limit() -> Result<()> {
    let bed = dcs_kube_bed::kubelet_namespace("workloads").await?;
    let client = bed.client.clone();
    let jobs: Api<Job> = Api::namespaced(client.clone(), &bed.name);
    let job = |name: &str, code: i32, completions: i32, backoff: i32| {
        serde_json::from_value::<Job>(
            json!({"metadata": {"name": name}, "spec": {"completions": completions, "backoffLimit": backoff,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x", "command": ["/bin/sh", "-c", format!("exit {code}")]}]}}}}),
        )
    };
    jobs.create(&PostParams::default(), &job("ok", 0, 2, 6)?)
        .await?;
    jobs.create(&PostParams::default(), &job("bad", 1, 1, 1)?)
        .await?;
    eventually("ok completes", || async {
        jobs.get("ok")
            .await
            .ok()
            .and_then(|j| j.status)
            .is_some_and(|s| condition_true_job(s.conditions.as_ref(), "Complete"))
    })
    .await?;
    let s = jobs.get("ok").await?.status.unwrap();
    assert_eq!(s.succeeded, Some(2));
    assert!(s.completion_time.is_some());
    eventually("bad fails", || async {
        jobs.get("bad")
            .await
            .ok()
            .and_then(|j| j.status)
            .is_some_and(|s| condition_true_job(s.conditions.as_ref(), "Failed"))
    })
    .await?;
    let s = jobs.get("bad").await?.status.unwrap();
    assert_eq!(s.failed, Some(2), "backoffLimit 1 allows one retry");
    let failed = s
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    Ok(())
}

fn condition_true_job(
    conds: Option<&Vec<k8s_openapi::api::batch::v1::JobCondition>>,
    ty: &str,
) -> bool {
    conds.is_some_and(|c| c.iter().any(|c| c.type_ == ty && c.status == "True"))
}

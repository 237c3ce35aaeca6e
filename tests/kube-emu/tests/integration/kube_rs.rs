//! kube-rs against kube-emu: typed and dynamic CRUD, watchers, a Controller with `.owns()`,
//! server-side apply, optimistic concurrency and a Lease handover.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use dcs_kube_emu::{Config, KubeEmu};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::time::timeout;

use crate::common;

use common::{WAIT, api_code, client_for, eventually, start};

/// The test's own custom resource.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq)]
#[kube(
    group = "test.kube-emu.dev",
    version = "v1",
    kind = "Gadget",
    namespaced,
    status = "GadgetStatus"
)]
#[kube(printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#)]
pub struct GadgetSpec {
    /// How many parts.
    pub parts: i32,
}

/// Status written by the controller.
#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq, Default)]
pub struct GadgetStatus {
    /// Where it is.
    pub phase: String,
    /// The generation the controller saw.
    pub observed_generation: Option<i64>,
}

async fn install_gadgets(client: &Client) -> Result<()> {
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    crds.create(&PostParams::default(), &Gadget::crd()).await?;
    Ok(())
}

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "kube-emu-test"}},
        "data": data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    }))
    .expect("valid configmap")
}

#[tokio::test]
async fn typed_crud_conflicts_and_selectors() -> Result<()> {
    let (emu, client) = start(Config::default()).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(&PostParams::default(), &cm("a", &[("k", "1")]))
        .await?;
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    let e = cms
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), Some((409, "AlreadyExists".into())));

    // Optimistic concurrency: a write with a stale resourceVersion is refused.
    let mut first = cms.get("a").await?;
    let mut second = first.clone();
    first.data = Some([("k".to_string(), "2".to_string())].into());
    let replaced = cms.replace("a", &PostParams::default(), &first).await?;
    assert_ne!(replaced.resource_version(), second.resource_version());
    second.data = Some([("k".to_string(), "3".to_string())].into());
    let e = cms
        .replace("a", &PostParams::default(), &second)
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), Some((409, "Conflict".into())));

    // Merge patch, label selectors, pagination.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "x"}}})),
    )
    .await?;
    for i in 0..5 {
        cms.create(&PostParams::default(), &cm(&format!("p{i}"), &[]))
            .await?;
    }
    let sel = cms.list(&ListParams::default().labels("tier=x")).await?;
    assert_eq!(
        sel.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        vec!["a"]
    );
    let page = cms.list(&ListParams::default().limit(4)).await?;
    assert_eq!(page.items.len(), 4);
    let token = page.metadata.continue_.clone().expect("continue token");
    let rest = cms
        .list(&ListParams::default().limit(4).continue_token(&token))
        .await?;
    assert_eq!(rest.items.len(), 2);
    let fields = cms
        .list(&ListParams::default().fields("metadata.name=p3"))
        .await?;
    assert_eq!(fields.items.len(), 1);

    cms.delete("a", &DeleteParams::default()).await?;
    let e = cms.get("a").await.unwrap_err();
    assert_eq!(api_code(&e), Some((404, "NotFound".into())));

    // deletecollection honours the selector and leaves the rest.
    cms.patch(
        "p1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"batch": "old"}}})),
    )
    .await?;
    cms.patch(
        "p2",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"batch": "old"}}})),
    )
    .await?;
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("batch=old"),
    )
    .await?;
    let mut left: Vec<String> = cms
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|c| c.name_any())
        .filter(|n| n.starts_with('p'))
        .collect();
    left.sort();
    assert_eq!(left, vec!["p0", "p3", "p4"]);
    emu.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn requests_without_a_valid_token_are_unauthorized() -> Result<()> {
    let emu = KubeEmu::start(Config::default()).await?;
    let kc = kube::config::Kubeconfig::from_yaml(
        &emu.kubeconfig("default").replace(&emu.token, "wrong"),
    )?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    let cms: Api<ConfigMap> = Api::namespaced(Client::try_from(config)?, "default");
    let e = cms.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&e), Some((401, "Unauthorized".into())));
    emu.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn dynamic_crud_of_a_custom_resource_with_status_subresource() -> Result<()> {
    let (emu, client) = start(Config::default()).await?;
    install_gadgets(&client).await?;
    let gvk = GroupVersionKind::gvk("test.kube-emu.dev", "v1", "Gadget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.kube-emu.dev/v1", "kind": "Gadget",
        "metadata": {"name": "g1"}, "spec": {"parts": 2}, "status": {"phase": "ignored"},
    }))?;
    let created = api.create(&PostParams::default(), &obj).await?;
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "create ignores status"
    );

    // The main endpoint ignores status; /status ignores everything else.
    let p = json!({"spec": {"parts": 3}, "status": {"phase": "no"}});
    let after = api
        .patch("g1", &PatchParams::default(), &Patch::Merge(&p))
        .await?;
    assert_eq!(after.metadata.generation, Some(2));
    assert!(after.data.get("status").is_none());
    let p = json!({"spec": {"parts": 9}, "status": {"phase": "Ready"}});
    let after = api
        .patch_status("g1", &PatchParams::default(), &Patch::Merge(&p))
        .await?;
    assert_eq!(after.data["spec"]["parts"], 3);
    assert_eq!(after.data["status"]["phase"], "Ready");
    assert_eq!(
        after.metadata.generation,
        Some(2),
        "status writes do not bump generation"
    );

    // Schema validation with field causes.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.kube-emu.dev/v1", "kind": "Gadget", "metadata": {"name": "g2"}, "spec": {"parts": "many"},
    }))?;
    let e = api.create(&PostParams::default(), &bad).await.unwrap_err();
    assert_eq!(api_code(&e), Some((422, "Invalid".into())));

    let typed: Api<Gadget> = Api::namespaced(client, "default");
    let g = typed.get("g1").await?;
    assert_eq!(g.spec.parts, 3);
    assert_eq!(g.status.as_ref().map(|s| s.phase.as_str()), Some("Ready"));
    api.delete("g1", &DeleteParams::default()).await?;
    assert_eq!(
        api_code(&api.get("g1").await.unwrap_err()),
        Some((404, "NotFound".into()))
    );
    emu.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn server_side_apply_tracks_managers_and_conflicts() -> Result<()> {
    let (emu, client) = start(Config::default()).await?;
    install_gadgets(&client).await?;
    let api: Api<Gadget> = Api::namespaced(client, "default");
    let desired = json!({"apiVersion": "test.kube-emu.dev/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"parts": 1}});
    api.patch("g", &PatchParams::apply("alice"), &Patch::Apply(&desired))
        .await?;
    let mut other = desired.clone();
    other["spec"]["parts"] = json!(2);
    let e = api
        .patch("g", &PatchParams::apply("bob"), &Patch::Apply(&other))
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), Some((409, "Conflict".into())));
    if let kube::Error::Api(s) = &e {
        assert!(
            s.message.contains("conflict with \"alice\""),
            "{}",
            s.message
        );
    }
    let forced = api
        .patch(
            "g",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&other),
        )
        .await?;
    assert_eq!(forced.spec.parts, 2);
    let managers: Vec<String> = forced
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(managers.contains(&"bob".to_string()));

    // SSA of status through the status subresource.
    let status = json!({"apiVersion": "test.kube-emu.dev/v1", "kind": "Gadget", "status": {"phase": "Applied"}});
    let g = api
        .patch_status(
            "g",
            &PatchParams::apply("ctrl").force(),
            &Patch::Apply(&status),
        )
        .await?;
    assert_eq!(g.status.map(|s| s.phase), Some("Applied".to_string()));
    assert_eq!(g.spec.parts, 2);
    emu.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn watcher_sees_changes_and_old_versions_expire() -> Result<()> {
    let (emu, client) = start(Config {
        watch_history: 5,
        ..Config::default()
    })
    .await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let stream = watcher(
        cms.clone(),
        watcher::Config::default().labels("app=kube-emu-test"),
    )
    .applied_objects();
    let mut stream = Box::pin(stream);
    cms.create(&PostParams::default(), &cm("w", &[("v", "1")]))
        .await?;
    let first = timeout(WAIT, stream.try_next()).await??.expect("event");
    assert_eq!(first.name_any(), "w");
    cms.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await?;
    let second = timeout(WAIT, stream.try_next()).await??.expect("event");
    assert_eq!(second.data.unwrap()["v"], "2");

    // A watch from a resourceVersion older than the retained history gets 410.
    for i in 0..10 {
        cms.create(&PostParams::default(), &cm(&format!("x{i}"), &[]))
            .await?;
    }
    let mut raw = cms
        .watch(&WatchParams::default().timeout(5), "2")
        .await?
        .boxed();
    match timeout(WAIT, raw.try_next()).await??.expect("an event") {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    // Bookmarks when asked for.
    let emu2 = KubeEmu::start(Config {
        bookmark_every: Duration::from_millis(200),
        ..Config::default()
    })
    .await?;
    let cms2: Api<ConfigMap> = Api::namespaced(client_for(&emu2).await?, "default");
    let rv2 = cms2
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap();
    let mut bm = cms2
        .watch(&WatchParams::default().timeout(5), &rv2)
        .await?
        .boxed();
    let ev = timeout(WAIT, bm.try_next()).await??.expect("an event");
    assert!(matches!(ev, WatchEvent::Bookmark(_)), "{ev:?}");
    emu2.shutdown().await;
    emu.shutdown().await;
    Ok(())
}

struct Ctx {
    client: Client,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(g: Arc<Gadget>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let ns = g.namespace().unwrap_or_default();
    let owner = g.controller_owner_ref(&()).expect("has uid");
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let child = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{}-parts", g.name_any()), "ownerReferences": [owner]},
        "data": {"parts": g.spec.parts.to_string()},
    });
    cms.patch(
        &format!("{}-parts", g.name_any()),
        &PatchParams::apply("gadget-controller").force(),
        &Patch::Apply(&child),
    )
    .await?;
    let gadgets: Api<Gadget> = Api::namespaced(ctx.client.clone(), &ns);
    let status = json!({"apiVersion": "test.kube-emu.dev/v1", "kind": "Gadget",
        "status": {"phase": "Ready", "observed_generation": g.metadata.generation}});
    gadgets
        .patch_status(
            &g.name_any(),
            &PatchParams::apply("gadget-controller").force(),
            &Patch::Apply(&status),
        )
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Gadget>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

#[tokio::test]
async fn controller_with_owns_reconciles_and_garbage_collection_follows() -> Result<()> {
    let (emu, client) = start(Config::default()).await?;
    install_gadgets(&client).await?;
    let gadgets: Api<Gadget> = Api::namespaced(client.clone(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let ctrl = Controller::new(gadgets.clone(), watcher::Config::default())
        .owns(cms.clone(), watcher::Config::default())
        .run(
            reconcile,
            error_policy,
            Arc::new(Ctx {
                client: client.clone(),
            }),
        )
        .for_each(|_| async {});
    let ctrl = tokio::spawn(ctrl);

    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new("g", GadgetSpec { parts: 4 }),
        )
        .await?;
    eventually("the owned ConfigMap", || async {
        cms.get_opt("g-parts")
            .await
            .ok()
            .flatten()
            .and_then(|c| c.data)
            .is_some_and(|d| d["parts"] == "4")
    })
    .await?;
    eventually("status written", || async {
        gadgets
            .get("g")
            .await
            .ok()
            .and_then(|g| g.status)
            .is_some_and(|s| s.phase == "Ready")
    })
    .await?;
    // Deleting the child triggers a reconcile through .owns(), which recreates it.
    cms.delete("g-parts", &DeleteParams::default()).await?;
    eventually("the ConfigMap recreated", || async {
        cms.get_opt("g-parts").await.ok().flatten().is_some()
    })
    .await?;
    // Spec changes flow through.
    gadgets
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parts": 5}})),
        )
        .await?;
    eventually("the ConfigMap updated", || async {
        cms.get_opt("g-parts")
            .await
            .ok()
            .flatten()
            .and_then(|c| c.data)
            .is_some_and(|d| d["parts"] == "5")
    })
    .await?;
    ctrl.abort();
    // Deleting the owner collects the child.
    gadgets.delete("g", &DeleteParams::default()).await?;
    eventually("the ConfigMap collected", || async {
        matches!(cms.get_opt("g-parts").await, Ok(None))
    })
    .await?;
    emu.shutdown().await;
    Ok(())
}

/// A hand-written lease loop: acquire when free or expired, renew while held.
async fn try_acquire(leases: &Api<Lease>, me: &str, ttl_secs: i32) -> Result<bool> {
    let now = jiff::Timestamp::now();
    let micro = |t: jiff::Timestamp| -> MicroTime { MicroTime(t) };
    match leases.get_opt("leader").await? {
        None => {
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {"name": "leader"},
                "spec": {"holderIdentity": me, "leaseDurationSeconds": ttl_secs},
            }))?;
            let mut lease = lease;
            if let Some(spec) = lease.spec.as_mut() {
                spec.renew_time = Some(micro(now));
                spec.acquire_time = Some(micro(now));
            }
            match leases.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(e) if api_code(&e).is_some_and(|(c, _)| c == 409) => Ok(false),
                Err(e) => Err(e.into()),
            }
        }
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            let holder = spec.holder_identity.clone().unwrap_or_default();
            let renewed = spec.renew_time.as_ref().map(|t| t.0).unwrap_or(now);
            let ttl = spec.lease_duration_seconds.unwrap_or(ttl_secs) as i64;
            let expired = now.as_second() - renewed.as_second() >= ttl;
            if holder != me && !expired && !holder.is_empty() {
                return Ok(false);
            }
            if holder != me {
                spec.acquire_time = Some(micro(now));
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
            spec.holder_identity = Some(me.to_string());
            spec.renew_time = Some(micro(now));
            // The replace carries the resourceVersion read above: two candidates racing for an
            // expired lease cannot both win.
            match leases
                .replace("leader", &PostParams::default(), &lease)
                .await
            {
                Ok(_) => Ok(true),
                Err(e) if api_code(&e).is_some_and(|(c, _)| c == 409) => Ok(false),
                Err(e) => Err(e.into()),
            }
        }
    }
}

#[tokio::test]
async fn lease_leader_election_hands_over() -> Result<()> {
    let (emu, client) = start(Config::default()).await?;
    let leases: Api<Lease> = Api::namespaced(client, "default");
    assert!(try_acquire(&leases, "a", 2).await?);
    assert!(
        !try_acquire(&leases, "b", 2).await?,
        "b must wait while a holds the lease"
    );
    assert!(try_acquire(&leases, "a", 2).await?, "a renews");
    // a stops renewing; b takes over once the lease expires.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if try_acquire(&leases, "b", 2).await? {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "b never took over");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let lease = leases.get("leader").await?;
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert!(!try_acquire(&leases, "a", 2).await?, "a lost the lease");
    // A stale write to the lease is refused.
    let mut stale = leases.get("leader").await?;
    leases
        .patch(
            "leader",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"leaseDurationSeconds": 3}})),
        )
        .await?;
    stale.spec.as_mut().unwrap().holder_identity = Some("a".into());
    let e = leases
        .replace("leader", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), Some((409, "Conflict".into())));
    emu.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn recorder_events_are_visible_as_core_events() -> Result<()> {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let (emu, client) = start(Config::default()).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let target = cms
        .create(&PostParams::default(), &cm("subject", &[]))
        .await?;
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "dcs-test".into(),
            instance: None,
        },
    );
    let ev = Event {
        type_: EventType::Warning,
        reason: "TtlTooShort".into(),
        note: Some("ttl 60s < 1900s".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&ev, &target.object_ref(&())).await?;
    recorder.publish(&ev, &target.object_ref(&())).await?;
    let core: Api<CoreEvent> = Api::namespaced(client, "default");
    let list = core
        .list(&ListParams::default().fields("involvedObject.name=subject"))
        .await?;
    assert_eq!(list.items.len(), 1, "the second publish updates the series");
    let e = &list.items[0];
    assert_eq!(e.message.as_deref(), Some("ttl 60s < 1900s"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.reason.as_deref(), Some("TtlTooShort"));
    assert_eq!(e.reporting_component.as_deref(), Some("dcs-test"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("ConfigMap"));
    emu.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn state_persists_across_restarts_with_a_data_dir() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("kube-emu-data-{}", uuid::Uuid::new_v4().simple()));
    let cfg = Config {
        data_dir: Some(dir.clone()),
        ..Config::default()
    };
    let (emu, client) = start(cfg.clone()).await?;
    install_gadgets(&client).await?;
    let gadgets: Api<Gadget> = Api::namespaced(client, "default");
    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new("kept", GadgetSpec { parts: 7 }),
        )
        .await?;
    let rv = gadgets.get("kept").await?.resource_version();
    let token = emu.token.clone();
    emu.shutdown().await;

    let (emu, client) = start(cfg).await?;
    assert_eq!(emu.token, token, "the same kubeconfig keeps working");
    let gadgets: Api<Gadget> = Api::namespaced(client, "default");
    let g = gadgets.get("kept").await?;
    assert_eq!(g.spec.parts, 7);
    assert_eq!(g.resource_version(), rv);
    let g2 = gadgets
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parts": 8}})),
        )
        .await?;
    assert!(g2.resource_version().unwrap().parse::<u64>()? > rv.unwrap().parse::<u64>()?);
    emu.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn rbac_is_enforced_for_service_accounts_with_authorize() -> Result<()> {
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let (emu, admin) = start(Config {
        authorize: true,
        ..Config::default()
    })
    .await?;
    let roles: Api<Role> = Api::namespaced(admin.clone(), "default");
    roles.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}))?).await?;
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "default");
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]}))?,
        )
        .await?;
    let token = emu.cluster.service_account_token("default", "reader");
    let kc = kube::config::Kubeconfig::from_yaml(
        &emu.kubeconfig("default").replace(&emu.token, &token),
    )?;
    let sa =
        Client::try_from(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?)?;
    let cms: Api<ConfigMap> = Api::namespaced(sa.clone(), "default");
    cms.list(&ListParams::default()).await?;
    let e = cms
        .create(&PostParams::default(), &cm("nope", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), Some((403, "Forbidden".into())));
    if let kube::Error::Api(s) = &e {
        assert!(s.message.contains("User \"system:serviceaccount:default:reader\" cannot create resource \"configmaps\""), "{}", s.message);
    }
    let secrets: Api<Secret> = Api::namespaced(sa, "default");
    assert_eq!(
        api_code(&secrets.list(&ListParams::default()).await.unwrap_err()),
        Some((403, "Forbidden".into()))
    );
    // The admin is not restricted.
    Api::<Secret>::namespaced(admin, "default")
        .list(&ListParams::default())
        .await?;
    emu.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn discovery_finds_builtins_and_custom_resources() -> Result<()> {
    let (emu, client) = start(Config::default()).await?;
    install_gadgets(&client).await?;
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await?;
    let gvk = GroupVersionKind::gvk("test.kube-emu.dev", "v1", "Gadget");
    let (ar, caps) = discovery.resolve_gvk(&gvk).expect("Gadget discovered");
    assert_eq!(ar.plural, "gadgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment"))
            .is_some()
    );
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
            .is_some()
    );
    let info = client.apiserver_version().await?;
    assert_eq!(info.major, "1");
    emu.shutdown().await;
    Ok(())
}

//! Re-initialisation: promptly at the reconcile after the runner says its offset expired (its
//! checkpoint's stop record, or a pod exiting with code 3), never waiting unbounded on runner
//! pods (a pod that does not go is forced off, the status says what is waited for), and the
//! checkpoint fence that keeps a surviving runner from saving.

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use dcs_crds::checkpoint::{Counters, Stopped};
use dcs_crds::testing::{CheckpointBuilder, SyncBuilder, offset};
use dcs_crds::{
    DorisChangelogSync, OnOffsetExpired, Phase, StartupMode, conditions::get_condition,
};
use dcs_operator::{
    controller::{self, Metrics},
    reconcile::{Context, reconcile},
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Pod},
};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use mysql_async::prelude::Queryable;

use crate::common;

use common::{create_doris_secret, doris_with_tables, events_about, install_crd, mysql, poll};

const TABLES: [&str; 2] = [
    "CREATE TABLE db.src (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
     PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.ttl_seconds\" = \"86400\")",
    "CREATE TABLE db.dst (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1",
];

/// A namespace of the control plane (no kubelet: runner pods stay Pending) with the CRD and the
/// Secret, doris-emu with [`TABLES`].
struct Bed {
    _ns: dcs_kube_bed::TestNamespace,
    client: Client,
    doris: dcs_doris_emu::RunningEmulator,
    api: Api<DorisChangelogSync>,
    configmaps: Api<ConfigMap>,
    pods: Api<Pod>,
}

impl Bed {
    async fn start() -> Result<Self> {
        let ns = common::bed("reinit").await?;
        let client = ns.client.clone();
        install_crd(&client).await?;
        let doris = doris_with_tables(&TABLES).await?;
        create_doris_secret(&client).await?;
        Ok(Self {
            api: Api::default_namespaced(client.clone()),
            configmaps: Api::default_namespaced(client.clone()),
            pods: Api::default_namespaced(client.clone()),
            _ns: ns,
            client,
            doris,
        })
    }

    fn namespace(&self) -> String {
        self.client.default_namespace().to_owned()
    }

    async fn create_sync(&self, name: &str) -> Result<()> {
        self.create_sync_with(name, OnOffsetExpired::default())
            .await
    }

    /// `db.src` into `db.dst` on the bed's Doris, `initial`, `then` when the offset expires.
    async fn create_sync_with(&self, name: &str, then: OnOffsetExpired) -> Result<()> {
        let ports = self.doris.ports();
        let fe = format!("127.0.0.1:{}", ports.fe_http_port);
        let sync = SyncBuilder::new()
            .name(name)
            .source_fe(&fe)
            .query_port(ports.query_port)
            .source_table("db.src")
            .source_secret("doris")
            .mode(StartupMode::Initial)
            .on_offset_expired(then)
            .sink_fe(&fe)
            .sink_table("db.dst")
            .sink_secret("doris")
            .build();
        self.api.create(&PostParams::default(), &sync).await?;
        Ok(())
    }

    /// Doris's "now" (the emulated clock), epoch ms.
    async fn doris_now_ms(&self) -> Result<i64> {
        let clock: serde_json::Value = dcs_doris_client::tls::plain_get(format!(
            "http://127.0.0.1:{}/_emu/clock",
            self.doris.ports().fe_http_port
        ))
        .await?
        .json()
        .await?;
        Ok(clock["now_ms"].as_i64().expect("now_ms"))
    }

    /// The checkpoint a runner of consumer `name` saved at Doris's now, optionally with the stop
    /// record the runner writes when it finds its offset expired (exit code 3).
    async fn save_checkpoint(&self, name: &str, expired: bool) -> Result<()> {
        let stopped = expired.then(|| Stopped {
            at: "2026-11-29T14:00:05Z".into(),
            reason: "OffsetExpired".into(),
            exit_code: 3,
            message: "the changelog window from 2026-11-29 13:00:00 starts within 60s of the TTL"
                .into(),
        });
        self.save_checkpoint_stopped(name, stopped).await
    }

    /// The checkpoint a runner of consumer `name` saved at Doris's now, with `stopped` as its stop
    /// record.
    async fn save_checkpoint_stopped(&self, name: &str, stopped: Option<Stopped>) -> Result<()> {
        let now_ms = self.doris_now_ms().await?;
        let mut checkpoint = CheckpointBuilder::new()
            .consumer(name)
            .id(9)
            .changelog_at(offset("2026-11-29 14:00:00", now_ms))
            .counters(Counters {
                rows_read: 5,
                rows_written: 5,
                loads: 2,
                bytes: 10,
                ..Counters::default()
            })
            .label_scheme(1);
        if let Some(stopped) = stopped {
            checkpoint = checkpoint.stopped(stopped);
        }
        let checkpoint = checkpoint.build().to_json();
        self.configmaps
            .patch(
                &format!("{name}-checkpoint"),
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"data": {"checkpoint.json": checkpoint}})),
            )
            .await?;
        Ok(())
    }

    /// A sync (`then` when its offset expires) launched and Streaming on a checkpoint its runner
    /// saved at Doris's now.
    async fn streaming_sync(
        &self,
        name: &str,
        then: OnOffsetExpired,
        ctx: &Arc<Context>,
    ) -> Result<()> {
        self.create_sync_with(name, then).await?;
        for _ in 0..3 {
            self.reconcile(name, ctx).await?;
        }
        self.save_checkpoint(name, false).await?;
        self.reconcile(name, ctx).await?;
        assert_eq!(self.status(name).await?.phase, Some(Phase::Streaming));
        Ok(())
    }

    async fn status(&self, name: &str) -> Result<dcs_crds::DorisChangelogSyncStatus> {
        Ok(self.api.get(name).await?.status.unwrap_or_default())
    }

    async fn reconcile(&self, name: &str, ctx: &Arc<Context>) -> Result<()> {
        reconcile(Arc::new(self.api.get(name).await?), ctx.clone()).await?;
        Ok(())
    }
}

/// Reconciles until `done` holds for the status (at most 100 passes, 100 ms apart).
async fn reconcile_until(
    bed: &Bed,
    name: &str,
    ctx: &Arc<Context>,
    what: &str,
    done: impl Fn(&dcs_crds::DorisChangelogSyncStatus) -> bool,
) -> Result<dcs_crds::DorisChangelogSyncStatus> {
    for _ in 0..100 {
        bed.reconcile(name, ctx).await?;
        let status = bed.status(name).await?;
        if done(&status) {
            return Ok(status);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not reached; status {:?}", bed.status(name).await?);
}

fn ready(status: &dcs_crds::DorisChangelogSyncStatus) -> (String, String, String) {
    let c = get_condition(&status.conditions, "Ready").expect("Ready");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

/// The status is Reinitializing with OffsetHealthy False OffsetExpired, its message starting with
/// `why`.
fn assert_reinitializing_on_expiry(status: &dcs_crds::DorisChangelogSyncStatus, why: &str) {
    assert_eq!(status.phase, Some(Phase::Reinitializing), "{status:?}");
    let offset = get_condition(&status.conditions, "OffsetHealthy").expect("OffsetHealthy");
    assert_eq!(
        (offset.status.as_str(), offset.reason.as_str()),
        ("False", "OffsetExpired")
    );
    assert!(offset.message.starts_with(why), "{}", offset.message);
}

/// Reconciles until consumer `s` is re-initialised as `s-r1`; the status.
async fn until_s_r1(bed: &Bed, ctx: &Arc<Context>) -> Result<dcs_crds::DorisChangelogSyncStatus> {
    reconcile_until(bed, "s", ctx, "the reinit", |s| {
        s.consumer_id.as_deref() == Some("s-r1")
    })
    .await
}

/// Reconciles until consumer `s` is re-initialised as `s-r1` on an expired offset: `lastReinit`
/// says so, and one Warning event `Reinitialized` starting with `why`; the status.
async fn reinitialized_on_expiry(
    bed: &Bed,
    ctx: &Arc<Context>,
    why: &str,
) -> Result<dcs_crds::DorisChangelogSyncStatus> {
    let status = until_s_r1(bed, ctx).await?;
    let reinit = status.last_reinit.clone().expect("lastReinit");
    assert_eq!(
        (
            reinit.reason.as_deref(),
            reinit.previous_consumer_id.as_deref()
        ),
        (Some("OffsetExpired"), Some("s"))
    );
    let events = events_about(&bed.client, "s", "Reinitialized").await?;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "Warning");
    assert!(
        events[0].1.starts_with(why) && events[0].1.ends_with("; starting again as consumer s-r1"),
        "{}",
        events[0].1
    );
    Ok(status)
}

#[tokio::test]
async fn a_runner_stopped_with_offset_expired_is_reinitialized_at_the_next_reconcile() -> Result<()>
{
    let bed = Bed::start().await?;
    let ctx = Arc::new(Context::new(bed.client.clone(), None));
    bed.streaming_sync("s", OnOffsetExpired::Reinitialize, &ctx)
        .await?;
    // The sink holds the old consumer's rows; they stay until the new runner swaps its rebuild in.
    let mut conn = mysql(&bed.doris).await?;
    conn.query_drop("INSERT INTO db.dst (id, v) VALUES (1, 'a'), (2, 'b')")
        .await?;

    // Full headroom by Doris's clock: only the runner's stop record says the offset expired.
    bed.save_checkpoint("s", true).await?;
    bed.reconcile("s", &ctx).await?;
    let why = "the runner reports the offset expired: the changelog window from 2026-11-29 13:00:00 starts within 60s of the TTL";
    assert_reinitializing_on_expiry(&bed.status("s").await?, why);
    reinitialized_on_expiry(&bed, &ctx, why).await?;
    let cm = bed.configmaps.get("s-checkpoint").await?;
    assert!(!cm.data.unwrap_or_default().contains_key("checkpoint.json"));
    let sync = bed.api.get("s").await?;
    assert!(
        !sync.annotations().contains_key("dcs.dev/stopping"),
        "{:?}",
        sync.annotations()
    );
    // The sink was not truncated: readers keep the old table.
    let count: Option<i64> = conn.query_first("SELECT COUNT(*) FROM db.dst").await?;
    assert_eq!(count, Some(2));
    conn.disconnect().await?;

    // The new consumer's runner is told to rebuild the sink.
    let status = reconcile_until(&bed, "s", &ctx, "the relaunch", |s| {
        s.phase == Some(Phase::Pending)
    })
    .await?;
    assert_eq!(status.consumer_id.as_deref(), Some("s-r1"));
    let config = bed.configmaps.get("s-runner-config").await?;
    let effective = dcs_crds::from_manifest(&config.data.unwrap()["sync.yaml"])?;
    assert_eq!(effective.consumer_id(), "s-r1");
    assert_eq!(effective.spec.startup.mode, dcs_crds::StartupMode::Initial);
    assert_eq!(
        effective
            .metadata
            .annotations
            .unwrap_or_default()
            .get("dcs.dev/reinitialized-from")
            .map(String::as_str),
        Some("s")
    );
    Ok(())
}

/// Doris's emulated clock moves `seconds` on.
async fn advance_doris_clock(bed: &Bed, seconds: i64) -> Result<()> {
    dcs_doris_client::tls::plain_http_client(reqwest::Client::builder())
        .unwrap()
        .post(format!(
            "http://127.0.0.1:{}/_emu/clock/advance",
            bed.doris.ports().fe_http_port
        ))
        .json(&serde_json::json!({ "seconds": seconds }))
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

/// The sync's runner pod (the Deployment's, Pending without a kubelet), once there is one.
async fn runner_pod(bed: &Bed, name: &str) -> Result<Pod> {
    poll("the runner pod", Duration::from_secs(30), async || {
        let list = bed
            .pods
            .list(&kube::api::ListParams::default().labels(&format!("dcs.dev/sync={name}")))
            .await?;
        Ok(list.items.into_iter().next())
    })
    .await
}

/// What a kubelet reports for a runner container that keeps exiting with `code`.
async fn crash_loop(bed: &Bed, pod: &Pod, code: i32) -> Result<()> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    bed.pods
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"containerStatuses": [{
                "name": "runner", "image": "dcs-runner", "imageID": "", "ready": false,
                "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                "lastState": {"terminated": {"exitCode": code, "reason": "Error",
                                             "startedAt": now, "finishedAt": now}},
            }]}})),
        )
        .await?;
    Ok(())
}

#[tokio::test]
async fn headroom_reaching_zero_by_doris_clock_while_the_runner_is_down_reinitializes() -> Result<()>
{
    let bed = Bed::start().await?;
    let ctx = Arc::new(Context::new(bed.client.clone(), None));
    bed.streaming_sync("s", OnOffsetExpired::Reinitialize, &ctx)
        .await?;

    // The runner is down, for a reason of its own (exit code 1, not 3): it says nothing about the
    // offset, and a crash loop alone is no reason to re-initialise.
    bed.save_checkpoint_stopped(
        "s",
        Some(Stopped {
            at: "2026-11-29T14:00:05Z".into(),
            reason: "StreamLoadFailed".into(),
            exit_code: 1,
            message: "the sink refused the load".into(),
        }),
    )
    .await?;
    let pod = runner_pod(&bed, "s").await?;
    crash_loop(&bed, &pod, 1).await?;
    bed.reconcile("s", &ctx).await?;
    let status = bed.status("s").await?;
    assert_eq!(status.consumer_id.as_deref(), Some("s"), "{status:?}");
    assert_ne!(status.phase, Some(Phase::Reinitializing), "{status:?}");
    let (_, reason, _) = ready(&status);
    assert_eq!(reason, "RunnerFailed");

    // Meanwhile Doris's clock reaches the TTL (86400 s) past the checkpoint's offset.
    advance_doris_clock(&bed, 86_400).await?;
    bed.reconcile("s", &ctx).await?;
    let why = "the oldest change still needed is older than the changelog TTL (86400s): headroom ";
    assert_reinitializing_on_expiry(&bed.status("s").await?, why);
    reinitialized_on_expiry(&bed, &ctx, why).await?;
    let cm = bed.configmaps.get("s-checkpoint").await?;
    assert!(!cm.data.unwrap_or_default().contains_key("checkpoint.json"));
    Ok(())
}

#[tokio::test]
async fn on_offset_expired_fail_ends_failed_and_touches_nothing() -> Result<()> {
    let bed = Bed::start().await?;
    let ctx = Arc::new(Context::new(bed.client.clone(), None));
    bed.streaming_sync("s", OnOffsetExpired::Fail, &ctx).await?;
    let deployments: Api<Deployment> = Api::default_namespaced(bed.client.clone());
    assert!(deployments.get_opt("s-runner").await?.is_some());

    // Full headroom by Doris's clock: the runner's stop record alone says the offset expired.
    bed.save_checkpoint("s", true).await?;
    bed.reconcile("s", &ctx).await?;
    let expected = "the runner reports the offset expired: the changelog window from 2026-11-29 13:00:00 starts within 60s of the TTL; onOffsetExpired is fail, so nothing was touched: set onOffsetExpired: reinitialize or change spec.reinitNonce to start again";
    let check_failed = async || -> Result<()> {
        let status = bed.status("s").await?;
        assert_eq!(status.phase, Some(Phase::Failed), "{status:?}");
        assert_eq!(
            ready(&status),
            (
                "False".to_owned(),
                "OffsetExpired".to_owned(),
                expected.to_owned()
            )
        );
        let error = status.last_error.clone().expect("lastError");
        assert_eq!(
            (error.reason.as_deref(), error.message.as_deref()),
            (Some("OffsetExpired"), Some(expected))
        );
        let offset = get_condition(&status.conditions, "OffsetHealthy").expect("OffsetHealthy");
        assert_eq!(
            (offset.status.as_str(), offset.reason.as_str()),
            ("False", "OffsetExpired")
        );
        // Nothing touched: same consumer, no reinit, the checkpoint kept; the runner is stopped.
        assert_eq!(status.consumer_id.as_deref(), Some("s"));
        assert_eq!(status.last_reinit, None);
        let cm = bed.configmaps.get("s-checkpoint").await?;
        let text = cm.data.unwrap_or_default()["checkpoint.json"].clone();
        let checkpoint: serde_json::Value = serde_json::from_str(&text)?;
        assert_eq!(checkpoint["consumerId"], "s");
        assert!(deployments.get_opt("s-runner").await?.is_none());
        Ok(())
    };
    check_failed().await?;
    let events = events_about(&bed.client, "s", "OffsetExpired").await?;
    assert_eq!(events, vec![("Warning".to_owned(), expected.to_owned())]);

    // The stop record goes (a person started the runner by hand, which claimed the checkpoint):
    // the sync stays Failed until a person changes the spec, and says so once.
    bed.save_checkpoint("s", false).await?;
    for _ in 0..3 {
        bed.reconcile("s", &ctx).await?;
        check_failed().await?;
    }
    assert_eq!(
        events_about(&bed.client, "s", "OffsetExpired").await?.len(),
        1
    );
    assert!(
        events_about(&bed.client, "s", "Reinitialized")
            .await?
            .is_empty()
    );

    // What the message offers: onOffsetExpired: reinitialize starts again under the next
    // consumer (a new reinitNonce does too: e2e expiry_fail_then_nonce).
    bed.api
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"onOffsetExpired": "reinitialize"}})),
        )
        .await?;
    let status = until_s_r1(&bed, &ctx).await?;
    assert_eq!(
        status.last_reinit.and_then(|r| r.reason).as_deref(),
        Some("OffsetExpired")
    );
    let events = events_about(&bed.client, "s", "Reinitialized").await?;
    assert_eq!(
        events,
        vec![(
            "Warning".to_owned(),
            format!(
                "onOffsetExpired is now reinitialize; the sync had failed: {expected}; starting again as consumer s-r1"
            )
        )]
    );
    Ok(())
}

#[tokio::test]
async fn a_runner_pod_that_does_not_go_is_forced_off_and_the_reinit_completes() -> Result<()> {
    let bed = Bed::start().await?;
    let mut ctx = Context::new(bed.client.clone(), None);
    ctx.pod_wait_margin = Duration::from_secs(2);
    let ctx = Arc::new(ctx);
    bed.create_sync("s").await?;
    for _ in 0..3 {
        bed.reconcile("s", &ctx).await?;
    }
    bed.save_checkpoint("s", true).await?;
    // What a surviving runner would hold: the checkpoint ConfigMap as it loaded it.
    let held = bed.configmaps.get("s-checkpoint").await?;
    // The Deployment's own pods go at once (no kubelet runs them): delete it and let them go
    // first, so the stop waits for the held pod alone.
    let deployments: Api<Deployment> = Api::default_namespaced(bed.client.clone());
    deployments.delete("s-runner", &Default::default()).await?;
    poll(
        "the Deployment's pods gone",
        Duration::from_secs(30),
        async || {
            let list = bed
                .pods
                .list(&kube::api::ListParams::default().labels("dcs.dev/sync=s"))
                .await?;
            Ok(list.items.is_empty().then_some(()))
        },
    )
    .await?;
    // A runner pod that does not go away: a CrashLoopBackOff pod whose deletion its kubelet has
    // not processed (here a finalizer holds it), with a 1 s grace period.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "s-runner-held",
                     "labels": {"dcs.dev/sync": "s", "app.kubernetes.io/managed-by": "dcs-operator"},
                     "finalizers": ["test.dcs.dev/hold"]},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "runner", "image": "dcs-runner"}]},
    }))?;
    bed.pods.create(&PostParams::default(), &pod).await?;

    // The first pass stops the runner and waits, saying what for and until when.
    bed.reconcile("s", &ctx).await?;
    let status = bed.status("s").await?;
    assert_eq!(status.phase, Some(Phase::Reinitializing));
    assert_eq!(
        status.consumer_id.as_deref(),
        Some("s"),
        "nothing changed yet"
    );
    let (ready_status, reason, message) = ready(&status);
    assert_eq!(
        (ready_status.as_str(), reason.as_str()),
        ("False", "Reinitializing")
    );
    let sync = bed.api.get("s").await?;
    let mark: serde_json::Value = serde_json::from_str(&sync.annotations()["dcs.dev/stopping"])?;
    let since: k8s_openapi::jiff::Timestamp = mark["since"].as_str().unwrap().parse()?;
    let deadline = since + k8s_openapi::jiff::SignedDuration::from_secs(3);
    assert_eq!(
        message,
        format!(
            "the runner reports the offset expired: the changelog window from 2026-11-29 13:00:00 starts within 60s of the TTL; re-initialising: waiting for the runner pod(s) s-runner-held of consumer s to stop before reading its checkpoint, until {deadline} (their grace period and a margin); then they are deleted with gracePeriodSeconds 0"
        )
    );
    assert_eq!(
        events_about(&bed.client, "s", "Reinitializing")
            .await?
            .len(),
        1
    );
    let cm = bed.configmaps.get("s-checkpoint").await?;
    assert_eq!(
        cm.annotations().get("dcs.dev/fenced").cloned(),
        Some(format!("reinitializing consumer s since {since}"))
    );
    assert!(cm.data.unwrap_or_default().contains_key("checkpoint.json"));

    // Meanwhile the runner restarts and claims its checkpoint, which clears its stop record, and
    // the operator restarts (its memory is gone): the reinit goes on, measured from the same start.
    bed.save_checkpoint("s", false).await?;
    let ctx = {
        let mut fresh = Context::new(bed.client.clone(), None);
        fresh.pod_wait_margin = Duration::from_secs(2);
        Arc::new(fresh)
    };
    let status = until_s_r1(&bed, &ctx).await?;
    assert_eq!(
        status.last_reinit.and_then(|r| r.reason).as_deref(),
        Some("OffsetExpired")
    );
    let forced = events_about(&bed.client, "s", "RunnerPodsForceDeleted").await?;
    assert_eq!(
        forced,
        vec![(
            "Warning".to_owned(),
            format!(
                "runner pod(s) s-runner-held did not stop within their grace period and a 2s margin (until {deadline}): deleted them with gracePeriodSeconds 0 and went on; s-runner-held still listed (a finalizer or an unreachable node): the checkpoint ConfigMap fence keeps it from saving or committing, and a load it pre-commits is left to Doris's transaction timeout"
            )
        )]
    );
    let still = bed.pods.get("s-runner-held").await?;
    assert_eq!(still.metadata.deletion_grace_period_seconds, Some(0));
    // The fence: the surviving runner's next save (a replace with the version it loaded) fails.
    let late = bed
        .configmaps
        .replace("s-checkpoint", &PostParams::default(), &held)
        .await;
    match late {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 409, "{e:?}"),
        other => panic!("a stale save must conflict, got {other:?}"),
    }
    let cm = bed.configmaps.get("s-checkpoint").await?;
    assert!(!cm.data.unwrap_or_default().contains_key("checkpoint.json"));
    assert_eq!(
        events_about(&bed.client, "s", "Reinitialized").await?.len(),
        1
    );

    // Let the pod go.
    bed.pods
        .patch(
            "s-runner-held",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    Ok(())
}

/// The real watch loop: a checkpoint that says OffsetExpired, and a runner pod exiting with code 3,
/// each start the reinit without waiting for a periodic requeue (60 s for a healthy streaming sync).
#[tokio::test]
async fn the_controller_reinitializes_on_the_checkpoint_or_a_pod_exiting_with_code_3() -> Result<()>
{
    let bed = Bed::start().await?;
    let ctx = Arc::new(Context::new(bed.client.clone(), None));
    let loop_ = tokio::spawn(controller::run(
        bed.client.clone(),
        Some(bed.namespace()),
        ctx,
        Arc::new(Metrics::default()),
    ));
    let deployments: Api<Deployment> = Api::default_namespaced(bed.client.clone());
    for name in ["a", "b"] {
        bed.create_sync(name).await?;
        poll("the runner launched", Duration::from_secs(30), async || {
            Ok(deployments
                .get_opt(&format!("{name}-runner"))
                .await?
                .map(|_| ()))
        })
        .await?;
        bed.save_checkpoint(name, false).await?;
        poll("Streaming", Duration::from_secs(30), async || {
            Ok((bed.status(name).await?.phase == Some(Phase::Streaming)).then_some(()))
        })
        .await?;
    }
    // Under 60 s, the periodic requeue of a healthy sync: only the watches can trigger these.
    let prompt = Duration::from_secs(45);

    // a: the runner's stop record in the checkpoint ConfigMap.
    bed.save_checkpoint("a", true).await?;
    let status = poll("a re-initialised", prompt, async || {
        let s = bed.status("a").await?;
        Ok((s.consumer_id.as_deref() == Some("a-r1")).then_some(s))
    })
    .await?;
    assert_eq!(
        status.last_reinit.and_then(|r| r.reason).as_deref(),
        Some("OffsetExpired")
    );

    // b: its pod exits with code 3 and is restarted into CrashLoopBackOff (as a kubelet reports it).
    let pod = poll("b's runner pod", Duration::from_secs(30), async || {
        let list = bed
            .pods
            .list(&kube::api::ListParams::default().labels("dcs.dev/sync=b"))
            .await?;
        Ok(list.items.into_iter().next())
    })
    .await?;
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    bed.pods
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"containerStatuses": [{
                "name": "runner", "image": "dcs-runner", "imageID": "", "ready": false,
                "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
                "lastState": {"terminated": {"exitCode": 3, "reason": "Error",
                                             "startedAt": now, "finishedAt": now}},
            }]}})),
        )
        .await?;
    let status = poll("b re-initialised", prompt, async || {
        let s = bed.status("b").await?;
        Ok((s.consumer_id.as_deref() == Some("b-r1")).then_some(s))
    })
    .await?;
    let reinit = status.last_reinit.expect("lastReinit");
    assert_eq!(reinit.reason.as_deref(), Some("OffsetExpired"));
    let events = events_about(&bed.client, "b", "Reinitialized").await?;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].1.starts_with(&format!(
            "the runner reports the offset expired: pod {} exited with code 3 (Error)",
            pod.name_any()
        )),
        "{}",
        events[0].1
    );
    loop_.abort();
    Ok(())
}

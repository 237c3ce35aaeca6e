//! Leader election against the test bed's control plane: one leader at a time, take-over after a release or a crash,
//! and the binary releasing its Lease on SIGTERM.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::Result;
use dcs_operator::leader::{LeaderElector, LeaseConfig, Outcome};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tokio::{sync::oneshot, time::Instant};

use crate::common;

use common::install_crd;

fn config(client: &Client, identity: &str) -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_secs(3),
        renew_interval: Duration::from_millis(200),
        renew_deadline: Duration::from_secs(2),
        ..LeaseConfig::new("dcs-operator", client.default_namespace(), identity)
    }
}

async fn holder(client: &Client) -> Result<Option<String>> {
    let lease = Api::<Lease>::default_namespaced(client.clone())
        .get_opt("dcs-operator")
        .await?;
    Ok(lease
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// Starts a candidate whose work runs until `stop` fires; `leading` is set while it leads.
fn candidate(
    client: &Client,
    identity: &str,
) -> (
    Arc<AtomicBool>,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<Outcome<()>>,
) {
    let leading = Arc::new(AtomicBool::new(false));
    let (stop, stopped) = oneshot::channel::<()>();
    let elector = LeaderElector::new(client.clone(), config(client, identity));
    let flag = leading.clone();
    let on = leading.clone();
    let task = tokio::spawn(async move {
        let outcome = elector
            .lead(
                std::future::pending(),
                move || on.store(true, Ordering::SeqCst),
                async move {
                    let _ = stopped.await;
                },
            )
            .await;
        flag.store(false, Ordering::SeqCst);
        outcome
    });
    (leading, stop, task)
}

async fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Candidate {
    name: &'static str,
    leading: Arc<AtomicBool>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Outcome<()>>,
}

fn start(client: &Client, name: &'static str) -> Candidate {
    let (leading, stop, task) = candidate(client, name);
    Candidate {
        name,
        leading,
        stop: Some(stop),
        task,
    }
}

#[tokio::test]
async fn exactly_one_leads_and_the_other_takes_over() -> Result<()> {
    let bed = common::bed("leader").await?;
    let client = bed.client.clone();

    let mut candidates = vec![start(&client, "a"), start(&client, "b")];
    wait_for("a leader", Duration::from_secs(10), || {
        candidates.iter().any(|c| c.leading.load(Ordering::SeqCst))
    })
    .await;
    let leader_at = candidates
        .iter()
        .position(|c| c.leading.load(Ordering::SeqCst))
        .unwrap();
    let mut leader = candidates.remove(leader_at);
    let mut other = candidates.remove(0);
    assert_eq!(holder(&client).await?.as_deref(), Some(leader.name));
    // For several lease durations the leader keeps renewing and the other never leads.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        assert!(
            leader.leading.load(Ordering::SeqCst),
            "the leader stepped down"
        );
        assert!(!other.leading.load(Ordering::SeqCst), "two leaders at once");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(holder(&client).await?.as_deref(), Some(leader.name));

    // The leader stops gracefully: it releases the Lease at once and the other takes over well
    // before the 3 s lease would have expired.
    leader.stop.take().unwrap().send(()).ok();
    assert_eq!(leader.task.await?, Outcome::Finished(()));
    let released = Instant::now();
    wait_for("the take-over", Duration::from_secs(10), || {
        other.leading.load(Ordering::SeqCst)
    })
    .await;
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "{:?}",
        released.elapsed()
    );
    assert_eq!(holder(&client).await?.as_deref(), Some(other.name));

    // The new leader crashes (no release): a third candidate takes over once the Lease expired.
    other.task.abort();
    let _ = (&mut other.task).await;
    let crashed = Instant::now();
    let c = start(&client, "c");
    wait_for(
        "the take-over after expiry",
        Duration::from_secs(10),
        || c.leading.load(Ordering::SeqCst),
    )
    .await;
    assert!(
        crashed.elapsed() >= Duration::from_millis(2500),
        "{:?}",
        crashed.elapsed()
    );
    let lease = Api::<Lease>::default_namespaced(client.clone())
        .get("dcs-operator")
        .await?
        .spec
        .unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("c"));
    assert_eq!(lease.lease_transitions, Some(1));
    c.task.abort();
    Ok(())
}

/// When each candidate led, on the test's monotonic clock: `(name, start, end)`.
type Spans = Arc<std::sync::Mutex<Vec<(String, Instant, Option<Instant>)>>>;

/// Records the end of a span when the work is dropped: stepped down, finished or crashed.
struct EndsSpan {
    spans: Spans,
    index: usize,
}

impl Drop for EndsSpan {
    fn drop(&mut self) {
        let mut spans = self.spans.lock().unwrap();
        spans[self.index].2 = Some(Instant::now());
    }
}

/// A candidate through `client` that leads (recording its span) until it loses the Lease or its
/// task is aborted (a crash: no release).
fn spanning_candidate(
    client: &Client,
    config: LeaseConfig,
    spans: &Spans,
) -> tokio::task::JoinHandle<Outcome<()>> {
    let elector = LeaderElector::new(client.clone(), config);
    let name = elector.config().identity.clone();
    let spans = spans.clone();
    tokio::spawn(async move {
        let started = std::sync::Mutex::new(None);
        elector
            .lead(
                std::future::pending(),
                || {
                    let mut all = spans.lock().unwrap();
                    all.push((name.clone(), Instant::now(), None));
                    *started.lock().unwrap() = Some(all.len() - 1);
                },
                async {
                    let index = started.lock().unwrap().expect("on_lead ran first");
                    let _end = EndsSpan {
                        spans: spans.clone(),
                        index,
                    };
                    std::future::pending::<()>().await
                },
            )
            .await
    })
}

fn assert_never_two_at_once(spans: &Spans) {
    let spans = spans.lock().unwrap().clone();
    for (i, (a, a_start, a_end)) in spans.iter().enumerate() {
        for (b, b_start, b_end) in &spans[i + 1..] {
            let a_end = a_end.unwrap_or_else(Instant::now);
            let b_end = b_end.unwrap_or_else(Instant::now);
            assert!(
                a_end <= *b_start || b_end <= *a_start,
                "{a} and {b} led at once: {spans:?}"
            );
        }
    }
}

#[tokio::test]
async fn racing_candidates_never_lead_at_once_while_leaders_crash() -> Result<()> {
    let bed = common::bed("leader").await?;
    let client = bed.client.clone();
    let spans = Spans::default();
    let mut tasks: Vec<_> = (0..4)
        .map(|i| spanning_candidate(&client, config(&client, &format!("racer-{i}")), &spans))
        .collect();
    for round in 1..=3 {
        wait_for(
            &format!("leader number {round}"),
            Duration::from_secs(20),
            || spans.lock().unwrap().len() == round,
        )
        .await;
        let leader = spans.lock().unwrap()[round - 1].0.clone();
        assert_eq!(holder(&client).await?.as_deref(), Some(leader.as_str()));
        tokio::time::sleep(Duration::from_millis(500)).await;
        // The leader crashes: no release, the others must wait out the Lease.
        let i: usize = leader["racer-".len()..].parse()?;
        tasks[i].abort();
        let _ = (&mut tasks[i]).await;
    }
    wait_for("a fourth leader", Duration::from_secs(20), || {
        spans.lock().unwrap().len() == 4
    })
    .await;
    assert_never_two_at_once(&spans);
    let names: std::collections::BTreeSet<String> =
        spans.lock().unwrap().iter().map(|s| s.0.clone()).collect();
    assert_eq!(names.len(), 4, "every racer led once: {names:?}");
    for t in tasks {
        t.abort();
    }
    Ok(())
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_steps_down_before_another_takes_over() -> Result<()> {
    let bed = common::bed("leader").await?;
    let client = bed.client.clone();
    // The leader reaches the API server through a proxy that will hold every answer back (a
    // stalled server or a partition: its renew calls hang instead of failing).
    let proxy = dcs_kube_bed::FaultProxy::start(bed.cp.address).await?;
    let cut_client = dcs_kube_bed::control_plane::client_from_kubeconfig(
        &bed.cp.kubeconfig_via(&bed.name, proxy.address),
    )
    .await?;
    let timings = |identity: &str| LeaseConfig {
        lease_duration: Duration::from_secs(6),
        renew_interval: Duration::from_millis(200),
        renew_deadline: Duration::from_secs(2),
        ..LeaseConfig::new("dcs-operator", &bed.name, identity)
    };
    let spans = Spans::default();
    let leader = spanning_candidate(&cut_client, timings("cut-off"), &spans);
    wait_for("the first leader", Duration::from_secs(20), || {
        spans.lock().unwrap().len() == 1
    })
    .await;
    let standby = spanning_candidate(&client, timings("standby"), &spans);
    // Let the standby see the leader renew a few times, then cut the leader off.
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.set_delay(Duration::from_secs(3600));
    let cut = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(60), leader).await??;
    let Outcome::Lost(why) = outcome else {
        panic!("the cut-off leader ended with {outcome:?}");
    };
    assert!(
        why.contains("not renewed within the 2s renew deadline"),
        "{why}"
    );
    wait_for("the standby's take-over", Duration::from_secs(60), || {
        spans.lock().unwrap().len() == 2
    })
    .await;
    assert_never_two_at_once(&spans);
    let all = spans.lock().unwrap().clone();
    assert_eq!(
        (all[0].0.as_str(), all[1].0.as_str()),
        ("cut-off", "standby")
    );
    // The standby waited out the lease from the last renewal it saw, not just the stall.
    assert!(all[1].1 >= cut + Duration::from_secs(5), "{all:?}");
    assert_eq!(holder(&client).await?.as_deref(), Some("standby"));
    standby.abort();
    Ok(())
}

#[tokio::test]
async fn the_binary_leads_and_releases_the_lease_on_sigterm() -> Result<()> {
    let bed = common::bed("leader").await?;
    let client = bed.client.clone();
    install_crd(&client).await?;
    let dir = std::env::temp_dir().join(format!("dcs-operator-leader-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, bed.kubeconfig())?;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dcs-operator"))
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", "operator-0")
        .env("POD_NAMESPACE", &bed.name)
        // The control plane is shared with the other tests: only this test's namespace.
        .env("DCS_NAMESPACES", &bed.name)
        .args([
            "--leader-election",
            "--leader-election-lease",
            "dcs-operator",
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
        ])
        .kill_on_drop(true)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while holder(&client).await?.as_deref() != Some("operator-0") {
        assert!(
            Instant::now() < deadline,
            "the binary did not take the Lease"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let http = dcs_doris_client::tls::plain_http_client(reqwest::Client::builder()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(r) = http
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await
            && let Ok(body) = r.text().await
            && body == "ok: leader"
        {
            break;
        }
        assert!(Instant::now() < deadline, "/readyz never said leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = http
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    assert!(
        metrics.lines().any(|l| l == "dcs_operator_leader 1"),
        "{metrics}"
    );

    let pid = child.id().expect("a pid").to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()?;
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(20), child.wait()).await??;
    assert_eq!(exit.code(), Some(0));
    assert_eq!(holder(&client).await?, None, "the Lease was not released");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

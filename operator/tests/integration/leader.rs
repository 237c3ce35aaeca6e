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

#[tokio::test]
async fn racing_candidates_cannot_both_win_an_expired_lease() -> Result<()> {
    let bed = common::bed("leader").await?;
    let client = bed.client.clone();
    let electors: Vec<LeaderElector> = (0..4)
        .map(|i| LeaderElector::new(client.clone(), config(&client, &format!("racer-{i}"))))
        .collect();
    for round in 0..3 {
        if round > 0 {
            // Expire the Lease of the previous winner.
            tokio::time::sleep(Duration::from_millis(3100)).await;
        }
        let results =
            futures::future::join_all(electors.iter().map(|e| e.try_acquire_or_renew())).await;
        let winners: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Ok(true)))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert_eq!(
            holder(&client).await?,
            Some(format!("racer-{}", winners[0]))
        );
    }
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
    let http = reqwest::Client::new();
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

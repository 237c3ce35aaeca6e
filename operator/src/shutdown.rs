//! Stopping on SIGTERM within a bound.
//!
//! The controllers drain gracefully on the signal (kube-runtime), but that drain can wait forever:
//! a signal that arrives before a controller's first list has filled its store leaves the
//! controller waiting for a store that will never be ready. A pod that does not stop holds the
//! leader Lease until the kubelet kills it, and the next operator waits out the Lease. So the
//! work gets [`DRAIN_GRACE`] after the signal, then is dropped, and the Lease is released.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tracing::warn;

/// How long the controllers may drain after the signal: well inside a pod's default
/// `terminationGracePeriodSeconds` (30 s), leaving time to release the Lease.
pub const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// A shutdown request every part of the process can wait on (cheap to clone).
#[derive(Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

impl Shutdown {
    /// Listens for SIGTERM and Ctrl-C from now on.
    pub fn on_signals() -> Self {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            signal().await;
            let _ = tx.send(true);
        });
        Self { rx }
    }

    /// A shutdown that fires when `trigger` completes (tests, embedding).
    pub fn on(trigger: impl Future<Output = ()> + Send + 'static) -> Self {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            trigger.await;
            let _ = tx.send(true);
        });
        Self { rx }
    }

    /// Completes once shutdown was requested (at once if it already was).
    pub fn requested(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.rx.clone();
        async move {
            // An error means the sender is gone without a request: never fires.
            if rx.wait_for(|asked| *asked).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Runs `work` to its end, or until `grace` after `shutdown` was requested; `None` when the grace
/// ran out (the work is dropped).
pub async fn drained<T>(
    work: impl Future<Output = T>,
    shutdown: &Shutdown,
    grace: Duration,
) -> Option<T> {
    let deadline = {
        let requested = shutdown.requested();
        async move {
            requested.await;
            tokio::time::sleep(grace).await;
        }
    };
    tokio::select! {
        out = work => Some(out),
        () = deadline => {
            warn!(grace_s = grace.as_secs(), "the controllers did not stop within the grace after the signal; stopping them");
            None
        }
    }
}

/// SIGTERM or Ctrl-C.
async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_that_never_ends_is_dropped_one_grace_after_the_request() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown = Shutdown::on(async move {
            let _ = rx.await;
        });
        let start = tokio::time::Instant::now();
        let run = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { drained(std::future::pending::<()>(), &shutdown, DRAIN_GRACE).await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!run.is_finished(), "no request yet: the work goes on");
        tx.send(()).unwrap();
        assert_eq!(run.await.unwrap(), None);
        assert_eq!(start.elapsed(), Duration::from_secs(60) + DRAIN_GRACE);
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_drains_in_time_keeps_its_result() {
        let shutdown = Shutdown::on(async {});
        let requested = shutdown.requested();
        let work = async move {
            requested.await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            7
        };
        assert_eq!(drained(work, &shutdown, DRAIN_GRACE).await, Some(7));
    }
}

//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::Duration;

use anyhow::Result;

/// Upper bound of every wait in the tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// The code and reason of an API error.
pub fn api_code(e: &kube::Error) -> Option<(u16, String)> {
    match e {
        kube::Error::Api(s) => Some((s.code, s.reason.clone())),
        _ => None,
    }
}

/// Polls `f` until it returns true, for at most [`WAIT`].
pub async fn eventually<F, Fut>(what: &str, mut f: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("timed out waiting for {what}")
}

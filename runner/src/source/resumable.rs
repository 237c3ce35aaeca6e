//! Reading one statement's result into a channel, reading it again where a DoGet stream broke
//! (the decisions are in [`super::resume`]).

use arrow_array::RecordBatch;
use futures::TryStreamExt;
use tokio::sync::mpsc;

use super::flight::FlightSession;
use super::resume::{Delivered, Replay, is_stream_interruption};
use crate::settings::StreamRetry;
use crate::{Error, Result};

/// What reading one statement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Streamed {
    /// Rows handed downstream (once each, with [`Replay::SkipDelivered`]).
    pub rows: u64,
    /// Re-reads after broken streams.
    pub retries: u32,
    /// False when the receiver went away first.
    pub delivered: bool,
}

/// How one statement is read.
#[derive(Debug, Clone, Copy)]
pub struct ReadPlan<'a> {
    /// The statement.
    pub sql: &'a str,
    /// What is read, for logs and errors (`snapshot split 2`, `changelog window stream-…`).
    pub what: &'a str,
    /// How a broken stream is read again.
    pub replay: Replay,
    /// How often and how soon.
    pub retry: StreamRetry,
    /// Leading rows of the result already delivered before this read (a changelog window resumed
    /// inside): skipped.
    pub skip: u64,
}

/// Run `plan.sql` on `session` and send every batch (checked by `validate`, wrapped by `wrap`) to
/// `tx`. A broken DoGet stream is read again after a back-off, up to `plan.retry.max_retries`
/// times, continuing after the rows already sent (see [`Replay`]).
///
/// # Errors
/// The last interruption once the retries are used up, a re-read that differs from what was
/// sent, or any other error at once.
pub async fn read_into<T>(
    session: &mut FlightSession,
    plan: ReadPlan<'_>,
    mut validate: impl FnMut(&RecordBatch) -> Result<()>,
    tx: &mpsc::Sender<T>,
    wrap: impl Fn(RecordBatch) -> T,
) -> Result<Streamed> {
    let mut sent = Delivered::skipping(plan.skip);
    let mut retries = 0;
    let mut interruption: Option<Error> = None;
    loop {
        let mut resume = sent.resume(plan.replay);
        let attempt = async {
            let mut stream = session.query(plan.sql).await?;
            while let Some(batch) = stream.try_next().await? {
                let batch = match resume.feed(batch) {
                    Ok(Some(b)) => b,
                    Ok(None) => continue,
                    Err(m) => return Err(mismatch(plan.what, interruption.as_ref(), &m)),
                };
                validate(&batch)?;
                sent.record(&batch);
                if tx.send(wrap(batch)).await.is_err() {
                    return Ok(false);
                }
            }
            resume
                .finish()
                .map_err(|m| mismatch(plan.what, interruption.as_ref(), &m))?;
            Ok(true)
        }
        .await;
        match attempt {
            Ok(delivered) => {
                return Ok(Streamed {
                    rows: sent.rows(),
                    retries,
                    delivered,
                });
            }
            Err(e) if is_stream_interruption(&e) => {
                retries += 1;
                let Some(delay) = plan.retry.delay(retries) else {
                    return Err(e);
                };
                tracing::warn!(
                    what = plan.what,
                    error = %e,
                    rows_sent = sent.rows(),
                    retry = retries,
                    ?delay,
                    "the result stream broke; reading it again"
                );
                interruption = Some(e);
                tokio::time::sleep(delay).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn mismatch(what: &str, interruption: Option<&Error>, m: &super::resume::Mismatch) -> Error {
    Error::UnexpectedResult {
        context: what.to_owned(),
        reason: match interruption {
            Some(e) => format!("the result stream broke ({e}) and {m}"),
            None => m.to_string(),
        },
    }
}

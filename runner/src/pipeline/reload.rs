//! Making lost loads again ([`super::repair`]'s `Reload`): the changelog windows their rows came
//! from are read again, and the rows of the lost loads, found by their index, are loaded again
//! under the next checkpoint id.

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::CHANNEL_CAPACITY;
use super::loads::Loads;
use super::reading::after_seam;
use super::repair;
use super::rows::{SLICE_ROWS, with_changes};
use crate::checkpoint::{LoadsSource, PendingTxn, RowSpan};
use crate::sink::batcher::Batcher;
use crate::sink::{LoadBatch, Sink};
use crate::source::changelog::{ChangelogEvent, ChangelogReader};
use crate::{Error, Result};

impl<K: Sink> Loads<K> {
    /// Read `source`'s windows again with `reader` and load the rows of `spans` under the next
    /// checkpoint id, one load per span (split when a span outgrows a batch); returns the
    /// pre-committed loads. The rows are found by their index among the rows handed to the sink
    /// since `source.from`, the way [`super::ledger`] counted them: after the seam (`seam_tso`,
    /// an `initial` sync's start point), in the windows' order.
    pub(super) async fn reload(
        &mut self,
        mut reader: ChangelogReader,
        seam_tso: Option<i64>,
        source: &LoadsSource,
        spans: &[RowSpan],
    ) -> Result<Vec<PendingTxn>> {
        let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
        let windows = source.windows.clone();
        let replay = tokio::spawn(async move {
            let result = reader.replay(&windows, &tx).await;
            reader.close().await;
            result
        });
        let until = repair::needed_until(spans);
        let encoding = self.sink.encoding();
        let limits = self.sink.limits();
        let mut reloaded = Vec::new();
        let mut index = 0;
        let mut seq = self.seq;
        let id = self.next_id;
        while index < until {
            let Some(event) = rx.recv().await else {
                break;
            };
            let ChangelogEvent::Batch(batch) = event else {
                continue;
            };
            let Some(batch) = after_seam(batch, seam_tso)? else {
                continue;
            };
            let n = batch.num_rows() as u64;
            for (offset, len) in repair::select(spans, index, n) {
                // One span, one load (or several if it outgrows a batch).
                let mut done = 0;
                while done < len {
                    let mut batcher = Batcher::new(limits);
                    let mut origins = Vec::new();
                    let mut taken = 0;
                    while done + taken < len {
                        let room = usize::try_from(batcher.room()).unwrap_or(usize::MAX);
                        let take = room.min(len - done - taken).min(SLICE_ROWS);
                        if take == 0 {
                            break;
                        }
                        let slice = batch.slice(offset + done + taken, take);
                        batcher.append(Instant::now().into_std(), |out| {
                            with_changes(&slice, true, None, |data, changes| {
                                let encoded = encoding.encode(data, changes, out)?;
                                origins.extend(encoding.written_origins(
                                    changes,
                                    data.num_rows(),
                                    None,
                                ));
                                Ok(encoded)
                            })
                        })?;
                        taken += take;
                        if batcher.flush_reason(Instant::now().into_std()).is_some() {
                            break;
                        }
                    }
                    let Some(body) = batcher.take() else {
                        break;
                    };
                    let load = LoadBatch {
                        body: body.body,
                        origins,
                    };
                    let result = self.sink.load(load, id, seq).await?;
                    seq += result.labels.max(1);
                    let rows = Some(RowSpan {
                        first: index + (offset + done) as u64,
                        count: taken as u64,
                    });
                    reloaded.extend(result.pending.map(|txn| PendingTxn { rows, ..txn }));
                    if let Some(refused) = result.dead_letter {
                        reloaded.extend(refused.pending.map(|txn| PendingTxn { rows, ..txn }));
                    }
                    done += taken;
                }
            }
            index += n;
        }
        drop(rx);
        match replay.await {
            Ok(Ok(())) | Err(_) => {}
            Ok(Err(e)) if index < until => return Err(e),
            Ok(Err(_)) => {}
        }
        if index < until {
            return Err(Error::LoadsLost {
                labels: format!("{} load(s)", spans.len()),
                doris: "aborted before the commit".into(),
                reason: format!(
                    "reading their changelog windows again returned {index} rows where they held rows up to {until}"
                ),
            });
        }
        self.seq = seq;
        Ok(reloaded)
    }
}

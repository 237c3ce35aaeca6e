//! The changelog phase: `@incr` windows read one after the other from the position's offset,
//! checkpointed between windows (or inside one whose loads reach [`MAX_PENDING_LOADS`]), until
//! stopped or failed.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::loads::slice_rows;
use super::reading::after_seam;
use super::rows::slices;
use super::{
    CHANNEL_CAPACITY, Flow, MAX_PENDING_LOADS, Outcome, Phase, sleep_until, wait_for_shutdown,
};
use crate::checkpoint::{CheckpointStore, Offset, Position, WindowProgress};
use crate::sink::Sink;
use crate::source::changelog::ChangelogEvent;
use crate::source::fe_http::FeHttpClient;
use crate::source::retention::RetentionGuard;
use crate::{Error, Result};

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    pub(super) async fn changelog_phase(
        &mut self,
        http: FeHttpClient,
        shutdown: &mut watch::Receiver<bool>,
        columns: Vec<String>,
        from: Offset,
    ) -> Result<Outcome> {
        // Nothing is read from the changelog before a rebuilt sink table is in place.
        self.finish_rebuild().await?;
        tracing::info!(from = %from.timestamp, increment_type = ?self.config.changelog.increment_type, "reading the changelog");
        let guard = RetentionGuard::new(http.clone());
        let reader = self.changelog_reader(http, columns).await?;
        let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
        let mut handle = tokio::spawn(reader.run(from.clone(), self.reading.in_window.clone(), tx));
        self.reading.position = Position::Changelog { offset: from };
        self.publishing.progress.phase = Phase::Changelog;
        self.publish();
        let mut due = false;
        let mut stopping = false;
        let outcome = loop {
            let flush_at = self.loads.deadline();
            let mid_window = self.reading.window.is_some();
            tokio::select! {
                biased;
                () = wait_for_shutdown(shutdown), if !stopping => {
                    tracing::info!(mid_window, "stopping: saving a last checkpoint");
                    if !mid_window {
                        self.checkpoint(false).await?;
                        break Ok(Outcome::Stopped);
                    }
                    stopping = true;
                }
                event = rx.recv() => match event {
                    Some(ChangelogEvent::WindowStart { window, skip }) => {
                        self.loads.ledger.window_started(&window, skip);
                        self.reading.window = Some((window, skip));
                    }
                    Some(ChangelogEvent::Batch(batch)) => {
                        self.publishing.progress.ready = true;
                        // In slices of at most a load, so the bound is checked after every load.
                        for slice in slices(&batch, slice_rows(&self.loads.sink.limits())) {
                            if let Some((_, done)) = &mut self.reading.window {
                                *done += slice.num_rows() as u64;
                            }
                            if let Some(slice) = after_seam(slice, self.reading.seam_tso())? {
                                self.rows(&slice, true).await?;
                            }
                            if self.loads.pending.len() >= MAX_PENDING_LOADS {
                                self.checkpoint_inside_window(&guard).await?;
                            }
                        }
                    }
                    Some(ChangelogEvent::WindowDone { window, rows }) => {
                        self.reading.window_closed();
                        tracing::debug!(window = %window.split_id(), rows, "changelog window handed to the sink");
                        self.publishing.progress.ready = true;
                        self.publishing.progress.last_window_seconds =
                            Some((window.end.epoch_ms - window.start.epoch_ms) as f64 / 1000.0);
                        self.publishing.progress.window_end = Some(window.end.clone());
                        self.reading.position = Position::Changelog { offset: window.end };
                        self.saving.changed();
                        self.publish();
                        let at_end = WindowEnd {
                            due,
                            stopping,
                            pending: self.loads.pending.len(),
                            until_timer: self.saving.next_at.saturating_duration_since(Instant::now()),
                            poll: self.config.changelog.poll_interval,
                        };
                        if at_end.checkpoint() {
                            due = false;
                            self.checkpoint(false).await?;
                        }
                        if stopping {
                            break Ok(Outcome::Stopped);
                        }
                    }
                    None => {
                        break Err(match (&mut handle).await {
                            Ok(Err(e)) => e,
                            Ok(Ok(())) => Error::SourceUnavailable {
                                context: "changelog reader".into(),
                                reason: "stopped without an error".into(),
                            },
                            Err(e) => Error::SourceUnavailable {
                                context: "changelog reader".into(),
                                reason: e.to_string(),
                            },
                        });
                    }
                },
                () = sleep_until(flush_at) => self.flush().await?,
                () = tokio::time::sleep_until(self.saving.next_at) => {
                    if mid_window {
                        due = true;
                        self.saving.next_at = Instant::now() + self.config.checkpoint_interval;
                    } else {
                        self.checkpoint(false).await?;
                    }
                }
            }
        };
        handle.abort();
        outcome
    }

    /// A checkpoint inside the window being read, because its loads reached
    /// [`MAX_PENDING_LOADS`]: it records how many of the window's rows are in the sink, and a
    /// restart reads the window on from there. Taken only while the window's start is still in
    /// the changelog (so the rows read so far are all the window has up to there).
    async fn checkpoint_inside_window(&mut self, guard: &RetentionGuard) -> Result<()> {
        let Some((window, done)) = self.reading.window.clone() else {
            return Ok(());
        };
        // Everything read so far goes into loads first, so `done` rows are all in them.
        self.flush().await?;
        guard
            .check(&window.start, std::time::Duration::ZERO)
            .await?;
        tracing::info!(window = %window.split_id(), rows = done, loads = self.loads.pending.len(), "checkpoint inside a changelog window (its loads reached the bound)");
        self.reading.in_window = Some(WindowProgress {
            end: window.end.clone(),
            rows: done,
        });
        self.saving.changed();
        self.checkpoint(false).await
    }
}

/// What decides whether a checkpoint is taken at the end of a changelog window.
#[derive(Debug, Clone, Copy)]
struct WindowEnd {
    /// The checkpoint timer fired while the window was read.
    due: bool,
    /// A stop was asked for while the window was read.
    stopping: bool,
    /// Loads pre-committed since the last checkpoint.
    pending: usize,
    /// Time left until the checkpoint timer fires.
    until_timer: Duration,
    /// `changelog.pollInterval`: about when the next window ends.
    poll: Duration,
}

impl WindowEnd {
    /// Checkpoint now when one is due or a stop waits for it, when the loads reach half the
    /// bound, or when the timer would fire before the next window ends (pure). The last keeps a
    /// change from waiting for two timers, the poll and then the checkpoint: the checkpoint is
    /// taken at the window end just before the timer, so a change is committed within
    /// max(pollInterval, checkpoint.interval) of its commit on the source, plus the commit.
    fn checkpoint(self) -> bool {
        self.due
            || self.stopping
            || self.pending >= MAX_PENDING_LOADS / 2
            || self.until_timer <= self.poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(until_timer_ms: u64, poll_ms: u64) -> WindowEnd {
        WindowEnd {
            due: false,
            stopping: false,
            pending: 1,
            until_timer: Duration::from_millis(until_timer_ms),
            poll: Duration::from_millis(poll_ms),
        }
    }

    #[test]
    fn a_window_end_checkpoints_when_the_timer_would_fire_before_the_next_one() {
        // 1 s poll, 1 s checkpoints: every window end.
        assert!(end(1_000, 1_000).checkpoint());
        assert!(end(300, 1_000).checkpoint());
        // 1 s poll, 10 s checkpoints: only the window end in the last second before the timer.
        assert!(!end(9_100, 1_000).checkpoint());
        assert!(!end(1_001, 1_000).checkpoint());
        assert!(end(999, 1_000).checkpoint());
        // The timer already past (fired late on a loaded machine): at once.
        assert!(end(0, 1_000).checkpoint());
    }

    #[test]
    fn a_window_end_checkpoints_when_due_stopping_or_holding_many_loads() {
        let far = end(60_000, 1_000);
        assert!(!far.checkpoint());
        assert!(WindowEnd { due: true, ..far }.checkpoint());
        assert!(
            WindowEnd {
                stopping: true,
                ..far
            }
            .checkpoint()
        );
        assert!(
            WindowEnd {
                pending: MAX_PENDING_LOADS / 2,
                ..far
            }
            .checkpoint()
        );
        assert!(
            !WindowEnd {
                pending: MAX_PENDING_LOADS / 2 - 1,
                ..far
            }
            .checkpoint()
        );
    }
}

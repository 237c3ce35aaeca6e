//! Resuming a Flight result stream that broke mid-way (pure decisions; the reading loop is
//! [`super::resumable`]).
//!
//! A DoGet stream can break after some of its batches were handed downstream (a BE restart, a
//! network reset, doris-emu's `flight_cut_after_batches`). The reader then runs the same statement
//! again, after a back-off, up to [`StreamRetry::max_retries`] times, and continues from where it
//! was, so the run goes on without losing or repeating rows:
//!
//! - [`Replay::SkipDelivered`]: the rows already handed downstream are skipped in the re-read. Right
//!   when the re-read returns the same rows in the same order: a changelog window (a fixed
//!   `[start, end)` range in TSO, LSN, OP order), or a snapshot split of a tablet that has not
//!   changed since (Doris returns a tablet's rows in key order). To notice a re-read that differs
//!   (the table changed in between), the last delivered row is kept and must be the row at the
//!   same position of the re-read; otherwise the read fails with [`Mismatch`] rather than guess.
//!   Nothing is buffered beyond that one row, so memory stays bounded.
//! - [`Replay::Resend`]: the re-read is delivered from its first row. Only for sinks where a row
//!   written twice is harmless (UNIQUE KEY upserts of snapshot rows), where it is also right when
//!   the table changed in between.

use std::time::Duration;

use arrow_array::RecordBatch;

use super::flight::DO_GET_CONTEXT;
use crate::Error;
use crate::settings::StreamRetry;

/// How a broken result stream is read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Replay {
    /// Skip the rows already delivered (checked on the last one).
    #[default]
    SkipDelivered,
    /// Deliver the re-read from its start (idempotent sinks only).
    Resend,
}

impl StreamRetry {
    /// The delay before re-read `retry` (1-based), or `None` once the retries are used up.
    pub fn delay(&self, retry: u32) -> Option<Duration> {
        if retry == 0 || retry > self.max_retries {
            return None;
        }
        Some(
            self.base
                .saturating_mul(1u32 << (retry - 1).min(16))
                .min(self.max),
        )
    }
}

/// Whether `e` broke a DoGet stream (its request or its batches), so that running the statement
/// again can help. Errors of planning the statement (`GetFlightInfo`: bad SQL, an expired offset,
/// a window not ready) are not: they are Doris's answer to the statement itself.
pub fn is_stream_interruption(e: &Error) -> bool {
    match e {
        Error::Doris { context, .. } | Error::SourceUnavailable { context, .. } => {
            context == DO_GET_CONTEXT
        }
        _ => false,
    }
}

/// What has been handed downstream from one statement's result so far.
#[derive(Debug, Default, Clone)]
pub struct Delivered {
    rows: u64,
    /// The last delivered row, as a one-row batch.
    last_row: Option<RecordBatch>,
}

impl Delivered {
    /// Nothing delivered yet by this read, but its first `rows` rows are delivered already (by an
    /// earlier run, recorded in a checkpoint): they are skipped from the first read on, checked
    /// only by their count.
    pub fn skipping(rows: u64) -> Self {
        Self {
            rows,
            last_row: None,
        }
    }

    /// Rows delivered.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Note `batch` as delivered.
    pub fn record(&mut self, batch: &RecordBatch) {
        let n = batch.num_rows();
        if n == 0 {
            return;
        }
        self.rows += n as u64;
        self.last_row = Some(batch.slice(n - 1, 1));
    }

    /// How to read the statement's result again: skip what was delivered, or (with
    /// [`Replay::Resend`]) start over, forgetting it.
    pub fn resume(&mut self, replay: Replay) -> Resume {
        match replay {
            Replay::SkipDelivered => Resume {
                skip: self.rows,
                seen: 0,
                expect: self.last_row.clone(),
            },
            Replay::Resend => {
                *self = Self::default();
                Resume::default()
            }
        }
    }
}

/// The re-read differs from what was delivered before the stream broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Rows delivered before the break.
    pub delivered: u64,
    /// What the re-read showed.
    pub reason: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "reading it again returned other rows than the {} already delivered ({}); the source \
             changed in between, so the read cannot continue without losing or repeating rows",
            self.delivered, self.reason
        )
    }
}

/// Filters a re-read: drops the rows delivered before, checking the last of them.
#[derive(Debug, Default)]
pub struct Resume {
    /// Rows still to skip.
    skip: u64,
    /// Rows of the re-read seen so far.
    seen: u64,
    /// The row the last skipped one must equal.
    expect: Option<RecordBatch>,
}

impl Resume {
    /// The part of `batch` to deliver (`None`: all of it was delivered before).
    ///
    /// # Errors
    /// [`Mismatch`] when the last skipped row is not the last delivered one.
    pub fn feed(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>, Mismatch> {
        let n = batch.num_rows() as u64;
        let delivered = self.seen + self.skip;
        self.seen += n;
        if self.skip == 0 {
            return Ok(Some(batch));
        }
        let take = self.skip.min(n);
        self.skip -= take;
        if self.skip == 0 {
            let last = batch.slice(usize::try_from(take - 1).unwrap_or(0), 1);
            if self.expect.as_ref().is_some_and(|e| !same_row(e, &last)) {
                return Err(Mismatch {
                    delivered,
                    reason: format!("row {delivered} is not the one delivered there"),
                });
            }
        }
        Ok((take < n).then(|| {
            let from = usize::try_from(take).unwrap_or(usize::MAX);
            batch.slice(from, batch.num_rows() - from)
        }))
    }

    /// Check the re-read's end: it must reach every row delivered before.
    ///
    /// # Errors
    /// [`Mismatch`] when the re-read was shorter.
    pub fn finish(&self) -> Result<(), Mismatch> {
        if self.skip == 0 {
            return Ok(());
        }
        Err(Mismatch {
            delivered: self.seen + self.skip,
            reason: format!("it ended after {} rows", self.seen),
        })
    }
}

/// Two one-row batches hold the same values (names and types included).
fn same_row(a: &RecordBatch, b: &RecordBatch) -> bool {
    a.num_columns() == b.num_columns()
        && a.schema().fields() == b.schema().fields()
        && a.columns()
            .iter()
            .zip(b.columns())
            .all(|(x, y)| x.to_data() == y.to_data())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{Array, Int32Array};
    use arrow_schema::{DataType, Field, Schema};

    fn batch(ids: &[i32]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(ids.to_vec()))]).unwrap()
    }

    fn ids(b: &RecordBatch) -> Vec<i32> {
        let a = b.column(0).as_any().downcast_ref::<Int32Array>().unwrap();
        (0..a.len()).map(|i| a.value(i)).collect()
    }

    #[test]
    fn a_re_read_skips_exactly_the_delivered_rows() {
        let mut d = Delivered::default();
        d.record(&batch(&[1, 2, 3]));
        d.record(&batch(&[4, 5]));
        assert_eq!(d.rows(), 5);
        // The re-read comes in other batch sizes.
        let mut r = d.resume(Replay::SkipDelivered);
        assert_eq!(r.feed(batch(&[1, 2])).unwrap(), None);
        let rest = r.feed(batch(&[3, 4, 5, 6, 7])).unwrap().unwrap();
        assert_eq!(ids(&rest), [6, 7]);
        assert_eq!(ids(&r.feed(batch(&[8])).unwrap().unwrap()), [8]);
        r.finish().unwrap();
        // A boundary exactly at a batch end.
        let mut r = d.resume(Replay::SkipDelivered);
        assert_eq!(r.feed(batch(&[1, 2, 3, 4, 5])).unwrap(), None);
        assert_eq!(ids(&r.feed(batch(&[6])).unwrap().unwrap()), [6]);
        // Nothing delivered: nothing skipped.
        let mut r = Delivered::default().resume(Replay::SkipDelivered);
        assert_eq!(ids(&r.feed(batch(&[1])).unwrap().unwrap()), [1]);
    }

    #[test]
    fn a_re_read_that_differs_is_refused() {
        let mut d = Delivered::default();
        d.record(&batch(&[1, 2, 3]));
        // A row deleted before the break point shifts the rest.
        let mut r = d.resume(Replay::SkipDelivered);
        let e = r.feed(batch(&[1, 3, 4, 5])).unwrap_err();
        assert_eq!(e.delivered, 3);
        assert_eq!(
            e.to_string(),
            "reading it again returned other rows than the 3 already delivered (row 3 is not the \
             one delivered there); the source changed in between, so the read cannot continue \
             without losing or repeating rows"
        );
        // A shorter re-read.
        let mut r = d.resume(Replay::SkipDelivered);
        assert_eq!(r.feed(batch(&[1, 2])).unwrap(), None);
        assert_eq!(r.finish().unwrap_err().reason, "it ended after 2 rows");
    }

    #[test]
    fn resend_starts_over() {
        let mut d = Delivered::default();
        d.record(&batch(&[1, 2, 3]));
        let mut r = d.resume(Replay::Resend);
        assert_eq!(d.rows(), 0);
        assert_eq!(ids(&r.feed(batch(&[1, 9])).unwrap().unwrap()), [1, 9]);
        r.finish().unwrap();
    }

    #[test]
    fn retries_back_off_and_run_out() {
        let p = StreamRetry {
            max_retries: 3,
            base: Duration::from_millis(100),
            max: Duration::from_millis(250),
        };
        assert_eq!(p.delay(1), Some(Duration::from_millis(100)));
        assert_eq!(p.delay(2), Some(Duration::from_millis(200)));
        assert_eq!(p.delay(3), Some(Duration::from_millis(250)));
        assert_eq!(p.delay(4), None);
        let never = StreamRetry {
            max_retries: 0,
            ..p
        };
        assert_eq!(never.delay(1), None);
    }

    #[test]
    fn only_do_get_failures_are_interruptions() {
        let cut = Error::Doris {
            context: DO_GET_CONTEXT.into(),
            message: "[INTERNAL_ERROR]arrow flight result stream interrupted after 1 batches"
                .into(),
        };
        assert!(is_stream_interruption(&cut));
        let reset = Error::SourceUnavailable {
            context: DO_GET_CONTEXT.into(),
            reason: "h2 protocol error".into(),
        };
        assert!(is_stream_interruption(&reset));
        let planning = Error::Doris {
            context: "Flight SQL query".into(),
            message: "Changelog offset has expired according to changelog.ttl_seconds".into(),
        };
        assert!(!is_stream_interruption(&planning));
        let not_ready = Error::WindowNotReady {
            code: 5101,
            message: "ERR_INCR_VISIBLE_WAIT_TIMEOUT".into(),
        };
        assert!(!is_stream_interruption(&not_ready));
    }
}

//! The batcher: encoded rows accumulate into one load body until `maxRows`, `maxBytes` or
//! `interval` is reached, whichever comes first (`spec.sink.doris.batch`).
//!
//! Pure: the caller passes the time in, so every decision is testable with explicit `Instant`s.
//! The interval runs from the first row of a batch, so a trickle of changes is still loaded within
//! `interval` of arriving, and an empty batcher has no deadline at all.

use std::time::Instant;

use bytes::Bytes;

use super::encode::Encoded;
use crate::settings::BatchLimits;

/// Why a batch should be loaded now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushReason {
    /// `maxRows` reached.
    Rows,
    /// `maxBytes` reached.
    Bytes,
    /// `interval` passed since the batch's first row.
    Interval,
}

/// A body ready to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyBatch {
    /// JSON lines.
    pub body: Bytes,
    /// Rows in the body.
    pub rows: u64,
    /// Of which upserts (changelog mode: every row).
    pub upserts: u64,
    /// Of which deletes.
    pub deletes: u64,
}

/// Rows waiting for their load.
#[derive(Debug)]
pub struct Batcher {
    limits: BatchLimits,
    body: Vec<u8>,
    rows: u64,
    upserts: u64,
    deletes: u64,
    opened_at: Option<Instant>,
}

impl Batcher {
    /// An empty batcher.
    pub fn new(limits: BatchLimits) -> Self {
        Self {
            limits,
            body: Vec::new(),
            rows: 0,
            upserts: 0,
            deletes: 0,
            opened_at: None,
        }
    }

    /// The limits.
    pub fn limits(&self) -> BatchLimits {
        self.limits
    }

    /// Rows still fitting under `maxRows` (at least one, so progress is always made).
    pub fn room(&self) -> u64 {
        self.limits.max_rows.saturating_sub(self.rows).max(1)
    }

    /// Append encoded rows: `encode` writes into the body and says what it wrote.
    ///
    /// # Errors
    /// The encoder's error; the body is then truncated back to where it was.
    pub fn append<E>(
        &mut self,
        now: Instant,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<Encoded, E>,
    ) -> Result<Encoded, E> {
        let before = self.body.len();
        match encode(&mut self.body) {
            Ok(counts) => {
                let rows = counts.upserts + counts.deletes;
                if rows > 0 {
                    self.opened_at.get_or_insert(now);
                }
                self.rows += rows;
                self.upserts += counts.upserts;
                self.deletes += counts.deletes;
                Ok(counts)
            }
            Err(e) => {
                self.body.truncate(before);
                Err(e)
            }
        }
    }

    /// Whether the batch should be loaded at `now`, and why.
    pub fn flush_reason(&self, now: Instant) -> Option<FlushReason> {
        if self.rows == 0 {
            None
        } else if self.rows >= self.limits.max_rows {
            Some(FlushReason::Rows)
        } else if self.body.len() as u64 >= self.limits.max_bytes {
            Some(FlushReason::Bytes)
        } else if self.deadline().is_some_and(|d| now >= d) {
            Some(FlushReason::Interval)
        } else {
            None
        }
    }

    /// When the interval of the current batch ends; `None` while empty.
    pub fn deadline(&self) -> Option<Instant> {
        self.opened_at.map(|t| t + self.limits.interval)
    }

    /// Rows waiting.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Take the batch, leaving the batcher empty; `None` when there is nothing to load.
    pub fn take(&mut self) -> Option<ReadyBatch> {
        if self.rows == 0 {
            self.body.clear();
            return None;
        }
        let capacity = self.body.capacity();
        let body = std::mem::replace(&mut self.body, Vec::with_capacity(capacity.min(1 << 20)));
        let batch = ReadyBatch {
            body: Bytes::from(body),
            rows: self.rows,
            upserts: self.upserts,
            deletes: self.deletes,
        };
        self.rows = 0;
        self.upserts = 0;
        self.deletes = 0;
        self.opened_at = None;
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limits(rows: u64, bytes: u64, secs: u64) -> BatchLimits {
        BatchLimits {
            max_rows: rows,
            max_bytes: bytes,
            interval: Duration::from_secs(secs),
        }
    }

    fn rows(n: u64, deletes: u64) -> impl FnOnce(&mut Vec<u8>) -> Result<Encoded, ()> {
        move |out: &mut Vec<u8>| {
            for _ in 0..n + deletes {
                out.extend_from_slice(b"{\"id\":1}\n");
            }
            Ok(Encoded {
                upserts: n,
                deletes,
                skipped: 0,
            })
        }
    }

    #[test]
    fn empty_batcher_never_flushes_and_has_no_deadline() {
        let b = Batcher::new(limits(10, 1000, 5));
        let t0 = Instant::now();
        assert_eq!(b.deadline(), None);
        assert_eq!(b.flush_reason(t0 + Duration::from_secs(3600)), None);
    }

    #[test]
    fn rows_limit_flushes_first() {
        let mut b = Batcher::new(limits(3, 1_000_000, 5));
        let t0 = Instant::now();
        b.append(t0, rows(2, 0)).unwrap();
        assert_eq!(b.flush_reason(t0), None);
        assert_eq!(b.room(), 1);
        b.append(t0, rows(0, 1)).unwrap();
        assert_eq!(b.flush_reason(t0), Some(FlushReason::Rows));
        let batch = b.take().unwrap();
        assert_eq!((batch.rows, batch.upserts, batch.deletes), (3, 2, 1));
        assert_eq!(batch.body.len(), 27);
        assert!(b.is_empty());
        assert_eq!(b.deadline(), None);
        assert_eq!(b.take(), None);
    }

    #[test]
    fn bytes_limit_flushes() {
        let mut b = Batcher::new(limits(1000, 20, 5));
        let t0 = Instant::now();
        b.append(t0, rows(2, 0)).unwrap();
        assert_eq!(b.flush_reason(t0), None);
        b.append(t0, rows(1, 0)).unwrap();
        assert_eq!(b.flush_reason(t0), Some(FlushReason::Bytes));
    }

    #[test]
    fn interval_runs_from_the_first_row() {
        let mut b = Batcher::new(limits(1000, 1_000_000, 5));
        let t0 = Instant::now();
        b.append(t0, rows(1, 0)).unwrap();
        b.append(t0 + Duration::from_secs(4), rows(1, 0)).unwrap();
        assert_eq!(b.deadline(), Some(t0 + Duration::from_secs(5)));
        assert_eq!(b.flush_reason(t0 + Duration::from_millis(4999)), None);
        assert_eq!(
            b.flush_reason(t0 + Duration::from_secs(5)),
            Some(FlushReason::Interval)
        );
        b.take().unwrap();
        let t1 = t0 + Duration::from_secs(9);
        b.append(t1, rows(1, 0)).unwrap();
        assert_eq!(b.deadline(), Some(t1 + Duration::from_secs(5)));
    }

    #[test]
    fn skipped_rows_do_not_open_a_batch_and_errors_roll_back() {
        let mut b = Batcher::new(limits(10, 1000, 5));
        let t0 = Instant::now();
        b.append(t0, |_: &mut Vec<u8>| {
            Ok::<_, ()>(Encoded {
                upserts: 0,
                deletes: 0,
                skipped: 4,
            })
        })
        .unwrap();
        assert!(b.is_empty());
        assert_eq!(b.deadline(), None);
        b.append(t0, rows(1, 0)).unwrap();
        let err = b.append(t0, |out: &mut Vec<u8>| {
            out.extend_from_slice(b"{\"half");
            Err::<Encoded, _>("bad op")
        });
        assert_eq!(err.unwrap_err(), "bad op");
        assert_eq!(b.take().unwrap().body, Bytes::from_static(b"{\"id\":1}\n"));
    }
}

//! The changelog: window planning and `@incr` SQL (pure), and the poller that reads one window at a
//! time over Flight SQL (docs/doris-protocols.md §1.3–§1.7, §2.4).
//!
//! Windows are `[start, end)` with `end` = Doris "now" floored to the second; the next start is the
//! previous end. The poller hands a window's batches downstream and only then sends
//! [`ChangelogEvent::WindowDone`]; the caller advances its offset on that event, once the sink has
//! the rows. Visibility errors (5100/5101) retry the same window until `visibleWaitTimeout`.

use std::time::Duration;

use arrow_array::{Array, Int8Array, RecordBatch};
use arrow_schema::DataType;
use dcs_crds::spec::{IncrementType, TableRef};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::fe_http::FeHttpClient;
use super::flight::{FlightSession, resolve_flight_port};
use super::resumable::{ReadPlan, read_into};
use super::resume::Replay;
use super::retention::{RetentionGuard, SAFETY_MARGIN};
use super::row_kind::row_kinds;
use super::snapshot::select_list;
use super::tso::{self, NowOffsets as _, offset_at};
use super::visibility;
use crate::checkpoint::{Offset, WindowProgress, WindowRead};
use crate::settings::ChangelogOptions;
use crate::{Error, Result};

/// The commit TSO column `@incr` returns when named.
pub const TSO_COLUMN: &str = "__DORIS_BINLOG_TSO__";
/// The order-within-commit column.
pub const LSN_COLUMN: &str = "__DORIS_BINLOG_LSN__";
/// The operation column (0 insert, 1 delete, 2 update-before, 3 update-after).
pub const OP_COLUMN: &str = "__DORIS_BINLOG_OP__";
/// The hidden columns, in the order the connector selects and sorts them.
pub const HIDDEN_COLUMNS: [&str; 3] = [TSO_COLUMN, LSN_COLUMN, OP_COLUMN];

/// One `@incr` window `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangelogWindow {
    /// Inclusive start.
    pub start: Offset,
    /// Exclusive end; the next window's start.
    pub end: Offset,
}

impl ChangelogWindow {
    /// The connector's split name, `stream-yyyyMMddHHmmss-yyyyMMddHHmmss`.
    pub fn split_id(&self) -> String {
        let compact = |o: &Offset| o.timestamp.replace(['-', ' ', ':'], "");
        format!("stream-{}-{}", compact(&self.start), compact(&self.end))
    }
}

/// What to do at a poll.
#[derive(Debug)]
pub enum WindowDecision {
    /// Doris "now" has not passed the start: nothing to read yet.
    Wait,
    /// Read this window.
    Window(ChangelogWindow),
    /// Doris's clock is behind the start; the sync must fail.
    Backwards(Error),
}

/// Plan the next window from `start` and Doris "now", as the connector does
/// (docs/doris-protocols.md §2.4): end = now floored to the second, but at most `max_span` after
/// the start (a catch-up after an outage is read as a series of windows, each moving the retention
/// check's start on); equal → wait; earlier → fail.
pub fn next_window(start: &Offset, doris_now_ms: i64, max_span: Duration) -> WindowDecision {
    let now = offset_at(doris_now_ms);
    let span_ms = i64::try_from(max_span.as_millis())
        .unwrap_or(i64::MAX)
        .max(1000);
    let end = if now.epoch_ms > start.epoch_ms.saturating_add(span_ms) {
        offset_at(start.epoch_ms + span_ms)
    } else {
        now
    };
    match end.epoch_ms.cmp(&start.epoch_ms) {
        std::cmp::Ordering::Equal => WindowDecision::Wait,
        std::cmp::Ordering::Less => WindowDecision::Backwards(Error::TimestampBackwards {
            start: start.timestamp.clone(),
            now: end.timestamp,
        }),
        std::cmp::Ordering::Greater => WindowDecision::Window(ChangelogWindow {
            start: start.clone(),
            end,
        }),
    }
}

/// How long after a whole second of Doris's clock a poll is made: a little after the second the
/// windows end at, so the changes committed in it are in.
pub const POLL_AFTER_SECOND: Duration = Duration::from_millis(100);

/// How long after Doris's now `now_ms` the next poll is due (pure): at [`POLL_AFTER_SECOND`] past
/// the whole second `poll_interval` after the one `now_ms` is in (the interval taken in whole
/// seconds, at least one and at most a day, since a window ends at a whole second). Polling just after the second a
/// change falls in, rather than at whatever phase a ticker started, keeps a change's wait for its
/// window within the poll interval plus that margin. Always between the margin and the interval
/// plus the margin, whatever the clock says, so a jump of Doris's clock never stalls the poll.
pub fn next_poll_in(now_ms: i64, poll_interval: Duration) -> Duration {
    // At most a day, so the instant it is added to stays far from its end.
    let step_ms = i64::try_from(poll_interval.as_secs().clamp(1, 86_400)).unwrap_or(1) * 1000;
    let margin_ms = i64::try_from(POLL_AFTER_SECOND.as_millis()).unwrap_or(0);
    let due = now_ms
        .saturating_sub(now_ms.rem_euclid(1000))
        .saturating_add(step_ms)
        .saturating_add(margin_ms);
    let wait = due
        .saturating_sub(now_ms)
        .clamp(margin_ms, step_ms + margin_ms);
    Duration::from_millis(u64::try_from(wait).unwrap_or(0))
}

/// The longest window read at once: a minute, or the poll interval when that is longer.
pub fn max_window_span(poll_interval: Duration) -> Duration {
    poll_interval.max(Duration::from_secs(60))
}

/// The connector's `@incr` statement for a window; `fields` empty selects `*`.
pub fn incr_sql(
    table: &TableRef,
    fields: &[String],
    window: &ChangelogWindow,
    increment_type: IncrementType,
) -> String {
    let hidden = HIDDEN_COLUMNS.join(", ");
    format!(
        "SELECT {}, {hidden} FROM {}@incr('startTimestamp' = '{}', 'endTimestamp' = '{}', 'incrementType' = '{}') ORDER BY {hidden}",
        select_list(fields),
        table.quoted(),
        window.start.timestamp,
        window.end.timestamp,
        increment_type.as_sql(),
    )
}

/// Check a changelog batch: every expected field present, each hidden column exactly once and
/// without NULLs, and every op known.
///
/// # Errors
/// [`Error::UnexpectedResult`] naming what is wrong, or [`Error::UnsupportedOperation`].
pub fn validate_batch(table: &str, fields: &[String], batch: &RecordBatch) -> Result<()> {
    let bad = |reason: String| Error::UnexpectedResult {
        context: format!("changelog of {table}"),
        reason,
    };
    let schema = batch.schema();
    for f in fields {
        if schema
            .fields()
            .iter()
            .all(|sf| !sf.name().eq_ignore_ascii_case(f))
        {
            return Err(bad(format!("the changelog result has no column {f}")));
        }
    }
    for hidden in HIDDEN_COLUMNS {
        let idx: Vec<usize> = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| f.name().eq_ignore_ascii_case(hidden))
            .map(|(i, _)| i)
            .collect();
        let [i] = idx[..] else {
            return Err(bad(format!(
                "{hidden} appears {} times in the changelog result, expected once",
                idx.len()
            )));
        };
        let column = batch.column(i);
        if column.null_count() > 0 {
            return Err(bad(format!("{hidden} holds NULLs")));
        }
        if hidden == OP_COLUMN {
            let ops = column
                .as_any()
                .downcast_ref::<Int8Array>()
                .ok_or_else(|| bad(format!("{hidden} is {}, expected Int8", column.data_type())))?;
            row_kinds(ops)?;
        } else if column.data_type() != &DataType::Int64 {
            return Err(bad(format!(
                "{hidden} is {}, expected Int64",
                column.data_type()
            )));
        }
    }
    Ok(())
}

/// What the changelog reader hands downstream.
#[derive(Debug)]
pub enum ChangelogEvent {
    /// A window is about to be read (its start passed the retention check); its first `skip` rows
    /// were delivered before (a window resumed inside) and are not sent again.
    WindowStart {
        /// The window.
        window: ChangelogWindow,
        /// Rows of it not sent again.
        skip: u64,
    },
    /// Rows of the current window, in TSO, LSN, OP order.
    Batch(RecordBatch),
    /// Every row of the window has been sent; the next window starts at `window.end`.
    WindowDone {
        /// The finished window.
        window: ChangelogWindow,
        /// Rows it held.
        rows: u64,
    },
}

/// The rows of `batch` committed after `seam_tso` (all of them when none is older, the common
/// case, without copying).
///
/// The first window of an `initial` sync starts at T0's second, so it returns the changes committed
/// earlier in that second, which the snapshot (read after T0) already holds. They are dropped by
/// their TSO. T0's TSO is Doris's current TSO (`/api/tso`): the last one Doris handed out, every
/// later commit gets a larger one (docs/doris-protocols.md §1.2), so a change with a TSO at or
/// below T0's was committed before T0 — and, visible by then
/// ([`super::retention::RetentionGuard::await_visible_through`]), is in the snapshot.
///
/// # Errors
/// When the batch has no TSO column of the expected type.
pub fn drop_before_seam(batch: RecordBatch, seam_tso: i64) -> Result<Option<RecordBatch>> {
    let bad = |reason: String| Error::UnexpectedResult {
        context: "changelog batch".into(),
        reason,
    };
    let schema = batch.schema();
    let i = schema
        .fields()
        .iter()
        .position(|f| f.name().eq_ignore_ascii_case(TSO_COLUMN))
        .ok_or_else(|| bad(format!("no column {TSO_COLUMN}")))?;
    let tso = batch
        .column(i)
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .ok_or_else(|| bad(format!("{TSO_COLUMN} is not Int64")))?;
    if tso.values().iter().all(|t| *t > seam_tso) {
        return Ok(Some(batch));
    }
    let keep: arrow_array::BooleanArray =
        tso.values().iter().map(|t| Some(*t > seam_tso)).collect();
    let kept = arrow::compute::filter_record_batch(&batch, &keep)
        .map_err(|e| bad(format!("filtering at the seam: {e}")))?;
    Ok((kept.num_rows() > 0).then_some(kept))
}

/// The increment type a window is read with.
///
/// The snapshot of an `initial` sync is read after T0, so it already holds some changes made
/// after T0. MIN_DELTA folds a window to the net change per key, and a key inserted after T0
/// (read by the snapshot) then deleted in the first window nets to nothing — the delete would
/// never reach the sink. Under MIN_DELTA the window that starts at the seam is therefore read with
/// DETAIL, which replays every change; it ends at Doris's now, after the snapshot, so from its end
/// on the sink equals the source at a window boundary and MIN_DELTA is exact again. DETAIL and
/// APPEND_ONLY need nothing: they replay every change (or every insert) of the seam anyway.
pub fn window_increment_type(
    options: &ChangelogOptions,
    window: &ChangelogWindow,
) -> IncrementType {
    match (options.increment_type, options.seam_start_ms) {
        (IncrementType::MinDelta, Some(seam)) if window.start.epoch_ms == seam => {
            IncrementType::Detail
        }
        (configured, _) => configured,
    }
}

/// What reading one window did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WindowStats {
    /// Rows sent downstream.
    pub rows: u64,
    /// Attempts made (1 without retries).
    pub attempts: u32,
    /// False when the receiver went away before the window was done.
    pub delivered: bool,
}

/// One poll: the window read, if one was due (with whether Doris's now is past its end, a
/// catch-up cut by [`max_window_span`] whose next window is due at once), and when the next
/// poll is due.
struct Polled {
    window: Option<(ChangelogWindow, WindowStats, bool)>,
    next: tokio::time::Instant,
}

/// Reads changelog windows over one Flight SQL session, reconnecting when Doris drops it.
#[derive(Debug)]
pub struct ChangelogReader {
    http: FeHttpClient,
    /// Every window's start is checked against the changelog's retention before and after it is
    /// read (`super::retention`).
    guard: RetentionGuard,
    flight_port: u16,
    session: Option<FlightSession>,
    fields: Vec<String>,
    options: ChangelogOptions,
}

impl ChangelogReader {
    /// A reader of `fields` (see [`super::snapshot::projection`]) of the settings' table.
    ///
    /// # Errors
    /// When the Flight SQL port cannot be resolved.
    pub async fn new(
        http: FeHttpClient,
        fields: Vec<String>,
        options: ChangelogOptions,
    ) -> Result<Self> {
        let flight_port = resolve_flight_port(&http).await?;
        Ok(Self {
            guard: RetentionGuard::new(http.clone()),
            http,
            flight_port,
            session: None,
            fields,
            options,
        })
    }

    /// Doris "now" as an offset (floored to the second): the start point of `latest` and `initial`.
    ///
    /// # Errors
    /// As [`tso::current`].
    pub async fn now_offset(&self) -> Result<Offset> {
        Ok(tso::current(&self.http).await?.window_end())
    }

    /// Resolve Doris "now" and read the window from `start` if there is one.
    ///
    /// # Errors
    /// As [`tso::current`], [`next_window`] and [`ChangelogReader::read_window`].
    pub async fn poll_once(
        &mut self,
        start: &Offset,
        tx: &mpsc::Sender<ChangelogEvent>,
    ) -> Result<Option<(ChangelogWindow, WindowStats)>> {
        Ok(self
            .poll_step(start, tx)
            .await?
            .window
            .map(|(w, stats, _)| (w, stats)))
    }

    /// [`ChangelogReader::poll_once`], saying too when the next poll is due.
    async fn poll_step(
        &mut self,
        start: &Offset,
        tx: &mpsc::Sender<ChangelogEvent>,
    ) -> Result<Polled> {
        let now = tso::current(&self.http).await?;
        let next =
            tokio::time::Instant::now() + next_poll_in(now.physical_ms, self.options.poll_interval);
        let max_span = max_window_span(self.options.poll_interval);
        let window = match next_window(start, now.physical_ms, max_span) {
            WindowDecision::Wait => None,
            WindowDecision::Backwards(e) => return Err(e),
            WindowDecision::Window(w) => {
                let behind = w.end.epoch_ms < offset_at(now.physical_ms).epoch_ms;
                let stats = self.read_window(&w, 0, tx).await?;
                Some((w, stats, behind))
            }
        };
        Ok(Polled { window, next })
    }

    /// Poll every `poll_interval` from `start`, chaining windows end → start, until the receiver
    /// goes away or a window fails. `resume` is a window starting at `start` that is in the sink
    /// up to its first rows (a checkpoint taken inside it): it is read first, without those rows.
    ///
    /// # Errors
    /// The first failure that is not retried.
    pub async fn run(
        mut self,
        mut start: Offset,
        resume: Option<WindowProgress>,
        tx: mpsc::Sender<ChangelogEvent>,
    ) -> Result<()> {
        if let Some(partial) = resume {
            let window = ChangelogWindow {
                start: start.clone(),
                end: partial.end,
            };
            match self.read_window(&window, partial.rows, &tx).await {
                Ok(stats) if stats.delivered => start = window.end,
                Ok(_) => {
                    self.close().await;
                    return Ok(());
                }
                Err(e) => {
                    self.close().await;
                    return Err(e);
                }
            }
        }
        // The first poll is made at once; then each just after the whole second it is due at
        // ([`next_poll_in`]), or at once while catching up.
        let mut due = None;
        let result = loop {
            if let Some(at) = due {
                tokio::time::sleep_until(at).await;
            }
            if tx.is_closed() {
                break Ok(());
            }
            match self.poll_step(&start, &tx).await {
                Ok(Polled {
                    window: Some((w, stats, behind)),
                    next,
                }) if stats.delivered => {
                    start = w.end;
                    due = (!behind).then_some(next);
                }
                Ok(Polled {
                    window: Some(_), ..
                }) => break Ok(()),
                Ok(Polled { window: None, next }) => due = Some(next),
                Err(e) => break Err(e),
            }
        };
        self.close().await;
        result
    }

    /// Read `windows` again, in order, each from its `skip`th row (the rows a checkpoint's loads
    /// were made of, to load again what Doris lost), with the same retention checks and
    /// increment types as when they were first read; then stop. No [`ChangelogEvent::WindowDone`]
    /// is sent.
    ///
    /// # Errors
    /// As [`ChangelogReader::read_window`].
    pub async fn replay(
        &mut self,
        windows: &[WindowRead],
        tx: &mpsc::Sender<ChangelogEvent>,
    ) -> Result<()> {
        for w in windows {
            let window = ChangelogWindow {
                start: w.start.clone(),
                end: w.end.clone(),
            };
            let stats = self.read_window_then(&window, w.skip, tx, false).await?;
            if !stats.delivered {
                break;
            }
        }
        Ok(())
    }

    /// Read one window, retrying it on visibility errors until `visible_wait_timeout` has passed
    /// since the first one, and reconnecting once if Doris dropped the session. Before every
    /// attempt the window's start is checked against the changelog's retention (with the safety
    /// margin), and again after the read, before the window is reported done (without it).
    ///
    /// # Errors
    /// [`Error::OffsetExpired`] when the start is past (or near) the retention edge; the Doris
    /// message of the last visibility error once the wait is over, or any other error at once.
    pub async fn read_window(
        &mut self,
        window: &ChangelogWindow,
        skip: u64,
        tx: &mpsc::Sender<ChangelogEvent>,
    ) -> Result<WindowStats> {
        self.read_window_then(window, skip, tx, true).await
    }

    /// [`ChangelogReader::read_window`], reporting the window done (`done`) or not.
    async fn read_window_then(
        &mut self,
        window: &ChangelogWindow,
        skip: u64,
        tx: &mpsc::Sender<ChangelogEvent>,
        done: bool,
    ) -> Result<WindowStats> {
        let mut first_failure: Option<Instant> = None;
        let mut reconnected = false;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut sent_any = false;
            self.guard.check(&window.start, SAFETY_MARGIN).await?;
            if attempts == 1 {
                let start = ChangelogEvent::WindowStart {
                    window: window.clone(),
                    skip,
                };
                if tx.send(start).await.is_err() {
                    return Ok(WindowStats::default());
                }
            }
            match self.try_window(window, skip, tx, &mut sent_any, done).await {
                Ok(mut stats) => {
                    stats.attempts = attempts;
                    return Ok(stats);
                }
                Err(Error::WindowNotReady { code, message }) if !sent_any => {
                    let first = *first_failure.get_or_insert_with(Instant::now);
                    let Some(delay) =
                        visibility::retry_delay(&self.options, first.elapsed(), &message)
                    else {
                        return Err(Error::Doris {
                            context: format!(
                                "changelog window {} was not readable within visibleWaitTimeout {:?}",
                                window.split_id(),
                                self.options.visible_wait_timeout
                            ),
                            message,
                        });
                    };
                    tracing::info!(window = %window.split_id(), code, attempt = attempts, ?delay, "changelog window not ready; retrying it");
                    tokio::time::sleep(delay).await;
                }
                Err(Error::FlightSessionLost { message }) if !sent_any && !reconnected => {
                    tracing::info!(%message, "Flight SQL session lost; reconnecting");
                    self.session = None;
                    reconnected = true;
                }
                Err(e) => {
                    // A broken session is not reused.
                    if let Some(s) = self.session.take() {
                        s.close().await;
                    }
                    return Err(e);
                }
            }
        }
    }

    async fn try_window(
        &mut self,
        window: &ChangelogWindow,
        skip: u64,
        tx: &mpsc::Sender<ChangelogEvent>,
        sent_any: &mut bool,
        done: bool,
    ) -> Result<WindowStats> {
        let settings = self.http.settings();
        let table = settings.table.to_string();
        let sql = incr_sql(
            &settings.table,
            &self.fields,
            window,
            window_increment_type(&self.options, window),
        );
        if self.session.is_none() {
            self.session = Some(FlightSession::connect(settings, self.flight_port).await?);
        }
        let session = self.session.as_mut().expect("connected above");
        let what = format!("changelog window {}", window.split_id());
        tracing::debug!(window = %window.split_id(), "reading changelog window");
        // A window's result is fixed ([start, end) in TSO, LSN, OP order): a broken stream is
        // read again and continues after the rows already sent.
        let plan = ReadPlan {
            sql: &sql,
            what: &what,
            replay: Replay::SkipDelivered,
            retry: self.options.stream_retry,
            skip,
        };
        let fields = &self.fields;
        let streamed = read_into(
            session,
            plan,
            |batch| {
                validate_batch(&table, fields, batch)?;
                *sent_any = true;
                Ok(())
            },
            tx,
            ChangelogEvent::Batch,
        )
        .await?;
        let mut stats = WindowStats {
            rows: streamed.rows,
            ..WindowStats::default()
        };
        if !streamed.delivered {
            return Ok(stats);
        }
        // Doris fixed the statement's retention edge when it started; the start still inside the
        // retention now means it was then, so no change of the window was skipped.
        self.guard.check(&window.start, Duration::ZERO).await?;
        if !done {
            stats.delivered = true;
            return Ok(stats);
        }
        let done = ChangelogEvent::WindowDone {
            window: window.clone(),
            rows: stats.rows,
        };
        stats.delivered = tx.send(done).await.is_ok();
        Ok(stats)
    }

    /// Close the Flight SQL session.
    pub async fn close(mut self) {
        if let Some(s) = self.session.take() {
            s.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{Int32Array, Int64Array};
    use arrow_schema::{Field, Schema};

    fn at(ts: &str) -> Offset {
        offset_at(tso::parse_timestamp(ts).unwrap())
    }

    #[test]
    fn polls_are_due_just_after_the_whole_second_a_poll_interval_on() {
        let ms = |n: u64| Duration::from_millis(n);
        let second = 1_800_000_000_000_i64;
        // 1 s: wherever in its second the last poll was, the next is 100 ms past the next second.
        assert_eq!(next_poll_in(second + 100, ms(1_000)), ms(1_000));
        assert_eq!(next_poll_in(second + 900, ms(1_000)), ms(200));
        assert_eq!(next_poll_in(second + 999, ms(1_000)), ms(101));
        assert_eq!(next_poll_in(second, ms(1_000)), ms(1_100));
        // 10 s: ten seconds on; a fraction of a second is dropped, and less than one is one.
        assert_eq!(next_poll_in(second + 100, ms(10_000)), ms(10_000));
        assert_eq!(next_poll_in(second + 100, ms(2_500)), ms(2_000));
        assert_eq!(next_poll_in(second + 100, ms(300)), ms(1_000));
        // Before the epoch (a clock set far back) and at the ends of the range: still bounded.
        assert_eq!(next_poll_in(-1, ms(1_000)), ms(101));
        assert!(next_poll_in(i64::MAX, ms(1_000)) <= ms(1_100));
        assert!(next_poll_in(i64::MIN, Duration::MAX) >= POLL_AFTER_SECOND);
    }

    #[test]
    fn the_seam_window_of_an_initial_sync_is_read_with_detail() {
        let t0 = at("2026-11-29 10:00:00");
        let later = at("2026-11-29 10:00:05");
        let options = ChangelogOptions {
            increment_type: IncrementType::MinDelta,
            seam_start_ms: Some(t0.epoch_ms),
            ..ChangelogOptions::default()
        };
        let seam = ChangelogWindow {
            start: t0.clone(),
            end: later.clone(),
        };
        let next = ChangelogWindow {
            start: later.clone(),
            end: at("2026-11-29 10:00:09"),
        };
        assert_eq!(
            window_increment_type(&options, &seam),
            IncrementType::Detail
        );
        assert_eq!(
            window_increment_type(&options, &next),
            IncrementType::MinDelta
        );
        let no_seam = ChangelogOptions {
            seam_start_ms: None,
            ..options.clone()
        };
        assert_eq!(
            window_increment_type(&no_seam, &seam),
            IncrementType::MinDelta
        );
        let append = ChangelogOptions {
            increment_type: IncrementType::AppendOnly,
            ..options
        };
        assert_eq!(
            window_increment_type(&append, &seam),
            IncrementType::AppendOnly
        );
    }

    #[test]
    fn windows_end_at_now_floored() {
        let start = at("2026-11-29 10:00:00");
        let now = start.epoch_ms + 12_345;
        let span = Duration::from_secs(60);
        let WindowDecision::Window(w) = next_window(&start, now, span) else {
            panic!()
        };
        assert_eq!(w.start, start);
        assert_eq!(w.end.timestamp, "2026-11-29 10:00:12");
        assert_eq!(w.split_id(), "stream-20261129100000-20261129100012");
        assert!(matches!(
            next_window(&start, start.epoch_ms + 999, span),
            WindowDecision::Wait
        ));
        let WindowDecision::Backwards(e) = next_window(&start, start.epoch_ms - 1, span) else {
            panic!()
        };
        assert_eq!(
            e.to_string(),
            "Current Doris timestamp moved backwards: now 2026-11-29 09:59:59 is before the changelog offset 2026-11-29 10:00:00"
        );
    }

    #[test]
    fn a_catch_up_is_read_in_windows_of_at_most_the_span() {
        let start = at("2026-11-29 10:00:00");
        let an_hour_later = start.epoch_ms + 3_600_000 + 400;
        let WindowDecision::Window(w) = next_window(
            &start,
            an_hour_later,
            max_window_span(Duration::from_secs(10)),
        ) else {
            panic!()
        };
        assert_eq!(w.end.timestamp, "2026-11-29 10:01:00");
        // A poll interval longer than a minute is the span.
        let WindowDecision::Window(w) = next_window(
            &start,
            an_hour_later,
            max_window_span(Duration::from_secs(300)),
        ) else {
            panic!()
        };
        assert_eq!(w.end.timestamp, "2026-11-29 10:05:00");
    }

    #[test]
    fn sql_matches_the_connector() {
        let t: TableRef = "db.tbl".parse().unwrap();
        let w = ChangelogWindow {
            start: at("2026-11-29 10:00:00"),
            end: at("2026-11-29 10:00:10"),
        };
        assert_eq!(
            incr_sql(&t, &["id".into(), "name".into()], &w, IncrementType::Detail),
            "SELECT `id`, `name`, __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__ FROM `db`.`tbl`@incr('startTimestamp' = '2026-11-29 10:00:00', 'endTimestamp' = '2026-11-29 10:00:10', 'incrementType' = 'DETAIL') ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__"
        );
        assert!(
            incr_sql(&t, &[], &w, IncrementType::MinDelta)
                .starts_with("SELECT *, __DORIS_BINLOG_TSO__")
        );
        assert!(
            incr_sql(&t, &[], &w, IncrementType::AppendOnly)
                .contains("'incrementType' = 'APPEND_ONLY'")
        );
    }

    fn batch(names: &[&str], ops: Vec<Option<i8>>) -> RecordBatch {
        let n = ops.len();
        let mut fields = vec![Field::new("id", DataType::Int32, false)];
        let mut cols: Vec<Arc<dyn Array>> = vec![Arc::new(Int32Array::from(
            (0..n as i32).collect::<Vec<_>>(),
        ))];
        for name in names {
            if *name == OP_COLUMN {
                fields.push(Field::new(*name, DataType::Int8, true));
                cols.push(Arc::new(Int8Array::from(ops.clone())));
            } else {
                fields.push(Field::new(*name, DataType::Int64, false));
                cols.push(Arc::new(Int64Array::from(vec![1i64; n])));
            }
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
    }

    #[test]
    fn batches_are_validated() {
        let fields = vec!["id".to_owned()];
        let ok = batch(&HIDDEN_COLUMNS, vec![Some(0), Some(3)]);
        validate_batch("t", &fields, &ok).unwrap();
        let missing = batch(&[TSO_COLUMN, OP_COLUMN], vec![Some(0)]);
        assert!(
            validate_batch("t", &fields, &missing)
                .unwrap_err()
                .to_string()
                .contains(LSN_COLUMN)
        );
        let twice = batch(
            &[TSO_COLUMN, LSN_COLUMN, OP_COLUMN, TSO_COLUMN],
            vec![Some(0)],
        );
        assert!(
            validate_batch("t", &fields, &twice)
                .unwrap_err()
                .to_string()
                .contains("2 times")
        );
        let null = batch(&HIDDEN_COLUMNS, vec![None]);
        assert!(
            validate_batch("t", &fields, &null)
                .unwrap_err()
                .to_string()
                .contains("NULL")
        );
        let bad_op = batch(&HIDDEN_COLUMNS, vec![Some(7)]);
        assert_eq!(
            validate_batch("t", &fields, &bad_op)
                .unwrap_err()
                .to_string(),
            "Unsupported Doris binlog operation 7"
        );
        assert!(validate_batch("t", &["name".into()], &ok).is_err());
    }

    #[test]
    fn changes_at_or_below_t0s_tso_are_dropped_at_the_seam() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new(TSO_COLUMN, DataType::Int64, false),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![1, 2, 3])),
                Arc::new(Int64Array::from(vec![99, 100, 101])),
            ],
        )
        .unwrap();
        let kept = drop_before_seam(b.clone(), 100).unwrap().unwrap();
        let ids = kept
            .column(0)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        assert_eq!(ids.values().to_vec(), vec![3]);
        assert_eq!(
            drop_before_seam(b.clone(), 98).unwrap().unwrap().num_rows(),
            3
        );
        assert!(drop_before_seam(b, 101).unwrap().is_none());
    }
}

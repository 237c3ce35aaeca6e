//! What the open checkpoint's loads are made of (pure bookkeeping).
//!
//! Every row handed to the sink since the last checkpoint has an index; a load holds a run of
//! consecutive indexes ([`RowSpan`]), and the checkpoint records the changelog windows those rows
//! were read from ([`LoadsSource`]). Reading the same windows again (from the same rows on, with
//! the same increment types and the same seam) yields the same rows in the same order, so the
//! rows of a load Doris aborted before its commit can be found again by their indexes
//! ([`super::repair`]).

use crate::checkpoint::{LoadsSource, Position, RowSpan, WindowRead};
use crate::source::changelog::ChangelogWindow;

/// The rows and windows of the loads since the last checkpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadLedger {
    /// Rows handed to the sink since the last checkpoint.
    rows: u64,
    /// Index of the first row of the batch being filled, if any.
    open_first: Option<u64>,
    /// The changelog windows read since the last checkpoint.
    windows: Vec<WindowRead>,
}

impl LoadLedger {
    /// `n` rows were added to the batch being filled.
    pub fn appended(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.open_first.get_or_insert(self.rows);
        self.rows += n;
    }

    /// The batch being filled was loaded: the rows it holds (`None` for an empty one).
    pub fn flushed(&mut self) -> Option<RowSpan> {
        let first = self.open_first.take()?;
        Some(RowSpan {
            first,
            count: self.rows - first,
        })
    }

    /// The batch being filled was dropped unloaded (its rows are read again later).
    pub fn dropped(&mut self) {
        *self = Self::default();
    }

    /// A changelog window is being read, from its `skip`th row on.
    pub fn window_started(&mut self, window: &ChangelogWindow, skip: u64) {
        self.windows.push(WindowRead {
            start: window.start.clone(),
            end: window.end.clone(),
            skip,
        });
    }

    /// What the loads since the last checkpoint were read from, that checkpoint being at `from`.
    pub fn source(&self, from: Position) -> LoadsSource {
        LoadsSource {
            from,
            windows: self.windows.clone(),
        }
    }

    /// A checkpoint was saved: the rows start again from 0. `inside` is the window still being
    /// read and the rows of it already handed over (a checkpoint inside a window), whose remaining
    /// rows are the next loads' first ones.
    pub fn restart(&mut self, inside: Option<(&ChangelogWindow, u64)>) {
        *self = Self::default();
        if let Some((window, done)) = inside {
            self.window_started(window, done);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::tso::offset_at;

    fn window(s: i64, e: i64) -> ChangelogWindow {
        ChangelogWindow {
            start: offset_at(s * 1000),
            end: offset_at(e * 1000),
        }
    }

    #[test]
    fn loads_get_the_spans_of_their_rows() {
        let mut l = LoadLedger::default();
        assert_eq!(l.flushed(), None);
        l.appended(3);
        l.appended(2);
        assert_eq!(l.flushed(), Some(RowSpan { first: 0, count: 5 }));
        l.appended(0);
        assert_eq!(l.flushed(), None, "nothing appended, nothing loaded");
        l.appended(4);
        assert_eq!(l.flushed(), Some(RowSpan { first: 5, count: 4 }));
    }

    #[test]
    fn windows_are_recorded_and_a_checkpoint_inside_one_carries_it_over() {
        let mut l = LoadLedger::default();
        l.window_started(&window(10, 20), 0);
        l.appended(7);
        l.flushed();
        l.window_started(&window(20, 30), 0);
        l.appended(3);
        let source = l.source(Position::Done);
        assert_eq!(source.windows.len(), 2);
        assert_eq!(source.windows[1].skip, 0);
        // A checkpoint inside window 20..30 after 3 of its rows.
        l.flushed();
        l.restart(Some((&window(20, 30), 3)));
        l.appended(1);
        assert_eq!(l.flushed(), Some(RowSpan { first: 0, count: 1 }));
        let source = l.source(Position::Done);
        assert_eq!(source.windows.len(), 1);
        assert_eq!(source.windows[0].skip, 3);
        l.dropped();
        assert_eq!(l, LoadLedger::default());
    }
}

//! The emulated clock and the TSO allocator.
//!
//! The clock starts at real time and moves with it; tests push it forward with
//! `POST /_emu/clock/advance`. Every time the emulator reads ("Doris now", TTL expiry, TSO) comes from
//! here, never from `SystemTime` directly.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// Bits of a TSO that hold the logical counter (`tso = physical_ms << 18 | logical`).
pub const TSO_LOGICAL_BITS: u32 = 18;

/// Compose a TSO from its physical milliseconds and logical counter.
pub fn compose_tso(physical_ms: i64, logical: i64) -> i64 {
    (physical_ms << TSO_LOGICAL_BITS) | (logical & ((1 << TSO_LOGICAL_BITS) - 1))
}

/// The physical milliseconds of a TSO.
pub fn tso_physical_ms(tso: i64) -> i64 {
    tso >> TSO_LOGICAL_BITS
}

/// The logical counter of a TSO.
pub fn tso_logical(tso: i64) -> i64 {
    tso & ((1 << TSO_LOGICAL_BITS) - 1)
}

/// Real time plus an offset that only grows (or, for deterministic tests, a frozen time that moves
/// only when advanced).
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: AtomicI64,
    /// When true, `offset_ms` is the absolute time and real time is ignored.
    frozen: AtomicBool,
    /// Last TSO handed out, so TSOs are strictly increasing even when the clock stands still.
    last_tso: Mutex<i64>,
}

impl Clock {
    /// A clock at real time.
    pub fn new() -> Self {
        Self::default()
    }

    /// A clock standing at `now_ms` that moves only with [`Clock::advance_ms`].
    pub fn frozen_at(now_ms: i64) -> Self {
        Self {
            offset_ms: AtomicI64::new(now_ms),
            frozen: AtomicBool::new(true),
            last_tso: Mutex::new(0),
        }
    }

    /// Emulated now, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        if self.frozen.load(Ordering::SeqCst) {
            return self.offset_ms.load(Ordering::SeqCst);
        }
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        real + self.offset_ms.load(Ordering::SeqCst)
    }

    /// Stops the clock where it is now; from then on it moves only with [`Clock::advance_ms`].
    pub fn freeze(&self) {
        if !self.frozen.load(Ordering::SeqCst) {
            let now = self.now_ms();
            self.offset_ms.store(now, Ordering::SeqCst);
            self.frozen.store(true, Ordering::SeqCst);
        }
    }

    /// Move the clock forward by `ms` milliseconds (negative values are ignored).
    pub fn advance_ms(&self, ms: i64) {
        if ms > 0 {
            self.offset_ms.fetch_add(ms, Ordering::SeqCst);
        }
    }

    /// Allocate the next commit TSO as Doris's `TSOService.getTSO` does: the logical counter is
    /// incremented before it is handed out (so the first TSO of a millisecond has logical 1), and
    /// TSOs strictly increase even when the clock stands still.
    pub fn next_tso(&self) -> i64 {
        let mut last = self.last_tso.lock();
        let tso = (*last + 1).max(compose_tso(self.now_ms(), 1));
        *last = tso;
        tso
    }

    /// The current TSO without allocating one (what `/api/tso` reports, Doris's
    /// `getCurrentTSO`): the last one handed out, or the current millisecond with logical 0. Every
    /// TSO allocated afterwards is larger, so a commit with a TSO at or below it came before.
    pub fn current_tso(&self) -> i64 {
        let last = *self.last_tso.lock();
        last.max(compose_tso(self.now_ms(), 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tso_encoding_matches_doris_example() {
        // docs/doris-protocols.md §1.2: 461373440032243713 >> 18 = 1760000000123
        assert_eq!(tso_physical_ms(461_373_440_032_243_713), 1_760_000_000_123);
        let t = compose_tso(1_760_000_000_123, 1);
        assert_eq!(tso_physical_ms(t), 1_760_000_000_123);
        assert_eq!(tso_logical(t), 1);
    }

    #[test]
    fn a_frozen_clock_moves_only_when_advanced() {
        let c = Clock::frozen_at(1_000);
        assert_eq!(c.now_ms(), 1_000);
        c.advance_ms(500);
        assert_eq!(c.now_ms(), 1_500);
        let first = c.next_tso();
        assert_eq!(tso_physical_ms(first), 1_500);
        assert_eq!(tso_logical(first), 1, "Doris increments before handing out");
        assert_eq!(tso_logical(c.next_tso()), 2);
    }

    #[test]
    fn a_frozen_running_clock_stands_still_until_advanced() {
        let c = Clock::new();
        c.advance_ms(60_000);
        c.freeze();
        let at = c.now_ms();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(c.now_ms(), at);
        c.advance_ms(1_000);
        assert_eq!(c.now_ms(), at + 1_000);
    }

    #[test]
    fn every_tso_handed_out_after_current_tso_is_larger() {
        let c = Clock::frozen_at(5_000);
        let reported = c.current_tso();
        assert_eq!(tso_logical(reported), 0);
        assert!(c.next_tso() > reported);
        let reported = c.current_tso();
        assert!(c.next_tso() > reported);
        c.advance_ms(1);
        let reported = c.current_tso();
        assert!(c.next_tso() > reported);
    }

    #[test]
    fn tsos_strictly_increase_and_follow_advance() {
        let c = Clock::new();
        let a = c.next_tso();
        let b = c.next_tso();
        assert!(b > a);
        c.advance_ms(3_600_000);
        let d = c.next_tso();
        assert!(tso_physical_ms(d) >= tso_physical_ms(a) + 3_600_000);
    }
}

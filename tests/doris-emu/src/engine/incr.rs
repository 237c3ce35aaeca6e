//! `@incr` validation and folding (docs/doris-protocols.md §1.3–§1.7).
//!
//! Folding rules:
//! - DETAIL: every recorded change. Insert → APPEND(after); update → UPDATE_BEFORE(before) then
//!   UPDATE_AFTER(after), same TSO/LSN; delete → DELETE(before).
//! - APPEND_ONLY: inserts only (on merge-on-write a new key; an update of an existing key is not
//!   an insert).
//! - MIN_DELTA: the net change per key between the window's start and end, with the TSO/LSN of the
//!   key's last change in the window.
//! - DUPLICATE tables record inserts only, so the three types return the same rows (Doris's
//!   regression tests run MIN_DELTA on a DUPLICATE table; it needs no before images there).
//!
//! Merge-on-write tables without `need_historical_value` store no before images. Doris then
//! records an upsert of an existing key like an insert (its regression test reads a re-written key
//! back as op 0), so DETAIL and APPEND_ONLY return it as APPEND with the new value. A delete is
//! still a DELETE row; the emulator fills it with the last value of the row.

use std::collections::HashMap;

use super::key::{Key, key_of};
use super::row::Row;
use super::table::{ChangeKind, Table};
use super::{
    ChangeRow, ChangelogSpelling, INCR_REQUIRES_CHANGELOG, IncrRequest, IncrementType, KeysType,
    MIN_DELTA_REQUIRES_MOW, offset_expired_message, op,
};
use crate::clock::compose_tso;
use crate::error::{DorisError, Result};
use crate::types::Value;

/// First retained commit time (ms): a change is expired when its physical time is at or before
/// `now - ttl`.
pub(crate) fn retained_from(t: &Table, now_ms: i64) -> i64 {
    now_ms - t.changelog.ttl_seconds * 1000 + 1
}

/// Checks done before any waiting: changelog on, MIN_DELTA requirements, MIN_DELTA expiry.
pub(crate) fn check(t: &Table, req: &IncrRequest, now_ms: i64) -> Result<()> {
    if !t.changelog.enabled {
        return Err(DorisError::analysis(INCR_REQUIRES_CHANGELOG));
    }
    if req.increment_type == IncrementType::MinDelta && t.keys_type == KeysType::Unique {
        if !t.mow {
            return Err(DorisError::analysis(MIN_DELTA_REQUIRES_MOW));
        }
        if !t.changelog.need_historical_value {
            let p = match t.changelog.spelling {
                ChangelogSpelling::Changelog => "changelog",
                ChangelogSpelling::Binlog => "binlog",
            };
            return Err(DorisError::analysis(format!(
                "MIN_DELTA INCR query requires base table to enable {p}.need_historical_value=true"
            )));
        }
    }
    if req.increment_type == IncrementType::MinDelta
        && let Some(s) = req.start_ms
        && s < retained_from(t, now_ms)
    {
        return Err(DorisError::analysis(offset_expired_message(
            t.changelog.spelling,
        )));
    }
    Ok(())
}

/// The folded rows of the window, sorted by TSO, LSN, OP.
pub(crate) fn fold(t: &Table, req: &IncrRequest, now_ms: i64) -> Vec<ChangeRow> {
    let start = req
        .start_ms
        .unwrap_or(i64::MIN)
        .max(retained_from(t, now_ms));
    let lo_tso = compose_tso(start, 0);
    let lo = t.history.partition_point(|c| c.tso < lo_tso);
    let hi = match req.end_ms {
        Some(e) => t.history.partition_point(|c| c.tso < compose_tso(e, 0)),
        None => t.history.len(),
    };
    if lo >= hi {
        return Vec::new();
    }
    let window = &t.history[lo..hi];
    let hist = t.changelog.need_historical_value || t.keys_type == KeysType::Duplicate;
    let mut out = Vec::new();
    let row = |o: i8, tso: i64, lsn: usize, v: &Option<Row>| ChangeRow {
        op: o,
        tso,
        lsn: lsn as i64,
        values: v.as_ref().map(Row::decode).unwrap_or_default(),
    };
    let ty = if t.keys_type == KeysType::Duplicate {
        IncrementType::Detail
    } else {
        req.increment_type
    };
    match ty {
        IncrementType::Detail => {
            for c in window {
                for (lsn, ch) in c.changes.iter().enumerate() {
                    match ch.kind {
                        ChangeKind::Insert => out.push(row(op::APPEND, c.tso, lsn, &ch.after)),
                        ChangeKind::Update if hist => {
                            out.push(row(op::UPDATE_BEFORE, c.tso, lsn, &ch.before));
                            out.push(row(op::UPDATE_AFTER, c.tso, lsn, &ch.after));
                        }
                        ChangeKind::Update => out.push(row(op::APPEND, c.tso, lsn, &ch.after)),
                        ChangeKind::Delete => out.push(row(op::DELETE, c.tso, lsn, &ch.before)),
                        ChangeKind::SilentDelete => {}
                    }
                }
            }
        }
        IncrementType::AppendOnly => {
            for c in window {
                for (lsn, ch) in c.changes.iter().enumerate() {
                    let counts = match ch.kind {
                        ChangeKind::Insert => true,
                        ChangeKind::Update => !hist,
                        _ => false,
                    };
                    if counts {
                        out.push(row(op::APPEND, c.tso, lsn, &ch.after));
                    }
                }
            }
        }
        IncrementType::MinDelta => {
            // per key: (start image, end image, tso, lsn) — start from the first change's before
            // image, end from the last change's after image.
            struct Net<'a> {
                start: Option<&'a Row>,
                end: Option<&'a Row>,
                tso: i64,
                lsn: usize,
            }
            let mut nets: HashMap<Key, Net> = HashMap::new();
            for c in window {
                for (lsn, ch) in c.changes.iter().enumerate() {
                    if ch.kind == ChangeKind::SilentDelete {
                        continue;
                    }
                    let image = ch.after.as_ref().or(ch.before.as_ref()).expect("an image");
                    let key = key_of(&image.decode(), &t.key_idx);
                    let e = nets.entry(key).or_insert(Net {
                        start: ch.before.as_ref(),
                        end: None,
                        tso: 0,
                        lsn: 0,
                    });
                    e.end = ch.after.as_ref();
                    e.tso = c.tso;
                    e.lsn = lsn;
                }
            }
            for n in nets.into_values() {
                let mk = |o: i8, v: Vec<Value>| ChangeRow {
                    op: o,
                    tso: n.tso,
                    lsn: n.lsn as i64,
                    values: v,
                };
                match (n.start.map(Row::decode), n.end.map(Row::decode)) {
                    (None, Some(e)) => out.push(mk(op::APPEND, e)),
                    (Some(s), Some(e)) if s != e => {
                        out.push(mk(op::UPDATE_BEFORE, s));
                        out.push(mk(op::UPDATE_AFTER, e));
                    }
                    (Some(s), None) => out.push(mk(op::DELETE, s)),
                    _ => {}
                }
            }
            out.sort_by_key(|r| (r.tso, r.lsn, r.op));
        }
    }
    out
}

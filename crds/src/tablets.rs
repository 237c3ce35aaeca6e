//! The tablets a snapshot planned, and whether they moved under it (pure; docs/ARCHITECTURE.md
//! §3.2, docs/doris-protocols.md §2.4).
//!
//! A snapshot reads the table tablet by tablet (`SELECT … TABLET(id)`), each at its own moment
//! after T0. A TRUNCATE, an INSERT OVERWRITE, a partition replaced or dropped gives the table new
//! tablets (new ids) and removes the old ones, and Doris reads a tablet id the table no longer
//! holds as no rows, without an error. So a snapshot whose planned tablets are not all still
//! there when it ends cannot say what it read: some tablets may have been read empty, shards that
//! planned at different moments may own different sets (rows owned by no shard, or by two), and a
//! restart finds its done tablets matching nothing. The first plan's tablets are recorded in the
//! checkpoint ([`TabletSet`]); [`gone`] compares a later plan with it, and [`differ`] compares
//! two shards'. Tablets added since (a new partition, whose rows are after T0) are not a
//! change: the changelog holds their rows.

use std::collections::BTreeSet;

/// Tablet ids as ranges `[first, last]` of consecutive ids, sorted (a partition's buckets have
/// consecutive ids, so a table needs about one range per partition).
pub type TabletSet = Vec<[i64; 2]>;

/// `ids` as a [`TabletSet`] (any order, duplicates ignored).
pub fn tablet_set(ids: &[i64]) -> TabletSet {
    let sorted: BTreeSet<i64> = ids.iter().copied().collect();
    let mut set: TabletSet = Vec::new();
    for id in sorted {
        match set.last_mut() {
            Some([_, last]) if last.checked_add(1) == Some(id) => *last = id,
            _ => set.push([id, id]),
        }
    }
    set
}

/// `set` sorted, with overlapping or adjacent ranges merged (a stored set is outside input).
fn normalize(set: &[[i64; 2]]) -> TabletSet {
    let mut ranges: Vec<[i64; 2]> = set.iter().filter(|[f, l]| f <= l).copied().collect();
    ranges.sort_unstable();
    let mut out: TabletSet = Vec::new();
    for [f, l] in ranges {
        match out.last_mut() {
            Some([_, last]) if f <= last.saturating_add(1) => *last = (*last).max(l),
            _ => out.push([f, l]),
        }
    }
    out
}

/// How many tablets `set` holds.
pub fn count(set: &[[i64; 2]]) -> u64 {
    normalize(set)
        .iter()
        .map(|[first, last]| u64::try_from(last.saturating_sub(*first)).map_or(0, |n| n + 1))
        .sum()
}

/// The first id of `[first, last]` that no range of `set` holds, if any (range arithmetic: a
/// stored set is outside input, so no loop runs over ids it names).
fn first_outside([first, last]: [i64; 2], set: &[[i64; 2]]) -> Option<i64> {
    let mut at = first;
    // Each step moves past one range of `set`; more steps than ranges means none holds `at`.
    for _ in 0..=set.len() {
        if at > last {
            return None;
        }
        match set.iter().find(|[f, l]| *f <= at && at <= *l) {
            Some([_, l]) => at = l.checked_add(1)?,
            None => return Some(at),
        }
    }
    (at <= last).then_some(at)
}

/// The tablets of `recorded` that `planned` (the table's tablets now) no longer holds, if any,
/// described for a person: `3 of the 8 tablets the snapshot planned are gone (10003, 10004,
/// 10005)`. `None` when every recorded tablet is still there.
pub fn gone(recorded: &[[i64; 2]], planned: &[i64]) -> Option<String> {
    let recorded = &normalize(recorded);
    let now = tablet_set(planned);
    let present: u64 = planned
        .iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|id| recorded.iter().any(|[f, l]| f <= *id && *id <= l))
        .count() as u64;
    let missing = count(recorded).saturating_sub(present);
    if missing == 0 {
        return None;
    }
    let mut shown = Vec::new();
    for range in recorded {
        let mut at = range[0];
        while shown.len() < 5 {
            let Some(id) = first_outside([at, range[1]], &now) else {
                break;
            };
            shown.push(id.to_string());
            let Some(next) = id.checked_add(1) else {
                break;
            };
            at = next;
        }
    }
    let more = if missing > shown.len() as u64 {
        ", …"
    } else {
        ""
    };
    Some(format!(
        "{missing} of the {} tablets the snapshot planned are gone ({}{more})",
        count(recorded),
        shown.join(", ")
    ))
}

/// Whether two plans of the same snapshot (two shards') saw different tablets, described for a
/// person; `None` when they are the same set.
pub fn differ(a: &[[i64; 2]], b: &[[i64; 2]]) -> Option<String> {
    let (a, b) = (&normalize(a), &normalize(b));
    if a == b {
        return None;
    }
    let first_only =
        |x: &[[i64; 2]], y: &[[i64; 2]]| x.iter().find_map(|range| first_outside(*range, y));
    let example = first_only(a, b)
        .map(|id| format!("tablet {id} is in the first only"))
        .or_else(|| first_only(b, a).map(|id| format!("tablet {id} is in the second only")))?;
    Some(format!(
        "they planned {} and {} tablets; {example}",
        count(a),
        count(b)
    ))
}

/// The message of a snapshot whose tablets moved: what happened and what dcs does about it.
pub fn moved_message(what: &str) -> String {
    format!(
        "the table's tablets changed during the snapshot ({what}): a TRUNCATE, INSERT OVERWRITE or partition replace gave it new tablets, and a snapshot that planned the old ones cannot say what it read; the snapshot is read again under a new consumer"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_make_one_range() {
        assert_eq!(
            tablet_set(&[10_007, 10_001, 10_002, 10_003, 10_009, 10_008, 10_002]),
            vec![[10_001, 10_003], [10_007, 10_009]]
        );
        assert_eq!(count(&tablet_set(&[1, 2, 3, 7])), 4);
        assert_eq!(tablet_set(&[]), TabletSet::new());
        assert_eq!(
            tablet_set(&[i64::MAX, i64::MAX - 1]),
            vec![[i64::MAX - 1, i64::MAX]]
        );
    }

    #[test]
    fn a_stored_set_of_any_size_is_compared_without_walking_its_ids() {
        let huge = vec![[0, i64::MAX]];
        assert!(
            gone(&huge, &[1, 2, 3])
                .unwrap()
                .starts_with("9223372036854775805 of the")
        );
        assert!(
            differ(&huge, &[[0, i64::MAX - 1]])
                .unwrap()
                .ends_with(&format!("tablet {} is in the first only", i64::MAX))
        );
        // Overlapping, unsorted ranges (not what dcs writes) are still read as a set.
        assert_eq!(differ(&[[5, 9], [1, 6]], &[[1, 9]]), None);
        assert_eq!(count(&[[5, 9], [1, 6], [9, 2]]), 9);
        assert_eq!(gone(&[[5, 9], [1, 6]], &(1..=9).collect::<Vec<_>>()), None);
    }

    #[test]
    fn tablets_gone_are_named_and_new_ones_are_not_a_change() {
        let recorded = tablet_set(&(10_001..=10_008).collect::<Vec<_>>());
        // A partition added since: still all there.
        let grown: Vec<i64> = (10_001..=10_012).collect();
        assert_eq!(gone(&recorded, &grown), None);
        // TRUNCATE: every tablet new.
        let truncated: Vec<i64> = (10_020..=10_027).collect();
        assert_eq!(
            gone(&recorded, &truncated).as_deref(),
            Some(
                "8 of the 8 tablets the snapshot planned are gone (10001, 10002, 10003, 10004, 10005, …)"
            )
        );
        // One partition overwritten.
        let overwritten: Vec<i64> = (10_001..=10_006).chain(10_030..=10_031).collect();
        assert_eq!(
            gone(&recorded, &overwritten).as_deref(),
            Some("2 of the 8 tablets the snapshot planned are gone (10007, 10008)")
        );
    }

    #[test]
    fn two_shards_plans_differ_only_when_their_sets_do() {
        let a = tablet_set(&[1, 2, 3, 4]);
        assert_eq!(differ(&a, &tablet_set(&[4, 3, 2, 1])), None);
        assert_eq!(
            differ(&a, &tablet_set(&[5, 6, 7, 8])).as_deref(),
            Some("they planned 4 and 4 tablets; tablet 1 is in the first only")
        );
        assert_eq!(
            differ(&a, &tablet_set(&[1, 2, 3, 4, 9])).as_deref(),
            Some("they planned 4 and 5 tablets; tablet 9 is in the second only")
        );
    }
}

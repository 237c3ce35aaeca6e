//! Rebuilding the sink for a re-initialised consumer, so readers never see it empty or partial.
//!
//! The operator starts a re-initialised consumer with the manifest annotation
//! [`REINITIALIZED_FROM_ANNOTATION`] naming the consumer it replaces. A runner that starts
//! **without a checkpoint** and with a snapshot ahead honours it:
//!
//! - **Upsert sink** (`sink.doris.mode: upsert`): the snapshot goes into a shadow table
//!   ([`shadow_table`], `<table>__dcs_shadow` in the sink's database) while readers keep the old,
//!   complete table:
//!   1. `DROP TABLE IF EXISTS` the shadow (a leftover of an earlier attempt), then
//!      `CREATE TABLE <shadow> LIKE <sink>` (same schema, keys, buckets, partitioning, properties);
//!   2. the snapshot is loaded into the shadow; every checkpoint records the rebuild
//!      ([`Record`]: the previous consumer and the shadow), so a restarted runner goes on loading
//!      into the shadow whatever the manifest says;
//!   3. when the snapshot is complete its last checkpoint is saved and its loads committed, then
//!      `ALTER TABLE <sink> REPLACE WITH TABLE <shadow> PROPERTIES ("swap" = "false")` swaps the
//!      shadow in atomically (the old table is dropped, the shadow takes its name with its rows,
//!      schema, properties and partitions);
//!   4. a checkpoint records the swap (`swappedAt`), and only then is the changelog read, into
//!      the sink table.
//!
//!   A run killed anywhere in between restarts from its checkpoint: before the first checkpoint
//!   it starts the rebuild again (the leftover shadow is dropped), during the snapshot it loads on
//!   into the shadow, after the complete snapshot it swaps. A swap whose answer was lost (killed,
//!   or the connection dropped, after Doris applied it) is recognised by the shadow being gone:
//!   only the swap removes it, so a shadow dropped by hand during a rebuild is taken for a swap.
//! - **Changelog-mode sink** (append-only, an audit trail): nothing is truncated or replaced; the
//!   history stays and the new consumer's snapshot rows carry `dcs_op` [`RESNAPSHOT_OP`](crate::sink::encode::RESNAPSHOT_OP) (`+R`)
//!   instead of `+I`, all with the new T0's TSO, so a reader sees where the history has a gap.
//!
//! [`plan`] is pure; a sink that rebuilds does the I/O behind [`super::Sink::begin_rebuild`] and
//! [`super::Sink::swap_rebuilt`] (for Doris, `super::doris::rebuild`: three DDL steps).

use dcs_crds::SinkMode;
pub use dcs_crds::checkpoint::{REINITIALIZED_FROM_ANNOTATION, Rebuild as Record};
use dcs_crds::spec::TableRef;

use crate::checkpoint::{Checkpoint, Position};

/// Appended to the sink table's name for the shadow table.
pub const SHADOW_SUFFIX: &str = "__dcs_shadow";
/// Longest table name Doris accepts by default (`table_name_length_limit`).
pub const MAX_TABLE_NAME: usize = 64;

/// The shadow table of `sink`: `<table>__dcs_shadow` in the same database (REPLACE works within
/// one database). A name that would be longer than Doris allows keeps a prefix of the table name
/// and a hash of the whole, so two long names never share a shadow.
pub fn shadow_table(sink: &TableRef) -> TableRef {
    let full = format!("{}{SHADOW_SUFFIX}", sink.table);
    let table = if full.len() <= MAX_TABLE_NAME {
        full
    } else {
        let hash = format!("{:08x}", fnv1a32(sink.table.as_bytes()));
        let keep = MAX_TABLE_NAME - SHADOW_SUFFIX.len() - hash.len() - 1;
        let mut end = keep;
        while !sink.table.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}_{hash}{SHADOW_SUFFIX}", &sink.table[..end])
    };
    TableRef {
        database: sink.database.clone(),
        table,
    }
}

fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in bytes {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// What a run does about rebuilding its sink.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rebuild {
    /// What this run's checkpoints record (once recorded, kept for the consumer's life).
    pub record: Option<Record>,
    /// What to do before the first load.
    pub step: Step,
}

/// The step before the first load.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Step {
    /// Load into the sink table.
    #[default]
    Sink,
    /// Drop a leftover shadow, create the shadow like the sink table, load into it.
    CreateShadow(TableRef),
    /// Load on into the shadow an earlier run of this consumer created.
    ResumeShadow(TableRef),
    /// The snapshot in the shadow is complete: swap it in before the changelog (it may already
    /// be swapped, the answer lost).
    SwapPending(TableRef),
}

impl Rebuild {
    /// The table loads go to until the swap: the shadow while one is in use.
    pub fn shadow(&self) -> Option<&TableRef> {
        match &self.step {
            Step::Sink => None,
            Step::CreateShadow(t) | Step::ResumeShadow(t) | Step::SwapPending(t) => Some(t),
        }
    }

    /// Whether the snapshot rows are marked [`RESNAPSHOT_OP`](crate::sink::encode::RESNAPSHOT_OP) (a changelog-mode rebuild).
    pub fn marks_snapshot(&self) -> bool {
        self.record
            .as_ref()
            .is_some_and(|r| r.shadow_table.is_none())
    }

    /// Whether the shadow still has to be swapped in (once the snapshot is complete).
    pub fn swap_due(&self) -> bool {
        self.shadow().is_some()
    }

    /// After the swap: loads go to the sink table, and the record says when it happened.
    pub fn swapped(&mut self, at: String) {
        self.step = Step::Sink;
        if let Some(r) = self.record.as_mut() {
            r.swapped_at = Some(at);
        }
    }
}

/// The sink as the rebuild sees it: its table and mode, `None` for the stdout sink.
pub type SinkKind<'a> = Option<(&'a TableRef, SinkMode)>;

/// A decided rebuild, and why a directive was ignored (for the log), if it was.
pub type Planned = (Rebuild, Option<String>);

/// Decides the rebuild of a run (pure). `stored` is the checkpoint the run starts from,
/// `directive` the manifest's [`REINITIALIZED_FROM_ANNOTATION`], `snapshot_first` whether the run
/// starts with a snapshot.
///
/// # Errors
/// A checkpoint whose rebuild names an unreadable shadow table.
pub fn plan(
    stored: Option<&Checkpoint>,
    directive: Option<&str>,
    sink: SinkKind<'_>,
    snapshot_first: bool,
) -> std::result::Result<Planned, String> {
    if let Some(cp) = stored {
        // The checkpoint rules: the directive only applies to a run without one.
        let Some(record) = cp.rebuild.clone() else {
            return Ok((Rebuild::default(), None));
        };
        let step = match (&record.shadow_table, &record.swapped_at) {
            (Some(shadow), None) => {
                let table = shadow.parse::<TableRef>().map_err(|e| {
                    format!("the checkpoint's rebuild names shadow table {shadow:?}: {e}")
                })?;
                if matches!(cp.position, Position::Snapshot { .. }) {
                    Step::ResumeShadow(table)
                } else {
                    Step::SwapPending(table)
                }
            }
            _ => Step::Sink,
        };
        let rebuild = Rebuild {
            record: Some(record),
            step,
        };
        return Ok((rebuild, None));
    }
    let Some(previous) = directive.map(str::trim).filter(|p| !p.is_empty()) else {
        return Ok((Rebuild::default(), None));
    };
    let ignored = |why: &str| {
        Ok((
            Rebuild::default(),
            Some(format!(
                "{REINITIALIZED_FROM_ANNOTATION}: {previous} is ignored: {why}"
            )),
        ))
    };
    let Some((table, mode)) = sink else {
        return ignored("the stdout sink has nothing to rebuild");
    };
    if !snapshot_first {
        return ignored(
            "this run starts without a snapshot (an offset-table row or the startup mode), so there is nothing to rebuild the sink from",
        );
    }
    let record = |shadow: Option<&TableRef>| Record {
        previous_consumer_id: previous.to_owned(),
        shadow_table: shadow.map(ToString::to_string),
        swapped_at: None,
    };
    let rebuild = match mode {
        SinkMode::Upsert => {
            let shadow = shadow_table(table);
            Rebuild {
                record: Some(record(Some(&shadow))),
                step: Step::CreateShadow(shadow),
            }
        }
        SinkMode::Changelog => Rebuild {
            record: Some(record(None)),
            step: Step::Sink,
        },
    };
    Ok((rebuild, None))
}

#[cfg(test)]
mod tests {
    use dcs_crds::testing::CheckpointBuilder;

    use super::*;
    use crate::checkpoint::Offset;

    fn table() -> TableRef {
        "sink.student".parse().unwrap()
    }

    fn checkpoint(rebuild: Option<Record>) -> Checkpoint {
        CheckpointBuilder::new()
            .consumer("s-r1")
            .id(3)
            .snapshot(&[1], 4)
            .rebuild(rebuild)
            .build()
    }

    fn record(shadow: Option<&str>, swapped: Option<&str>) -> Record {
        Record {
            previous_consumer_id: "s".into(),
            shadow_table: shadow.map(str::to_owned),
            swapped_at: swapped.map(str::to_owned),
        }
    }

    #[test]
    fn a_fresh_upsert_run_with_the_directive_creates_the_shadow() {
        let t = table();
        let (r, note) = plan(None, Some("s"), Some((&t, SinkMode::Upsert)), true).unwrap();
        assert_eq!(note, None);
        let shadow: TableRef = "sink.student__dcs_shadow".parse().unwrap();
        assert_eq!(
            r,
            Rebuild {
                record: Some(record(Some("sink.student__dcs_shadow"), None)),
                step: Step::CreateShadow(shadow.clone()),
            }
        );
        assert_eq!(r.shadow(), Some(&shadow));
        assert!(r.swap_due() && !r.marks_snapshot());
    }

    #[test]
    fn a_fresh_changelog_run_marks_its_snapshot_and_keeps_the_history() {
        let t = table();
        let (r, _) = plan(None, Some("s"), Some((&t, SinkMode::Changelog)), true).unwrap();
        assert_eq!(r.record, Some(record(None, None)));
        assert_eq!(r.step, Step::Sink);
        assert!(r.marks_snapshot() && !r.swap_due());
    }

    #[test]
    fn the_checkpoint_rules_over_the_directive() {
        let t = table();
        let sink = Some((&t, SinkMode::Upsert));
        // A checkpoint without a rebuild: the directive is not for this run.
        assert_eq!(
            plan(Some(&checkpoint(None)), Some("s"), sink, true).unwrap(),
            (Rebuild::default(), None)
        );
        // Mid-rebuild: loads go on into the recorded shadow, directive or not.
        let cp = checkpoint(Some(record(Some("sink.student__dcs_shadow"), None)));
        let (r, _) = plan(Some(&cp), None, sink, false).unwrap();
        assert_eq!(
            r.step,
            Step::ResumeShadow("sink.student__dcs_shadow".parse().unwrap())
        );
        assert!(r.swap_due());
        // The snapshot complete, not swapped (or swapped, the answer lost): swap before the
        // changelog, without requiring the shadow to be there.
        let mut cp = cp;
        cp.position = Position::Changelog {
            offset: Offset {
                timestamp: "2026-11-29 14:00:00".into(),
                epoch_ms: 0,
                tso: 0,
            },
        };
        let (r, _) = plan(Some(&cp), None, sink, false).unwrap();
        assert_eq!(
            r.step,
            Step::SwapPending("sink.student__dcs_shadow".parse().unwrap())
        );
        assert!(r.swap_due());
        // Swapped: the sink table again, the record kept.
        let done = record(
            Some("sink.student__dcs_shadow"),
            Some("2026-11-29T14:10:00Z"),
        );
        let cp = checkpoint(Some(done.clone()));
        let (r, _) = plan(Some(&cp), Some("s"), sink, true).unwrap();
        assert_eq!(
            r,
            Rebuild {
                record: Some(done),
                step: Step::Sink
            }
        );
        // A changelog rebuild mid-snapshot still marks the rows.
        let cp = checkpoint(Some(record(None, None)));
        assert!(
            plan(Some(&cp), None, sink, true)
                .unwrap()
                .0
                .marks_snapshot()
        );
    }

    #[test]
    fn a_directive_without_a_snapshot_or_a_doris_sink_is_ignored_with_the_reason() {
        let t = table();
        let (r, note) = plan(None, Some("s"), Some((&t, SinkMode::Upsert)), false).unwrap();
        assert_eq!(r, Rebuild::default());
        assert_eq!(
            note.as_deref(),
            Some(
                "dcs.dev/reinitialized-from: s is ignored: this run starts without a snapshot (an offset-table row or the startup mode), so there is nothing to rebuild the sink from"
            )
        );
        let (r, note) = plan(None, Some("s"), None, true).unwrap();
        assert_eq!(r, Rebuild::default());
        assert!(note.unwrap().contains("stdout sink"));
        assert_eq!(
            plan(None, Some("  "), Some((&t, SinkMode::Upsert)), true).unwrap(),
            (Rebuild::default(), None)
        );
        assert_eq!(
            plan(None, None, Some((&t, SinkMode::Upsert)), true).unwrap(),
            (Rebuild::default(), None)
        );
    }

    #[test]
    fn a_bad_shadow_in_the_checkpoint_is_an_error() {
        let t = table();
        let cp = checkpoint(Some(record(Some("no-dot"), None)));
        assert!(plan(Some(&cp), None, Some((&t, SinkMode::Upsert)), true).is_err());
    }

    #[test]
    fn long_table_names_keep_within_the_doris_limit_and_stay_distinct() {
        let long = |s: &str| TableRef {
            database: "d".into(),
            table: format!("{}{s}", "x".repeat(60)),
        };
        let a = shadow_table(&long("a"));
        let b = shadow_table(&long("b"));
        assert!(a.table.len() <= MAX_TABLE_NAME, "{}", a.table);
        assert!(a.table.ends_with(SHADOW_SUFFIX));
        assert_ne!(a, b);
        assert_eq!(shadow_table(&"d.t".parse().unwrap()).table, "t__dcs_shadow");
    }
}

//! Where the snapshot of an `initial` sync is read, so that it meets the changelog from T0 without
//! a change twice (docs/ARCHITECTURE.md §3.4, §7).
//!
//! The changelog run drops every change at or below T0's TSO (`changelog::drop_before_seam`). A
//! snapshot of the current data also holds the changes made after T0 before their tablet was
//! read, which the changelog brings again: harmless for an upsert sink (the second write lands
//! on the same key), a doubled event for a sink that keeps every event. Such a sink reads the
//! snapshot as of T0 (`FOR VERSION AS OF`, docs/doris-protocols.md §1.8): every change at or
//! below T0 in the snapshot, every later one in the changelog, each exactly once.

use dcs_crds::doris_table::{KeysModel, SourceTableInfo};

/// What the seam needs to know of the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeamSink {
    /// A row sent twice lands once (an upsert sink keyed like the source).
    pub idempotent: bool,
    /// A changelog-mode (audit) sink: its history is the product, a doubled event is a wrong
    /// history.
    pub audit: bool,
}

/// How the snapshot is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadAt {
    /// The current data (no changelog follows, or the sink takes a change twice harmlessly).
    Now,
    /// As of this commit TSO (T0's).
    Tso(i64),
    /// The current data although the sink keeps every event: the table cannot be read as of T0
    /// (a stdout sink of a merge-on-write table without before-images). The changes made during
    /// the snapshot reach it twice; the reason is logged.
    NowAtLeastOnce(String),
}

/// Whether Doris reads the table as of a TSO: the changelog on, and on a merge-on-write table
/// its before-images (the older versions are rebuilt from them; a DUPLICATE KEY table only
/// inserts, so the rows committed up to the TSO are its image).
pub fn readable_as_of(info: &SourceTableInfo) -> bool {
    info.enabled
        && match info.keys {
            KeysModel::Duplicate => true,
            KeysModel::Unique { merge_on_write } => merge_on_write && info.need_historical_value,
            KeysModel::Aggregate | KeysModel::Unknown => false,
        }
}

/// Decide how the snapshot before the changelog from `t0` is read.
///
/// # Errors
/// An audit sink of a table that cannot be read as of T0: its history would hold the changes made
/// during the snapshot twice. The message names the table property that fixes it.
pub fn read_at(
    t0_tso: Option<i64>,
    sink: SeamSink,
    info: Option<&SourceTableInfo>,
    table: &str,
) -> Result<ReadAt, String> {
    let Some(tso) = t0_tso else {
        return Ok(ReadAt::Now);
    };
    if sink.idempotent {
        return Ok(ReadAt::Now);
    }
    match info {
        Some(info) if readable_as_of(info) => Ok(ReadAt::Tso(tso)),
        info => {
            let why = match info {
                None => "its definition was not read".to_owned(),
                Some(i) if !i.enabled => "its changelog is off".to_owned(),
                Some(i) => format!(
                    "it is a merge-on-write table without {}need_historical_value, whose older \
                     versions Doris cannot rebuild",
                    i.spelling.prefix()
                ),
            };
            let what = format!(
                "{table} cannot be read as of T0 (FOR VERSION AS OF {tso}): {why}; so the changes \
                 made while the snapshot is read would reach the sink twice, once in the \
                 snapshot and once from the changelog"
            );
            if sink.audit {
                Err(format!(
                    "{what}. A changelog-mode sink keeps every event and must not hold one twice: \
                     create the source table with \"{}need_historical_value\" = \"true\", or use \
                     an upsert sink",
                    info.map_or("changelog.", |i| i.spelling.prefix())
                ))
            } else {
                Ok(ReadAt::NowAtLeastOnce(what))
            }
        }
    }
}

impl ReadAt {
    /// The TSO to read as of, if any.
    pub fn tso(&self) -> Option<i64> {
        match self {
            Self::Tso(t) => Some(*t),
            Self::Now | Self::NowAtLeastOnce(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dcs_crds::doris_table::PropertySpelling;

    fn info(keys: KeysModel, historical: bool) -> SourceTableInfo {
        SourceTableInfo {
            spelling: PropertySpelling::Changelog,
            enabled: true,
            need_historical_value: historical,
            ttl_seconds: 3600,
            keys,
            light_delete: false,
        }
    }

    const AUDIT: SeamSink = SeamSink {
        idempotent: false,
        audit: true,
    };
    const UPSERT: SeamSink = SeamSink {
        idempotent: true,
        audit: false,
    };
    const STDOUT: SeamSink = SeamSink {
        idempotent: false,
        audit: false,
    };
    const MOW: KeysModel = KeysModel::Unique {
        merge_on_write: true,
    };

    #[test]
    fn a_sink_keeping_every_event_reads_the_snapshot_as_of_t0() {
        let mow = info(MOW, true);
        assert_eq!(
            read_at(Some(7), AUDIT, Some(&mow), "d.t"),
            Ok(ReadAt::Tso(7))
        );
        assert_eq!(
            read_at(Some(7), STDOUT, Some(&mow), "d.t"),
            Ok(ReadAt::Tso(7))
        );
        let dup = info(KeysModel::Duplicate, false);
        assert_eq!(
            read_at(Some(7), AUDIT, Some(&dup), "d.t"),
            Ok(ReadAt::Tso(7))
        );
    }

    #[test]
    fn upsert_sinks_and_snapshots_without_a_changelog_read_the_current_data() {
        let mow = info(MOW, true);
        assert_eq!(read_at(Some(7), UPSERT, Some(&mow), "d.t"), Ok(ReadAt::Now));
        assert_eq!(read_at(None, AUDIT, Some(&mow), "d.t"), Ok(ReadAt::Now));
        assert_eq!(read_at(None, AUDIT, None, "d.t"), Ok(ReadAt::Now));
    }

    #[test]
    fn an_audit_sink_of_a_table_without_before_images_is_refused_naming_the_property() {
        let err = read_at(Some(7), AUDIT, Some(&info(MOW, false)), "d.t").unwrap_err();
        assert!(
            err.starts_with(
                "d.t cannot be read as of T0 (FOR VERSION AS OF 7): it is a merge-on-write table \
                 without changelog.need_historical_value"
            ),
            "{err}"
        );
        assert!(
            err.ends_with(
                "create the source table with \"changelog.need_historical_value\" = \"true\", or \
                 use an upsert sink"
            ),
            "{err}"
        );
        let off = SourceTableInfo {
            enabled: false,
            ..info(MOW, true)
        };
        assert!(read_at(Some(7), AUDIT, Some(&off), "d.t").is_err());
    }

    #[test]
    fn a_stdout_sink_of_such_a_table_reads_the_current_data_and_says_why() {
        let got = read_at(Some(7), STDOUT, Some(&info(MOW, false)), "d.t").unwrap();
        assert!(matches!(&got, ReadAt::NowAtLeastOnce(why) if why.contains("twice")));
        assert_eq!(got.tso(), None);
    }
}

//! The source's columns as a sink follows them (schema evolution): which were added and which
//! dropped since the columns the sink was last in step with ([`diff_columns`]), and what the
//! sync does about it under `spec.sink.doris.schemaChange` ([`decide`]). Pure; a sink applies a
//! change behind [`super::Sink::follow_columns`].
//!
//! Doris refuses `RENAME COLUMN` and `MODIFY COLUMN` on a table with the changelog
//! (docs/doris-protocols.md §1.9), so ADD and DROP COLUMN are the changes a source can show.

use dcs_crds::SchemaChangePolicy;

/// How a sink meets a change of the source's columns: the policy, and whether dcs may change
/// the sink table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Follow {
    /// The columns read are fixed (a `source.columns` list, or a sink without a table): there is
    /// nothing to follow, and the changelog is read with the fixed list.
    #[default]
    Fixed,
    /// `evolve` on a table dcs may change (`createTable.enabled`): ADD/DROP COLUMN on the sink.
    Evolve,
    /// `evolve` on a table dcs may not change (`createTable.enabled: false`): followed when the
    /// sink has the new columns already (someone added them), stopped otherwise.
    EvolveByHand,
    /// `fail`: any change stops the sync.
    Fail,
    /// `ignore`: the sink keeps its columns; only the source columns it has are written.
    Ignore,
}

impl Follow {
    /// The follow of a Doris sink table: `policy`, whether every source column is read
    /// (`all_columns`: no `source.columns` list), whether dcs may change the table.
    pub fn of(policy: SchemaChangePolicy, all_columns: bool, may_alter: bool) -> Self {
        match (all_columns, policy) {
            (false, _) => Self::Fixed,
            (true, SchemaChangePolicy::Evolve) if may_alter => Self::Evolve,
            (true, SchemaChangePolicy::Evolve) => Self::EvolveByHand,
            (true, SchemaChangePolicy::Fail) => Self::Fail,
            (true, SchemaChangePolicy::Ignore) => Self::Ignore,
        }
    }

    /// Whether the source's columns are watched (the changelog read with all of them).
    pub fn watches(self) -> bool {
        self != Self::Fixed
    }
}

/// What the sync does about a change of the source's columns ([`decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No change.
    Same,
    /// Change the sink's columns ([`super::Sink::follow_columns`]).
    Alter(SchemaChange),
    /// The sink keeps its columns; `ignored` are the source columns not written.
    Keep {
        /// The change.
        change: SchemaChange,
        /// Source columns the sink does not have, not written.
        ignored: Vec<String>,
    },
    /// Stop before a row with the new columns is written.
    Stop {
        /// The change.
        change: SchemaChange,
        /// What changed and what to do.
        message: String,
    },
}

/// Decide about the source's columns `current`, the sink being in step with `known` and having
/// `sink_columns` (its data columns). `source` names the source table for the messages. Pure.
pub fn decide(
    follow: Follow,
    source: &str,
    known: &[String],
    current: &[String],
    sink_columns: &[String],
) -> Step {
    if follow == Follow::Fixed {
        return Step::Same;
    }
    let Some(change) = diff_columns(known, current) else {
        return Step::Same;
    };
    let what = change.describe(source);
    match follow {
        Follow::Fixed => Step::Same,
        Follow::Evolve => Step::Alter(change),
        Follow::Ignore => Step::Keep {
            ignored: missing_from(current, sink_columns),
            change,
        },
        Follow::EvolveByHand => {
            let missing = missing_from(&change.added, sink_columns);
            if missing.is_empty() {
                return Step::Keep {
                    change,
                    ignored: Vec::new(),
                };
            }
            let message = format!(
                "{what}; spec.sink.doris.createTable.enabled is false, so dcs does not change the sink table, which lacks {}: add them to it (the sync goes on at its next start), or set createTable.enabled: true to let dcs follow, or schemaChange: ignore to keep the sink's columns",
                list(&missing)
            );
            Step::Stop { change, message }
        }
        Follow::Fail => {
            let message = format!(
                "{what}; spec.sink.doris.schemaChange is fail, so the sync stopped before writing a row with the new columns into the sink: set schemaChange to evolve to follow the change (a column you added to the sink yourself is kept), or to ignore to keep the sink's columns"
            );
            Step::Stop { change, message }
        }
    }
}

/// The names of `names` that `have` lacks (case-insensitively), in order.
pub fn missing_from(names: &[String], have: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|n| !have.iter().any(|h| h.eq_ignore_ascii_case(n)))
        .cloned()
        .collect()
}

fn list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Columns added to and dropped from the source since the last known column list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaChange {
    /// New columns, in their order.
    pub added: Vec<String>,
    /// Columns gone.
    pub dropped: Vec<String>,
}

impl SchemaChange {
    /// In words: `the columns of source table db.t changed: added `c`; dropped `d``.
    pub fn describe(&self, source: &str) -> String {
        let mut parts = Vec::new();
        if !self.added.is_empty() {
            parts.push(format!("added {}", list(&self.added)));
        }
        if !self.dropped.is_empty() {
            parts.push(format!("dropped {}", list(&self.dropped)));
        }
        format!(
            "the columns of source table {source} changed: {}",
            parts.join("; ")
        )
    }
}

/// Compare the known columns with the current ones (names compared case-insensitively);
/// `None` when the same set. Pure.
pub fn diff_columns(known: &[String], current: &[String]) -> Option<SchemaChange> {
    let has = |list: &[String], n: &str| list.iter().any(|c| c.eq_ignore_ascii_case(n));
    let change = SchemaChange {
        added: current.iter().filter(|c| !has(known, c)).cloned().collect(),
        dropped: known.iter().filter(|c| !has(current, c)).cloned().collect(),
    };
    (!change.added.is_empty() || !change.dropped.is_empty()).then_some(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn column_changes_are_found_by_name() {
        assert_eq!(
            diff_columns(&names(&["id", "a"]), &names(&["ID", "a"])),
            None
        );
        assert_eq!(
            diff_columns(&names(&["id", "a", "b"]), &names(&["id", "b", "c", "d"])),
            Some(SchemaChange {
                added: names(&["c", "d"]),
                dropped: names(&["a"]),
            })
        );
    }

    #[test]
    fn the_policy_decides_what_a_change_does() {
        let tables = "src.t";
        let known = names(&["id", "a", "b"]);
        let current = names(&["id", "b", "c"]);
        let change = SchemaChange {
            added: names(&["c"]),
            dropped: names(&["a"]),
        };
        for follow in [
            Follow::Evolve,
            Follow::EvolveByHand,
            Follow::Fail,
            Follow::Ignore,
        ] {
            assert_eq!(
                decide(follow, tables, &known, &known, &known),
                Step::Same,
                "{follow:?}"
            );
        }
        assert_eq!(
            decide(Follow::Fixed, tables, &known, &current, &known),
            Step::Same
        );
        assert_eq!(
            decide(Follow::Evolve, tables, &known, &current, &known),
            Step::Alter(change.clone())
        );
        assert_eq!(
            decide(Follow::Ignore, tables, &known, &current, &known),
            Step::Keep {
                change: change.clone(),
                ignored: names(&["c"]),
            }
        );
        assert_eq!(
            decide(Follow::Fail, tables, &known, &current, &known),
            Step::Stop {
                change: change.clone(),
                message: "the columns of source table src.t changed: added `c`; dropped `a`; spec.sink.doris.schemaChange is fail, so the sync stopped before writing a row with the new columns into the sink: set schemaChange to evolve to follow the change (a column you added to the sink yourself is kept), or to ignore to keep the sink's columns".into(),
            }
        );
        assert_eq!(
            decide(Follow::EvolveByHand, tables, &known, &current, &known),
            Step::Stop {
                change: change.clone(),
                message: "the columns of source table src.t changed: added `c`; dropped `a`; spec.sink.doris.createTable.enabled is false, so dcs does not change the sink table, which lacks `c`: add them to it (the sync goes on at its next start), or set createTable.enabled: true to let dcs follow, or schemaChange: ignore to keep the sink's columns".into(),
            }
        );
        // Someone added the column to the sink: followed without a change of the table.
        assert_eq!(
            decide(
                Follow::EvolveByHand,
                tables,
                &known,
                &current,
                &names(&["id", "a", "b", "C"])
            ),
            Step::Keep {
                change,
                ignored: Vec::new(),
            }
        );
    }

    #[test]
    fn the_follow_comes_from_the_policy_the_columns_read_and_the_right_to_alter() {
        use SchemaChangePolicy::{Evolve, Fail, Ignore};
        assert_eq!(Follow::of(Evolve, false, true), Follow::Fixed);
        assert_eq!(Follow::of(Fail, false, true), Follow::Fixed);
        assert_eq!(Follow::of(Evolve, true, true), Follow::Evolve);
        assert_eq!(Follow::of(Evolve, true, false), Follow::EvolveByHand);
        assert_eq!(Follow::of(Fail, true, false), Follow::Fail);
        assert_eq!(Follow::of(Ignore, true, true), Follow::Ignore);
        assert!(!Follow::Fixed.watches() && Follow::Ignore.watches());
    }
}

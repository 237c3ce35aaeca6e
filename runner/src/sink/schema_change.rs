//! The source's columns as a sink follows them (schema evolution): which were added and which
//! dropped since the columns the sink was last prepared for. Pure; a sink applies a change behind
//! [`super::Sink::follow_columns`].

/// Columns added to and dropped from the source since the last known column list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaChange {
    /// New columns, in their order.
    pub added: Vec<String>,
    /// Columns gone.
    pub dropped: Vec<String>,
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
}

//! `ALTER TABLE t REPLACE WITH TABLE u [PROPERTIES ("swap" = "true"|"false")]`.
//!
//! As Doris's `Alter.replaceTableInternal` does it, under one lock so no reader ever sees a state
//! in between: both tables leave the database, `u` comes back under the name `t`, and `t` either
//! comes back under the name `u` (`swap` true, the default) or is erased (`swap` false). A table
//! is one object with its rows, tablets, id, properties, partitioning and changelog, so all of
//! that moves with the name: after a non-swapping replace, `t` is what `u` was (its schema too,
//! which Doris does not compare), `u` no longer exists, and the changelog of the old `t` is gone
//! with it. Transactions address tables by id, so a load pre-committed into `u` commits into the
//! renamed table, and one pre-committed into an erased table can no longer commit.

use super::{Engine, access_denied, err_unknown_db, err_unknown_table, is_system_db};
use crate::error::{DorisError, Result};

impl Engine {
    /// Replaces `table` with `with` in database `db` (see the module docs).
    ///
    /// # Errors
    /// Doris's `Unknown database` / `Unknown table` for a missing database or table, access denied
    /// on system databases, and (the emulator's wording) a table replaced with itself.
    pub fn replace_table(&self, db: &str, table: &str, with: &str, swap: bool) -> Result<()> {
        if is_system_db(db) {
            return Err(access_denied(db));
        }
        if table == with {
            return Err(DorisError::analysis(format!(
                "Cannot replace table {table} with itself"
            )));
        }
        let mut st = self.state.write();
        let d = st.dbs.get_mut(db).ok_or_else(|| err_unknown_db(db))?;
        if !d.tables.contains_key(table) {
            return Err(err_unknown_table(table));
        }
        if !d.tables.contains_key(with) {
            return Err(err_unknown_table(with));
        }
        let mut original = d.tables.remove(table).expect("checked");
        let mut replacement = d.tables.remove(with).expect("checked");
        replacement.name = table.to_owned();
        d.tables.insert(table.to_owned(), replacement);
        if swap {
            original.name = with.to_owned();
            d.tables.insert(with.to_owned(), original);
        }
        Ok(())
    }
}

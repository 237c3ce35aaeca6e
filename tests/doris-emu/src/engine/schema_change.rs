//! Column schema changes: `ALTER TABLE … ADD COLUMN`, `DROP COLUMN`, `RENAME COLUMN`,
//! `MODIFY COLUMN`, `ORDER BY`, as Doris's FE takes them (docs/doris-protocols.md §1.9).
//!
//! On a table with the changelog only ADD/DROP COLUMN (and a column's comment) are allowed; every
//! other column change fails with [`ROW_BINLOG_NOT_ALLOWED`] before anything else is checked
//! (Doris's `AlterOperations.checkRowBinlogAllow`). Every change is applied to the current rows
//! and to every changelog image under the engine's lock, so no read sees half a change, and an
//! `@incr` window that spans a change returns every row with the table's current columns: an
//! added column carries its default (or NULL) in the changes written before it, a dropped column
//! is gone from every row, a column added again under a dropped one's name starts from its
//! default.

use super::table::{NormWrite, Table};
use super::{ColumnDef, Engine, KeysType, State, Txn, TxnState};
use crate::error::{DorisError, Result};
use crate::types::{DorisType, Value};

/// Doris's rejection of a column change on a table with the changelog (D `AlterOperations.
/// checkRowBinlogAllow`; DW `row-binlog.md`, "DDL restrictions"). Doris uses this text under
/// both spellings of the feature.
pub const ROW_BINLOG_NOT_ALLOWED: &str =
    "Not allowed to perform current operation on Table With binlog<row>";

/// Where `ADD COLUMN` / `MODIFY COLUMN` put the column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnPosition<'a> {
    /// No position given: ADD appends, MODIFY keeps the column where it is.
    Unchanged,
    /// `FIRST`.
    First,
    /// `AFTER <column>`.
    After(&'a str),
}

fn bad(detail: impl AsRef<str>) -> DorisError {
    DorisError::analysis(detail)
}

/// The one gate for column changes Doris refuses on a changelog table.
fn refuse_on_changelog(t: &Table) -> Result<()> {
    if t.changelog.enabled {
        return Err(bad(ROW_BINLOG_NOT_ALLOWED));
    }
    Ok(())
}

/// Doris's column order rule, checked on the schema a change would leave (D
/// `SchemaChangeHandler`: "Invalid column order. value should be after key. index[<t>]").
fn check_key_prefix(t: &Table, columns: &[ColumnDef]) -> Result<()> {
    let mut seen_value = false;
    for c in columns {
        if c.is_key && seen_value {
            return Err(bad(format!(
                "Invalid column order. value should be after key. index[{}]",
                t.name
            )));
        }
        seen_value |= !c.is_key;
    }
    Ok(())
}

/// The index a column is moved or added to, in `columns` without it.
fn target_index(
    columns: &[ColumnDef],
    position: ColumnPosition<'_>,
    current: usize,
) -> Result<usize> {
    match position {
        ColumnPosition::Unchanged => Ok(current),
        ColumnPosition::First => Ok(0),
        ColumnPosition::After(a) => columns
            .iter()
            .position(|c| c.name == a)
            .map(|i| i + 1)
            .ok_or_else(|| bad(format!("Column[{a}] does not exists"))),
    }
}

/// How the stored values of a column follow a type change the emulator carries out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueChange {
    /// The value is stored the same way under both types.
    Kept,
    /// TINYINT..BIGINT to LARGEINT.
    ToLargeInt,
}

/// Whether Doris's FE lets a column change from `from` to `to` at all (D
/// `catalog/ColumnType.java`, `schemaChangeMatrix`, restricted to the emulator's types).
fn doris_allows(from: &DorisType, to: &DorisType) -> bool {
    use DorisType::*;
    let int_rank = |t: &DorisType| match t {
        TinyInt => Some(0),
        SmallInt => Some(1),
        Int => Some(2),
        BigInt => Some(3),
        LargeInt => Some(4),
        _ => None,
    };
    if std::mem::discriminant(from) == std::mem::discriminant(to) {
        return true;
    }
    match (from, to) {
        (a, b) if int_rank(a).is_some() && int_rank(b).is_some() => int_rank(a) < int_rank(b),
        (a, Float | Double | Varchar(_) | String) if int_rank(a).is_some() => true,
        (Int, Date) => true,
        (Float, Double | Varchar(_) | String) => true,
        (Double, Varchar(_) | String) => true,
        (Varchar(_), TinyInt | SmallInt | Int | BigInt | LargeInt | Float | Double) => true,
        (Varchar(_), Date | String | Json) => true,
        (Char(_), TinyInt | SmallInt | Int | BigInt | LargeInt | Float | Double) => true,
        (Char(_), Date | Varchar(_) | String) => true,
        (String, Json) => true,
        (Json, String | Varchar(_)) => true,
        (Decimal { .. }, Varchar(_) | String) => true,
        (DateTime(_), Date) | (Date, DateTime(_)) => true,
        _ => false,
    }
}

/// The type change `MODIFY COLUMN` asks for, checked as Doris's `Column.checkSchemaChangeAllowed`
/// checks it, then narrowed to the changes the emulator carries out.
fn type_change(from: &ColumnDef, to: &ColumnDef) -> Result<ValueChange> {
    use DorisType::*;
    if !doris_allows(&from.ty, &to.ty) {
        return Err(bad(format!(
            "Can not change {} to {}",
            from.ty.primitive_name(),
            to.ty.primitive_name()
        )));
    }
    if from.nullable && !to.nullable {
        return Err(bad("Can not change from nullable to non-nullable"));
    }
    if from.default != to.default {
        return Err(bad("Can not change default value"));
    }
    match (&from.ty, &to.ty) {
        (Varchar(a), Varchar(b)) | (Char(a), Varchar(b)) | (Char(a), Char(b)) if a > b => {
            return Err(bad("Cannot shorten string length"));
        }
        _ => {}
    }
    let int = |t: &DorisType| matches!(t, TinyInt | SmallInt | Int | BigInt);
    let change = match (&from.ty, &to.ty) {
        (a, b) if a == b => Some(ValueChange::Kept),
        (a, LargeInt) if int(a) => Some(ValueChange::ToLargeInt),
        (a, b) if int(a) && int(b) => Some(ValueChange::Kept),
        (Float, Double) => Some(ValueChange::Kept),
        (Varchar(_) | Char(_), Varchar(_) | String) | (Char(_), Char(_)) => Some(ValueChange::Kept),
        (
            Decimal {
                precision: p1,
                scale: s1,
            },
            Decimal {
                precision: p2,
                scale: s2,
            },
        ) if s1 == s2 && p2 >= p1 => Some(ValueChange::Kept),
        (DateTime(a), DateTime(b)) if b >= a => Some(ValueChange::Kept),
        _ => None,
    };
    change.ok_or_else(|| {
        DorisError::plain(format!(
            "doris-emu does not emulate MODIFY COLUMN from {} to {}",
            from.ty.display_name(),
            to.ty.display_name()
        ))
    })
}

/// A pre-committed load keeps its rows against the column names it was validated with
/// (`Txn::cols`) and is mapped to the table's columns by name when it commits
/// (`table::remap_write`). A rename or a type change must reach those rows too, so a load
/// pre-committed before the change commits its values into the same column, converted.
fn follow_in_pending_loads(st: &mut State, db: &str, table_id: i64, mut f: impl FnMut(&mut Txn)) {
    st.txns
        .values_mut()
        .filter(|x| x.db == db && x.table_id == table_id && x.state == TxnState::PreCommitted)
        .for_each(&mut f);
}

/// `Int` to `LargeInt` in column `p` of a pre-committed load's rows.
fn widen_pending(x: &mut Txn, p: usize) {
    let widen = |v: &mut Value| {
        if let Value::Int(i) = *v {
            *v = Value::LargeInt(i as i128);
        }
    };
    for w in &mut x.writes {
        match w {
            NormWrite::Upsert(r) | NormWrite::Delete(r) | NormWrite::PredicateDelete(r) => {
                r.get_mut(p).into_iter().for_each(widen)
            }
            NormWrite::Partial { columns, values } => columns
                .iter()
                .zip(values.iter_mut())
                .filter(|(c, _)| **c == p)
                .for_each(|(_, v)| widen(v)),
        }
    }
}

impl Engine {
    /// `ALTER TABLE ADD COLUMN … [AFTER c | FIRST]`: every stored row and changelog image gains
    /// the column with its default (NULL when it has none).
    pub fn add_column(
        &self,
        db: &str,
        table: &str,
        col: ColumnDef,
        position: ColumnPosition<'_>,
    ) -> Result<()> {
        let mut st = self.state.write();
        let t = st.table_mut(db, table)?;
        if t.column_index(&col.name).is_some() {
            return Err(bad(format!(
                "Can not add column which already exists in base table: {}",
                col.name
            )));
        }
        if col.is_key && t.keys_type == KeysType::Unique {
            return Err(bad(format!(
                "Can not add key column {} to UNIQUE KEY table with binlog or merge-on-write",
                col.name
            )));
        }
        let pos = match position {
            ColumnPosition::Unchanged => t.columns.len(),
            p => target_index(&t.columns, p, t.columns.len())?,
        };
        let fill = match &col.default {
            Some(d) => crate::types::coerce(&col.ty, d.clone())
                .map_err(|e| bad(format!("Invalid default value for '{}': {e}", col.name)))?,
            None if col.nullable => Value::Null,
            None => {
                return Err(bad(format!(
                    "Can not add column which is NOT NULL and has no default value: {}",
                    col.name
                )));
            }
        };
        let mut after = t.columns.clone();
        after.insert(pos, col.clone());
        check_key_prefix(t, &after)?;
        if col.is_key {
            let key_pos = after[..pos].iter().filter(|c| c.is_key).count();
            t.key_columns.insert(key_pos, col.name.clone());
        }
        t.insert_column(pos, col, fill);
        Ok(())
    }

    /// `ALTER TABLE DROP COLUMN`: the column leaves every stored row and changelog image.
    pub fn drop_column(&self, db: &str, table: &str, column: &str) -> Result<()> {
        let mut st = self.state.write();
        let t = st.table_mut(db, table)?;
        let pos = t
            .column_index(column)
            .ok_or_else(|| bad(format!("Column does not exists: {column}")))?;
        let c = &t.columns[pos];
        if c.is_key && t.keys_type == KeysType::Unique {
            return Err(bad("Can not drop key column in Unique data model table"));
        }
        if t.distribution.hash_columns.iter().any(|h| h == column) {
            return Err(bad(format!("Can not drop distribution column: {column}")));
        }
        if t.auto_partition
            .as_ref()
            .is_some_and(|a| a.column == column)
        {
            return Err(bad(format!("Can not drop partition column: {column}")));
        }
        if t.columns.len() == 1 {
            return Err(bad("Can not drop all columns"));
        }
        if c.is_key && t.key_columns.len() == 1 {
            return Err(bad("Can not drop all key columns"));
        }
        t.key_columns.retain(|k| k != column);
        t.remove_column(pos);
        Ok(())
    }

    /// `ALTER TABLE RENAME COLUMN old new`: refused on a changelog table; otherwise the values
    /// stay, under the new name (key and distribution columns included).
    pub fn rename_column(&self, db: &str, table: &str, from: &str, to: &str) -> Result<()> {
        let mut st = self.state.write();
        let t = st.table_mut(db, table)?;
        refuse_on_changelog(t)?;
        let pos = t
            .column_index(from)
            .ok_or_else(|| bad(format!("Column[{from}] does not exists")))?;
        if t.auto_partition.as_ref().is_some_and(|a| a.column == from) {
            return Err(bad(
                "Renaming partition columns has problems, forbidden in current Doris version",
            ));
        }
        if from == to {
            return Err(bad(format!("Same column name: {from}")));
        }
        if t.column_index(to).is_some() {
            return Err(bad(format!("Column name[{to}] is already used")));
        }
        let rename = |n: &mut String| {
            if n == from {
                *n = to.to_string();
            }
        };
        t.key_columns.iter_mut().for_each(rename);
        t.distribution.hash_columns.iter_mut().for_each(rename);
        t.columns[pos].name = to.to_string();
        t.reindex();
        let id = t.id;
        follow_in_pending_loads(&mut st, db, id, |x| x.cols.iter_mut().for_each(rename));
        Ok(())
    }

    /// `ALTER TABLE MODIFY COLUMN c <type> … [AFTER c | FIRST]`: refused on a changelog table;
    /// otherwise the type changes Doris allows that the emulator carries out (integer widening,
    /// FLOAT to DOUBLE, a longer CHAR/VARCHAR or STRING, a larger DECIMAL precision at the same
    /// scale, a finer DATETIME), and a move, applied to every stored row.
    pub fn modify_column(
        &self,
        db: &str,
        table: &str,
        col: ModifiedColumn,
        position: ColumnPosition<'_>,
    ) -> Result<()> {
        let mut st = self.state.write();
        let t = st.table_mut(db, table)?;
        refuse_on_changelog(t)?;
        let pos = t
            .column_index(&col.name)
            .ok_or_else(|| bad(format!("Column[{}] does not exists", col.name)))?;
        if t.auto_partition
            .as_ref()
            .is_some_and(|a| a.column == col.name)
        {
            return Err(bad(format!(
                "Can not modify partition column[{}]",
                col.name
            )));
        }
        if t.distribution.hash_columns.contains(&col.name) {
            return Err(bad(format!(
                "Can not modify distribution column[{}]",
                col.name
            )));
        }
        let old = t.columns[pos].clone();
        if old.is_key {
            return Err(DorisError::plain(format!(
                "doris-emu does not emulate MODIFY COLUMN of a key column ({})",
                col.name
            )));
        }
        let new = ColumnDef {
            name: old.name.clone(),
            ty: col.ty,
            nullable: col.nullable.unwrap_or(old.nullable),
            is_key: false,
            default: col.default,
            comment: col.comment.unwrap_or_else(|| old.comment.clone()),
        };
        let change = type_change(&old, &new)?;
        let mut rest = t.columns.clone();
        rest.remove(pos);
        let to = target_index(&rest, position, pos)?;
        let mut after = rest;
        after.insert(to, new);
        check_key_prefix(t, &after)?;
        t.columns = after;
        t.reindex();
        t.rewrite_rows(|r| {
            let mut v = r.remove(pos);
            if change == ValueChange::ToLargeInt
                && let Value::Int(i) = v
            {
                v = Value::LargeInt(i as i128);
            }
            r.insert(to, v);
        });
        if change == ValueChange::ToLargeInt {
            let id = t.id;
            follow_in_pending_loads(&mut st, db, id, |x| {
                if let Some(p) = x.cols.iter().position(|c| *c == col.name) {
                    widen_pending(x, p);
                }
            });
        }
        Ok(())
    }

    /// `ALTER TABLE MODIFY COLUMN c COMMENT '…'`: allowed on a changelog table too (D
    /// `ModifyColumnCommentOp.allowOpRowBinlog`).
    pub fn modify_column_comment(
        &self,
        db: &str,
        table: &str,
        column: &str,
        comment: &str,
    ) -> Result<()> {
        let mut st = self.state.write();
        let t = st.table_mut(db, table)?;
        let pos = t
            .column_index(column)
            .ok_or_else(|| bad(format!("Column[{column}] does not exists")))?;
        t.columns[pos].comment = comment.to_string();
        Ok(())
    }

    /// `ALTER TABLE ORDER BY (…)`: refused on a changelog table, as Doris does; not emulated
    /// otherwise.
    pub fn reorder_columns(&self, db: &str, table: &str) -> Result<()> {
        let mut st = self.state.write();
        let t = st.table_mut(db, table)?;
        refuse_on_changelog(t)?;
        Err(DorisError::plain(
            "doris-emu does not emulate ALTER TABLE ORDER BY",
        ))
    }
}

/// A `MODIFY COLUMN` definition: what the statement says, the rest inherited from the column.
#[derive(Debug, Clone, PartialEq)]
pub struct ModifiedColumn {
    /// The column.
    pub name: String,
    /// Its new type.
    pub ty: DorisType,
    /// `NULL` / `NOT NULL` as written (`None`: the column's own).
    pub nullable: Option<bool>,
    /// `DEFAULT` as written (none written: no default, as Doris reads the statement).
    pub default: Option<Value>,
    /// `COMMENT` as written (`None`: the column's own).
    pub comment: Option<String>,
}

#[cfg(test)]
mod type_tests {
    use super::*;

    fn def(ty: DorisType) -> ColumnDef {
        ColumnDef {
            name: "c".into(),
            ty,
            nullable: true,
            is_key: false,
            default: None,
            comment: String::new(),
        }
    }

    fn check(from: DorisType, to: DorisType) -> std::result::Result<ValueChange, String> {
        type_change(&def(from), &def(to)).map_err(|e| e.message)
    }

    #[test]
    fn widenings_are_carried_out() {
        use DorisType::*;
        assert_eq!(check(TinyInt, BigInt), Ok(ValueChange::Kept));
        assert_eq!(check(Int, LargeInt), Ok(ValueChange::ToLargeInt));
        assert_eq!(check(Float, Double), Ok(ValueChange::Kept));
        assert_eq!(check(Varchar(4), Varchar(10)), Ok(ValueChange::Kept));
        assert_eq!(check(Char(4), Varchar(4)), Ok(ValueChange::Kept));
        assert_eq!(check(Varchar(4), String), Ok(ValueChange::Kept));
        let d = |precision, scale| Decimal { precision, scale };
        assert_eq!(check(d(10, 2), d(20, 2)), Ok(ValueChange::Kept));
        assert_eq!(check(DateTime(0), DateTime(3)), Ok(ValueChange::Kept));
    }

    #[test]
    fn narrowings_fail_with_doris_texts() {
        use DorisType::*;
        let p = "errCode = 2, detailMessage = ";
        assert_eq!(
            check(BigInt, Int),
            Err(format!("{p}Can not change BIGINT to INT"))
        );
        assert_eq!(
            check(Double, Float),
            Err(format!("{p}Can not change DOUBLE to FLOAT"))
        );
        assert_eq!(
            check(
                Boolean,
                Decimal {
                    precision: 9,
                    scale: 0
                }
            ),
            Err(format!("{p}Can not change BOOLEAN to DECIMAL32"))
        );
        assert_eq!(
            check(String, Varchar(10)),
            Err(format!("{p}Can not change STRING to VARCHAR"))
        );
        assert_eq!(
            check(Varchar(10), Varchar(4)),
            Err(format!("{p}Cannot shorten string length"))
        );
        let mut not_null = def(DorisType::Int);
        not_null.nullable = false;
        assert_eq!(
            type_change(&def(DorisType::Int), &not_null).map_err(|e| e.message),
            Err(format!("{p}Can not change from nullable to non-nullable"))
        );
        let mut defaulted = def(DorisType::BigInt);
        defaulted.default = Some(Value::Int(0));
        assert_eq!(
            type_change(&def(DorisType::Int), &defaulted).map_err(|e| e.message),
            Err(format!("{p}Can not change default value"))
        );
    }

    #[test]
    fn changes_doris_allows_but_the_emulator_does_not_carry_out_say_so() {
        use DorisType::*;
        let d = |precision, scale| Decimal { precision, scale };
        assert_eq!(
            check(d(10, 2), d(8, 2)),
            Err(
                "doris-emu does not emulate MODIFY COLUMN from DECIMAL(10,2) to DECIMAL(8,2)"
                    .into()
            )
        );
        assert_eq!(
            check(Int, Varchar(10)),
            Err("doris-emu does not emulate MODIFY COLUMN from INT to VARCHAR(10)".into())
        );
    }
}

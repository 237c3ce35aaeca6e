//! One table: definition, current rows, and the history of committed changes.

use std::collections::{BTreeMap, HashMap};

use super::key::{Key, key_of, row_key, stable_hash};
use super::row::Row;
use super::{AutoPartition, ChangelogConfig, ColumnDef, Distribution, KeysType, RowWrite};
use crate::error::{DorisError, Result};
use crate::types::{Value, coerce};

/// Current rows, encoded ([`Row`]; the history's images share their bytes).
#[derive(Debug, Clone)]
pub(crate) enum Rows {
    /// UNIQUE (merge-on-write): one row per key, ordered by key.
    Unique(BTreeMap<Key, Row>),
    /// DUPLICATE: every row, in load order (keyed by a growing row id).
    Dup(BTreeMap<u64, Row>),
}

/// What a committed row change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    /// A new row (new key on UNIQUE; every row on DUPLICATE).
    Insert,
    /// An existing key rewritten (UNIQUE).
    Update,
    /// A key deleted (UNIQUE, recorded in the changelog).
    Delete,
    /// A predicate delete (DUPLICATE, or a DELETE statement on a table with
    /// `enable_mow_light_delete`): changes the data, never shows in the changelog.
    SilentDelete,
}

/// One row change of a commit; its LSN is its index in [`Commit::changes`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub kind: ChangeKind,
    /// Row before the change (Update, Delete, SilentDelete).
    pub before: Option<Row>,
    /// Row after the change (Insert, Update).
    pub after: Option<Row>,
}

/// One committed transaction of a table.
#[derive(Debug, Clone)]
pub(crate) struct Commit {
    /// Commit TSO.
    pub tso: i64,
    /// `TRUNCATE TABLE`: empties the table; no changelog records.
    pub truncate: bool,
    /// Row changes in LSN order.
    pub changes: Vec<Change>,
}

/// A write after validation: values normalised to the column types.
#[derive(Debug, Clone)]
pub(crate) enum NormWrite {
    Upsert(Vec<Value>),
    Delete(Vec<Value>),
    /// A key a DELETE statement removes with a delete predicate (UNIQUE with
    /// `enable_mow_light_delete`): not recorded in the changelog.
    PredicateDelete(Vec<Value>),
    Partial {
        columns: Vec<usize>,
        values: Vec<Value>,
    },
}

/// A table and everything stored for it.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub id: i64,
    pub db: String,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    pub keys_type: KeysType,
    pub key_columns: Vec<String>,
    pub key_idx: Vec<usize>,
    pub hash_idx: Vec<usize>,
    pub distribution: Distribution,
    pub auto_partition: Option<AutoPartition>,
    /// UNIQUE merge-on-write (false: merge-on-read).
    pub mow: bool,
    /// `enable_mow_light_delete`: a DELETE statement writes a delete predicate, which the
    /// changelog does not record (docs/doris-protocols.md §1.1).
    pub light_delete: bool,
    /// Properties other than the changelog family and the merge-on-write flag, in print order.
    pub props: Vec<(String, String)>,
    pub changelog: ChangelogConfig,
    /// `binlog.max_bytes` / `binlog.max_history_nums` (no effect, printed only).
    pub binlog_max_bytes: String,
    pub binlog_max_history_nums: String,
    pub tablets: Vec<i64>,
    pub rows: Rows,
    /// Committed changes, in TSO order (kept only when the changelog is enabled).
    pub history: Vec<Commit>,
    pub next_row_id: u64,
    /// Rows held when the row map was last rebuilt packed ([`Table::compact_if_due`]).
    pub compacted_rows: usize,
}

/// Row maps smaller than this are never rebuilt (tests' tables stay as they are).
const COMPACT_MIN_ROWS: usize = 65_536;

/// Rebuilds `map` with full nodes, in place. `BTreeMap::append` into a non-empty map merges
/// both sides' entries into a new tree filled node by node, freeing the old nodes as it reads
/// them; collecting into a new map would first gather every entry into one vector (a peak of
/// the whole map's entries again).
fn packed<K: Ord, V>(map: &mut BTreeMap<K, V>) {
    let mut rest = std::mem::take(map);
    if let Some((k, v)) = rest.pop_first() {
        map.insert(k, v);
        map.append(&mut rest);
    }
}

fn bad(detail: impl AsRef<str>) -> DorisError {
    DorisError::analysis(detail)
}

impl Table {
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn column_names(&self) -> Vec<String> {
        self.columns.iter().map(|c| c.name.clone()).collect()
    }

    pub fn is_unique(&self) -> bool {
        self.keys_type == KeysType::Unique
    }

    /// Recompute the key and hash column positions after a schema change.
    pub fn reindex(&mut self) {
        self.key_idx = self
            .key_columns
            .iter()
            .filter_map(|k| self.column_index(k))
            .collect();
        self.hash_idx = self
            .distribution
            .hash_columns
            .iter()
            .filter_map(|k| self.column_index(k))
            .collect();
    }

    /// The index (into `tablets`) of the tablet a row lives in.
    fn tablet_index(&self, row: &[Value]) -> usize {
        let n = self.tablets.len().max(1) as u64;
        (stable_hash(row, &self.hash_idx) % n) as usize
    }

    /// The tablet a row lives in.
    pub fn tablet_of(&self, row: &[Value]) -> i64 {
        self.tablets[self.tablet_index(row)]
    }

    /// The tablet a stored row lives in, from the index it records (hashing only when the table
    /// has too many tablets for a row to record one).
    fn stored_tablet(&self, row: &Row) -> i64 {
        match row.tablet() {
            Some(i) => self.tablets[i],
            None => self.tablet_of(&row.decode()),
        }
    }

    /// `values` encoded for storage.
    fn encode(&self, values: &[Value]) -> Row {
        Row::encode(values, self.tablet_index(values))
    }

    /// Default (or NULL) for a column of a newly inserted row.
    fn default_for(&self, i: usize) -> Result<Value> {
        let c = &self.columns[i];
        match &c.default {
            Some(d) => coerce(&c.ty, d.clone()).map_err(|e| bad(format!("{e}, column={}", c.name))),
            None if c.nullable => Ok(Value::Null),
            None => Err(bad(format!(
                "the unmentioned column `{}` should have default value or be nullable for newly inserted rows in non-strict mode partial update",
                c.name
            ))),
        }
    }

    fn norm_value(&self, i: usize, v: Value) -> Result<Value> {
        let c = &self.columns[i];
        let v = coerce(&c.ty, v).map_err(|e| bad(format!("{e}, column={}", c.name)))?;
        if v.is_null() && !c.nullable {
            return Err(bad(format!(
                "null value for not null column, column={}",
                c.name
            )));
        }
        Ok(v)
    }

    /// Validate and normalise writes: arity, NOT NULL, types, and model rules.
    pub fn normalize(&self, writes: Vec<RowWrite>) -> Result<Vec<NormWrite>> {
        let n = self.columns.len();
        let mut out = Vec::with_capacity(writes.len());
        for w in writes {
            out.push(match w {
                RowWrite::Upsert(row) => {
                    if row.len() != n {
                        return Err(bad(format!(
                            "Column count doesn't match value count: expected {n}, got {}",
                            row.len()
                        )));
                    }
                    let row = row
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| self.norm_value(i, v))
                        .collect::<Result<Vec<_>>>()?;
                    NormWrite::Upsert(row)
                }
                RowWrite::Delete(row) => {
                    let row = if row.len() == n {
                        row
                    } else if row.len() == self.key_idx.len() && self.is_unique() {
                        // key values only: spread them into a full row
                        let mut full = vec![Value::Null; n];
                        for (v, &i) in row.into_iter().zip(&self.key_idx) {
                            full[i] = v;
                        }
                        full
                    } else {
                        return Err(bad(format!(
                            "Column count doesn't match value count: expected {n}, got {}",
                            row.len()
                        )));
                    };
                    let row = row
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| {
                            let c = &self.columns[i];
                            let v = coerce(&c.ty, v).map_err(|e| bad(format!("{e}, column={}", c.name)))?;
                            if v.is_null() && self.key_idx.contains(&i) && !c.nullable {
                                return Err(bad(format!("null value for not null column, column={}", c.name)));
                            }
                            Ok(v)
                        })
                        .collect::<Result<Vec<_>>>()?;
                    NormWrite::Delete(row)
                }
                RowWrite::Partial { columns, values } => {
                    if !self.is_unique() {
                        return Err(bad(
                            "Partial update is only allowed on unique table with merge-on-write enabled.",
                        ));
                    }
                    if columns.len() != values.len() {
                        return Err(bad(format!(
                            "Column count doesn't match value count: expected {}, got {}",
                            columns.len(),
                            values.len()
                        )));
                    }
                    if let Some(&bad_i) = columns.iter().find(|&&i| i >= n) {
                        return Err(bad(format!("partial update column index {bad_i} out of range")));
                    }
                    for &k in &self.key_idx {
                        if !columns.contains(&k) {
                            return Err(bad(format!(
                                "Insert has filtered data in strict mode, partial update must contain all key columns, missing: {}",
                                self.columns[k].name
                            )));
                        }
                    }
                    let values = columns
                        .iter()
                        .zip(values)
                        .map(|(&i, v)| self.norm_value(i, v))
                        .collect::<Result<Vec<_>>>()?;
                    NormWrite::Partial { columns, values }
                }
            });
        }
        Ok(out)
    }

    /// Apply normalised writes; on error nothing is changed. Returns the changes in LSN order.
    pub fn apply(&mut self, writes: Vec<NormWrite>) -> Result<Vec<Change>> {
        let mut changes = Vec::with_capacity(writes.len());
        match self.apply_inner(writes, &mut changes) {
            Ok(()) => {
                self.compact_if_due();
                Ok(changes)
            }
            Err(e) => {
                self.undo(&changes);
                Err(e)
            }
        }
    }

    fn apply_inner(&mut self, writes: Vec<NormWrite>, changes: &mut Vec<Change>) -> Result<()> {
        let mut pending_dup_deletes: Vec<Vec<Value>> = Vec::new();
        for w in writes {
            if !matches!(w, NormWrite::Delete(_)) && !pending_dup_deletes.is_empty() {
                self.dup_delete_batch(std::mem::take(&mut pending_dup_deletes), changes);
            }
            match w {
                NormWrite::Upsert(row) => self.upsert(row, changes),
                NormWrite::PredicateDelete(row) => {
                    let key = key_of(&row, &self.key_idx);
                    if let Rows::Unique(m) = &mut self.rows
                        && let Some(old) = m.remove(&key)
                    {
                        changes.push(Change {
                            kind: ChangeKind::SilentDelete,
                            before: Some(old),
                            after: None,
                        });
                    }
                }
                NormWrite::Delete(row) => {
                    if self.is_unique() {
                        let key = key_of(&row, &self.key_idx);
                        if let Rows::Unique(m) = &mut self.rows
                            && let Some(old) = m.remove(&key)
                        {
                            changes.push(Change {
                                kind: ChangeKind::Delete,
                                before: Some(old),
                                after: None,
                            });
                        }
                    } else {
                        pending_dup_deletes.push(row);
                    }
                }
                NormWrite::Partial { columns, values } => {
                    let mut probe = vec![Value::Null; self.columns.len()];
                    for (&i, v) in columns.iter().zip(&values) {
                        probe[i] = v.clone();
                    }
                    let key = key_of(&probe, &self.key_idx);
                    let existing = match &self.rows {
                        Rows::Unique(m) => m.get(&key).map(Row::decode),
                        Rows::Dup(_) => None,
                    };
                    let row = match existing {
                        Some(mut row) => {
                            for (&i, v) in columns.iter().zip(values) {
                                row[i] = v;
                            }
                            row
                        }
                        None => {
                            let mut row = Vec::with_capacity(self.columns.len());
                            for i in 0..self.columns.len() {
                                row.push(match columns.iter().position(|&c| c == i) {
                                    Some(p) => values[p].clone(),
                                    None => self.default_for(i)?,
                                });
                            }
                            row
                        }
                    };
                    self.upsert(row, changes);
                }
            }
        }
        if !pending_dup_deletes.is_empty() {
            self.dup_delete_batch(pending_dup_deletes, changes);
        }
        Ok(())
    }

    fn upsert(&mut self, values: Vec<Value>, changes: &mut Vec<Change>) {
        let row = self.encode(&values);
        match &mut self.rows {
            Rows::Unique(m) => {
                let key = key_of(&values, &self.key_idx);
                match m.insert(key, row.clone()) {
                    Some(old) => changes.push(Change {
                        kind: ChangeKind::Update,
                        before: Some(old),
                        after: Some(row),
                    }),
                    None => changes.push(Change {
                        kind: ChangeKind::Insert,
                        before: None,
                        after: Some(row),
                    }),
                }
            }
            Rows::Dup(m) => {
                m.insert(self.next_row_id, row.clone());
                self.next_row_id += 1;
                changes.push(Change {
                    kind: ChangeKind::Insert,
                    before: None,
                    after: Some(row),
                });
            }
        }
    }

    /// Remove one stored row equal to each given row (a multiset difference in one pass).
    fn dup_delete_batch(&mut self, rows: Vec<Vec<Value>>, changes: &mut Vec<Change>) {
        let mut wanted: HashMap<Key, usize> = HashMap::new();
        for r in &rows {
            *wanted.entry(row_key(r)).or_default() += 1;
        }
        if let Rows::Dup(m) = &mut self.rows {
            let mut victims = Vec::new();
            for (id, row) in m.iter() {
                if wanted.is_empty() {
                    break;
                }
                let k = row_key(&row.decode());
                if let Some(c) = wanted.get_mut(&k) {
                    *c -= 1;
                    if *c == 0 {
                        wanted.remove(&k);
                    }
                    victims.push(*id);
                }
            }
            for id in victims {
                if let Some(old) = m.remove(&id) {
                    changes.push(Change {
                        kind: ChangeKind::SilentDelete,
                        before: Some(old),
                        after: None,
                    });
                }
            }
        }
    }

    /// Revert changes (in reverse order). Only needed for UNIQUE tables: DUPLICATE writes never fail
    /// half-way.
    fn undo(&mut self, changes: &[Change]) {
        let key_idx = self.key_idx.clone();
        if let Rows::Unique(m) = &mut self.rows {
            for c in changes.iter().rev() {
                match c.kind {
                    ChangeKind::Insert => {
                        if let Some(a) = &c.after {
                            m.remove(&key_of(&a.decode(), &key_idx));
                        }
                    }
                    ChangeKind::Update | ChangeKind::Delete | ChangeKind::SilentDelete => {
                        if let Some(b) = &c.before {
                            m.insert(key_of(&b.decode(), &key_idx), b.clone());
                        }
                    }
                }
            }
        }
    }

    /// Current rows, optionally only those in the given tablets, still encoded (cheap to take
    /// under the lock; decode them after).
    pub fn current_stored(&self, tablets: Option<&[i64]>) -> Vec<Row> {
        let keep = |r: &Row| tablets.is_none_or(|ts| ts.contains(&self.stored_tablet(r)));
        match &self.rows {
            Rows::Unique(m) => m.values().filter(|r| keep(r)).cloned().collect(),
            Rows::Dup(m) => m.values().filter(|r| keep(r)).cloned().collect(),
        }
    }

    /// The current rows of a UNIQUE table whose key is one of `keys` (each the key columns'
    /// values in key order), in key order; `None` on a DUPLICATE table, whose rows a key does
    /// not name.
    pub fn stored_with_keys(&self, keys: &[Vec<Value>]) -> Option<Vec<Row>> {
        let Rows::Unique(m) = &self.rows else {
            return None;
        };
        // a key tuple is encoded as the key columns of a row are (the parts, in order)
        let mut wanted: Vec<Key> = keys.iter().map(|k| row_key(k)).collect();
        wanted.sort();
        wanted.dedup();
        Some(wanted.iter().filter_map(|k| m.get(k)).cloned().collect())
    }

    /// Some current row, if any (the first in storage order).
    pub fn first_stored(&self) -> Option<&Row> {
        match &self.rows {
            Rows::Unique(m) => m.values().next(),
            Rows::Dup(m) => m.values().next(),
        }
    }

    /// How many current rows there are, optionally only in the given tablets.
    pub fn count_stored(&self, tablets: Option<&[i64]>) -> usize {
        let Some(ts) = tablets else {
            return self.row_count();
        };
        let keep = |r: &&Row| ts.contains(&self.stored_tablet(r));
        match &self.rows {
            Rows::Unique(m) => m.values().filter(keep).count(),
            Rows::Dup(m) => m.values().filter(keep).count(),
        }
    }

    /// Current rows, optionally only those in the given tablets.
    pub fn current_rows(&self, tablets: Option<&[i64]>) -> Vec<Vec<Value>> {
        self.current_stored(tablets)
            .iter()
            .map(Row::decode)
            .collect()
    }

    /// Rows as of commit TSO `version` (inclusive), rebuilt from the history.
    pub fn rows_as_of(&self, version: i64, tablets: Option<&[i64]>) -> Vec<Vec<Value>> {
        let end = self.history.partition_point(|c| c.tso <= version);
        let keep = |r: &Row| tablets.is_none_or(|ts| ts.contains(&self.stored_tablet(r)));
        let rows: Vec<Row> = if self.is_unique() {
            let mut m: BTreeMap<Key, Row> = BTreeMap::new();
            for commit in &self.history[..end] {
                if commit.truncate {
                    m.clear();
                }
                for ch in &commit.changes {
                    match ch.kind {
                        ChangeKind::Insert | ChangeKind::Update => {
                            let a = ch.after.as_ref().expect("after image");
                            m.insert(key_of(&a.decode(), &self.key_idx), a.clone());
                        }
                        ChangeKind::Delete | ChangeKind::SilentDelete => {
                            let b = ch.before.as_ref().expect("before image");
                            m.remove(&key_of(&b.decode(), &self.key_idx));
                        }
                    }
                }
            }
            m.into_values().filter(|r| keep(r)).collect()
        } else {
            let mut rows: BTreeMap<u64, Row> = BTreeMap::new();
            let mut index: HashMap<Key, Vec<u64>> = HashMap::new();
            let mut seq = 0u64;
            for commit in &self.history[..end] {
                if commit.truncate {
                    rows.clear();
                    index.clear();
                }
                for ch in &commit.changes {
                    match ch.kind {
                        ChangeKind::Insert | ChangeKind::Update => {
                            let a = ch.after.as_ref().expect("after image");
                            index.entry(row_key(&a.decode())).or_default().push(seq);
                            rows.insert(seq, a.clone());
                            seq += 1;
                        }
                        ChangeKind::Delete | ChangeKind::SilentDelete => {
                            let b = ch.before.as_ref().expect("before image");
                            if let Some(ids) = index.get_mut(&row_key(&b.decode()))
                                && !ids.is_empty()
                            {
                                let id = ids.remove(0);
                                rows.remove(&id);
                            }
                        }
                    }
                }
            }
            rows.into_values().filter(|r| keep(r)).collect()
        };
        rows.iter().map(Row::decode).collect()
    }

    /// Rewrite every stored row and history image with `edit` (after `reindex`, so the tablet
    /// is the new column list's), keeping the images that shared their bytes shared.
    pub(crate) fn rewrite_rows(&mut self, edit: impl Fn(&mut Vec<Value>)) {
        let mut done: HashMap<Row, Row> = HashMap::new();
        let hash_idx = self.hash_idx.clone();
        let n_tablets = self.tablets.len().max(1) as u64;
        let mut redo = |r: &mut Row| {
            if let Some(n) = done.get(r) {
                *r = n.clone();
                return;
            }
            let mut values = r.decode();
            edit(&mut values);
            let tablet = (stable_hash(&values, &hash_idx) % n_tablets) as usize;
            let n = Row::encode(&values, tablet);
            done.insert(r.clone(), n.clone());
            *r = n;
        };
        match &mut self.rows {
            Rows::Unique(m) => m.values_mut().for_each(&mut redo),
            Rows::Dup(m) => m.values_mut().for_each(&mut redo),
        }
        for c in &mut self.history {
            for ch in &mut c.changes {
                ch.before.iter_mut().for_each(&mut redo);
                ch.after.iter_mut().for_each(&mut redo);
            }
        }
    }

    /// Insert a column at `pos` into every stored row and history image.
    pub fn insert_column(&mut self, pos: usize, col: ColumnDef, fill: Value) {
        self.columns.insert(pos, col);
        self.reindex();
        self.rewrite_rows(|r| r.insert(pos, fill.clone()));
    }

    /// Remove the column at `pos` from every stored row and history image.
    pub fn remove_column(&mut self, pos: usize) {
        self.columns.remove(pos);
        self.reindex();
        self.rewrite_rows(|r| {
            r.remove(pos);
        });
    }

    /// Empty the table.
    pub fn clear(&mut self) {
        match &mut self.rows {
            Rows::Unique(m) => m.clear(),
            Rows::Dup(m) => m.clear(),
        }
    }

    /// Rebuild the row map packed once it has grown by a quarter (or shrunk by half) since the
    /// last rebuild. A B-tree filled by inserts keeps its nodes a little over half full (about
    /// 75 bytes a row here); one built from its own sorted entries fills them (about 42), which
    /// is what lets ten million rows of source and sink fit in 3 GiB. Growth by a quarter keeps
    /// the cost amortised at a few moves per row; the pause is one pass over the map, under the
    /// engine's lock, as the commit that triggered it.
    fn compact_if_due(&mut self) {
        let n = self.row_count();
        let due = n >= COMPACT_MIN_ROWS
            && (n >= self.compacted_rows + self.compacted_rows / 4 || n <= self.compacted_rows / 2);
        if !due {
            return;
        }
        match &mut self.rows {
            Rows::Unique(m) => packed(m),
            Rows::Dup(m) => packed(m),
        }
        self.compacted_rows = n;
    }

    /// Number of stored rows.
    pub fn row_count(&self) -> usize {
        match &self.rows {
            Rows::Unique(m) => m.len(),
            Rows::Dup(m) => m.len(),
        }
    }
}

/// Remap a write recorded against `old_cols` to the table's current column list (a pre-committed
/// load that spans a schema change): dropped columns disappear, added ones take their default.
pub(crate) fn remap_write(t: &Table, old_cols: &[String], w: NormWrite) -> Result<NormWrite> {
    let map_row = |row: Vec<Value>| -> Result<Vec<Value>> {
        let mut out = Vec::with_capacity(t.columns.len());
        for c in &t.columns {
            match old_cols.iter().position(|n| *n == c.name) {
                Some(p) => out.push(row[p].clone()),
                None => out.push(match &c.default {
                    Some(d) => coerce(&c.ty, d.clone()).map_err(bad)?,
                    None => Value::Null,
                }),
            }
        }
        Ok(out)
    };
    Ok(match w {
        NormWrite::Upsert(r) => NormWrite::Upsert(map_row(r)?),
        NormWrite::Delete(r) => NormWrite::Delete(map_row(r)?),
        NormWrite::PredicateDelete(r) => NormWrite::PredicateDelete(map_row(r)?),
        NormWrite::Partial { columns, values } => {
            let mut cs = Vec::new();
            let mut vs = Vec::new();
            for (i, v) in columns.into_iter().zip(values) {
                if let Some(p) = t.column_index(&old_cols[i]) {
                    cs.push(p);
                    vs.push(v);
                }
            }
            NormWrite::Partial {
                columns: cs,
                values: vs,
            }
        }
    })
}

//! The storage engine: catalog, tables, transactions, the changelog and `@incr` reads.
//!
//! Everything here is synchronous and protocol-free except [`Engine::incr`], which may wait for
//! pre-committed transactions (the visibility wait). Front ends (MySQL, HTTP, Flight) and the SQL
//! executor call these methods; none of them touch the tables directly.
//!
//! CONTRACT: the signatures in this file are what the SQL executor, the HTTP front end and the Flight
//! front end are written against. Change them only together with their callers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::clock::Clock;
use crate::clock::tso_physical_ms;
use crate::error::{DorisError, ER_BAD_DB, ERR_INCR_VISIBLE_WAIT_TIMEOUT, Result};
use crate::types::{DorisType, Value};

/// Data model of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeysType {
    /// `UNIQUE KEY` (merge-on-write): a row per key, INSERT upserts.
    Unique,
    /// `DUPLICATE KEY`: every row kept.
    Duplicate,
}

impl KeysType {
    /// The name Doris uses in `_schema` (`UNIQUE_KEYS` / `DUP_KEYS`).
    pub fn doris_name(self) -> &'static str {
        match self {
            KeysType::Unique => "UNIQUE_KEYS",
            KeysType::Duplicate => "DUP_KEYS",
        }
    }
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    /// Name.
    pub name: String,
    /// Type.
    pub ty: DorisType,
    /// `NULL` allowed (key columns are NOT NULL in Doris unless declared otherwise).
    pub nullable: bool,
    /// Part of the key.
    pub is_key: bool,
    /// `DEFAULT` value, if declared.
    pub default: Option<Value>,
    /// `COMMENT`.
    pub comment: String,
}

/// `DISTRIBUTED BY HASH(cols) BUCKETS n|AUTO`.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// Hash columns (empty for RANDOM).
    pub hash_columns: Vec<String>,
    /// Bucket count; `None` for `AUTO` (the emulator then uses a fixed small number of tablets).
    pub buckets: Option<u32>,
}

/// `AUTO PARTITION BY RANGE (date_trunc(col, 'unit'))`.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoPartition {
    /// Partition column.
    pub column: String,
    /// `year`, `quarter`, `month`, `week`, `day`, `hour`.
    pub unit: String,
}

/// What `CREATE TABLE` parses into.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDef {
    /// Database.
    pub db: String,
    /// Table name.
    pub name: String,
    /// Columns in order.
    pub columns: Vec<ColumnDef>,
    /// Data model.
    pub keys_type: KeysType,
    /// Key columns (a prefix of `columns`, in order).
    pub key_columns: Vec<String>,
    /// Distribution.
    pub distribution: Distribution,
    /// Auto partition, if any.
    pub auto_partition: Option<AutoPartition>,
    /// `PROPERTIES (...)` as written.
    pub properties: Vec<(String, String)>,
    /// `IF NOT EXISTS`.
    pub if_not_exists: bool,
}

/// Which property family enabled the changelog (docs/doris-protocols.md §0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangelogSpelling {
    /// `changelog.enable`, `changelog.ttl_seconds`, ...
    Changelog,
    /// `binlog.enable` + `binlog.format=ROW`, `binlog.ttl_seconds`, ...
    Binlog,
}

/// A table's changelog settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangelogConfig {
    /// Changelog recorded.
    pub enabled: bool,
    /// Which spelling the table was created with (decides error texts).
    pub spelling: ChangelogSpelling,
    /// Before-images stored (`need_historical_value`).
    pub need_historical_value: bool,
    /// Retention in seconds.
    pub ttl_seconds: i64,
}

/// A snapshot of a table's definition.
#[derive(Debug, Clone, PartialEq)]
pub struct TableInfo {
    /// Table id (stable for the table's life).
    pub id: i64,
    /// Database.
    pub db: String,
    /// Name.
    pub name: String,
    /// Visible columns in order.
    pub columns: Vec<ColumnDef>,
    /// Data model.
    pub keys_type: KeysType,
    /// Key column names.
    pub key_columns: Vec<String>,
    /// All properties as `SHOW CREATE TABLE` prints them (defaults included).
    pub properties: BTreeMap<String, String>,
    /// Changelog settings.
    pub changelog: ChangelogConfig,
    /// Tablet ids (one per bucket); every row lives in exactly one.
    pub tablets: Vec<i64>,
    /// Distribution as declared.
    pub distribution: Distribution,
    /// Auto partition as declared.
    pub auto_partition: Option<AutoPartition>,
}

/// One row change inside a transaction. Rows are full rows in the table's column order.
#[derive(Debug, Clone, PartialEq)]
pub enum RowWrite {
    /// Insert (DUPLICATE) or upsert (UNIQUE).
    Upsert(Vec<Value>),
    /// Delete the row with this key (UNIQUE; the non-key values are ignored).
    Delete(Vec<Value>),
    /// Partial update (UNIQUE, `partial_columns`): only the listed column indexes change; a missing
    /// key is inserted with defaults/NULL elsewhere.
    Partial {
        /// Indexes into the table's columns, key columns included.
        columns: Vec<usize>,
        /// One value per listed column.
        values: Vec<Value>,
    },
}

/// Rows of a table as stored (compact, sharing the table's bytes), from [`Engine::scan_stored`],
/// with the definition they were read under (taken under the same lock, so a schema change
/// cannot come between them).
pub struct StoredRows {
    rows: Vec<row::Row>,
    info: TableInfo,
    /// From [`Engine::lookup_stored`] when no key matched: some row of the table, if it has any.
    unmatched: Option<row::Row>,
}

impl StoredRows {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table's definition when the rows were read.
    pub fn info(&self) -> &TableInfo {
        &self.info
    }

    /// The values of the rows in `range`, in the table's column order.
    pub fn decode(&self, range: std::ops::Range<usize>) -> Vec<Vec<Value>> {
        self.rows[range].iter().map(row::Row::decode).collect()
    }

    /// From a key lookup that matched nothing: the values of some other row of the table (none
    /// when it is empty), on which a caller can still evaluate its predicate, so that an error
    /// a scan would have raised on the table's rows is raised all the same.
    pub fn unmatched_row(&self) -> Option<Vec<Value>> {
        self.unmatched.as_ref().map(row::Row::decode)
    }
}

/// A table's definition, as [`Engine::table_info`] gives it.
fn info_of(t: &table::Table) -> TableInfo {
    TableInfo {
        id: t.id,
        db: t.db.clone(),
        name: t.name.clone(),
        columns: t.columns.clone(),
        keys_type: t.keys_type,
        key_columns: t.key_columns.clone(),
        properties: props::property_map(t),
        changelog: t.changelog.clone(),
        tablets: t.tablets.clone(),
        distribution: t.distribution.clone(),
        auto_partition: t.auto_partition.clone(),
    }
}

/// Result of an auto-committed write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The commit TSO shared by every row of the write (0 when nothing changed).
    pub tso: i64,
    /// Rows written.
    pub affected: u64,
}

/// Stream Load transaction states (docs/doris-protocols.md §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// Begun, body not yet loaded (`RUNNING` as an ExistingJobStatus).
    Prepare,
    /// Loaded under two-phase commit, waiting for commit or abort.
    PreCommitted,
    /// Committed and visible (`FINISHED` as an ExistingJobStatus).
    Visible,
    /// Aborted; its label may be reused.
    Aborted,
}

/// Why a load could not begin.
#[derive(Debug, Clone, PartialEq)]
pub enum BeginError {
    /// The label belongs to a live transaction.
    LabelExists {
        /// That transaction.
        txn_id: i64,
        /// Its state.
        state: TxnState,
    },
    /// Any other error (unknown table, ...).
    Other(crate::error::DorisError),
}

/// How the second phase addresses a transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum TxnRef {
    /// `txn_id: <id>`.
    Id(i64),
    /// `label: <l>`.
    Label(String),
}

/// Second-phase operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnOperation {
    /// `txn_operation: commit`.
    Commit,
    /// `txn_operation: abort`.
    Abort,
}

/// `incrementType` of an `@incr` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncrementType {
    /// APPEND_ONLY.
    AppendOnly,
    /// MIN_DELTA (Doris's default).
    MinDelta,
    /// DETAIL.
    Detail,
}

/// Changelog op codes as `@incr` returns them in `__DORIS_BINLOG_OP__`.
pub mod op {
    /// Insert.
    pub const APPEND: i8 = 0;
    /// Delete (values are the before image).
    pub const DELETE: i8 = 1;
    /// Update, before image.
    pub const UPDATE_BEFORE: i8 = 2;
    /// Update, after image.
    pub const UPDATE_AFTER: i8 = 3;
}

/// One row of an `@incr` result, before projection.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeRow {
    /// Op code, see [`op`].
    pub op: i8,
    /// Commit TSO.
    pub tso: i64,
    /// Position within the commit.
    pub lsn: i64,
    /// Full row in the table's current column order.
    pub values: Vec<Value>,
}

/// An `@incr` request, times already resolved to epoch milliseconds of the wall clock.
#[derive(Debug, Clone, PartialEq)]
pub struct IncrRequest {
    /// Database.
    pub db: String,
    /// Table.
    pub table: String,
    /// Inclusive start (`None` = first retained change).
    pub start_ms: Option<i64>,
    /// Exclusive end (`None` = unbounded).
    pub end_ms: Option<i64>,
    /// Increment type.
    pub increment_type: IncrementType,
    /// Session `change_visible_timeout_ms`: how long to wait for pre-committed transactions.
    pub visible_timeout_ms: i64,
}

pub mod fe_config;
mod incr;
mod key;
mod props;
mod replace;
mod row;
mod schema_change;
mod table;
#[cfg(test)]
mod tests;

pub use schema_change::{ColumnPosition, ModifiedColumn, ROW_BINLOG_NOT_ALLOWED};
use table::{Commit, NormWrite, Rows, Table};

/// MySQL `ER_DB_CREATE_EXISTS`.
pub const ER_DB_CREATE_EXISTS: u16 = 1007;
/// MySQL `ER_TABLE_EXISTS_ERROR`.
pub const ER_TABLE_EXISTS: u16 = 1050;
/// MySQL `ER_BAD_TABLE_ERROR` (Doris `ERR_BAD_TABLE_ERROR`, "Unknown table '%s'").
pub const ER_BAD_TABLE: u16 = 1051;
/// MySQL `ER_DBACCESS_DENIED_ERROR`.
pub const ER_DB_ACCESS_DENIED: u16 = 1044;
/// MySQL `ER_DUP_FIELDNAME`.
pub const ER_DUP_FIELDNAME: u16 = 1060;

/// `@incr` on a table without the changelog (the text Doris uses for both spellings).
pub const INCR_REQUIRES_CHANGELOG: &str = "INCR query requires ROW binlog enabled on base table.";
/// `MIN_DELTA` on a table that is not UNIQUE merge-on-write.
pub const MIN_DELTA_REQUIRES_MOW: &str = "MIN_DELTA INCR query requires base table to be UNIQUE KEY with enable_unique_key_merge_on_write=true";
/// Time travel on a table without the changelog.
pub const TIME_TRAVEL_REQUIRES_CHANGELOG: &str = "FOR VERSION/TIME AS OF requires row binlog";
/// Ids of tables, tablets and databases start here (Doris ids look like this).
const FIRST_CATALOG_ID: i64 = 10_000;
/// Stream Load transaction ids start here.
const FIRST_TXN_ID: i64 = 1_000;
/// Tablets of a table declared `BUCKETS AUTO`.
pub const AUTO_BUCKETS: u32 = 3;
/// Databases every Doris lists and nobody may create tables in.
pub const SYSTEM_DATABASES: [&str; 2] = ["information_schema", "mysql"];
/// How often the visibility wait looks again.
const VISIBLE_WAIT_POLL: Duration = Duration::from_millis(20);

/// `Unknown database 'x'` (1049), as DDL and USE report it.
pub fn err_unknown_db(db: &str) -> DorisError {
    DorisError::new(
        ER_BAD_DB,
        format!("errCode = 2, detailMessage = Unknown database '{db}'"),
    )
}

/// `Unknown table 'x'` (1051), as DDL, SHOW and Stream Load report it.
pub fn err_unknown_table(table: &str) -> DorisError {
    DorisError::new(
        ER_BAD_TABLE,
        format!("errCode = 2, detailMessage = Unknown table '{table}'"),
    )
}

/// What the Nereids planner reports for a SELECT on a missing table.
pub fn err_select_unknown_table(db: &str, table: &str) -> DorisError {
    DorisError::analysis(format!(
        "Table [{table}] does not exist in database [{db}]."
    ))
}

/// What the Nereids planner reports for a SELECT in a missing database.
pub fn err_select_unknown_db(db: &str) -> DorisError {
    DorisError::analysis(format!("Database [{db}] does not exist."))
}

/// The expired-offset error of a table's spelling (docs/doris-protocols.md §1.7).
pub fn offset_expired_message(spelling: ChangelogSpelling) -> &'static str {
    match spelling {
        ChangelogSpelling::Changelog => {
            "Changelog offset has expired according to changelog.ttl_seconds"
        }
        ChangelogSpelling::Binlog => {
            "Row binlog offset has expired according to binlog.ttl_seconds"
        }
    }
}

fn is_system_db(db: &str) -> bool {
    SYSTEM_DATABASES.contains(&db)
}

/// Which lookup error family to use.
#[derive(Clone, Copy)]
enum Lookup {
    /// DDL / SHOW / load: `Unknown database` / `Unknown table`.
    Ddl,
    /// SELECT: the Nereids texts.
    Select,
}

#[derive(Debug)]
struct Database {
    /// Catalog id (Doris names databases by id in transaction messages).
    id: i64,
    tables: BTreeMap<String, Table>,
}

#[derive(Debug)]
struct Txn {
    db: String,
    table_id: i64,
    label: String,
    state: TxnState,
    /// Validated rows, against the column list in `cols`.
    writes: Vec<NormWrite>,
    cols: Vec<String>,
    /// Emulated time the load began.
    prepare_ms: i64,
    /// How long the load may stay PREPARE (its `timeout`, else the FE default).
    timeout_ms: i64,
    /// Emulated time of the pre-commit.
    precommit_ms: Option<i64>,
    reason: String,
}

impl Txn {
    /// Whether Doris's transaction manager aborts it at `now_ms` (`TransactionState.isTimeout`).
    fn timed_out(&self, now_ms: i64, precommit_timeout_ms: i64) -> bool {
        match self.state {
            TxnState::Prepare => now_ms - self.prepare_ms > self.timeout_ms,
            TxnState::PreCommitted => self
                .precommit_ms
                .is_some_and(|at| now_ms - at > precommit_timeout_ms),
            TxnState::Visible | TxnState::Aborted => false,
        }
    }
}

#[derive(Debug)]
struct State {
    dbs: BTreeMap<String, Database>,
    next_id: i64,
    next_txn_id: i64,
    txns: BTreeMap<i64, Txn>,
    /// Latest commit TSO of any table (0 before the first commit).
    last_commit_tso: i64,
}

impl State {
    fn alloc_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn db(&self, db: &str, how: Lookup) -> Result<&Database> {
        self.dbs.get(db).ok_or_else(|| match how {
            Lookup::Ddl => err_unknown_db(db),
            Lookup::Select => err_select_unknown_db(db),
        })
    }

    fn table(&self, db: &str, name: &str, how: Lookup) -> Result<&Table> {
        self.db(db, how)?.tables.get(name).ok_or_else(|| match how {
            Lookup::Ddl => err_unknown_table(name),
            Lookup::Select => err_select_unknown_table(db, name),
        })
    }

    fn table_mut(&mut self, db: &str, name: &str) -> Result<&mut Table> {
        self.dbs
            .get_mut(db)
            .ok_or_else(|| err_unknown_db(db))?
            .tables
            .get_mut(name)
            .ok_or_else(|| err_unknown_table(name))
    }

    fn table_by_id_mut(&mut self, db: &str, id: i64) -> Option<&mut Table> {
        self.dbs
            .get_mut(db)?
            .tables
            .values_mut()
            .find(|t| t.id == id)
    }

    /// Apply validated writes to a table as one commit. Returns the commit TSO (0 when nothing
    /// changed and `always_commit` is false) and the number of changed rows.
    fn commit(
        &mut self,
        clock: &Clock,
        db: &str,
        table_id: i64,
        writes: Vec<NormWrite>,
        always_commit: bool,
    ) -> Result<(i64, u64)> {
        let t = self
            .table_by_id_mut(db, table_id)
            .ok_or_else(|| DorisError::analysis(format!("unknown table, tableId={table_id}")))?;
        let changes = t.apply(writes)?;
        if changes.is_empty() && !always_commit {
            return Ok((0, 0));
        }
        let affected = changes.len() as u64;
        let tso = clock.next_tso();
        if t.changelog.enabled {
            t.history.push(Commit {
                tso,
                truncate: false,
                changes,
            });
        }
        self.last_commit_tso = tso;
        Ok((tso, affected))
    }
}

/// The catalog, the tables and the transactions. Cheap to share behind an `Arc`.
pub struct Engine {
    clock: Arc<Clock>,
    feature_changelog: bool,
    /// The FE settings of transactions (timeouts, the running-transaction limit).
    pub fe_config: fe_config::FeConfig,
    state: RwLock<State>,
}

impl Engine {
    /// An empty engine. `feature_changelog=false` emulates an FE without `enable_feature_changelog`.
    pub fn new(clock: Arc<Clock>, feature_changelog: bool) -> Self {
        Self {
            clock,
            feature_changelog,
            fe_config: fe_config::FeConfig::default(),
            state: RwLock::new(State {
                dbs: BTreeMap::new(),
                next_id: FIRST_CATALOG_ID,
                next_txn_id: FIRST_TXN_ID,
                txns: BTreeMap::new(),
                last_commit_tso: 0,
            }),
        }
    }

    /// The clock every engine decision uses.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Whether the FE has the changelog feature enabled.
    pub fn feature_changelog(&self) -> bool {
        self.feature_changelog
    }

    /// The TSO of the latest commit on any table (0 before the first), for `committedTSO`.
    pub fn committed_tso(&self) -> i64 {
        self.state.read().last_commit_tso
    }

    // === catalog ===

    /// `CREATE DATABASE [IF NOT EXISTS]`.
    pub fn create_database(&self, name: &str, if_not_exists: bool) -> Result<()> {
        let mut st = self.state.write();
        if st.dbs.contains_key(name) || is_system_db(name) {
            if if_not_exists {
                return Ok(());
            }
            return Err(DorisError::new(
                ER_DB_CREATE_EXISTS,
                format!(
                    "errCode = 2, detailMessage = Can't create database '{name}'; database exists"
                ),
            ));
        }
        let id = st.alloc_id();
        st.dbs.insert(
            name.to_string(),
            Database {
                id,
                tables: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// `DROP DATABASE [IF EXISTS]`.
    pub fn drop_database(&self, name: &str, if_exists: bool) -> Result<()> {
        if is_system_db(name) {
            return Err(access_denied(name));
        }
        let mut st = self.state.write();
        if st.dbs.remove(name).is_none() {
            if if_exists {
                return Ok(());
            }
            return Err(DorisError::new(
                1008,
                format!(
                    "errCode = 2, detailMessage = Can't drop database '{name}'; database doesn't exist"
                ),
            ));
        }
        Ok(())
    }

    /// Database names, sorted (`information_schema` and `mysql` included, as Doris lists them).
    pub fn databases(&self) -> Vec<String> {
        let st = self.state.read();
        let mut out: Vec<String> = st.dbs.keys().cloned().collect();
        out.extend(SYSTEM_DATABASES.iter().map(|s| s.to_string()));
        out.sort();
        out
    }

    /// Table names of a database, sorted.
    pub fn tables(&self, db: &str) -> Result<Vec<String>> {
        if is_system_db(db) {
            return Ok(Vec::new());
        }
        let st = self.state.read();
        Ok(st.db(db, Lookup::Ddl)?.tables.keys().cloned().collect())
    }

    /// `CREATE TABLE`, validating models and properties with Doris's exact errors.
    pub fn create_table(&self, def: TableDef) -> Result<()> {
        if is_system_db(&def.db) {
            return Err(access_denied(&def.db));
        }
        let mut st = self.state.write();
        let db = st.db(&def.db, Lookup::Ddl)?;
        if db.tables.contains_key(&def.name) {
            if def.if_not_exists {
                return Ok(());
            }
            return Err(DorisError::new(
                ER_TABLE_EXISTS,
                format!(
                    "errCode = 2, detailMessage = Table '{}' already exists",
                    def.name
                ),
            ));
        }
        let bad = |m: &str| DorisError::analysis(m);
        if def.columns.is_empty() {
            return Err(bad("Table should contain at least one column"));
        }
        for (i, c) in def.columns.iter().enumerate() {
            if def.columns[..i]
                .iter()
                .any(|o| o.name.eq_ignore_ascii_case(&c.name))
            {
                return Err(DorisError::new(
                    ER_DUP_FIELDNAME,
                    format!(
                        "errCode = 2, detailMessage = Duplicate column name '{}'",
                        c.name
                    ),
                ));
            }
        }
        let n_keys = def.key_columns.len();
        if n_keys == 0 || n_keys > def.columns.len() {
            return Err(bad("Key columns should be a ordered prefix of the schema."));
        }
        for (k, c) in def.key_columns.iter().zip(&def.columns) {
            if *k != c.name {
                if !def.columns.iter().any(|c| c.name == *k) {
                    return Err(bad(&format!("Key column[{k}] doesn't exist.")));
                }
                return Err(bad("Key columns should be a ordered prefix of the schema."));
            }
            match c.ty {
                DorisType::Float | DorisType::Double => {
                    return Err(bad(
                        "Float or double can not used as a key, use decimal instead.",
                    ));
                }
                DorisType::Json => {
                    return Err(bad(&format!(
                        "JSONB type should not be used in key column[{}].",
                        c.name
                    )));
                }
                _ => {}
            }
        }
        if def.keys_type == KeysType::Duplicate
            && n_keys == def.columns.len()
            && def.columns.len() > 1
        {
            // allowed in Doris; nothing to check
        }
        for h in &def.distribution.hash_columns {
            if !def.columns.iter().any(|c| c.name == *h) {
                return Err(bad(&format!("Distribution column({h}) doesn't exist.")));
            }
            if def.keys_type == KeysType::Unique && !def.key_columns.contains(h) {
                return Err(bad(&format!("Distribution column[{h}] is not key column")));
            }
        }
        if def.keys_type == KeysType::Unique && def.distribution.hash_columns.is_empty() {
            return Err(bad(
                "Random distribution for non-duplicate table is unsupported",
            ));
        }
        if def.distribution.buckets == Some(0) {
            return Err(bad(
                "Number of hash distribution should be greater than zero.",
            ));
        }
        if let Some(ap) = &def.auto_partition {
            if !def.columns.iter().any(|c| c.name == ap.column) {
                return Err(bad(&format!(
                    "partition column {} does not exist",
                    ap.column
                )));
            }
            let units = ["year", "quarter", "month", "week", "day", "hour"];
            if !units.contains(&ap.unit.as_str()) {
                return Err(bad(&format!(
                    "date_trunc function time unit param only support argument is {}",
                    units.join("|")
                )));
            }
        }
        let props = props::validate_create(def.keys_type, &def.properties, self.feature_changelog)?;
        for c in &def.columns {
            if let Some(d) = &c.default {
                crate::types::coerce(&c.ty, d.clone())
                    .map_err(|e| bad(&format!("Invalid default value for '{}': {e}", c.name)))?;
            }
        }

        let id = st.alloc_id();
        let n_tablets = def.distribution.buckets.unwrap_or(AUTO_BUCKETS);
        let tablets: Vec<i64> = (0..n_tablets).map(|_| st.alloc_id()).collect();
        let rows = match def.keys_type {
            KeysType::Unique => Rows::Unique(BTreeMap::new()),
            KeysType::Duplicate => Rows::Dup(BTreeMap::new()),
        };
        let mut t = Table {
            id,
            db: def.db.clone(),
            name: def.name.clone(),
            columns: def.columns,
            keys_type: def.keys_type,
            key_columns: def.key_columns,
            key_idx: Vec::new(),
            hash_idx: Vec::new(),
            distribution: def.distribution,
            auto_partition: def.auto_partition,
            mow: props.mow,
            light_delete: props.light_delete,
            props: props.other,
            changelog: props.changelog,
            binlog_max_bytes: props.binlog_max_bytes,
            binlog_max_history_nums: props.binlog_max_history_nums,
            tablets,
            rows,
            history: Vec::new(),
            next_row_id: 0,
            compacted_rows: 0,
        };
        t.reindex();
        st.dbs
            .get_mut(&def.db)
            .expect("checked")
            .tables
            .insert(def.name, t);
        Ok(())
    }

    /// `DROP TABLE [IF EXISTS]`.
    pub fn drop_table(&self, db: &str, table: &str, if_exists: bool) -> Result<()> {
        if is_system_db(db) {
            return Err(access_denied(db));
        }
        let mut st = self.state.write();
        let d = st.dbs.get_mut(db).ok_or_else(|| err_unknown_db(db))?;
        if d.tables.remove(table).is_none() && !if_exists {
            return Err(err_unknown_table(table));
        }
        Ok(())
    }

    /// `ALTER TABLE SET ("k"="v", ...)`.
    pub fn set_properties(&self, db: &str, table: &str, props: &[(String, String)]) -> Result<()> {
        let mut st = self.state.write();
        let t = st.table_mut(db, table)?;
        props::alter_set(t, props)
    }

    /// `TRUNCATE TABLE`.
    ///
    /// The rows go away without changelog records (Doris replaces the partitions with new ones,
    /// new ids and new tablets, docs/doris-protocols.md §2.4; no row is deleted). When the
    /// changelog is on, a truncate marker is kept in the history so that `FOR VERSION AS OF`
    /// before it still sees the old rows, and after it sees none; `@incr` never returns anything
    /// for it. The old tablet ids are gone: `_query_plan` lists the new ones, and `TABLET(old)`
    /// reads no rows, without an error.
    pub fn truncate(&self, db: &str, table: &str) -> Result<()> {
        let mut st = self.state.write();
        let n = st.table_mut(db, table)?.tablets.len();
        let ids: Vec<i64> = (0..n).map(|_| st.alloc_id()).collect();
        let t = st.table_mut(db, table)?;
        t.tablets = ids;
        t.clear();
        let tso = self.clock.next_tso();
        if t.changelog.enabled {
            t.history.push(Commit {
                tso,
                truncate: true,
                changes: Vec::new(),
            });
        }
        st.last_commit_tso = tso;
        Ok(())
    }

    /// A table's definition.
    pub fn table_info(&self, db: &str, table: &str) -> Result<TableInfo> {
        let st = self.state.read();
        Ok(info_of(st.table(db, table, Lookup::Ddl)?))
    }

    /// The `Create Table` text of `SHOW CREATE TABLE`.
    pub fn show_create_table(&self, db: &str, table: &str) -> Result<String> {
        let st = self.state.read();
        Ok(props::show_create(st.table(db, table, Lookup::Ddl)?))
    }

    // === data ===

    /// Current rows (or the rows as of commit TSO `version`, `FOR VERSION AS OF`), optionally only
    /// those in the given tablets. Rows are in the table's column order.
    ///
    /// Errors use the SELECT (Nereids) texts: `Table [t] does not exist in database [db].`.
    /// Time travel needs the changelog, and on merge-on-write tables `need_historical_value`; a
    /// version older than the TTL on a merge-on-write table fails with the expired-offset error.
    pub fn scan(
        &self,
        db: &str,
        table: &str,
        version: Option<i64>,
        tablets: Option<&[i64]>,
    ) -> Result<Vec<Vec<Value>>> {
        let st = self.state.read();
        let t = st.table(db, table, Lookup::Select)?;
        let Some(v) = version else {
            return Ok(t.current_rows(tablets));
        };
        if !t.changelog.enabled {
            return Err(DorisError::analysis(TIME_TRAVEL_REQUIRES_CHANGELOG));
        }
        if t.keys_type == KeysType::Unique {
            if !t.changelog.need_historical_value {
                let p = match t.changelog.spelling {
                    ChangelogSpelling::Changelog => "changelog",
                    ChangelogSpelling::Binlog => "binlog",
                };
                return Err(DorisError::analysis(format!(
                    "FOR VERSION/TIME AS OF on merge-on-write table requires {p}.need_historical_value=true"
                )));
            }
            let expire_before = self.clock.now_ms() - t.changelog.ttl_seconds * 1000;
            if tso_physical_ms(v) <= expire_before {
                return Err(DorisError::analysis(offset_expired_message(
                    t.changelog.spelling,
                )));
            }
        }
        Ok(t.rows_as_of(v, tablets))
    }

    /// Current rows (no time travel), optionally only those in the given tablets, taken under
    /// the lock still encoded and decoded by the caller a chunk at a time: a big read never holds
    /// the whole table as values at once. Errors as [`Engine::scan`].
    pub fn scan_stored(
        &self,
        db: &str,
        table: &str,
        tablets: Option<&[i64]>,
    ) -> Result<StoredRows> {
        let st = self.state.read();
        let t = st.table(db, table, Lookup::Select)?;
        Ok(StoredRows {
            rows: t.current_stored(tablets),
            info: info_of(t),
            unmatched: None,
        })
    }

    /// The current rows of a UNIQUE table whose key is one of `keys` (each tuple the key
    /// columns' values in key order, as stored: an integer key as `Int` or `LargeInt`, a string
    /// key as `Str`), in key order, found without a scan. `None` for a DUPLICATE table. Errors
    /// as [`Engine::scan`].
    pub fn lookup_stored(
        &self,
        db: &str,
        table: &str,
        keys: &[Vec<Value>],
    ) -> Result<Option<StoredRows>> {
        let st = self.state.read();
        let t = st.table(db, table, Lookup::Select)?;
        let Some(rows) = t.stored_with_keys(keys) else {
            return Ok(None);
        };
        let unmatched = if rows.is_empty() {
            t.first_stored().cloned()
        } else {
            None
        };
        Ok(Some(StoredRows {
            rows,
            info: info_of(t),
            unmatched,
        }))
    }

    /// How many current rows the table holds (in the given tablets). Errors as [`Engine::scan`].
    pub fn count_rows(&self, db: &str, table: &str, tablets: Option<&[i64]>) -> Result<usize> {
        let st = self.state.read();
        let t = st.table(db, table, Lookup::Select)?;
        Ok(t.count_stored(tablets))
    }

    /// Apply writes as one auto-committed transaction (INSERT / UPDATE / DELETE statements).
    pub fn write(&self, db: &str, table: &str, writes: Vec<RowWrite>) -> Result<WriteOutcome> {
        let mut st = self.state.write();
        let t = st.table(db, table, Lookup::Ddl)?;
        let id = t.id;
        let norm = t.normalize(writes)?;
        let (tso, affected) = st.commit(&self.clock, db, id, norm, false)?;
        Ok(WriteOutcome { tso, affected })
    }

    /// Apply the deletes of a DELETE statement as one auto-committed transaction. On a UNIQUE
    /// table with `enable_mow_light_delete` they are a delete predicate: the rows go, the
    /// changelog records nothing (docs/doris-protocols.md §1.1); otherwise as [`Engine::write`].
    pub fn delete_statement(
        &self,
        db: &str,
        table: &str,
        writes: Vec<RowWrite>,
    ) -> Result<WriteOutcome> {
        let mut st = self.state.write();
        let t = st.table(db, table, Lookup::Ddl)?;
        let id = t.id;
        let predicate = t.is_unique() && t.light_delete;
        let mut norm = t.normalize(writes)?;
        if predicate {
            for w in &mut norm {
                if let NormWrite::Delete(row) = w {
                    *w = NormWrite::PredicateDelete(std::mem::take(row));
                }
            }
        }
        let (tso, affected) = st.commit(&self.clock, db, id, norm, false)?;
        Ok(WriteOutcome { tso, affected })
    }

    // === stream load transactions ===

    /// Begin a load transaction under `label` (labels of aborted transactions may be reused), with
    /// the FE's default load timeout.
    pub fn begin_txn(&self, db: &str, table: &str, label: &str) -> Result<i64, BeginError> {
        self.begin_txn_with_timeout(db, table, label, None)
    }

    /// Begin a load transaction under `label` that may stay PREPARE for `timeout_s` seconds (the
    /// load's `timeout` header; `None`: `stream_load_default_timeout_second`). Refused when the
    /// database already runs `max_running_txn_num_per_db` transactions.
    pub fn begin_txn_with_timeout(
        &self,
        db: &str,
        table: &str,
        label: &str,
        timeout_s: Option<i64>,
    ) -> Result<i64, BeginError> {
        let mut st = self.state.write();
        let now = self.clock.now_ms();
        self.expire_txns(&mut st, now);
        let t = st
            .table(db, table, Lookup::Ddl)
            .map_err(BeginError::Other)?;
        let table_id = t.id;
        if let Some((id, txn)) = st
            .txns
            .iter()
            .rev()
            .find(|(_, x)| x.db == db && x.label == label && x.state != TxnState::Aborted)
        {
            return Err(BeginError::LabelExists {
                txn_id: *id,
                state: txn.state,
            });
        }
        let running = st
            .txns
            .values()
            .filter(|x| x.db == db && matches!(x.state, TxnState::Prepare | TxnState::PreCommitted))
            .count() as i64;
        let limit = self.fe_config.max_running_txn_num_per_db();
        if running >= limit {
            let db_id = st.dbs.get(db).map_or(0, |d| d.id);
            return Err(BeginError::Other(DorisError::analysis(format!(
                "current running txns on db {db_id} is {running}, larger than limit {limit}"
            ))));
        }
        let timeout_ms = timeout_s
            .map(|s| s.saturating_mul(1000))
            .unwrap_or_else(|| self.fe_config.default_load_timeout_ms());
        let id = st.next_txn_id;
        st.next_txn_id += 1;
        st.txns.insert(
            id,
            Txn {
                db: db.to_string(),
                table_id,
                label: label.to_string(),
                state: TxnState::Prepare,
                writes: Vec::new(),
                cols: Vec::new(),
                prepare_ms: now,
                timeout_ms,
                precommit_ms: None,
                reason: String::new(),
            },
        );
        Ok(id)
    }

    /// Doris's transaction manager: abort every transaction past its timeout at `now_ms` (by the
    /// emulated clock, so a clock jump times transactions out as Doris's would). Run before every
    /// decision that depends on a transaction's state.
    fn expire_txns(&self, st: &mut State, now_ms: i64) {
        let precommit_timeout = self.fe_config.precommit_timeout_ms();
        for txn in st.txns.values_mut() {
            if txn.timed_out(now_ms, precommit_timeout) {
                txn.state = TxnState::Aborted;
                txn.reason = fe_config::TIMEOUT_REASON.to_string();
                txn.writes = Vec::new();
            }
        }
    }

    /// Attach the load's rows and pre-commit (two-phase) or commit at once. Returns the new state.
    ///
    /// Invalid rows fail the load: the error is returned and the transaction is aborted with it as
    /// the reason (its label becomes reusable; a later `abort_txn` is a no-op).
    pub fn finish_txn(
        &self,
        txn_id: i64,
        writes: Vec<RowWrite>,
        two_phase: bool,
    ) -> Result<TxnState> {
        let mut st = self.state.write();
        self.expire_txns(&mut st, self.clock.now_ms());
        let (db, table_id, state) = match st.txns.get(&txn_id) {
            Some(t) => (t.db.clone(), t.table_id, t.state),
            None => {
                return Err(DorisError::analysis(format!(
                    "transaction [{txn_id}] not found"
                )));
            }
        };
        if state != TxnState::Prepare {
            return Err(DorisError::analysis(format!(
                "transaction [{txn_id}] is {}, not prepare",
                state_name(state)
            )));
        }
        let validated = match st.table_by_id_mut(&db, table_id) {
            Some(t) => t.normalize(writes).map(|w| (w, t.column_names())),
            None => Err(DorisError::analysis(format!(
                "unknown table, tableId={table_id}"
            ))),
        };
        let (norm, cols) = match validated {
            Ok(v) => v,
            Err(e) => {
                let txn = st.txns.get_mut(&txn_id).expect("exists");
                txn.state = TxnState::Aborted;
                txn.reason = e.message.clone();
                return Err(e);
            }
        };
        if two_phase {
            let now = self.clock.now_ms();
            let txn = st.txns.get_mut(&txn_id).expect("exists");
            txn.writes = norm;
            txn.cols = cols;
            txn.precommit_ms = Some(now);
            txn.state = TxnState::PreCommitted;
            return Ok(TxnState::PreCommitted);
        }
        match st.commit(&self.clock, &db, table_id, norm, true) {
            Ok(_) => {
                st.txns.get_mut(&txn_id).expect("exists").state = TxnState::Visible;
                Ok(TxnState::Visible)
            }
            Err(e) => {
                let txn = st.txns.get_mut(&txn_id).expect("exists");
                txn.state = TxnState::Aborted;
                txn.reason = e.message.clone();
                Err(e)
            }
        }
    }

    /// Abort a transaction that failed while loading (its label becomes reusable).
    pub fn abort_txn(&self, txn_id: i64, reason: &str) -> Result<()> {
        let mut st = self.state.write();
        let txn = st
            .txns
            .get_mut(&txn_id)
            .ok_or_else(|| DorisError::analysis(format!("transaction [{txn_id}] not found")))?;
        match txn.state {
            TxnState::Aborted => Ok(()),
            TxnState::Visible => Err(DorisError::analysis(format!(
                "transaction [{txn_id}] is already VISIBLE, could not abort."
            ))),
            TxnState::Prepare | TxnState::PreCommitted => {
                txn.state = TxnState::Aborted;
                txn.reason = reason.to_string();
                txn.writes = Vec::new();
                Ok(())
            }
        }
    }

    /// The second phase of 2PC. `Ok` carries the success message, `Err` the failure message, both
    /// exactly as docs/doris-protocols.md §4.3 words them.
    ///
    /// By label, Doris looks for a PRECOMMITTED transaction (commit) or a PRECOMMITTED/PREPARE one
    /// (abort): `transaction not found, label=<l>` when the label is unknown, `running transaction
    /// not found, label=<l>` when none is in such a state. Aborting an aborted transaction says
    /// `is already aborted, abort reason: ...` (comma), committing one `... aborted. abort reason:`.
    pub fn two_phase(
        &self,
        db: &str,
        txn: &TxnRef,
        operation: TxnOperation,
    ) -> std::result::Result<String, String> {
        let e = |m: String| format!("errCode = 2, detailMessage = {m}");
        let mut st = self.state.write();
        self.expire_txns(&mut st, self.clock.now_ms());
        if !st.dbs.contains_key(db) {
            return Err(e(format!("unknown database, database={db}")));
        }
        let id = match txn {
            TxnRef::Id(id) => *id,
            TxnRef::Label(l) => {
                let mut with_label = st
                    .txns
                    .iter()
                    .filter(|(_, x)| x.db == db && x.label == *l)
                    .peekable();
                if with_label.peek().is_none() {
                    return Err(e(format!("transaction not found, label={l}")));
                }
                let wanted = |s: TxnState| match operation {
                    TxnOperation::Commit => s == TxnState::PreCommitted,
                    TxnOperation::Abort => matches!(s, TxnState::PreCommitted | TxnState::Prepare),
                };
                match with_label
                    .filter(|(_, x)| wanted(x.state))
                    .map(|(id, _)| *id)
                    .next_back()
                {
                    Some(id) => id,
                    None => return Err(e(format!("running transaction not found, label={l}"))),
                }
            }
        };
        let ok_subject = match txn {
            TxnRef::Id(id) => format!("transaction [{id}]"),
            TxnRef::Label(l) => format!("label [{l}]"),
        };
        let Some(x) = st.txns.get(&id).filter(|x| x.db == db) else {
            return Err(e(format!("transaction [{id}] not found")));
        };
        match operation {
            TxnOperation::Commit => match x.state {
                TxnState::Aborted => Err(e(format!(
                    "transaction [{id}] is already aborted. abort reason: {}",
                    x.reason
                ))),
                TxnState::Visible => Err(e(format!(
                    "transaction [{id}] is already visible, not pre-committed."
                ))),
                TxnState::Prepare => Err(e(format!(
                    "transaction [{id}] is prepare, not pre-committed."
                ))),
                TxnState::PreCommitted => {
                    let x = st.txns.get_mut(&id).expect("exists");
                    let writes = std::mem::take(&mut x.writes);
                    let cols = std::mem::take(&mut x.cols);
                    let (db_name, table_id) = (x.db.clone(), x.table_id);
                    let writes = match st.table_by_id_mut(&db_name, table_id) {
                        Some(t) if t.column_names() != cols => writes
                            .into_iter()
                            .map(|w| table::remap_write(t, &cols, w))
                            .collect::<Result<Vec<_>>>()
                            .map_err(|err| err.message)?,
                        _ => writes,
                    };
                    match st.commit(&self.clock, &db_name, table_id, writes, true) {
                        Ok(_) => {
                            st.txns.get_mut(&id).expect("exists").state = TxnState::Visible;
                            Ok(format!("{ok_subject} commit successfully."))
                        }
                        Err(err) => {
                            let x = st.txns.get_mut(&id).expect("exists");
                            x.state = TxnState::Aborted;
                            x.reason = err.message.clone();
                            Err(err.message)
                        }
                    }
                }
            },
            TxnOperation::Abort => match x.state {
                TxnState::Aborted => Err(e(format!(
                    "transaction [{id}] is already aborted, abort reason: {}",
                    x.reason
                ))),
                TxnState::Visible => Err(e(format!(
                    "transaction [{id}] is already VISIBLE, could not abort."
                ))),
                TxnState::Prepare | TxnState::PreCommitted => {
                    let x = st.txns.get_mut(&id).expect("exists");
                    x.state = TxnState::Aborted;
                    x.reason = "User Abort".to_string();
                    x.writes = Vec::new();
                    Ok(format!("{ok_subject} abort successfully."))
                }
            },
        }
    }

    /// State of a transaction, for tests and the control API.
    pub fn txn_state(&self, txn_id: i64) -> Option<TxnState> {
        let mut st = self.state.write();
        self.expire_txns(&mut st, self.clock.now_ms());
        st.txns.get(&txn_id).map(|t| t.state)
    }

    /// Why a transaction was aborted (empty while it is not).
    pub fn txn_reason(&self, txn_id: i64) -> Option<String> {
        self.state
            .read()
            .txns
            .get(&txn_id)
            .map(|t| t.reason.clone())
    }

    /// Label of a transaction.
    pub fn txn_label(&self, txn_id: i64) -> Option<String> {
        self.state.read().txns.get(&txn_id).map(|t| t.label.clone())
    }

    // === changelog ===

    /// An `@incr` read: changes with commit time in `[start, end)`, folded by increment type, TTL
    /// applied, ordered by TSO, LSN, OP. Waits up to `visible_timeout_ms` for pre-committed
    /// transactions on the table whose commit could land in the window, then fails with 5101.
    ///
    /// Details (the folding rules are documented in `engine/incr.rs`):
    /// - `now` and the TTL horizon are read once, at the start of the call;
    /// - the wait covers PRECOMMITTED transactions on the table pre-committed before `end` (any, when
    ///   `end` is unbounded); `visible_timeout_ms <= 0` skips the wait (eventual-consistent read);
    /// - a start at or after the end, or in the future, returns no rows without waiting.
    pub async fn incr(&self, req: IncrRequest) -> Result<Vec<ChangeRow>> {
        let now = self.clock.now_ms();
        let table_id = {
            let st = self.state.read();
            let t = st.table(&req.db, &req.table, Lookup::Select)?;
            incr::check(t, &req, now)?;
            t.id
        };
        if let Some(s) = req.start_ms
            && (s > now || req.end_ms.is_some_and(|e| s >= e))
        {
            return Ok(Vec::new());
        }
        if req.visible_timeout_ms > 0 {
            let deadline = Instant::now() + Duration::from_millis(req.visible_timeout_ms as u64);
            loop {
                let pending = {
                    let mut st = self.state.write();
                    self.expire_txns(&mut st, self.clock.now_ms());
                    st.txns.values().any(|x| {
                        x.db == req.db
                            && x.table_id == table_id
                            && x.state == TxnState::PreCommitted
                            && match (x.precommit_ms, req.end_ms) {
                                (Some(p), Some(end)) => p < end,
                                _ => true,
                            }
                    })
                };
                if !pending {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(
                        self.visible_wait_timeout(req.end_ms.unwrap_or(-1), req.visible_timeout_ms)
                    );
                }
                tokio::time::sleep(VISIBLE_WAIT_POLL).await;
            }
        }
        let st = self.state.read();
        let t = st.table(&req.db, &req.table, Lookup::Select)?;
        if t.id != table_id {
            return Err(err_select_unknown_table(&req.db, &req.table));
        }
        Ok(incr::fold(t, &req, now))
    }

    fn visible_wait_timeout(&self, end_ms: i64, timeout_ms: i64) -> DorisError {
        let current = self.clock.current_tso();
        let committed = self.committed_tso();
        DorisError::new(
            ERR_INCR_VISIBLE_WAIT_TIMEOUT,
            format!(
                "ERR_INCR_VISIBLE_WAIT_TIMEOUT: reason=VISIBLE_WAIT_TIMEOUT, requestedEndTimestampMs={end_ms}, currentTSO={current}, currentTSOPhysicalTimeMs={}, committedTSO={committed}, committedTSOPhysicalTimeMs={}, retryAfterMs=1000, timeoutMs={timeout_ms}",
                tso_physical_ms(current),
                tso_physical_ms(committed),
            ),
        )
    }
}

fn access_denied(db: &str) -> DorisError {
    DorisError::new(
        ER_DB_ACCESS_DENIED,
        format!(
            "errCode = 2, detailMessage = Access denied for user 'root'@'%' to database '{db}'"
        ),
    )
}

fn state_name(s: TxnState) -> &'static str {
    match s {
        TxnState::Prepare => "PREPARE",
        TxnState::PreCommitted => "PRECOMMITTED",
        TxnState::Visible => "VISIBLE",
        TxnState::Aborted => "ABORTED",
    }
}

//! Statement execution against the engine.

use super::ast::*;
use super::eval::{self, EvalCtx, RelColumn, Relation, RowRef, Visibility};
use super::{RowSink, Session, keyed, time};
use crate::Doris;
use crate::clock::{TSO_LOGICAL_BITS, compose_tso, tso_logical, tso_physical_ms};
use crate::engine::{
    AutoPartition, ChangeRow, ColumnDef, ColumnPosition, Distribution, IncrRequest, IncrementType,
    KeysType, ModifiedColumn, RowWrite, StoredRows, TableDef, TableInfo,
};
use crate::error::{DorisError, ERR_INCR_VISIBLE_WAIT_TIMEOUT, ERR_INCR_WINDOW_NOT_READY, Result};
use crate::types::{ColumnMeta, DorisType, QueryResult, ResultSet, Value, coerce};

/// Hidden column names. Kept in one place: changelog builds may rename them
/// (docs/doris-protocols.md §0).
pub mod hidden {
    /// `@incr` op code (TINYINT).
    pub const BINLOG_OP: &str = "__DORIS_BINLOG_OP__";
    /// `@incr` commit TSO (BIGINT).
    pub const BINLOG_TSO: &str = "__DORIS_BINLOG_TSO__";
    /// `@incr` position within the commit (BIGINT).
    pub const BINLOG_LSN: &str = "__DORIS_BINLOG_LSN__";
    /// Delete sign of UNIQUE tables.
    pub const DELETE_SIGN: &str = "__DORIS_DELETE_SIGN__";
    /// Version column of UNIQUE tables.
    pub const VERSION_COL: &str = "__DORIS_VERSION_COL__";
}

const INCR_UNSUPPORTED: &str = "Unsupported parameter in incr query";
const INCR_BAD_TIME: &str = "Invalid TIMESTAMP format in incr clause";

fn ok(affected_rows: u64) -> QueryResult {
    QueryResult::Ok {
        affected_rows,
        info: String::new(),
    }
}

fn no_db() -> DorisError {
    DorisError::new(1046, "errCode = 2, detailMessage = No database selected")
}

fn db_of(session: &Session, name: &ObjName) -> Result<String> {
    match &name.db {
        Some(d) => Ok(d.clone()),
        None => session.current_db.clone().ok_or_else(no_db),
    }
}

fn is_info_schema(db: &str) -> bool {
    db.eq_ignore_ascii_case("information_schema")
}

fn str_col(name: &str) -> RelColumn {
    RelColumn::visible(name, DorisType::Varchar(65533), true)
}

fn int_col(name: &str) -> RelColumn {
    RelColumn::visible(name, DorisType::BigInt, true)
}

fn s(v: impl Into<String>) -> Value {
    Value::Str(v.into())
}

fn opt_s(v: Option<String>) -> Value {
    v.map(Value::Str).unwrap_or(Value::Null)
}

fn rows_result(columns: Vec<RelColumn>, rows: Vec<Vec<Value>>) -> QueryResult {
    QueryResult::Rows(ResultSet {
        columns: columns.into_iter().map(|c| c.meta).collect(),
        rows,
    })
}

/// Run one parsed statement. With a `sink`, a SELECT's rows go to it in parts (see
/// [`super::execute_streamed`]) and the result set returned holds the columns only.
pub async fn run(
    doris: &Doris,
    session: &mut Session,
    stmt: Statement,
    sink: Option<RowSink<'_>>,
) -> Result<QueryResult> {
    let now_ms = doris.clock.now_ms();
    match stmt {
        Statement::Noop => Ok(ok(0)),
        Statement::CreateDatabase {
            name,
            if_not_exists,
        } => {
            doris.engine.create_database(&name, if_not_exists)?;
            Ok(ok(0))
        }
        Statement::DropDatabase { name, if_exists } => {
            doris.engine.drop_database(&name, if_exists)?;
            if session.current_db.as_deref() == Some(name.as_str()) {
                session.current_db = None;
            }
            Ok(ok(0))
        }
        Statement::Use(db) => {
            let exists = doris.engine.databases().iter().any(|d| d == &db) || is_info_schema(&db);
            if !exists {
                return Err(DorisError::new(
                    crate::error::ER_BAD_DB,
                    format!("errCode = 2, detailMessage = Unknown database '{db}'"),
                ));
            }
            session.current_db = Some(db);
            Ok(ok(0))
        }
        Statement::Show(show) => run_show(doris, session, show, now_ms),
        Statement::CreateTable(ct) => {
            let def = table_def(session, ct)?;
            doris.engine.create_table(def)?;
            Ok(ok(0))
        }
        Statement::CreateTableLike {
            name,
            like,
            if_not_exists,
        } => {
            let def = table_def_like(session, doris, &name, &like, if_not_exists)?;
            doris.engine.create_table(def)?;
            Ok(ok(0))
        }
        Statement::DropTable { name, if_exists } => {
            let db = db_of(session, &name)?;
            doris.engine.drop_table(&db, &name.name, if_exists)?;
            Ok(ok(0))
        }
        Statement::Truncate(name) => {
            let db = db_of(session, &name)?;
            doris.engine.truncate(&db, &name.name)?;
            Ok(ok(0))
        }
        Statement::Alter { name, ops } => {
            let db = db_of(session, &name)?;
            if ops.len() > 1
                && ops
                    .iter()
                    .any(|op| matches!(op, AlterOp::ReplaceWith { .. }))
            {
                return Err(DorisError::analysis(
                    "REPLACE WITH TABLE cannot be combined with other alter operations",
                ));
            }
            for op in ops {
                match op {
                    AlterOp::AddColumn { column, position } => {
                        let def = column_def(column, false)?;
                        doris.engine.add_column(
                            &db,
                            &name.name,
                            def,
                            column_position(position.as_ref()),
                        )?;
                    }
                    AlterOp::DropColumn(c) => doris.engine.drop_column(&db, &name.name, &c)?,
                    AlterOp::ModifyColumn {
                        column,
                        has_comment,
                        position,
                    } => {
                        let modified = modified_column(column, has_comment)?;
                        doris.engine.modify_column(
                            &db,
                            &name.name,
                            modified,
                            column_position(position.as_ref()),
                        )?;
                    }
                    AlterOp::ModifyColumnComment { column, comment } => doris
                        .engine
                        .modify_column_comment(&db, &name.name, &column, &comment)?,
                    AlterOp::RenameColumn { from, to } => {
                        doris.engine.rename_column(&db, &name.name, &from, &to)?
                    }
                    AlterOp::OrderBy(_) => doris.engine.reorder_columns(&db, &name.name)?,
                    AlterOp::SetProperties(p) => {
                        doris.engine.set_properties(&db, &name.name, &p)?
                    }
                    AlterOp::ReplaceWith { table, properties } => {
                        let swap = replace_swap(properties)?;
                        doris.engine.replace_table(&db, &name.name, &table, swap)?;
                    }
                }
            }
            Ok(ok(0))
        }
        Statement::Set(items) => {
            let ctx = ctx_for(doris, session, now_ms);
            let mut updates = Vec::new();
            for item in items {
                updates.push((item.name.clone(), set_value(&ctx, &item)?));
            }
            for (k, v) in updates {
                match v {
                    Some(v) => session.variables.insert(k, v),
                    None => session.variables.remove(&k),
                };
            }
            Ok(ok(0))
        }
        Statement::SetNames(cs) => {
            for k in [
                "character_set_client",
                "character_set_connection",
                "character_set_results",
            ] {
                session.variables.insert(k.to_string(), cs.clone());
            }
            Ok(ok(0))
        }
        Statement::Insert {
            table,
            columns,
            rows,
        } => {
            let ctx = ctx_for(doris, session, now_ms);
            run_insert(&ctx, &table, columns, InsertSource::Values(rows))
        }
        Statement::InsertSelect {
            table,
            columns,
            query,
        } => {
            let rs = {
                let ctx = ctx_for(doris, session, now_ms);
                run_select(&ctx, &query).await?
            };
            let ctx = ctx_for(doris, session, now_ms);
            run_insert(&ctx, &table, columns, InsertSource::Rows(rs))
        }
        Statement::Update {
            table,
            sets,
            where_,
        } => {
            let ctx = ctx_for(doris, session, now_ms);
            run_update(&ctx, &table, &sets, where_.as_ref())
        }
        Statement::Delete { table, where_ } => {
            let ctx = ctx_for(doris, session, now_ms);
            run_delete(&ctx, &table, where_.as_ref())
        }
        Statement::Select(sel) => {
            let ctx = ctx_for(doris, session, now_ms);
            Ok(QueryResult::Rows(match sink {
                Some(sink) => run_select_streamed(&ctx, &sel, sink).await?,
                None => run_select(&ctx, &sel).await?,
            }))
        }
    }
}

fn ctx_for<'a>(doris: &'a Doris, session: &'a Session, now_ms: i64) -> EvalCtx<'a> {
    let tz = time::session_tz(eval::var_text(session, "time_zone").as_deref());
    EvalCtx {
        doris,
        session,
        now_ms,
        tz,
    }
}

// ------------------------------------------------------------------------------------------------
// SET

fn set_value(ctx: &EvalCtx<'_>, item: &SetItem) -> Result<Option<String>> {
    if matches!(&item.value, Expr::Func { name, .. } if name == "__default") {
        return Ok(None);
    }
    let text = match &item.value {
        Expr::Column {
            qualifier: None,
            name,
        } => name.clone(),
        e => {
            let v = eval::eval(ctx, e, None)?;
            match v {
                Value::Null => String::new(),
                Value::Bool(b) => b.to_string(),
                other => eval::text_of(&other),
            }
        }
    };
    let name = item.name.as_str();
    let lower = text.to_ascii_lowercase();
    let bool_text = |t: &str| -> Result<String> {
        match t {
            "1" | "true" | "on" => Ok("true".into()),
            "0" | "false" | "off" => Ok("false".into()),
            _ => Err(DorisError::analysis(format!(
                "Variable '{name}' can't be set to the value of '{text}'"
            ))),
        }
    };
    Ok(Some(match name {
        "time_zone" => {
            if time::parse_tz(&text).is_none() {
                return Err(DorisError::analysis(format!(
                    "Unknown or incorrect time zone: '{text}'"
                )));
            }
            if lower == "system" {
                "UTC".into()
            } else {
                text
            }
        }
        "show_hidden_columns" | "enable_unique_key_partial_update" => bool_text(&lower)?,
        "autocommit" => {
            if bool_text(&lower)? == "true" {
                "1".into()
            } else {
                "0".into()
            }
        }
        "change_visible_timeout_ms"
        | "query_timeout"
        | "insert_timeout"
        | "wait_timeout"
        | "max_allowed_packet" => {
            if text.trim().parse::<i64>().is_err() {
                return Err(DorisError::analysis(format!(
                    "Incorrect argument type to variable '{name}'"
                )));
            }
            text.trim().to_string()
        }
        _ => text,
    }))
}

// ------------------------------------------------------------------------------------------------
// CREATE TABLE

fn type_size(ty: &DorisType) -> usize {
    match ty {
        DorisType::Boolean | DorisType::TinyInt => 1,
        DorisType::SmallInt => 2,
        DorisType::Int | DorisType::Float | DorisType::Date => 4,
        DorisType::BigInt | DorisType::Double | DorisType::DateTime(_) => 8,
        DorisType::LargeInt => 16,
        DorisType::Decimal { .. } => 16,
        DorisType::Char(n) | DorisType::Varchar(n) => *n as usize,
        DorisType::String | DorisType::Json => 65533,
    }
}

/// `AFTER c` / `FIRST` as the engine takes it.
fn column_position(pos: Option<&ColumnPos>) -> ColumnPosition<'_> {
    match pos {
        None => ColumnPosition::Unchanged,
        Some(ColumnPos::First) => ColumnPosition::First,
        Some(ColumnPos::After(c)) => ColumnPosition::After(c),
    }
}

/// A `MODIFY COLUMN` definition: what the statement says; the engine fills in the rest from the
/// column.
fn modified_column(spec: ColumnSpec, has_comment: bool) -> Result<ModifiedColumn> {
    let nullable = spec.nullable;
    let def = column_def(spec, false)?;
    Ok(ModifiedColumn {
        name: def.name,
        ty: def.ty,
        nullable,
        default: def.default,
        comment: has_comment.then_some(def.comment),
    })
}

fn column_def(spec: ColumnSpec, is_key: bool) -> Result<ColumnDef> {
    let is_key = is_key || spec.key;
    let default = match spec.default {
        None => None,
        Some(Expr::Lit(l)) => {
            let v = eval::literal_value(&l)?;
            if v.is_null() {
                None
            } else {
                Some(coerce(&spec.ty, v).map_err(|e| {
                    DorisError::analysis(format!("Invalid default value for '{}': {e}", spec.name))
                })?)
            }
        }
        // DEFAULT CURRENT_TIMESTAMP: accepted; the engine has no per-row default expressions.
        Some(_) => None,
    };
    if matches!(spec.ty, DorisType::Json | DorisType::String) && is_key {
        return Err(DorisError::analysis(format!(
            "{} type should not be used in key column[{}].",
            spec.ty.display_name(),
            spec.name
        )));
    }
    Ok(ColumnDef {
        nullable: spec.nullable.unwrap_or(!is_key),
        name: spec.name,
        ty: spec.ty,
        is_key,
        default,
        comment: spec.comment,
    })
}

/// `CREATE TABLE name LIKE like`: the definition of `like` (columns with their defaults and
/// comments, keys, distribution, auto partition, every property including the changelog ones),
/// no rows and no changelog history, as Doris's `CREATE TABLE LIKE` copies the schema only.
fn table_def_like(
    session: &Session,
    doris: &Doris,
    name: &ObjName,
    like: &ObjName,
    if_not_exists: bool,
) -> Result<TableDef> {
    let db = db_of(session, name)?;
    let source_db = db_of(session, like)?;
    let info = doris.engine.table_info(&source_db, &like.name)?;
    Ok(TableDef {
        db,
        name: name.name.clone(),
        columns: info.columns,
        keys_type: info.keys_type,
        key_columns: info.key_columns,
        distribution: info.distribution,
        auto_partition: info.auto_partition,
        properties: info.properties.into_iter().collect(),
        if_not_exists,
    })
}

/// The `swap` property of REPLACE WITH TABLE: true unless given; Doris reads it with Java's
/// `Boolean.parseBoolean`, so anything but `true` (any case) is false. Other keys are refused as
/// Doris's `ReplaceTableClause` refuses them.
fn replace_swap(properties: Vec<(String, String)>) -> Result<bool> {
    let mut swap = true;
    let mut unknown = Vec::new();
    for (k, v) in properties {
        if k == "swap" {
            swap = v.eq_ignore_ascii_case("true");
        } else {
            unknown.push(k);
        }
    }
    if !unknown.is_empty() {
        return Err(DorisError::analysis(format!(
            "Unknown properties: [{}]",
            unknown.join(", ")
        )));
    }
    Ok(swap)
}

fn table_def(session: &Session, ct: CreateTable) -> Result<TableDef> {
    let db = db_of(session, &ct.name)?;
    if ct.columns.is_empty() {
        return Err(DorisError::analysis(
            "Table should contain at least one column",
        ));
    }
    for (i, c) in ct.columns.iter().enumerate() {
        if ct.columns[..i]
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&c.name))
        {
            return Err(DorisError::analysis(format!(
                "Duplicate column name '{}'",
                c.name
            )));
        }
    }
    let (kind, keys) = match ct.keys {
        Some(k) => k,
        None => {
            // Doris's default: DUPLICATE KEY on the leading columns (≤ 3, ≤ 36 bytes, up to a string).
            let mut keys = Vec::new();
            let mut size = 0;
            for c in &ct.columns {
                if matches!(
                    c.ty,
                    DorisType::Json | DorisType::String | DorisType::Float | DorisType::Double
                ) {
                    break;
                }
                keys.push(c.name.clone());
                size += type_size(&c.ty);
                if keys.len() >= 3
                    || size >= 36
                    || matches!(c.ty, DorisType::Varchar(_) | DorisType::Char(_))
                {
                    break;
                }
            }
            if keys.is_empty() {
                keys.push(ct.columns[0].name.clone());
            }
            (KeysKind::Duplicate, keys)
        }
    };
    let keys_type = match kind {
        KeysKind::Unique => KeysType::Unique,
        KeysKind::Duplicate => KeysType::Duplicate,
        KeysKind::Aggregate => {
            return Err(DorisError::analysis(
                "AGGREGATE KEY tables are not supported by the emulator",
            ));
        }
    };
    for k in &keys {
        if !ct.columns.iter().any(|c| c.name.eq_ignore_ascii_case(k)) {
            return Err(DorisError::analysis(format!(
                "Key column[{k}] doesn't exist."
            )));
        }
    }
    let prefix_ok = keys.len() <= ct.columns.len()
        && keys
            .iter()
            .zip(&ct.columns)
            .all(|(k, c)| k.eq_ignore_ascii_case(&c.name));
    if !prefix_ok {
        return Err(DorisError::analysis(
            "Key columns should be a ordered prefix of the schema.",
        ));
    }
    let nkeys = keys.len();
    let key_columns: Vec<String> = ct.columns[..nkeys].iter().map(|c| c.name.clone()).collect();
    let mut columns = Vec::with_capacity(ct.columns.len());
    for (i, c) in ct.columns.into_iter().enumerate() {
        columns.push(column_def(c, i < nkeys)?);
    }
    let distribution = match ct.distribution {
        Some((cols, buckets)) => Distribution {
            hash_columns: cols,
            buckets,
        },
        None => match keys_type {
            KeysType::Unique => Distribution {
                hash_columns: key_columns.clone(),
                buckets: None,
            },
            KeysType::Duplicate => Distribution {
                hash_columns: Vec::new(),
                buckets: None,
            },
        },
    };
    // The table COMMENT is accepted but not kept: the engine's TableDef has no field for it.
    let properties = ct.properties;
    Ok(TableDef {
        db,
        name: ct.name.name,
        columns,
        keys_type,
        key_columns,
        distribution,
        auto_partition: ct
            .auto_partition
            .map(|(column, unit)| AutoPartition { column, unit }),
        properties,
        if_not_exists: ct.if_not_exists,
    })
}

// ------------------------------------------------------------------------------------------------
// DML

enum InsertSource {
    Values(Vec<Vec<Expr>>),
    Rows(ResultSet),
}

/// A DML target's definition; a missing table or database reads as the Nereids planner words it.
fn dml_table_info(ctx: &EvalCtx<'_>, db: &str, table: &str) -> Result<TableInfo> {
    ctx.doris
        .engine
        .table_info(db, table)
        .map_err(|e| match e.code {
            crate::engine::ER_BAD_TABLE => crate::engine::err_select_unknown_table(db, table),
            crate::error::ER_BAD_DB => crate::engine::err_select_unknown_db(db),
            _ => e,
        })
}

fn find_col(info: &TableInfo, name: &str) -> Option<usize> {
    info.columns
        .iter()
        .position(|c| c.name.eq_ignore_ascii_case(name))
}

/// Convert a value to a column's type (NOT NULL is the engine's check, with its message).
fn coerce_for(col: &ColumnDef, v: Value) -> Result<Value> {
    coerce(&col.ty, v).map_err(|e| DorisError::analysis(format!("{e}, column={}", col.name)))
}

fn truthy_sign(v: &Value) -> bool {
    eval::truth(v) == Some(true)
}

fn run_insert(
    ctx: &EvalCtx<'_>,
    table: &ObjName,
    columns: Option<Vec<String>>,
    source: InsertSource,
) -> Result<QueryResult> {
    let db = db_of(ctx.session, table)?;
    let info = dml_table_info(ctx, &db, &table.name)?;
    // target positions; usize::MAX marks the delete sign
    const SIGN: usize = usize::MAX;
    let explicit = columns.is_some();
    let targets: Vec<usize> = match &columns {
        Some(cols) => {
            let mut t = Vec::with_capacity(cols.len());
            for c in cols {
                if c.eq_ignore_ascii_case(hidden::DELETE_SIGN) {
                    t.push(SIGN);
                    continue;
                }
                let i = find_col(&info, c).ok_or_else(|| {
                    DorisError::analysis(format!("Unknown column '{c}' in target table."))
                })?;
                if t.contains(&i) {
                    return Err(DorisError::analysis(format!(
                        "Column '{c}' specified twice"
                    )));
                }
                t.push(i);
            }
            t
        }
        None => (0..info.columns.len()).collect(),
    };
    let partial = explicit
        && info.keys_type == KeysType::Unique
        && eval::var_text(ctx.session, "enable_unique_key_partial_update")
            .is_some_and(|v| v == "true")
        && !targets.contains(&SIGN);
    let raw_rows: Vec<Vec<Option<Value>>> = match source {
        InsertSource::Values(rows) => {
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                if r.len() != targets.len() {
                    return Err(DorisError::analysis(
                        "Column count doesn't match value count",
                    ));
                }
                let mut vals = Vec::with_capacity(r.len());
                for e in &r {
                    if matches!(e, Expr::Func { name, .. } if name == "__default") {
                        vals.push(None);
                    } else {
                        vals.push(Some(eval::eval(ctx, e, None)?));
                    }
                }
                out.push(vals);
            }
            out
        }
        InsertSource::Rows(rs) => {
            if rs.columns.len() != targets.len() {
                return Err(DorisError::analysis(
                    "Column count doesn't match value count",
                ));
            }
            rs.rows
                .into_iter()
                .map(|r| r.into_iter().map(Some).collect())
                .collect()
        }
    };
    let mut writes = Vec::with_capacity(raw_rows.len());
    for vals in raw_rows {
        if partial {
            let mut cols = Vec::with_capacity(targets.len());
            let mut values = Vec::with_capacity(targets.len());
            for (t, v) in targets.iter().zip(vals) {
                let col = &info.columns[*t];
                let v = v.unwrap_or_else(|| col.default.clone().unwrap_or(Value::Null));
                cols.push(*t);
                values.push(coerce_for(col, v)?);
            }
            writes.push(RowWrite::Partial {
                columns: cols,
                values,
            });
            continue;
        }
        let mut row: Vec<Option<Value>> = vec![None; info.columns.len()];
        let mut delete = false;
        for (t, v) in targets.iter().zip(vals) {
            if *t == SIGN {
                delete = v.as_ref().is_some_and(truthy_sign);
            } else {
                row[*t] = v;
            }
        }
        let mut full = Vec::with_capacity(row.len());
        for (col, v) in info.columns.iter().zip(row) {
            let v = match v {
                Some(v) => v,
                None => col.default.clone().unwrap_or(Value::Null),
            };
            full.push(coerce_for(col, v)?);
        }
        writes.push(if delete {
            RowWrite::Delete(full)
        } else {
            RowWrite::Upsert(full)
        });
    }
    let n = writes.len() as u64;
    if writes.is_empty() {
        return Ok(ok(0));
    }
    let outcome = ctx.doris.engine.write(&db, &table.name, writes)?;
    let label = format!("insert_{:016x}", outcome.tso as u64);
    Ok(QueryResult::Ok {
        affected_rows: n,
        info: format!(
            "{{'label':'{label}', 'status':'VISIBLE', 'txnId':'{}'}}",
            outcome.tso
        ),
    })
}

/// A table's visible columns as relation columns.
fn visible_columns(info: &TableInfo) -> Vec<RelColumn> {
    info.columns
        .iter()
        .map(|c| RelColumn {
            meta: ColumnMeta {
                name: c.name.clone(),
                ty: c.ty,
                nullable: c.nullable,
            },
            visibility: Visibility::Visible,
        })
        .collect()
}

fn table_relation(info: &TableInfo, rows: Vec<Vec<Value>>, alias: Option<&str>) -> Relation {
    let mut columns = visible_columns(info);
    let unique = info.keys_type == KeysType::Unique;
    if unique {
        for (name, ty) in [
            (hidden::DELETE_SIGN, DorisType::TinyInt),
            (hidden::VERSION_COL, DorisType::BigInt),
        ] {
            columns.push(RelColumn {
                meta: ColumnMeta {
                    name: name.to_string(),
                    ty,
                    nullable: false,
                },
                visibility: Visibility::Hidden,
            });
        }
    }
    let rows = if unique {
        rows.into_iter()
            .map(|mut r| {
                r.push(Value::Int(0));
                r.push(Value::Int(0));
                r
            })
            .collect()
    } else {
        rows
    };
    let mut qualifiers = vec![info.name.clone()];
    if let Some(a) = alias {
        qualifiers = vec![a.to_string()];
    }
    Relation {
        columns,
        rows,
        qualifiers,
    }
}

fn run_update(
    ctx: &EvalCtx<'_>,
    table: &ObjName,
    sets: &[(String, Expr)],
    where_: Option<&Expr>,
) -> Result<QueryResult> {
    let db = db_of(ctx.session, table)?;
    let info = dml_table_info(ctx, &db, &table.name)?;
    if info.keys_type != KeysType::Unique {
        return Err(DorisError::analysis("Only unique table could be updated."));
    }
    let mut targets = Vec::with_capacity(sets.len());
    for (c, e) in sets {
        let i = find_col(&info, c)
            .ok_or_else(|| eval::clause_error(eval::unknown_column(c), "PROJECT"))?;
        if info.columns[i].is_key {
            return Err(DorisError::analysis(
                "Only value columns of unique table could be updated",
            ));
        }
        targets.push((i, e));
    }
    let rel = dml_rows(ctx, &db, &info, where_)?;
    let ncols = info.columns.len();
    let mut writes = Vec::with_capacity(rel.rows.len());
    for r in &rel.rows {
        let rr = RowRef {
            rel: &rel,
            values: r,
            group: None,
        };
        let mut new_row: Vec<Value> = r[..ncols].to_vec();
        for (i, e) in &targets {
            let v = eval::in_clause(eval::eval(ctx, e, Some(&rr)), "PROJECT")?;
            new_row[*i] = coerce_for(&info.columns[*i], v)?;
        }
        writes.push(RowWrite::Upsert(new_row));
    }
    let n = writes.len() as u64;
    if n > 0 {
        ctx.doris
            .engine
            .delete_statement(&db, &table.name, writes)?;
    }
    Ok(ok(n))
}

/// The rows of table `info` an UPDATE or DELETE with `where_` changes, as a filtered relation.
fn dml_rows(
    ctx: &EvalCtx<'_>,
    db: &str,
    info: &TableInfo,
    where_: Option<&Expr>,
) -> Result<Relation> {
    let stored = rows_where(ctx, db, &info.name, None, None, where_)?;
    let mut rel = table_relation(info, stored.decode(0..stored.len()), None);
    if let Some(w) = where_ {
        filter_found(ctx, &stored, &mut rel, None, w)?;
    }
    Ok(rel)
}

/// The current rows of `db.table` (in `tablets`) that a statement filtered by `where_` needs:
/// only the rows of the keys the predicate pins ([`keyed::pinned_keys`]) when it pins every
/// key column of a UNIQUE table, else all. Still to be filtered by `where_`
/// ([`filter_found`]). Errors are the SELECT (Nereids) texts, as a scan's.
fn rows_where(
    ctx: &EvalCtx<'_>,
    db: &str,
    table: &str,
    tablets: Option<&[i64]>,
    alias: Option<&str>,
    where_: Option<&Expr>,
) -> Result<StoredRows> {
    if let (None, Some(w)) = (tablets, where_) {
        let info = ctx.doris.engine.table_info(db, table)?;
        let qualifiers = [alias.unwrap_or(&info.name).to_string()];
        if let Some(keys) = keyed::pinned_keys(&info, &qualifiers, w)
            && let Some(found) = ctx.doris.engine.lookup_stored(db, table, &keys)?
        {
            ctx.doris.counters.hit("sql_key_lookup");
            return Ok(found);
        }
    }
    ctx.doris.engine.scan_stored(db, table, tablets)
}

/// [`eval::filter`] over rows from [`rows_where`]. When a key lookup found nothing, the
/// predicate is still evaluated on another row of the table (and the result dropped), so an
/// error a scan would have met (an unknown column, say) is not hidden by the lookup.
fn filter_found(
    ctx: &EvalCtx<'_>,
    stored: &StoredRows,
    rel: &mut Relation,
    alias: Option<&str>,
    pred: &Expr,
) -> Result<()> {
    if let Some(row) = stored.unmatched_row() {
        let mut probe = table_relation(stored.info(), vec![row], alias);
        eval::filter(ctx, &mut probe, pred)?;
    }
    eval::filter(ctx, rel, pred)
}

fn run_delete(ctx: &EvalCtx<'_>, table: &ObjName, where_: Option<&Expr>) -> Result<QueryResult> {
    let db = db_of(ctx.session, table)?;
    let info = dml_table_info(ctx, &db, &table.name)?;
    let rel = dml_rows(ctx, &db, &info, where_)?;
    let ncols = info.columns.len();
    let writes: Vec<RowWrite> = rel
        .rows
        .iter()
        .map(|r| RowWrite::Delete(r[..ncols].to_vec()))
        .collect();
    let n = writes.len() as u64;
    if n > 0 {
        ctx.doris
            .engine
            .delete_statement(&db, &table.name, writes)?;
    }
    Ok(ok(n))
}

// ------------------------------------------------------------------------------------------------
// SELECT

/// Run a SELECT: build the source relation, filter, then project/aggregate/order/limit.
pub async fn run_select(ctx: &EvalCtx<'_>, sel: &Select) -> Result<ResultSet> {
    if let Some((db, from, Streamable::CountStar)) = streamable(ctx.session, sel)? {
        return count_star(ctx, sel, &db, from);
    }
    let rel = match &sel.from {
        None => {
            let mut rel = Relation {
                columns: Vec::new(),
                rows: vec![Vec::new()],
                qualifiers: Vec::new(),
            };
            if let Some(w) = &sel.where_ {
                eval::filter(ctx, &mut rel, w)?;
            }
            rel
        }
        Some(from) => filtered_relation(ctx, from, sel.where_.as_ref()).await?,
    };
    eval::project(ctx, &rel, sel)
}

/// Source rows a streamed SELECT decodes, filters and projects at a time.
const STREAM_ROWS: usize = 4096;

/// What a SELECT over one table's current rows needs of them, when it can run a part at a time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Streamable {
    /// Columns or `*`, optionally filtered: each row maps on its own.
    PerRow,
    /// `COUNT(*)` alone, optionally filtered: only the number of rows.
    CountStar,
}

/// The database, FROM clause and shape of a SELECT over one table's current rows (no `@incr`,
/// time travel or system table) that needs no row together with another: columns or `*`
/// ([`Streamable::PerRow`]) or a lone `COUNT(*)` ([`Streamable::CountStar`]), with no DISTINCT,
/// GROUP BY, HAVING, ORDER BY, LIMIT or OFFSET. `None` for anything else.
fn streamable<'s>(
    session: &Session,
    sel: &'s Select,
) -> Result<Option<(String, &'s FromClause, Streamable)>> {
    let Some(from) = &sel.from else {
        return Ok(None);
    };
    let whole_set = sel.distinct
        || !sel.group_by.is_empty()
        || sel.having.is_some()
        || !sel.order_by.is_empty()
        || sel.limit.is_some()
        || sel.offset.is_some();
    let shape = if sel.items.iter().all(|i| match i {
        SelectItem::Wildcard | SelectItem::QualifiedWildcard(_) => true,
        SelectItem::Expr { expr, .. } => matches!(expr, Expr::Column { .. }),
    }) {
        Streamable::PerRow
    } else if let [SelectItem::Expr { expr, .. }] = sel.items.as_slice()
        && matches!(expr, Expr::Func { name, star: true, distinct: false, .. } if name == "count")
    {
        Streamable::CountStar
    } else {
        return Ok(None);
    };
    if whole_set || !reads_current_rows(from) {
        return Ok(None);
    }
    let db = db_of(session, &from.table)?;
    Ok((!is_info_schema(&db)).then_some((db, from, shape)))
}

/// `SELECT COUNT(*) FROM t [WHERE ..]` without holding the table as values: counted in the
/// store when unfiltered, else decoded and filtered a part at a time. The result's shape is the
/// one the general path gives (the count over no rows, then the real count put in).
fn count_star(ctx: &EvalCtx<'_>, sel: &Select, db: &str, from: &FromClause) -> Result<ResultSet> {
    let tablets = from.tablets.as_deref();
    let (info, total) = match &sel.where_ {
        None => {
            // count first: its errors are the SELECT (Nereids) texts
            let n = ctx.doris.engine.count_rows(db, &from.table.name, tablets)?;
            (ctx.doris.engine.table_info(db, &from.table.name)?, n)
        }
        Some(w) => {
            let alias = from.alias.as_deref();
            let stored = rows_where(ctx, db, &from.table.name, tablets, alias, Some(w))?;
            let info = stored.info();
            let mut n = 0;
            for at in (0..stored.len().max(1)).step_by(STREAM_ROWS) {
                let end = (at + STREAM_ROWS).min(stored.len());
                let mut rel = table_relation(info, stored.decode(at..end), alias);
                filter_found(ctx, &stored, &mut rel, alias, w)?;
                n += rel.rows.len();
            }
            (info.clone(), n)
        }
    };
    let rel = table_relation(&info, Vec::new(), from.alias.as_deref());
    let mut rs = eval::project(ctx, &rel, sel)?;
    if let Some(cell) = rs.rows.first_mut().and_then(|r| r.first_mut()) {
        *cell = Value::Int(total as i64);
    }
    Ok(rs)
}

/// [`run_select`] with the rows handed to `sink` a part at a time, so a big table is never held
/// as values whole (only as its compact stored rows). Selects that need all rows at once run
/// whole and reach `sink` in one part. The parts' columns are the same; the returned result
/// set has them and no rows.
async fn run_select_streamed(
    ctx: &EvalCtx<'_>,
    sel: &Select,
    sink: RowSink<'_>,
) -> Result<ResultSet> {
    let Some((db, from, Streamable::PerRow)) = streamable(ctx.session, sel)? else {
        let rs = run_select(ctx, sel).await?;
        let columns = rs.columns.clone();
        sink(rs)?;
        return Ok(ResultSet {
            columns,
            rows: Vec::new(),
        });
    };
    // read first: its errors are the SELECT (Nereids) texts
    let alias = from.alias.as_deref();
    let stored = rows_where(
        ctx,
        &db,
        &from.table.name,
        from.tablets.as_deref(),
        alias,
        sel.where_.as_ref(),
    )?;
    let info = stored.info();
    let mut columns = None;
    let mut at = 0;
    loop {
        let end = (at + STREAM_ROWS).min(stored.len());
        let mut rel = table_relation(info, stored.decode(at..end), alias);
        if let Some(w) = &sel.where_ {
            filter_found(ctx, &stored, &mut rel, alias, w)?;
        }
        let rs = eval::project(ctx, &rel, sel)?;
        columns.get_or_insert_with(|| rs.columns.clone());
        sink(rs)?;
        at = end;
        if at >= stored.len() {
            break;
        }
    }
    Ok(ResultSet {
        columns: columns.unwrap_or_default(),
        rows: Vec::new(),
    })
}

/// Whether `from` reads a table's (or a system table's) current rows: no `@incr`, no time
/// travel, no `dual` or table-valued function.
fn reads_current_rows(from: &FromClause) -> bool {
    let name = &from.table;
    from.incr.is_none()
        && from.as_of.is_none()
        && !(name.db.is_none()
            && (name.name.eq_ignore_ascii_case("dual") || name.name.ends_with("()")))
}

/// The rows of `from` for which `where_` holds.
async fn filtered_relation(
    ctx: &EvalCtx<'_>,
    from: &FromClause,
    where_: Option<&Expr>,
) -> Result<Relation> {
    let name = &from.table;
    let alias = from.alias.as_deref();
    if reads_current_rows(from) {
        let db = db_of(ctx.session, name)?;
        if !is_info_schema(&db) {
            let tablets = from.tablets.as_deref();
            // read first: its errors are the SELECT (Nereids) texts
            let stored = rows_where(ctx, &db, &name.name, tablets, alias, where_)?;
            let mut rel = table_relation(stored.info(), stored.decode(0..stored.len()), alias);
            if let Some(w) = where_ {
                filter_found(ctx, &stored, &mut rel, alias, w)?;
            }
            return Ok(rel);
        }
    }
    let mut rel = source_relation(ctx, from).await?;
    if let Some(w) = where_ {
        eval::filter(ctx, &mut rel, w)?;
    }
    Ok(rel)
}

async fn source_relation(ctx: &EvalCtx<'_>, from: &FromClause) -> Result<Relation> {
    let name = &from.table;
    // table-valued functions
    if name.db.is_none() && name.name.eq_ignore_ascii_case("dual") {
        return Ok(Relation {
            columns: Vec::new(),
            rows: vec![Vec::new()],
            qualifiers: Vec::new(),
        });
    }
    if name.db.is_none() && name.name.ends_with("()") {
        let mut rel = match name.name.as_str() {
            "frontends()" => frontends(ctx),
            "backends()" => backends(ctx),
            other => {
                return Err(DorisError::analysis(format!(
                    "Can not found function '{}'",
                    other.trim_end_matches("()")
                )));
            }
        };
        if let Some(a) = &from.alias {
            rel.qualifiers = vec![a.clone()];
        }
        return Ok(rel);
    }
    let db = db_of(ctx.session, name)?;
    if is_info_schema(&db) {
        let mut rel = info_schema(ctx, &name.name)?;
        rel.qualifiers = vec![from.alias.clone().unwrap_or_else(|| name.name.clone())];
        return Ok(rel);
    }
    if let Some(params) = &from.incr {
        return incr_relation(ctx, &db, &name.name, params, from.alias.as_deref()).await;
    }
    let version = match &from.as_of {
        None => None,
        Some(AsOf::Version(v)) => Some(*v),
        Some(AsOf::Time(t)) => {
            let wall = time::parse_wall_seconds(t.trim())
                .or_else(|| match Value::parse_text(&DorisType::DateTime(6), t) {
                    Ok(Value::DateTime(us)) => Some(us),
                    _ => None,
                })
                .ok_or_else(|| DorisError::analysis(format!("Invalid datetime value: {t}")))?;
            let ms = time::wall_micros_to_ms(&ctx.tz, wall)
                .ok_or_else(|| DorisError::analysis(format!("Invalid datetime value: {t}")))?;
            Some(compose_tso(ms, (1 << TSO_LOGICAL_BITS) - 1))
        }
    };
    // scan first: its errors are the SELECT (Nereids) texts
    let rows = ctx
        .doris
        .engine
        .scan(&db, &name.name, version, from.tablets.as_deref())?;
    let info = ctx.doris.engine.table_info(&db, &name.name)?;
    Ok(table_relation(&info, rows, from.alias.as_deref()))
}

fn visible_timeout_ms(session: &Session) -> i64 {
    eval::var_text(session, "change_visible_timeout_ms")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(super::DEFAULT_CHANGE_VISIBLE_TIMEOUT_MS)
}

/// Parsed `@incr(...)` parameters: (start ms, end ms, type).
pub fn parse_incr_params(
    params: &[(String, String)],
    tz: &jiff::tz::TimeZone,
) -> Result<(Option<i64>, Option<i64>, IncrementType)> {
    let mut start = None;
    let mut end = None;
    let mut ty = IncrementType::MinDelta;
    for (k, v) in params {
        match k.as_str() {
            "startTimestamp" | "endTimestamp" => {
                let wall = time::parse_wall_seconds(v.trim())
                    .ok_or_else(|| DorisError::analysis(INCR_BAD_TIME))?;
                let ms = time::wall_micros_to_ms(tz, wall)
                    .ok_or_else(|| DorisError::analysis(INCR_BAD_TIME))?;
                if k == "startTimestamp" {
                    start = Some(ms);
                } else {
                    end = Some(ms);
                }
            }
            "incrementType" => {
                ty = match v.trim().to_ascii_uppercase().as_str() {
                    "DETAIL" => IncrementType::Detail,
                    "MIN_DELTA" => IncrementType::MinDelta,
                    "APPEND_ONLY" => IncrementType::AppendOnly,
                    _ => return Err(DorisError::analysis(INCR_UNSUPPORTED)),
                };
            }
            _ => return Err(DorisError::analysis(INCR_UNSUPPORTED)),
        }
    }
    Ok((start, end, ty))
}

async fn incr_relation(
    ctx: &EvalCtx<'_>,
    db: &str,
    table: &str,
    params: &[(String, String)],
    alias: Option<&str>,
) -> Result<Relation> {
    let (start_ms, end_ms, increment_type) = parse_incr_params(params, &ctx.tz)?;
    let visible_timeout_ms = visible_timeout_ms(ctx.session);
    ctx.doris.counters.hit("sql_incr");
    if let Some(code) = ctx.doris.faults.take_incr_error() {
        let cur = ctx.doris.clock.current_tso();
        let phys = tso_physical_ms(cur);
        let committed = ctx.doris.engine.committed_tso();
        let committed_phys = tso_physical_ms(committed);
        let (name, reason) = if code == ERR_INCR_VISIBLE_WAIT_TIMEOUT {
            ("ERR_INCR_VISIBLE_WAIT_TIMEOUT", "VISIBLE_WAIT_TIMEOUT")
        } else {
            ("ERR_INCR_WINDOW_NOT_READY", "END_AFTER_CURRENT_TSO")
        };
        let code = if code == 0 {
            ERR_INCR_WINDOW_NOT_READY
        } else {
            code
        };
        return Err(DorisError::new(
            code,
            format!(
                "{name}: reason={reason}, requestedEndTimestampMs={}, currentTSO={cur}, currentTSOPhysicalTimeMs={phys}, committedTSO={committed}, committedTSOPhysicalTimeMs={committed_phys}, retryAfterMs=1000, timeoutMs={visible_timeout_ms}",
                end_ms.unwrap_or(-1)
            ),
        ));
    }
    let req = IncrRequest {
        db: db.to_string(),
        table: table.to_string(),
        start_ms,
        end_ms,
        increment_type,
        visible_timeout_ms,
    };
    let changes: Vec<ChangeRow> = ctx.doris.engine.incr(req).await?;
    let info = ctx.doris.engine.table_info(db, table)?;
    let mut columns = visible_columns(&info);
    for (name, ty) in [
        (hidden::BINLOG_OP, DorisType::TinyInt),
        (hidden::BINLOG_TSO, DorisType::BigInt),
        (hidden::BINLOG_LSN, DorisType::BigInt),
    ] {
        columns.push(RelColumn {
            meta: ColumnMeta {
                name: name.to_string(),
                ty,
                nullable: false,
            },
            visibility: Visibility::NamedOnly,
        });
    }
    let ncols = info.columns.len();
    let rows = changes
        .into_iter()
        .map(|c| {
            let mut r = c.values;
            r.resize(ncols, Value::Null);
            r.push(Value::Int(c.op as i64));
            r.push(Value::Int(c.tso));
            r.push(Value::Int(c.lsn));
            r
        })
        .collect();
    Ok(Relation {
        columns,
        rows,
        qualifiers: vec![alias.unwrap_or(table).to_string()],
    })
}

// ------------------------------------------------------------------------------------------------
// SHOW and information_schema

fn fmt_now(ctx: &EvalCtx<'_>) -> String {
    let wall = time::ms_to_wall_micros(&ctx.tz, ctx.now_ms);
    time::mysql_format(wall, "%Y-%m-%d %H:%i:%s").unwrap_or_default()
}

fn frontends(ctx: &EvalCtx<'_>) -> Relation {
    let d = ctx.doris;
    let cols = [
        "Name",
        "Host",
        "EditLogPort",
        "HttpPort",
        "QueryPort",
        "RpcPort",
        "ArrowFlightSqlPort",
        "Role",
        "IsMaster",
        "ClusterId",
        "Join",
        "Alive",
        "ReplayedJournalId",
        "LastStartTime",
        "LastHeartbeat",
        "IsHelper",
        "ErrMsg",
        "Version",
        "CurrentConnected",
    ];
    let now = fmt_now(ctx);
    let row = vec![
        s(format!(
            "fe_{}_9010",
            d.config.host.replace(['.', ':'], "_")
        )),
        s(d.config.host.clone()),
        s("9010"),
        s(d.ports.fe_http_port.to_string()),
        s(d.ports.query_port.to_string()),
        s("9020"),
        s(d.ports.fe_flight_port.to_string()),
        s("FOLLOWER"),
        s("true"),
        s("1"),
        s("true"),
        s("true"),
        s("1"),
        s(now.clone()),
        s(now),
        s("true"),
        s(""),
        s(super::DORIS_VERSION),
        s("Yes"),
    ];
    Relation {
        columns: cols.iter().map(|c| str_col(c)).collect(),
        rows: vec![row],
        qualifiers: vec!["frontends".into()],
    }
}

fn backends(ctx: &EvalCtx<'_>) -> Relation {
    let d = ctx.doris;
    let now = fmt_now(ctx);
    let cols: Vec<(&str, Value)> = vec![
        ("BackendId", s("10001")),
        ("Host", s(d.config.host.clone())),
        ("HeartbeatPort", s("9050")),
        ("BePort", s("9060")),
        ("HttpPort", s(d.ports.be_http_port.to_string())),
        ("BrpcPort", s("8060")),
        ("ArrowFlightSqlPort", s(d.ports.be_flight_port.to_string())),
        ("LastStartTime", s(now.clone())),
        ("LastHeartbeat", s(now)),
        ("Alive", s("true")),
        ("SystemDecommissioned", s("false")),
        ("TabletNum", s("0")),
        ("DataUsedCapacity", s("0.000")),
        ("TrashUsedCapacity", s("0.000")),
        ("AvailCapacity", s("1.000 TB")),
        ("TotalCapacity", s("1.000 TB")),
        ("UsedPct", s("0.00 %")),
        ("MaxDiskUsedPct", s("0.00 %")),
        ("RemoteUsedCapacity", s("0.000")),
        ("Tag", s("{\"location\" : \"default\"}")),
        ("ErrMsg", s("")),
        ("Version", s(super::DORIS_VERSION)),
        (
            "Status",
            s(
                "{\"lastSuccessReportTabletsTime\":\"N/A\",\"lastStreamLoadTime\":-1,\"isQueryDisabled\":false,\"isLoadDisabled\":false}",
            ),
        ),
        ("HeartbeatFailureCounter", s("0")),
        ("NodeRole", s("mix")),
        ("CpuCores", s("2")),
        ("Memory", s("8.00 GB")),
    ];
    let (names, row): (Vec<&str>, Vec<Value>) = cols.into_iter().unzip();
    Relation {
        columns: names.iter().map(|c| str_col(c)).collect(),
        rows: vec![row],
        qualifiers: vec!["backends".into()],
    }
}

fn tso_status(ctx: &EvalCtx<'_>) -> Relation {
    let cur = ctx.doris.clock.current_tso();
    let phys = tso_physical_ms(cur);
    let committed = ctx.doris.engine.committed_tso();
    let columns = vec![
        int_col("WINDOW_END_PHYSICAL_TIME"),
        int_col("CURRENT_TSO"),
        int_col("CURRENT_TSO_PHYSICAL_TIME"),
        int_col("CURRENT_TSO_LOGICAL_COUNTER"),
        int_col("COMMITTED_TSO"),
        int_col("COMMITTED_TSO_PHYSICAL_TIME"),
    ];
    let (c, cp) = if committed > 0 {
        (
            Value::Int(committed),
            Value::Int(tso_physical_ms(committed)),
        )
    } else {
        (Value::Null, Value::Null)
    };
    let rows = vec![vec![
        Value::Int(phys + crate::http::fe::TSO_WINDOW_MS),
        Value::Int(cur),
        Value::Int(phys),
        Value::Int(tso_logical(cur)),
        c,
        cp,
    ]];
    Relation {
        columns,
        rows,
        qualifiers: vec!["tso_status".into()],
    }
}

/// Every (db, table info) in the catalog, system databases excluded.
fn all_tables(ctx: &EvalCtx<'_>) -> Vec<TableInfo> {
    let mut out = Vec::new();
    for db in ctx.doris.engine.databases() {
        if is_info_schema(&db)
            || db.eq_ignore_ascii_case("mysql")
            || db.eq_ignore_ascii_case("__internal_schema")
        {
            continue;
        }
        let Ok(tables) = ctx.doris.engine.tables(&db) else {
            continue;
        };
        for t in tables {
            if let Ok(info) = ctx.doris.engine.table_info(&db, &t) {
                out.push(info);
            }
        }
    }
    out
}

fn numeric_precision(ty: &DorisType) -> Option<i64> {
    Some(match ty {
        DorisType::Boolean => 1,
        DorisType::TinyInt => 3,
        DorisType::SmallInt => 5,
        DorisType::Int => 10,
        DorisType::BigInt => 19,
        DorisType::LargeInt => 39,
        DorisType::Float => 7,
        DorisType::Double => 15,
        DorisType::Decimal { precision, .. } => *precision as i64,
        _ => return None,
    })
}

fn numeric_scale(ty: &DorisType) -> Option<i64> {
    match ty {
        DorisType::TinyInt
        | DorisType::SmallInt
        | DorisType::Int
        | DorisType::BigInt
        | DorisType::LargeInt => Some(0),
        DorisType::Decimal { scale, .. } => Some(*scale as i64),
        _ => None,
    }
}

/// The `information_schema` tables the emulator answers (others are empty or unknown).
const INFO_SCHEMA_TABLES: &[&str] = &[
    "character_sets",
    "collations",
    "columns",
    "global_variables",
    "schemata",
    "session_variables",
    "table_properties",
    "tables",
    "tso_status",
];

fn info_schema(ctx: &EvalCtx<'_>, table: &str) -> Result<Relation> {
    let opt_i = |v: Option<i64>| v.map(Value::Int).unwrap_or(Value::Null);
    let rel = match table.to_ascii_lowercase().as_str() {
        "tso_status" => tso_status(ctx),
        "schemata" => {
            let columns = [
                "CATALOG_NAME",
                "SCHEMA_NAME",
                "DEFAULT_CHARACTER_SET_NAME",
                "DEFAULT_COLLATION_NAME",
                "SQL_PATH",
                "DEFAULT_ENCRYPTION",
            ]
            .iter()
            .map(|c| str_col(c))
            .collect();
            let rows = ctx
                .doris
                .engine
                .databases()
                .into_iter()
                .map(|d| {
                    vec![
                        s("internal"),
                        s(d),
                        s("utf8"),
                        s("utf8_general_ci"),
                        Value::Null,
                        s("NO"),
                    ]
                })
                .collect();
            Relation {
                columns,
                rows,
                qualifiers: Vec::new(),
            }
        }
        "tables" => {
            let mut columns: Vec<RelColumn> = [
                "TABLE_CATALOG",
                "TABLE_SCHEMA",
                "TABLE_NAME",
                "TABLE_TYPE",
                "ENGINE",
            ]
            .iter()
            .map(|c| str_col(c))
            .collect();
            columns.push(int_col("VERSION"));
            columns.push(str_col("ROW_FORMAT"));
            for c in [
                "TABLE_ROWS",
                "AVG_ROW_LENGTH",
                "DATA_LENGTH",
                "MAX_DATA_LENGTH",
                "INDEX_LENGTH",
                "DATA_FREE",
                "AUTO_INCREMENT",
            ] {
                columns.push(int_col(c));
            }
            for c in ["CREATE_TIME", "UPDATE_TIME", "CHECK_TIME"] {
                columns.push(RelColumn::visible(c, DorisType::DateTime(0), true));
            }
            columns.push(str_col("TABLE_COLLATION"));
            columns.push(int_col("CHECKSUM"));
            columns.push(str_col("CREATE_OPTIONS"));
            columns.push(str_col("TABLE_COMMENT"));
            let mut rows = Vec::new();
            for info in all_tables(ctx) {
                let n = ctx
                    .doris
                    .engine
                    .scan(&info.db, &info.name, None, None)
                    .map(|r| r.len() as i64)
                    .unwrap_or(0);
                rows.push(vec![
                    s("internal"),
                    s(info.db.clone()),
                    s(info.name.clone()),
                    s("BASE TABLE"),
                    s("Doris"),
                    Value::Null,
                    Value::Null,
                    Value::Int(n),
                    Value::Int(0),
                    Value::Int(0),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    s("utf-8"),
                    Value::Null,
                    s(""),
                    s(""),
                ]);
            }
            Relation {
                columns,
                rows,
                qualifiers: Vec::new(),
            }
        }
        "columns" => {
            let spec: [(&str, bool); 24] = [
                ("TABLE_CATALOG", false),
                ("TABLE_SCHEMA", false),
                ("TABLE_NAME", false),
                ("COLUMN_NAME", false),
                ("ORDINAL_POSITION", true),
                ("COLUMN_DEFAULT", false),
                ("IS_NULLABLE", false),
                ("DATA_TYPE", false),
                ("CHARACTER_MAXIMUM_LENGTH", true),
                ("CHARACTER_OCTET_LENGTH", true),
                ("NUMERIC_PRECISION", true),
                ("NUMERIC_SCALE", true),
                ("DATETIME_PRECISION", true),
                ("CHARACTER_SET_NAME", false),
                ("COLLATION_NAME", false),
                ("COLUMN_TYPE", false),
                ("COLUMN_KEY", false),
                ("EXTRA", false),
                ("PRIVILEGES", false),
                ("COLUMN_COMMENT", false),
                ("COLUMN_SIZE", true),
                ("DECIMAL_DIGITS", true),
                ("GENERATION_EXPRESSION", false),
                ("SRS_ID", true),
            ];
            let columns = spec
                .iter()
                .map(|(n, i)| if *i { int_col(n) } else { str_col(n) })
                .collect();
            let mut rows = Vec::new();
            for info in all_tables(ctx) {
                let key_tag = match info.keys_type {
                    KeysType::Unique => "UNI",
                    KeysType::Duplicate => "DUP",
                };
                for (i, c) in info.columns.iter().enumerate() {
                    let char_len = match c.ty {
                        DorisType::Char(n) | DorisType::Varchar(n) => Some(n as i64),
                        DorisType::String => Some(2147483643),
                        _ => None,
                    };
                    let dt_prec = match c.ty {
                        DorisType::DateTime(p) => Some(p as i64),
                        DorisType::Date => Some(0),
                        _ => None,
                    };
                    rows.push(vec![
                        s("internal"),
                        s(info.db.clone()),
                        s(info.name.clone()),
                        s(c.name.clone()),
                        Value::Int(i as i64 + 1),
                        opt_s(c.default.as_ref().and_then(|d| d.to_text(&c.ty))),
                        s(if c.nullable { "YES" } else { "NO" }),
                        s(c.ty.data_type_name()),
                        opt_i(char_len),
                        opt_i(char_len.map(|n| n.saturating_mul(4))),
                        opt_i(numeric_precision(&c.ty)),
                        opt_i(numeric_scale(&c.ty)),
                        opt_i(dt_prec),
                        Value::Null,
                        Value::Null,
                        s(c.ty.sql_name()),
                        s(if c.is_key { key_tag } else { "" }),
                        s(""),
                        s("SELECT"),
                        s(c.comment.clone()),
                        opt_i(numeric_precision(&c.ty).or(char_len)),
                        opt_i(numeric_scale(&c.ty)),
                        Value::Null,
                        Value::Null,
                    ]);
                }
            }
            Relation {
                columns,
                rows,
                qualifiers: Vec::new(),
            }
        }
        "table_properties" => {
            let columns = [
                "TABLE_CATALOG",
                "TABLE_SCHEMA",
                "TABLE_NAME",
                "PROPERTY_NAME",
                "PROPERTY_VALUE",
            ]
            .iter()
            .map(|c| str_col(c))
            .collect();
            let mut rows = Vec::new();
            for info in all_tables(ctx) {
                for (k, v) in &info.properties {
                    rows.push(vec![
                        s("internal"),
                        s(info.db.clone()),
                        s(info.name.clone()),
                        s(k.clone()),
                        s(v.clone()),
                    ]);
                }
            }
            Relation {
                columns,
                rows,
                qualifiers: Vec::new(),
            }
        }
        "session_variables" | "global_variables" => {
            let columns = [
                "VARIABLE_NAME",
                "VARIABLE_VALUE",
                "DEFAULT_VALUE",
                "CHANGED",
            ]
            .iter()
            .map(|c| str_col(c))
            .collect();
            let rows = variables_list(ctx.session)
                .into_iter()
                .map(|(k, v, d)| {
                    let changed = if v == d { "0" } else { "1" };
                    vec![s(k), s(v), s(d), s(changed)]
                })
                .collect();
            Relation {
                columns,
                rows,
                qualifiers: Vec::new(),
            }
        }
        "character_sets" => Relation {
            columns: vec![
                str_col("CHARACTER_SET_NAME"),
                str_col("DEFAULT_COLLATE_NAME"),
                str_col("DESCRIPTION"),
                int_col("MAXLEN"),
            ],
            rows: vec![vec![
                s("utf8mb4"),
                s("utf8mb4_0900_bin"),
                s("UTF-8 Unicode"),
                Value::Int(4),
            ]],
            qualifiers: Vec::new(),
        },
        "collations" => Relation {
            columns: vec![
                str_col("COLLATION_NAME"),
                str_col("CHARACTER_SET_NAME"),
                int_col("ID"),
                str_col("IS_DEFAULT"),
                str_col("IS_COMPILED"),
                int_col("SORTLEN"),
            ],
            rows: vec![vec![
                s("utf8mb4_0900_bin"),
                s("utf8mb4"),
                Value::Int(309),
                s("Yes"),
                s("Yes"),
                Value::Int(1),
            ]],
            qualifiers: Vec::new(),
        },
        "views"
        | "routines"
        | "statistics"
        | "key_column_usage"
        | "referential_constraints"
        | "table_constraints"
        | "triggers"
        | "events"
        | "engines"
        | "processlist"
        | "partitions"
        | "files" => Relation::default(),
        other => {
            return Err(DorisError::analysis(format!(
                "Table [{other}] does not exist in database [information_schema]."
            )));
        }
    };
    Ok(rel)
}

/// (name, current value, default value), sorted by name.
fn variables_list(session: &Session) -> Vec<(String, String, String)> {
    let mut map: std::collections::BTreeMap<String, (String, String)> = eval::VARIABLE_DEFAULTS
        .iter()
        .map(|(k, v)| (k.to_string(), (v.to_string(), v.to_string())))
        .collect();
    for (k, v) in &session.variables {
        if k.starts_with('@') {
            continue;
        }
        map.entry(k.clone())
            .and_modify(|e| e.0 = v.clone())
            .or_insert_with(|| (v.clone(), String::new()));
    }
    map.into_iter().map(|(k, (v, d))| (k, v, d)).collect()
}

fn run_show(doris: &Doris, session: &Session, show: Show, now_ms: i64) -> Result<QueryResult> {
    let ctx = ctx_for(doris, session, now_ms);
    Ok(match show {
        Show::Databases => {
            let rows = doris
                .engine
                .databases()
                .into_iter()
                .map(|d| vec![s(d)])
                .collect();
            rows_result(vec![str_col("Database")], rows)
        }
        Show::Tables { db, like, full } => {
            let db = match db {
                Some(d) => d,
                None => session.current_db.clone().ok_or_else(no_db)?,
            };
            let names = if is_info_schema(&db) {
                INFO_SCHEMA_TABLES.iter().map(|t| t.to_string()).collect()
            } else {
                doris.engine.tables(&db)?
            };
            let names: Vec<String> = names
                .into_iter()
                .filter(|n| {
                    like.as_ref().is_none_or(|p| {
                        eval::like(&n.to_ascii_lowercase(), &p.to_ascii_lowercase())
                    })
                })
                .collect();
            let mut cols = vec![str_col(&format!("Tables_in_{db}"))];
            if full {
                cols.push(str_col("Table_type"));
            }
            let rows = names
                .into_iter()
                .map(|n| {
                    if full {
                        vec![s(n), s("BASE TABLE")]
                    } else {
                        vec![s(n)]
                    }
                })
                .collect();
            rows_result(cols, rows)
        }
        Show::CreateTable(name) => {
            let db = db_of(session, &name)?;
            let text = doris.engine.show_create_table(&db, &name.name)?;
            rows_result(
                vec![str_col("Table"), str_col("Create Table")],
                vec![vec![s(name.name), s(text)]],
            )
        }
        Show::Frontends => {
            let r = frontends(&ctx);
            rows_result(r.columns, r.rows)
        }
        Show::Backends => {
            let r = backends(&ctx);
            rows_result(r.columns, r.rows)
        }
        Show::TsoStatus => {
            let r = tso_status(&ctx);
            rows_result(r.columns, r.rows)
        }
        Show::Variables(like) => {
            let rows = variables_list(session)
                .into_iter()
                .filter(|(k, _, _)| {
                    like.as_ref()
                        .is_none_or(|p| eval::like(k, &p.to_ascii_lowercase()))
                })
                .map(|(k, v, _)| vec![s(k), s(v)])
                .collect();
            rows_result(vec![str_col("Variable_name"), str_col("Value")], rows)
        }
        Show::Warnings => rows_result(
            vec![str_col("Level"), str_col("Code"), str_col("Message")],
            Vec::new(),
        ),
        Show::Collation => rows_result(
            [
                "Collation",
                "Charset",
                "Id",
                "Default",
                "Compiled",
                "Sortlen",
            ]
            .iter()
            .map(|c| str_col(c))
            .collect(),
            vec![vec![
                s("utf8mb4_0900_bin"),
                s("utf8mb4"),
                s("309"),
                s("Yes"),
                s("Yes"),
                s("1"),
            ]],
        ),
        Show::Charset => rows_result(
            ["Charset", "Description", "Default collation", "Maxlen"]
                .iter()
                .map(|c| str_col(c))
                .collect(),
            vec![vec![
                s("utf8mb4"),
                s("UTF-8 Unicode"),
                s("utf8mb4_0900_bin"),
                s("4"),
            ]],
        ),
        Show::Columns(name) => {
            let db = db_of(session, &name)?;
            let info = doris.engine.table_info(&db, &name.name)?;
            let rows = info
                .columns
                .iter()
                .map(|c| {
                    vec![
                        s(c.name.clone()),
                        s(c.ty.display_name()),
                        s(if c.nullable { "Yes" } else { "No" }),
                        s(if c.is_key { "true" } else { "false" }),
                        opt_s(c.default.as_ref().and_then(|d| d.to_text(&c.ty))),
                        s(if c.is_key { "" } else { "NONE" }),
                    ]
                })
                .collect();
            rows_result(
                ["Field", "Type", "Null", "Key", "Default", "Extra"]
                    .iter()
                    .map(|c| str_col(c))
                    .collect(),
                rows,
            )
        }
        Show::Empty => rows_result(Vec::new(), Vec::new()),
    })
}

//! The statement tree the parser produces and the executor runs.

use crate::types::DorisType;

/// `[db.]name`.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjName {
    /// Database, when qualified.
    pub db: Option<String>,
    /// Object name.
    pub name: String,
}

/// A literal as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// `NULL`
    Null,
    /// `TRUE` / `FALSE`
    Bool(bool),
    /// A number, as written (`12`, `-3` after folding, `1.50`, `1e3`).
    Number(String),
    /// A string.
    Str(String),
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%` / `MOD`
    Mod,
    /// `DIV`
    IntDiv,
    /// `=`
    Eq,
    /// `!=` / `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<=>`
    NullSafeEq,
    /// `AND`
    And,
    /// `OR`
    Or,
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    /// `-x`
    Neg,
    /// `NOT x`
    Not,
}

/// A scalar expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal.
    Lit(Literal),
    /// A column, optionally qualified (`t.c`, `db.t.c` keeps only the last qualifier).
    Column {
        /// Table or alias qualifier.
        qualifier: Option<String>,
        /// Column name.
        name: String,
    },
    /// `@@[session.|global.]name`
    SysVar {
        /// Variable name (lower-cased).
        name: String,
    },
    /// `@name` (user variables are always NULL here).
    UserVar(String),
    /// A unary operation.
    Unary(UnOp, Box<Expr>),
    /// A binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `x IS [NOT] NULL`
    IsNull {
        /// Operand.
        expr: Box<Expr>,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `x [NOT] IN (...)`
    InList {
        /// Operand.
        expr: Box<Expr>,
        /// Candidates.
        list: Vec<Expr>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `x [NOT] BETWEEN lo AND hi`
    Between {
        /// Operand.
        expr: Box<Expr>,
        /// Lower bound (inclusive).
        lo: Box<Expr>,
        /// Upper bound (inclusive).
        hi: Box<Expr>,
        /// `NOT BETWEEN`.
        negated: bool,
    },
    /// `x [NOT] LIKE pattern`
    Like {
        /// Operand.
        expr: Box<Expr>,
        /// Pattern.
        pattern: Box<Expr>,
        /// `NOT LIKE`.
        negated: bool,
    },
    /// A function call; `COUNT(*)` has `star` set and no args.
    Func {
        /// Name, lower-cased.
        name: String,
        /// Arguments.
        args: Vec<Expr>,
        /// `f(*)`.
        star: bool,
        /// `f(DISTINCT ...)`.
        distinct: bool,
    },
    /// `CAST(x AS type)`
    Cast(Box<Expr>, DorisType),
    /// `CASE [operand] WHEN .. THEN .. [ELSE ..] END`
    Case {
        /// Simple-case operand.
        operand: Option<Box<Expr>>,
        /// (condition or value, result) pairs.
        whens: Vec<(Expr, Expr)>,
        /// ELSE branch.
        else_: Option<Box<Expr>>,
    },
}

/// One item of a SELECT list.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectItem {
    /// `*`
    Wildcard,
    /// `t.*`
    QualifiedWildcard(String),
    /// An expression with an optional alias; `text` is the source text (the default column name).
    Expr {
        /// The expression.
        expr: Expr,
        /// `AS alias`.
        alias: Option<String>,
        /// The expression's source text.
        text: String,
    },
}

/// `FOR VERSION AS OF` / `FOR TIME AS OF`.
#[derive(Debug, Clone, PartialEq)]
pub enum AsOf {
    /// A commit TSO.
    Version(i64),
    /// A `yyyy-MM-dd HH:mm:ss` wall time in the session zone.
    Time(String),
}

/// The FROM clause (a single relation; joins are not supported).
#[derive(Debug, Clone, PartialEq)]
pub struct FromClause {
    /// The table.
    pub table: ObjName,
    /// `@incr(...)` parameters as written (key, value), when present.
    pub incr: Option<Vec<(String, String)>>,
    /// `TABLET(id, ...)`.
    pub tablets: Option<Vec<i64>>,
    /// `PARTITION(...)` / `PARTITIONS(...)` names (accepted, ignored).
    pub partitions: Option<Vec<String>>,
    /// `FOR VERSION/TIME AS OF`.
    pub as_of: Option<AsOf>,
    /// Alias.
    pub alias: Option<String>,
}

/// An ORDER BY item.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderItem {
    /// Sort key.
    pub expr: Expr,
    /// `DESC`.
    pub desc: bool,
    /// NULLs sort first (Doris: first for ASC, last for DESC, unless `NULLS FIRST|LAST`).
    pub nulls_first: bool,
}

/// A SELECT.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    /// `SELECT DISTINCT`.
    pub distinct: bool,
    /// Projection.
    pub items: Vec<SelectItem>,
    /// Source relation.
    pub from: Option<FromClause>,
    /// WHERE.
    pub where_: Option<Expr>,
    /// GROUP BY.
    pub group_by: Vec<Expr>,
    /// HAVING (over source columns and aggregates; output aliases are not visible in it).
    pub having: Option<Expr>,
    /// ORDER BY.
    pub order_by: Vec<OrderItem>,
    /// LIMIT.
    pub limit: Option<u64>,
    /// OFFSET.
    pub offset: Option<u64>,
}

/// A column definition in CREATE TABLE / ALTER TABLE ADD COLUMN.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSpec {
    /// Name.
    pub name: String,
    /// Type.
    pub ty: DorisType,
    /// `NULL` / `NOT NULL` as declared (`None` = not said).
    pub nullable: Option<bool>,
    /// `DEFAULT` literal (or `CURRENT_TIMESTAMP`, kept as a function expression).
    pub default: Option<Expr>,
    /// `COMMENT`.
    pub comment: String,
    /// `KEY` marker in ALTER TABLE ADD COLUMN.
    pub key: bool,
}

/// `UNIQUE KEY` / `DUPLICATE KEY` / `AGGREGATE KEY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeysKind {
    /// UNIQUE KEY.
    Unique,
    /// DUPLICATE KEY.
    Duplicate,
    /// AGGREGATE KEY (rejected at execution).
    Aggregate,
}

/// CREATE TABLE.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    /// Table name.
    pub name: ObjName,
    /// IF NOT EXISTS.
    pub if_not_exists: bool,
    /// Columns.
    pub columns: Vec<ColumnSpec>,
    /// Keys clause; `None` = Doris default (DUPLICATE KEY on leading columns).
    pub keys: Option<(KeysKind, Vec<String>)>,
    /// Table comment.
    pub comment: Option<String>,
    /// `AUTO PARTITION BY RANGE (date_trunc(col, 'unit'))`.
    pub auto_partition: Option<(String, String)>,
    /// `DISTRIBUTED BY HASH(cols)` (empty = RANDOM) and BUCKETS (`None` = AUTO).
    pub distribution: Option<(Vec<String>, Option<u32>)>,
    /// PROPERTIES.
    pub properties: Vec<(String, String)>,
}

/// One `SET` assignment.
#[derive(Debug, Clone, PartialEq)]
pub struct SetItem {
    /// Variable name, lower-cased.
    pub name: String,
    /// Value.
    pub value: Expr,
    /// `SET GLOBAL`.
    pub global: bool,
}

/// `SHOW ...` variants.
#[derive(Debug, Clone, PartialEq)]
pub enum Show {
    /// SHOW DATABASES
    Databases,
    /// SHOW [FULL] TABLES [FROM db] [LIKE ..]
    Tables {
        /// FROM db.
        db: Option<String>,
        /// LIKE pattern.
        like: Option<String>,
        /// FULL.
        full: bool,
    },
    /// SHOW CREATE TABLE t
    CreateTable(ObjName),
    /// SHOW FRONTENDS
    Frontends,
    /// SHOW BACKENDS
    Backends,
    /// SHOW TSO STATUS
    TsoStatus,
    /// SHOW [SESSION|GLOBAL] VARIABLES [LIKE ..]
    Variables(Option<String>),
    /// SHOW WARNINGS / ERRORS
    Warnings,
    /// SHOW COLLATION
    Collation,
    /// SHOW CHARACTER SET / CHARSET
    Charset,
    /// SHOW [FULL] COLUMNS FROM t / DESC t
    Columns(ObjName),
    /// SHOW ENGINES, SHOW PROCESSLIST, ... (empty result)
    Empty,
}

/// `AFTER c` / `FIRST` in ADD COLUMN and MODIFY COLUMN.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnPos {
    /// FIRST.
    First,
    /// AFTER column.
    After(String),
}

/// ALTER TABLE operations.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterOp {
    /// ADD COLUMN col [AFTER c | FIRST]
    AddColumn {
        /// The column.
        column: ColumnSpec,
        /// `AFTER c` / `FIRST` (`None`: at the end).
        position: Option<ColumnPos>,
    },
    /// DROP COLUMN c
    DropColumn(String),
    /// MODIFY COLUMN col <type> … [AFTER c | FIRST]
    ModifyColumn {
        /// The column as the statement declares it.
        column: ColumnSpec,
        /// Whether the statement said `COMMENT` (an empty comment is a comment).
        has_comment: bool,
        /// `AFTER c` / `FIRST` (`None`: where it is).
        position: Option<ColumnPos>,
    },
    /// MODIFY COLUMN c COMMENT '…'
    ModifyColumnComment {
        /// The column.
        column: String,
        /// The new comment.
        comment: String,
    },
    /// RENAME COLUMN old new
    RenameColumn {
        /// Current name.
        from: String,
        /// New name.
        to: String,
    },
    /// ORDER BY (c, …)
    OrderBy(Vec<String>),
    /// SET ("k"="v", ...)
    SetProperties(Vec<(String, String)>),
    /// REPLACE WITH TABLE other [PROPERTIES ("swap" = "...")]
    ReplaceWith {
        /// The table that takes this one's place (same database).
        table: String,
        /// PROPERTIES.
        properties: Vec<(String, String)>,
    },
}

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// CREATE DATABASE
    CreateDatabase {
        /// Name.
        name: String,
        /// IF NOT EXISTS.
        if_not_exists: bool,
    },
    /// DROP DATABASE
    DropDatabase {
        /// Name.
        name: String,
        /// IF EXISTS.
        if_exists: bool,
    },
    /// USE db
    Use(String),
    /// SHOW ...
    Show(Show),
    /// CREATE TABLE
    CreateTable(CreateTable),
    /// CREATE TABLE t LIKE u
    CreateTableLike {
        /// The new table.
        name: ObjName,
        /// The table whose definition it copies.
        like: ObjName,
        /// IF NOT EXISTS.
        if_not_exists: bool,
    },
    /// DROP TABLE
    DropTable {
        /// Table.
        name: ObjName,
        /// IF EXISTS.
        if_exists: bool,
    },
    /// TRUNCATE TABLE
    Truncate(ObjName),
    /// ALTER TABLE
    Alter {
        /// Table.
        name: ObjName,
        /// Operations in order.
        ops: Vec<AlterOp>,
    },
    /// INSERT INTO t [(cols)] VALUES ...
    Insert {
        /// Table.
        table: ObjName,
        /// Column list.
        columns: Option<Vec<String>>,
        /// Rows.
        rows: Vec<Vec<Expr>>,
    },
    /// INSERT INTO t [(cols)] SELECT ...
    InsertSelect {
        /// Table.
        table: ObjName,
        /// Column list.
        columns: Option<Vec<String>>,
        /// The query.
        query: Box<Select>,
    },
    /// UPDATE t SET ... WHERE ...
    Update {
        /// Table.
        table: ObjName,
        /// Assignments.
        sets: Vec<(String, Expr)>,
        /// WHERE.
        where_: Option<Expr>,
    },
    /// DELETE FROM t WHERE ...
    Delete {
        /// Table.
        table: ObjName,
        /// WHERE.
        where_: Option<Expr>,
    },
    /// SELECT
    Select(Box<Select>),
    /// SET ...
    Set(Vec<SetItem>),
    /// `SET NAMES x [COLLATE y]` / `SET CHARACTER SET x`
    SetNames(String),
    /// BEGIN / COMMIT / ROLLBACK / START TRANSACTION and other no-ops.
    Noop,
}

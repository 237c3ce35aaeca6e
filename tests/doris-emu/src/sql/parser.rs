//! A hand-written recursive-descent parser for the Doris dialect the emulator speaks.
//!
//! Pure: text in, [`Statement`] out. It never panics; nesting is bounded so hostile input cannot
//! overflow the stack.

use super::ast::*;
use super::lexer::{Tok, Token, tokenize};
use crate::types::DorisType;

/// Deepest expression nesting accepted.
const MAX_DEPTH: usize = 20;

/// Why a statement could not be parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    /// A syntax error at a byte offset.
    Syntax {
        /// Byte offset of the offending token.
        pos: usize,
        /// The offending token, as text.
        found: String,
        /// What was expected (may be empty).
        expected: String,
    },
    /// A semantic error found while parsing (bad type parameters, ...): the Doris detail message.
    Analysis(String),
}

type PResult<T> = Result<T, ParseError>;

/// Words that end an expression / cannot be a bare alias.
const RESERVED: &[&str] = &[
    "select",
    "from",
    "where",
    "group",
    "having",
    "order",
    "limit",
    "offset",
    "union",
    "except",
    "intersect",
    "join",
    "inner",
    "left",
    "right",
    "full",
    "cross",
    "on",
    "using",
    "as",
    "and",
    "or",
    "not",
    "xor",
    "is",
    "in",
    "between",
    "like",
    "regexp",
    "rlike",
    "asc",
    "desc",
    "by",
    "for",
    "tablet",
    "partition",
    "partitions",
    "into",
    "values",
    "value",
    "set",
    "case",
    "when",
    "then",
    "else",
    "end",
    "null",
    "true",
    "false",
    "distinct",
    "all",
    "div",
    "mod",
    "window",
    "lateral",
    "natural",
    "outer",
    "into",
    "tablesample",
    "with",
];

fn is_reserved(w: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(w))
}

/// Parse one statement (trailing `;` allowed).
pub fn parse(sql: &str) -> PResult<Statement> {
    let toks = tokenize(sql).map_err(|e| ParseError::Syntax {
        pos: e.pos,
        found: e.message,
        expected: String::new(),
    })?;
    let mut p = Parser {
        sql,
        toks,
        pos: 0,
        depth: 0,
    };
    let stmt = p.statement()?;
    while p.eat(&Tok::Semi) {}
    if !p.at_eof() {
        return Err(p.unexpected("<EOF>"));
    }
    Ok(stmt)
}

struct Parser<'a> {
    sql: &'a str,
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    // ---------------------------------------------------------------- token helpers

    fn peek(&self) -> &Tok {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> &Tok {
        let i = (self.pos + n).min(self.toks.len().saturating_sub(1));
        self.toks.get(i).map(|t| &t.tok).unwrap_or(&Tok::Eof)
    }

    fn cur_start(&self) -> usize {
        self.toks
            .get(self.pos)
            .map(|t| t.start)
            .unwrap_or(self.sql.len())
    }

    fn prev_end(&self) -> usize {
        if self.pos == 0 {
            0
        } else {
            self.toks
                .get(self.pos - 1)
                .map(|t| t.end)
                .unwrap_or(self.sql.len())
        }
    }

    fn at_eof(&self) -> bool {
        matches!(self.peek(), Tok::Eof)
    }

    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: &Tok) -> PResult<()> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(self.unexpected(&t.describe()))
        }
    }

    fn is_kw(&self, kw: &str) -> bool {
        self.is_kw_at(0, kw)
    }

    fn is_kw_at(&self, n: usize, kw: &str) -> bool {
        matches!(self.peek_at(n), Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn eat_kws(&mut self, kws: &[&str]) -> bool {
        for (i, k) in kws.iter().enumerate() {
            if !self.is_kw_at(i, k) {
                return false;
            }
        }
        for _ in kws {
            self.bump();
        }
        true
    }

    fn expect_kw(&mut self, kw: &str) -> PResult<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.unexpected(&kw.to_uppercase()))
        }
    }

    fn unexpected(&self, expected: &str) -> ParseError {
        let t = self.toks.get(self.pos);
        ParseError::Syntax {
            pos: t.map(|t| t.start).unwrap_or(self.sql.len()),
            found: t
                .map(|t| t.tok.describe())
                .unwrap_or_else(|| "<EOF>".into()),
            expected: expected.to_string(),
        }
    }

    /// Any identifier: a bare word or a backticked name.
    fn ident(&mut self) -> PResult<String> {
        match self.peek().clone() {
            Tok::Word(w) => {
                self.bump();
                Ok(w)
            }
            Tok::Quoted(w) => {
                self.bump();
                Ok(w)
            }
            _ => Err(self.unexpected("identifier")),
        }
    }

    fn string_lit(&mut self) -> PResult<String> {
        match self.peek().clone() {
            Tok::Str(s) => {
                self.bump();
                Ok(s)
            }
            _ => Err(self.unexpected("string literal")),
        }
    }

    fn uint(&mut self) -> PResult<u64> {
        match self.peek().clone() {
            Tok::Number(n) => match n.parse::<u64>() {
                Ok(v) => {
                    self.bump();
                    Ok(v)
                }
                Err(_) => Err(self.unexpected("integer")),
            },
            _ => Err(self.unexpected("integer")),
        }
    }

    fn int(&mut self) -> PResult<i64> {
        let neg = self.eat(&Tok::Minus);
        match self.peek().clone() {
            Tok::Number(n) => match n.parse::<i64>() {
                Ok(v) => {
                    self.bump();
                    Ok(if neg { -v } else { v })
                }
                Err(_) => Err(self.unexpected("integer")),
            },
            _ => Err(self.unexpected("integer")),
        }
    }

    fn obj_name(&mut self) -> PResult<ObjName> {
        let first = self.ident()?;
        if self.peek() == &Tok::Dot && matches!(self.peek_at(1), Tok::Word(_) | Tok::Quoted(_)) {
            self.bump();
            let second = self.ident()?;
            // `catalog.db.table`: drop the catalog (only `internal` exists).
            if self.peek() == &Tok::Dot && matches!(self.peek_at(1), Tok::Word(_) | Tok::Quoted(_))
            {
                self.bump();
                let third = self.ident()?;
                return Ok(ObjName {
                    db: Some(second),
                    name: third,
                });
            }
            return Ok(ObjName {
                db: Some(first),
                name: second,
            });
        }
        Ok(ObjName {
            db: None,
            name: first,
        })
    }

    fn ident_list(&mut self) -> PResult<Vec<String>> {
        self.expect(&Tok::LParen)?;
        let mut out = Vec::new();
        if self.eat(&Tok::RParen) {
            return Ok(out);
        }
        loop {
            out.push(self.ident()?);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::RParen)?;
        Ok(out)
    }

    /// `( "k" = "v", ... )`
    fn properties(&mut self) -> PResult<Vec<(String, String)>> {
        self.expect(&Tok::LParen)?;
        let mut out = Vec::new();
        if self.eat(&Tok::RParen) {
            return Ok(out);
        }
        loop {
            let k = match self.peek().clone() {
                Tok::Str(s) | Tok::Word(s) | Tok::Quoted(s) => {
                    self.bump();
                    s
                }
                _ => return Err(self.unexpected("property key")),
            };
            self.expect(&Tok::Eq)?;
            let v = match self.peek().clone() {
                Tok::Str(s) | Tok::Number(s) | Tok::Word(s) => {
                    self.bump();
                    s
                }
                _ => return Err(self.unexpected("property value")),
            };
            out.push((k, v));
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::RParen)?;
        Ok(out)
    }

    /// Skip a balanced `( ... )` group.
    fn skip_parens(&mut self) -> PResult<()> {
        self.expect(&Tok::LParen)?;
        let mut depth = 1usize;
        while depth > 0 {
            match self.bump() {
                Tok::LParen => depth += 1,
                Tok::RParen => depth -= 1,
                Tok::Eof => return Err(self.unexpected(")")),
                _ => {}
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- statements

    fn statement(&mut self) -> PResult<Statement> {
        let Tok::Word(w) = self.peek().clone() else {
            if self.peek() == &Tok::LParen {
                return Ok(Statement::Select(Box::new(self.select()?)));
            }
            return Err(self.unexpected("a statement"));
        };
        match w.to_ascii_lowercase().as_str() {
            "select" => Ok(Statement::Select(Box::new(self.select()?))),
            "create" => self.create(),
            "drop" => self.drop_stmt(),
            "use" => {
                self.bump();
                let name = self.obj_name()?;
                // `USE catalog.db` → db.
                Ok(Statement::Use(name.name))
            }
            "show" => self.show(),
            "desc" | "describe" | "explain" if !self.is_kw_at(1, "select") => {
                self.bump();
                let t = self.obj_name()?;
                Ok(Statement::Show(Show::Columns(t)))
            }
            "truncate" => {
                self.bump();
                self.eat_kw("table");
                let t = self.obj_name()?;
                if self.is_kw("partition") || self.is_kw("partitions") {
                    self.bump();
                    self.skip_parens()?;
                }
                Ok(Statement::Truncate(t))
            }
            "alter" => self.alter(),
            "insert" => self.insert(),
            "update" => self.update(),
            "delete" => self.delete(),
            "set" => self.set(),
            "begin" => {
                self.bump();
                self.eat_kw("work");
                Ok(Statement::Noop)
            }
            "start" => {
                self.bump();
                self.expect_kw("transaction")?;
                Ok(Statement::Noop)
            }
            "commit" | "rollback" => {
                self.bump();
                self.eat_kw("work");
                Ok(Statement::Noop)
            }
            _ => Err(self.unexpected("a statement")),
        }
    }

    fn create(&mut self) -> PResult<Statement> {
        self.expect_kw("create")?;
        if self.eat_kw("database") || self.eat_kw("schema") {
            let if_not_exists = self.eat_kws(&["if", "not", "exists"]);
            let name = self.obj_name()?.name;
            if self.is_kw("properties") {
                self.bump();
                self.properties()?;
            }
            return Ok(Statement::CreateDatabase {
                name,
                if_not_exists,
            });
        }
        self.eat_kw("external");
        self.expect_kw("table")?;
        let if_not_exists = self.eat_kws(&["if", "not", "exists"]);
        let name = self.obj_name()?;
        if self.eat_kw("like") {
            let like = self.obj_name()?;
            if self.eat_kw("with") {
                // WITH ROLLUP [(r1, ...)]: the emulator has no rollups to copy.
                self.expect_kw("rollup")?;
                if self.peek() == &Tok::LParen {
                    self.ident_list()?;
                }
            }
            return Ok(Statement::CreateTableLike {
                name,
                like,
                if_not_exists,
            });
        }
        if self.is_kw("as") {
            return Err(self.unexpected("("));
        }
        self.expect(&Tok::LParen)?;
        let mut columns = Vec::new();
        loop {
            if self.is_kw("index") {
                // INDEX idx (cols) [USING x] [PROPERTIES(...)] [COMMENT '...']
                self.bump();
                self.ident()?;
                self.skip_parens()?;
                if self.eat_kw("using") {
                    self.ident()?;
                }
                if self.eat_kw("properties") {
                    self.properties()?;
                }
                if self.eat_kw("comment") {
                    self.string_lit()?;
                }
            } else {
                columns.push(self.column_spec()?);
            }
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::RParen)?;
        let mut ct = CreateTable {
            name,
            if_not_exists,
            columns,
            keys: None,
            comment: None,
            auto_partition: None,
            distribution: None,
            properties: Vec::new(),
        };
        loop {
            if self.eat_kw("engine") {
                self.eat(&Tok::Eq);
                let e = self.ident()?;
                if !e.eq_ignore_ascii_case("olap") {
                    return Err(ParseError::Analysis(format!("Unknown engine name: {e}")));
                }
            } else if self.is_kw("unique")
                || self.is_kw("duplicate")
                || self.is_kw("aggregate")
                || self.is_kw("primary")
            {
                let kind = match self.bump() {
                    Tok::Word(w) if w.eq_ignore_ascii_case("unique") => KeysKind::Unique,
                    Tok::Word(w) if w.eq_ignore_ascii_case("duplicate") => KeysKind::Duplicate,
                    Tok::Word(w) if w.eq_ignore_ascii_case("primary") => KeysKind::Unique,
                    _ => KeysKind::Aggregate,
                };
                self.expect_kw("key")?;
                let cols = self.ident_list()?;
                ct.keys = Some((kind, cols));
                if self.eat_kw("cluster") {
                    self.expect_kw("by")?;
                    self.ident_list()?;
                }
            } else if self.eat_kw("comment") {
                ct.comment = Some(self.string_lit()?);
            } else if self.eat_kw("auto") {
                self.expect_kw("partition")?;
                self.expect_kw("by")?;
                let range = self.eat_kw("range");
                if !range {
                    self.expect_kw("list")?;
                }
                if range && self.peek() == &Tok::LParen && self.peek_at(1) != &Tok::RParen {
                    // (date_trunc(col, 'unit'))
                    self.expect(&Tok::LParen)?;
                    let f = self.ident()?;
                    if !f.eq_ignore_ascii_case("date_trunc") {
                        return Err(ParseError::Analysis(
                            "auto create partition only support date_trunc function of RANGE partition".into(),
                        ));
                    }
                    self.expect(&Tok::LParen)?;
                    let col = self.ident()?;
                    self.expect(&Tok::Comma)?;
                    let unit = self.string_lit()?;
                    self.expect(&Tok::RParen)?;
                    self.expect(&Tok::RParen)?;
                    ct.auto_partition = Some((col, unit.to_ascii_lowercase()));
                } else {
                    self.skip_parens()?;
                }
                if self.peek() == &Tok::LParen {
                    self.skip_parens()?;
                }
            } else if self.eat_kw("partition") {
                self.expect_kw("by")?;
                self.ident()?; // RANGE / LIST
                self.skip_parens()?;
                if self.peek() == &Tok::LParen {
                    self.skip_parens()?;
                }
            } else if self.eat_kw("distributed") {
                self.expect_kw("by")?;
                let cols = if self.eat_kw("hash") {
                    self.ident_list()?
                } else {
                    self.expect_kw("random")?;
                    Vec::new()
                };
                let mut buckets = None;
                if self.eat_kw("buckets") {
                    if self.eat_kw("auto") {
                        buckets = None;
                    } else {
                        let n = self.uint()?;
                        if n == 0 || n > u32::MAX as u64 {
                            return Err(ParseError::Analysis(
                                "Number of hash distribution should be greater than zero.".into(),
                            ));
                        }
                        buckets = Some(n as u32);
                    }
                }
                ct.distribution = Some((cols, buckets));
            } else if self.eat_kw("rollup") {
                self.skip_parens()?;
            } else if self.eat_kw("properties") {
                ct.properties = self.properties()?;
            } else {
                break;
            }
        }
        Ok(Statement::CreateTable(ct))
    }

    fn column_spec(&mut self) -> PResult<ColumnSpec> {
        let name = self.ident()?;
        let ty = self.data_type()?;
        let mut spec = ColumnSpec {
            name,
            ty,
            nullable: None,
            default: None,
            comment: String::new(),
            key: false,
        };
        loop {
            if self.eat_kw("key") {
                spec.key = true;
            } else if self.eat_kws(&["not", "null"]) {
                spec.nullable = Some(false);
            } else if self.eat_kw("null") {
                spec.nullable = Some(true);
            } else if self.eat_kw("default") {
                spec.default = Some(self.default_value()?);
            } else if self.eat_kw("comment") {
                spec.comment = self.string_lit()?;
            } else if self.eat_kw("auto_increment") {
                if self.peek() == &Tok::LParen {
                    self.skip_parens()?;
                }
            } else if self.eat_kws(&["on", "update"]) {
                self.default_value()?;
            } else if let Tok::Word(w) = self.peek().clone() {
                // aggregation types (REPLACE, SUM, MAX, MIN, ...) are accepted and ignored
                let lw = w.to_ascii_lowercase();
                if [
                    "replace",
                    "replace_if_not_null",
                    "sum",
                    "max",
                    "min",
                    "none",
                    "bitmap_union",
                    "hll_union",
                ]
                .contains(&lw.as_str())
                {
                    self.bump();
                } else {
                    break;
                }
            } else {
                break;
            }
        }
        Ok(spec)
    }

    fn default_value(&mut self) -> PResult<Expr> {
        if self.is_kw("current_timestamp") || self.is_kw("now") {
            self.bump();
            let mut args = Vec::new();
            if self.eat(&Tok::LParen) && !self.eat(&Tok::RParen) {
                args.push(Expr::Lit(Literal::Number(self.uint()?.to_string())));
                self.expect(&Tok::RParen)?;
            }
            return Ok(Expr::Func {
                name: "current_timestamp".into(),
                args,
                star: false,
                distinct: false,
            });
        }
        let neg = self.eat(&Tok::Minus);
        let lit = match self.bump() {
            Tok::Str(s) => Literal::Str(s),
            Tok::Number(n) => Literal::Number(if neg { format!("-{n}") } else { n }),
            Tok::Word(w) if w.eq_ignore_ascii_case("null") => Literal::Null,
            Tok::Word(w) if w.eq_ignore_ascii_case("true") => Literal::Bool(true),
            Tok::Word(w) if w.eq_ignore_ascii_case("false") => Literal::Bool(false),
            _ => {
                self.pos = self.pos.saturating_sub(1);
                return Err(self.unexpected("default value"));
            }
        };
        Ok(Expr::Lit(lit))
    }

    fn paren_numbers(&mut self) -> PResult<Vec<u64>> {
        let mut out = Vec::new();
        if self.eat(&Tok::LParen) {
            loop {
                out.push(self.uint()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            self.expect(&Tok::RParen)?;
        }
        Ok(out)
    }

    /// A column type.
    pub(crate) fn data_type(&mut self) -> PResult<DorisType> {
        let name = match self.peek().clone() {
            Tok::Word(w) => {
                self.bump();
                w.to_ascii_lowercase()
            }
            _ => return Err(self.unexpected("data type")),
        };
        let ty = match name.as_str() {
            "boolean" | "bool" => {
                self.paren_numbers()?;
                DorisType::Boolean
            }
            "tinyint" => {
                self.paren_numbers()?;
                DorisType::TinyInt
            }
            "smallint" => {
                self.paren_numbers()?;
                DorisType::SmallInt
            }
            "int" | "integer" => {
                self.paren_numbers()?;
                DorisType::Int
            }
            "bigint" => {
                self.paren_numbers()?;
                DorisType::BigInt
            }
            "largeint" => {
                self.paren_numbers()?;
                DorisType::LargeInt
            }
            "float" => {
                self.paren_numbers()?;
                DorisType::Float
            }
            "double" => {
                self.eat_kw("precision");
                self.paren_numbers()?;
                DorisType::Double
            }
            "decimal" | "decimalv3" | "decimalv2" | "numeric" | "dec" => {
                let ps = self.paren_numbers()?;
                let (p, s) = match ps.as_slice() {
                    [] => (9, 0),
                    [p] => (*p, 0),
                    [p, s] => (*p, *s),
                    _ => return Err(self.unexpected(")")),
                };
                if !(1..=38).contains(&p) {
                    return Err(ParseError::Analysis(format!(
                        "Precision of decimal must between 1 and 38. Precision was set to: {p}."
                    )));
                }
                if s > p {
                    return Err(ParseError::Analysis(format!(
                        "Scale of decimal must between 0 and precision. Scale was set to: {s}."
                    )));
                }
                DorisType::Decimal {
                    precision: p as u8,
                    scale: s as u8,
                }
            }
            "char" | "character" => {
                let n = self.paren_numbers()?;
                let n = n.first().copied().unwrap_or(1);
                if !(1..=255).contains(&n) {
                    return Err(ParseError::Analysis(format!(
                        "Char size must between 1 and 255. Size was set to: {n}."
                    )));
                }
                DorisType::Char(n as u32)
            }
            "varchar" => {
                let n = self.paren_numbers()?;
                let n = n.first().copied().unwrap_or(65533);
                if !(1..=65533).contains(&n) {
                    return Err(ParseError::Analysis(format!(
                        "Varchar size must between 1 and 65533. Size was set to: {n}."
                    )));
                }
                DorisType::Varchar(n as u32)
            }
            "string" | "text" | "tinytext" | "mediumtext" | "longtext" => DorisType::String,
            "date" | "datev2" | "datev1" => DorisType::Date,
            "datetime" | "datetimev2" | "datetimev1" | "timestamp" => {
                let p = self.paren_numbers()?;
                let p = p.first().copied().unwrap_or(0);
                if p > 6 {
                    return Err(ParseError::Analysis(format!(
                        "Scale of Datetime/Time must between 0 and 6. Scale was set to: {p}"
                    )));
                }
                DorisType::DateTime(p as u8)
            }
            "json" | "jsonb" => DorisType::Json,
            _ => {
                self.pos = self.pos.saturating_sub(1);
                return Err(self.unexpected("data type"));
            }
        };
        Ok(ty)
    }

    fn drop_stmt(&mut self) -> PResult<Statement> {
        self.expect_kw("drop")?;
        if self.eat_kw("database") || self.eat_kw("schema") {
            let if_exists = self.eat_kws(&["if", "exists"]);
            let name = self.obj_name()?.name;
            self.eat_kw("force");
            return Ok(Statement::DropDatabase { name, if_exists });
        }
        self.expect_kw("table")?;
        let if_exists = self.eat_kws(&["if", "exists"]);
        let name = self.obj_name()?;
        self.eat_kw("force");
        Ok(Statement::DropTable { name, if_exists })
    }

    fn show(&mut self) -> PResult<Statement> {
        self.expect_kw("show")?;
        let full = self.eat_kw("full");
        let s = if self.eat_kw("databases") || self.eat_kw("schemas") {
            self.skip_like_or_where()?;
            Show::Databases
        } else if self.eat_kw("tables") {
            let db = if self.eat_kw("from") || self.eat_kw("in") {
                Some(self.obj_name()?.name)
            } else {
                None
            };
            let like = if self.eat_kw("like") {
                Some(self.string_lit()?)
            } else {
                None
            };
            Show::Tables { db, like, full }
        } else if self.eat_kw("create") {
            self.expect_kw("table")?;
            Show::CreateTable(self.obj_name()?)
        } else if self.eat_kw("frontends") {
            Show::Frontends
        } else if self.eat_kw("backends") {
            Show::Backends
        } else if self.eat_kw("tso") {
            self.expect_kw("status")?;
            Show::TsoStatus
        } else if self.eat_kw("variables")
            || self.eat_kws(&["session", "variables"])
            || self.eat_kws(&["global", "variables"])
            || self.eat_kws(&["local", "variables"])
        {
            let like = if self.eat_kw("like") {
                Some(self.string_lit()?)
            } else {
                if self.eat_kw("where") {
                    self.expr()?;
                }
                None
            };
            Show::Variables(like)
        } else if self.eat_kw("warnings") || self.eat_kw("errors") {
            if self.eat_kw("limit") {
                self.uint()?;
            }
            Show::Warnings
        } else if self.eat_kw("collation") {
            self.skip_like_or_where()?;
            Show::Collation
        } else if self.eat_kws(&["character", "set"]) || self.eat_kw("charset") {
            self.skip_like_or_where()?;
            Show::Charset
        } else if self.eat_kw("columns") || self.eat_kw("fields") {
            if !(self.eat_kw("from") || self.eat_kw("in")) {
                return Err(self.unexpected("FROM"));
            }
            let mut t = self.obj_name()?;
            if self.eat_kw("from") || self.eat_kw("in") {
                t.db = Some(self.obj_name()?.name);
            }
            Show::Columns(t)
        } else if self.eat_kw("engines")
            || self.eat_kw("processlist")
            || self.eat_kw("plugins")
            || self.eat_kw("triggers")
            || self.eat_kws(&["table", "status"])
            || self.eat_kws(&["master", "status"])
        {
            while !self.at_eof() && self.peek() != &Tok::Semi {
                self.bump();
            }
            Show::Empty
        } else {
            return Err(self.unexpected(
                "DATABASES, TABLES, CREATE TABLE, FRONTENDS, BACKENDS, VARIABLES, ...",
            ));
        };
        Ok(Statement::Show(s))
    }

    fn skip_like_or_where(&mut self) -> PResult<()> {
        if self.eat_kw("like") {
            self.string_lit()?;
        } else if self.eat_kw("where") {
            self.expr()?;
        }
        Ok(())
    }

    fn alter(&mut self) -> PResult<Statement> {
        self.expect_kw("alter")?;
        self.expect_kw("table")?;
        let name = self.obj_name()?;
        let mut ops = Vec::new();
        loop {
            if self.eat_kw("add") {
                self.expect_kw("column")?;
                if self.peek() == &Tok::LParen {
                    return Err(self.unexpected("column definition"));
                }
                let column = self.column_spec()?;
                let position = self.column_pos()?;
                if self.eat_kw("to") {
                    self.ident()?;
                }
                ops.push(AlterOp::AddColumn { column, position });
            } else if self.eat_kw("drop") {
                self.expect_kw("column")?;
                ops.push(AlterOp::DropColumn(self.ident()?));
            } else if self.eat_kw("set") {
                ops.push(AlterOp::SetProperties(self.properties()?));
            } else if self.eat_kw("replace") {
                self.expect_kw("with")?;
                // Older Doris versions wrote `REPLACE WITH tbl`; current ones `REPLACE WITH TABLE tbl`.
                self.eat_kw("table");
                let table = self.ident()?;
                let properties = if self.eat_kw("properties") {
                    self.properties()?
                } else {
                    Vec::new()
                };
                ops.push(AlterOp::ReplaceWith { table, properties });
            } else if self.eat_kw("modify") {
                if self.eat_kw("comment") {
                    self.string_lit()?;
                } else {
                    self.expect_kw("column")?;
                    ops.push(self.modify_column()?);
                }
            } else if self.eat_kw("rename") {
                self.expect_kw("column")?;
                let from = self.ident()?;
                let to = self.ident()?;
                ops.push(AlterOp::RenameColumn { from, to });
            } else if self.eat_kws(&["order", "by"]) {
                self.expect(&Tok::LParen)?;
                let mut columns = vec![self.ident()?];
                while self.eat(&Tok::Comma) {
                    columns.push(self.ident()?);
                }
                self.expect(&Tok::RParen)?;
                ops.push(AlterOp::OrderBy(columns));
            } else {
                return Err(self.unexpected(
                    "ADD COLUMN, DROP COLUMN, MODIFY COLUMN, RENAME COLUMN, ORDER BY, SET or REPLACE WITH TABLE",
                ));
            }
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        Ok(Statement::Alter { name, ops })
    }

    /// `[AFTER c | FIRST]` after a column definition.
    fn column_pos(&mut self) -> PResult<Option<ColumnPos>> {
        if self.eat_kw("after") {
            Ok(Some(ColumnPos::After(self.ident()?)))
        } else if self.eat_kw("first") {
            Ok(Some(ColumnPos::First))
        } else {
            Ok(None)
        }
    }

    /// After `MODIFY COLUMN`: `c COMMENT '…'`, or `c <type> [KEY] [NULL | NOT NULL] [DEFAULT …]
    /// [COMMENT '…'] [AFTER c | FIRST]`.
    fn modify_column(&mut self) -> PResult<AlterOp> {
        if matches!(self.peek(), Tok::Word(_) | Tok::Quoted(_))
            && matches!(self.peek_at(1), Tok::Word(w) if w.eq_ignore_ascii_case("comment"))
        {
            let column = self.ident()?;
            self.expect_kw("comment")?;
            let comment = self.string_lit()?;
            return Ok(AlterOp::ModifyColumnComment { column, comment });
        }
        let start = self.pos;
        let column = self.column_spec()?;
        let has_comment = self.toks[start..self.pos]
            .iter()
            .any(|t| matches!(&t.tok, Tok::Word(w) if w.eq_ignore_ascii_case("comment")));
        let position = self.column_pos()?;
        if self.eat_kw("from") {
            self.ident()?;
        }
        Ok(AlterOp::ModifyColumn {
            column,
            has_comment,
            position,
        })
    }

    fn insert(&mut self) -> PResult<Statement> {
        self.expect_kw("insert")?;
        if !self.eat_kw("into") {
            self.expect_kw("overwrite")?;
            return Err(ParseError::Analysis(
                "INSERT OVERWRITE is not supported by the emulator".into(),
            ));
        }
        self.eat_kw("table");
        let table = self.obj_name()?;
        if self.is_kw("partition") || self.is_kw("partitions") || self.is_kw("temporary") {
            self.eat_kw("temporary");
            self.bump();
            self.skip_parens()?;
        }
        if self.eat_kw("with") {
            self.expect_kw("label")?;
            self.ident()?;
        }
        let columns = if self.peek() == &Tok::LParen && !self.is_kw_at(1, "select") {
            Some(self.ident_list()?)
        } else {
            None
        };
        if self.is_kw("select") || self.peek() == &Tok::LParen {
            let query = self.select()?;
            return Ok(Statement::InsertSelect {
                table,
                columns,
                query: Box::new(query),
            });
        }
        if !(self.eat_kw("values") || self.eat_kw("value")) {
            return Err(self.unexpected("VALUES"));
        }
        let mut rows = Vec::new();
        loop {
            self.expect(&Tok::LParen)?;
            let mut row = Vec::new();
            if !self.eat(&Tok::RParen) {
                loop {
                    if self.eat_kw("default") {
                        row.push(Expr::Func {
                            name: "__default".into(),
                            args: vec![],
                            star: false,
                            distinct: false,
                        });
                    } else {
                        row.push(self.expr()?);
                    }
                    if !self.eat(&Tok::Comma) {
                        break;
                    }
                }
                self.expect(&Tok::RParen)?;
            }
            rows.push(row);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        Ok(Statement::Insert {
            table,
            columns,
            rows,
        })
    }

    fn update(&mut self) -> PResult<Statement> {
        self.expect_kw("update")?;
        let table = self.obj_name()?;
        if self.eat_kw("as")
            || matches!(self.peek(), Tok::Word(w) if !w.eq_ignore_ascii_case("set"))
        {
            self.ident()?;
        }
        self.expect_kw("set")?;
        let mut sets = Vec::new();
        loop {
            let mut col = self.ident()?;
            if self.eat(&Tok::Dot) {
                col = self.ident()?;
            }
            self.expect(&Tok::Eq)?;
            sets.push((col, self.expr()?));
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        let where_ = if self.eat_kw("where") {
            Some(self.expr()?)
        } else {
            None
        };
        Ok(Statement::Update {
            table,
            sets,
            where_,
        })
    }

    fn delete(&mut self) -> PResult<Statement> {
        self.expect_kw("delete")?;
        self.expect_kw("from")?;
        let table = self.obj_name()?;
        if self.is_kw("partition") || self.is_kw("partitions") {
            self.bump();
            self.skip_parens()?;
        }
        if self.eat_kw("as") || matches!(self.peek(), Tok::Word(w) if !is_reserved(w)) {
            self.ident()?;
        }
        let where_ = if self.eat_kw("where") {
            Some(self.expr()?)
        } else {
            None
        };
        Ok(Statement::Delete { table, where_ })
    }

    fn set(&mut self) -> PResult<Statement> {
        self.expect_kw("set")?;
        if self.eat_kw("names") {
            let cs = match self.bump() {
                Tok::Word(w) | Tok::Str(w) | Tok::Quoted(w) => w,
                _ => {
                    self.pos = self.pos.saturating_sub(1);
                    return Err(self.unexpected("character set name"));
                }
            };
            if self.eat_kw("collate") {
                match self.bump() {
                    Tok::Word(_) | Tok::Str(_) | Tok::Quoted(_) => {}
                    _ => {
                        self.pos = self.pos.saturating_sub(1);
                        return Err(self.unexpected("collation name"));
                    }
                }
            }
            return Ok(Statement::SetNames(cs));
        }
        if self.eat_kws(&["character", "set"]) || self.eat_kw("charset") {
            let cs = match self.bump() {
                Tok::Word(w) | Tok::Str(w) | Tok::Quoted(w) => w,
                _ => {
                    self.pos = self.pos.saturating_sub(1);
                    return Err(self.unexpected("character set name"));
                }
            };
            return Ok(Statement::SetNames(cs));
        }
        if self.is_kw("transaction")
            || ((self.is_kw("session") || self.is_kw("global") || self.is_kw("local"))
                && self.is_kw_at(1, "transaction"))
            || self.is_kw("password")
            || self.is_kw("property")
            || self.is_kw("role")
        {
            while !self.at_eof() && self.peek() != &Tok::Semi {
                self.bump();
            }
            return Ok(Statement::Noop);
        }
        let mut items = Vec::new();
        loop {
            let mut global = false;
            let name;
            if self.eat(&Tok::AtAt) {
                let first = self.ident()?;
                if self.eat(&Tok::Dot) {
                    global = first.eq_ignore_ascii_case("global");
                    name = self.ident()?;
                } else {
                    name = first;
                }
            } else if self.eat(&Tok::At) {
                let n = self.ident()?;
                name = format!("@{n}");
            } else {
                if self.eat_kw("global") {
                    global = true;
                } else if !self.eat_kw("session") {
                    self.eat_kw("local");
                }
                name = self.ident()?;
            }
            if !self.eat(&Tok::Eq) {
                self.expect(&Tok::Colon)?;
                self.expect(&Tok::Eq)?;
            }
            let value = if self.eat_kw("default") {
                Expr::Func {
                    name: "__default".into(),
                    args: vec![],
                    star: false,
                    distinct: false,
                }
            } else {
                self.expr()?
            };
            items.push(SetItem {
                name: name.to_ascii_lowercase(),
                value,
                global,
            });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        Ok(Statement::Set(items))
    }

    // ---------------------------------------------------------------- SELECT

    fn select(&mut self) -> PResult<Select> {
        if self.peek() == &Tok::LParen {
            self.enter()?;
            self.bump();
            let s = self.select()?;
            self.expect(&Tok::RParen)?;
            self.depth -= 1;
            return Ok(s);
        }
        self.expect_kw("select")?;
        self.eat_kw("all");
        let distinct = self.eat_kw("distinct");
        let mut items = Vec::new();
        loop {
            items.push(self.select_item()?);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        let from = if self.eat_kw("from") {
            Some(self.parse_from()?)
        } else {
            None
        };
        if self.is_kw("join")
            || self.is_kw("inner")
            || self.is_kw("left")
            || self.is_kw("right")
            || self.peek() == &Tok::Comma
        {
            return Err(ParseError::Analysis(
                "joins are not supported by the emulator".into(),
            ));
        }
        let where_ = if self.eat_kw("where") {
            Some(self.expr()?)
        } else {
            None
        };
        let mut group_by = Vec::new();
        if self.eat_kws(&["group", "by"]) {
            loop {
                group_by.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        let having = if self.eat_kw("having") {
            Some(self.expr()?)
        } else {
            None
        };
        let mut order_by = Vec::new();
        if self.eat_kws(&["order", "by"]) {
            loop {
                let expr = self.expr()?;
                let desc = if self.eat_kw("desc") {
                    true
                } else {
                    self.eat_kw("asc");
                    false
                };
                let mut nulls_first = !desc;
                if self.eat_kw("nulls") {
                    if self.eat_kw("first") {
                        nulls_first = true;
                    } else if self.eat_kw("last") {
                        nulls_first = false;
                    } else {
                        return Err(self.unexpected("FIRST or LAST"));
                    }
                }
                order_by.push(OrderItem {
                    expr,
                    desc,
                    nulls_first,
                });
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        let mut limit = None;
        let mut offset = None;
        if self.eat_kw("limit") {
            let a = self.uint()?;
            if self.eat(&Tok::Comma) {
                offset = Some(a);
                limit = Some(self.uint()?);
            } else {
                limit = Some(a);
                if self.eat_kw("offset") {
                    offset = Some(self.uint()?);
                }
            }
        }
        if self.is_kw("union") {
            return Err(ParseError::Analysis(
                "UNION is not supported by the emulator".into(),
            ));
        }
        Ok(Select {
            distinct,
            items,
            from,
            where_,
            group_by,
            having,
            order_by,
            limit,
            offset,
        })
    }

    fn select_item(&mut self) -> PResult<SelectItem> {
        if self.eat(&Tok::Star) {
            return Ok(SelectItem::Wildcard);
        }
        if matches!(self.peek(), Tok::Word(_) | Tok::Quoted(_))
            && self.peek_at(1) == &Tok::Dot
            && self.peek_at(2) == &Tok::Star
        {
            let q = self.ident()?;
            self.bump();
            self.bump();
            return Ok(SelectItem::QualifiedWildcard(q));
        }
        let start = self.cur_start();
        let expr = self.expr()?;
        let end = self.prev_end();
        let text = self.sql.get(start..end).unwrap_or("").to_string();
        let alias = if self.eat_kw("as") {
            match self.peek().clone() {
                Tok::Str(s) => {
                    self.bump();
                    Some(s)
                }
                _ => Some(self.ident()?),
            }
        } else {
            match self.peek().clone() {
                Tok::Word(w) if !is_reserved(&w) => {
                    self.bump();
                    Some(w)
                }
                Tok::Quoted(w) | Tok::Str(w) => {
                    self.bump();
                    Some(w)
                }
                _ => None,
            }
        };
        Ok(SelectItem::Expr { expr, alias, text })
    }

    fn parse_from(&mut self) -> PResult<FromClause> {
        if self.peek() == &Tok::LParen {
            return Err(ParseError::Analysis(
                "subqueries are not supported by the emulator".into(),
            ));
        }
        let table = self.obj_name()?;
        let mut fc = FromClause {
            table,
            incr: None,
            tablets: None,
            partitions: None,
            as_of: None,
            alias: None,
        };
        if self.peek() == &Tok::LParen {
            // table-valued function, e.g. frontends()
            self.skip_parens()?;
            fc.table.name = format!("{}()", fc.table.name.to_ascii_lowercase());
        }
        if self.eat(&Tok::At) {
            let kind = self.ident()?;
            if !kind.eq_ignore_ascii_case("incr") {
                return Err(ParseError::Analysis(format!(
                    "Unsupported table scan param type: {kind}"
                )));
            }
            self.expect(&Tok::LParen)?;
            let mut params = Vec::new();
            if !self.eat(&Tok::RParen) {
                loop {
                    let k = match self.peek().clone() {
                        Tok::Str(s) | Tok::Word(s) | Tok::Quoted(s) => {
                            self.bump();
                            s
                        }
                        _ => return Err(self.unexpected("parameter name")),
                    };
                    self.expect(&Tok::Eq)?;
                    let v = match self.peek().clone() {
                        Tok::Str(s) | Tok::Number(s) | Tok::Word(s) => {
                            self.bump();
                            s
                        }
                        _ => return Err(self.unexpected("parameter value")),
                    };
                    params.push((k, v));
                    if !self.eat(&Tok::Comma) {
                        break;
                    }
                }
                self.expect(&Tok::RParen)?;
            }
            fc.incr = Some(params);
        }
        loop {
            if self.is_kw("tablet") && self.peek_at(1) == &Tok::LParen {
                self.bump();
                self.bump();
                let mut ids = Vec::new();
                loop {
                    ids.push(self.int()?);
                    if !self.eat(&Tok::Comma) {
                        break;
                    }
                }
                self.expect(&Tok::RParen)?;
                fc.tablets = Some(ids);
            } else if (self.is_kw("partition") || self.is_kw("partitions"))
                && self.peek_at(1) == &Tok::LParen
            {
                self.bump();
                fc.partitions = Some(self.ident_list()?);
            } else if self.is_kw("for") {
                self.bump();
                if self.eat_kw("version") {
                    self.expect_kw("as")?;
                    self.expect_kw("of")?;
                    let v = self.int()?;
                    fc.as_of = Some(AsOf::Version(v));
                } else if self.eat_kw("time") {
                    self.expect_kw("as")?;
                    self.expect_kw("of")?;
                    let t = match self.peek().clone() {
                        Tok::Str(s) => {
                            self.bump();
                            s
                        }
                        Tok::Number(n) => {
                            self.bump();
                            n
                        }
                        _ => return Err(self.unexpected("timestamp")),
                    };
                    fc.as_of = Some(AsOf::Time(t));
                } else {
                    return Err(self.unexpected("VERSION or TIME"));
                }
            } else if fc.alias.is_none()
                && (self.eat_kw("as")
                    || matches!(self.peek(), Tok::Word(w) if !is_reserved(w))
                    || matches!(self.peek(), Tok::Quoted(_)))
            {
                fc.alias = Some(self.ident()?);
            } else {
                break;
            }
        }
        Ok(fc)
    }

    // ---------------------------------------------------------------- expressions

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::Analysis(
                "expression is nested too deeply".into(),
            ));
        }
        Ok(())
    }

    /// An expression.
    pub(crate) fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.or_expr();
        self.depth -= 1;
        r
    }

    fn or_expr(&mut self) -> PResult<Expr> {
        let mut l = self.and_expr()?;
        while self.eat_kw("or") || self.eat(&Tok::OrOr) {
            let r = self.and_expr()?;
            l = Expr::Binary(BinOp::Or, Box::new(l), Box::new(r));
        }
        Ok(l)
    }

    fn and_expr(&mut self) -> PResult<Expr> {
        let mut l = self.not_expr()?;
        while self.eat_kw("and") || self.eat(&Tok::AndAnd) {
            let r = self.not_expr()?;
            l = Expr::Binary(BinOp::And, Box::new(l), Box::new(r));
        }
        Ok(l)
    }

    fn not_expr(&mut self) -> PResult<Expr> {
        if self.eat_kw("not") {
            self.enter()?;
            let e = self.not_expr();
            self.depth -= 1;
            return Ok(Expr::Unary(UnOp::Not, Box::new(e?)));
        }
        self.predicate()
    }

    fn predicate(&mut self) -> PResult<Expr> {
        let l = self.additive()?;
        let op = match self.peek() {
            Tok::Eq => Some(BinOp::Eq),
            Tok::Ne => Some(BinOp::Ne),
            Tok::Lt => Some(BinOp::Lt),
            Tok::Le => Some(BinOp::Le),
            Tok::Gt => Some(BinOp::Gt),
            Tok::Ge => Some(BinOp::Ge),
            Tok::NullSafeEq => Some(BinOp::NullSafeEq),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            let r = self.additive()?;
            return Ok(Expr::Binary(op, Box::new(l), Box::new(r)));
        }
        if self.eat_kw("is") {
            let negated = self.eat_kw("not");
            if self.eat_kw("null") {
                return Ok(Expr::IsNull {
                    expr: Box::new(l),
                    negated,
                });
            }
            let b = if self.eat_kw("true") {
                true
            } else if self.eat_kw("false") {
                false
            } else {
                return Err(self.unexpected("NULL"));
            };
            let cmp = Expr::Binary(
                BinOp::NullSafeEq,
                Box::new(l),
                Box::new(Expr::Lit(Literal::Bool(b))),
            );
            return Ok(if negated {
                Expr::Unary(UnOp::Not, Box::new(cmp))
            } else {
                cmp
            });
        }
        let negated = if self.is_kw("not")
            && (self.is_kw_at(1, "in") || self.is_kw_at(1, "between") || self.is_kw_at(1, "like"))
        {
            self.bump();
            true
        } else {
            false
        };
        if self.eat_kw("in") {
            self.expect(&Tok::LParen)?;
            if self.is_kw("select") {
                return Err(ParseError::Analysis(
                    "subqueries are not supported by the emulator".into(),
                ));
            }
            let mut list = Vec::new();
            loop {
                list.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            self.expect(&Tok::RParen)?;
            return Ok(Expr::InList {
                expr: Box::new(l),
                list,
                negated,
            });
        }
        if self.eat_kw("between") {
            let lo = self.additive()?;
            self.expect_kw("and")?;
            let hi = self.additive()?;
            return Ok(Expr::Between {
                expr: Box::new(l),
                lo: Box::new(lo),
                hi: Box::new(hi),
                negated,
            });
        }
        if self.eat_kw("like") {
            let pattern = self.additive()?;
            return Ok(Expr::Like {
                expr: Box::new(l),
                pattern: Box::new(pattern),
                negated,
            });
        }
        if negated {
            return Err(self.unexpected("IN, BETWEEN or LIKE"));
        }
        Ok(l)
    }

    fn additive(&mut self) -> PResult<Expr> {
        let mut l = self.multiplicative()?;
        loop {
            let op = match self.peek() {
                Tok::Plus => BinOp::Add,
                Tok::Minus => BinOp::Sub,
                _ => break,
            };
            self.bump();
            let r = self.multiplicative()?;
            l = Expr::Binary(op, Box::new(l), Box::new(r));
        }
        Ok(l)
    }

    fn multiplicative(&mut self) -> PResult<Expr> {
        let mut l = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Star => BinOp::Mul,
                Tok::Slash => BinOp::Div,
                Tok::Percent => BinOp::Mod,
                Tok::Word(w) if w.eq_ignore_ascii_case("div") => BinOp::IntDiv,
                Tok::Word(w) if w.eq_ignore_ascii_case("mod") => BinOp::Mod,
                _ => break,
            };
            self.bump();
            let r = self.unary()?;
            l = Expr::Binary(op, Box::new(l), Box::new(r));
        }
        Ok(l)
    }

    fn unary(&mut self) -> PResult<Expr> {
        if self.eat(&Tok::Minus) {
            self.enter()?;
            let e = self.unary();
            self.depth -= 1;
            let e = e?;
            // fold negative numeric literals so `-5` stays a literal
            if let Expr::Lit(Literal::Number(n)) = &e {
                return Ok(Expr::Lit(Literal::Number(match n.strip_prefix('-') {
                    Some(pos) => pos.to_string(),
                    None => format!("-{n}"),
                })));
            }
            return Ok(Expr::Unary(UnOp::Neg, Box::new(e)));
        }
        if self.eat(&Tok::Plus) {
            self.enter()?;
            let e = self.unary();
            self.depth -= 1;
            return e;
        }
        if self.eat(&Tok::Bang) {
            self.enter()?;
            let e = self.unary();
            self.depth -= 1;
            return Ok(Expr::Unary(UnOp::Not, Box::new(e?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> PResult<Expr> {
        match self.peek().clone() {
            Tok::Number(n) => {
                self.bump();
                Ok(Expr::Lit(Literal::Number(n)))
            }
            Tok::Str(s) => {
                self.bump();
                // adjacent string literals concatenate
                let mut s = s;
                while let Tok::Str(more) = self.peek().clone() {
                    self.bump();
                    s.push_str(&more);
                }
                Ok(Expr::Lit(Literal::Str(s)))
            }
            Tok::LParen => {
                self.bump();
                if self.is_kw("select") {
                    return Err(ParseError::Analysis(
                        "subqueries are not supported by the emulator".into(),
                    ));
                }
                let e = self.expr()?;
                self.expect(&Tok::RParen)?;
                Ok(e)
            }
            Tok::AtAt => {
                self.bump();
                let first = self.ident()?;
                let name = if self.peek() == &Tok::Dot
                    && ["session", "global", "local"]
                        .iter()
                        .any(|s| first.eq_ignore_ascii_case(s))
                {
                    self.bump();
                    self.ident()?
                } else {
                    first
                };
                Ok(Expr::SysVar {
                    name: name.to_ascii_lowercase(),
                })
            }
            Tok::At => {
                self.bump();
                Ok(Expr::UserVar(self.ident()?.to_ascii_lowercase()))
            }
            Tok::Quoted(_) => self.column_ref(),
            Tok::Word(w) => {
                let lw = w.to_ascii_lowercase();
                match lw.as_str() {
                    "null" => {
                        self.bump();
                        return Ok(Expr::Lit(Literal::Null));
                    }
                    "true" => {
                        self.bump();
                        return Ok(Expr::Lit(Literal::Bool(true)));
                    }
                    "false" => {
                        self.bump();
                        return Ok(Expr::Lit(Literal::Bool(false)));
                    }
                    "case" => return self.case_expr(),
                    "cast" if self.peek_at(1) == &Tok::LParen => {
                        self.bump();
                        self.bump();
                        let e = self.expr()?;
                        self.expect_kw("as")?;
                        let ty = self.cast_type()?;
                        self.expect(&Tok::RParen)?;
                        return Ok(Expr::Cast(Box::new(e), ty));
                    }
                    "date" | "timestamp" | "datetime" if matches!(self.peek_at(1), Tok::Str(_)) => {
                        self.bump();
                        let Tok::Str(s) = self.bump() else {
                            return Err(self.unexpected("string"));
                        };
                        let ty = if lw == "date" {
                            DorisType::Date
                        } else {
                            DorisType::DateTime(6)
                        };
                        return Ok(Expr::Cast(Box::new(Expr::Lit(Literal::Str(s))), ty));
                    }
                    "current_timestamp" | "localtime" | "localtimestamp" | "current_date"
                    | "current_user" | "current_time" | "utc_timestamp"
                        if self.peek_at(1) != &Tok::LParen =>
                    {
                        self.bump();
                        return Ok(Expr::Func {
                            name: lw,
                            args: vec![],
                            star: false,
                            distinct: false,
                        });
                    }
                    "interval" => {
                        return Err(ParseError::Analysis(
                            "INTERVAL is not supported by the emulator".into(),
                        ));
                    }
                    _ => {}
                }
                if self.peek_at(1) == &Tok::LParen {
                    return self.func_call();
                }
                if is_reserved(&w) {
                    return Err(self.unexpected("expression"));
                }
                self.column_ref()
            }
            _ => Err(self.unexpected("expression")),
        }
    }

    fn cast_type(&mut self) -> PResult<DorisType> {
        // MySQL-style cast targets
        if self.is_kw("char") && self.peek_at(1) != &Tok::LParen {
            self.bump();
            return Ok(DorisType::String);
        }
        if self.eat_kw("signed") || self.eat_kw("unsigned") {
            self.eat_kw("integer");
            self.eat_kw("int");
            return Ok(DorisType::BigInt);
        }
        self.data_type()
    }

    fn column_ref(&mut self) -> PResult<Expr> {
        let mut parts = vec![self.ident()?];
        while self.peek() == &Tok::Dot
            && matches!(self.peek_at(1), Tok::Word(_) | Tok::Quoted(_))
            && parts.len() < 4
        {
            self.bump();
            parts.push(self.ident()?);
        }
        let name = parts.pop().unwrap_or_default();
        let qualifier = parts.pop();
        Ok(Expr::Column { qualifier, name })
    }

    fn func_call(&mut self) -> PResult<Expr> {
        let name = self.ident()?.to_ascii_lowercase();
        self.expect(&Tok::LParen)?;
        let mut args = Vec::new();
        let mut star = false;
        let distinct = self.eat_kw("distinct");
        if self.eat(&Tok::Star) {
            star = true;
        } else if self.peek() != &Tok::RParen {
            loop {
                args.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        self.expect(&Tok::RParen)?;
        if self.is_kw("over") {
            return Err(ParseError::Analysis(
                "window functions are not supported by the emulator".into(),
            ));
        }
        Ok(Expr::Func {
            name,
            args,
            star,
            distinct,
        })
    }

    fn case_expr(&mut self) -> PResult<Expr> {
        self.expect_kw("case")?;
        let operand = if self.is_kw("when") {
            None
        } else {
            Some(Box::new(self.expr()?))
        };
        let mut whens = Vec::new();
        while self.eat_kw("when") {
            let c = self.expr()?;
            self.expect_kw("then")?;
            let r = self.expr()?;
            whens.push((c, r));
        }
        if whens.is_empty() {
            return Err(self.unexpected("WHEN"));
        }
        let else_ = if self.eat_kw("else") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        self.expect_kw("end")?;
        Ok(Expr::Case {
            operand,
            whens,
            else_,
        })
    }
}

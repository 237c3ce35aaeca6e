//! Expression evaluation and the relational steps (filter, aggregate, project, order, limit) that
//! every row source shares: tables, `@incr` output and `information_schema`.

use std::cmp::Ordering;

use jiff::tz::TimeZone;

use super::Session;
use super::ast::*;
use super::time;
use crate::Doris;
use crate::error::{DorisError, Result};
use crate::types::{ColumnMeta, DorisType, ResultSet, Value, coerce, default_type_of};

const MICROS_PER_SEC: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SEC;

/// Whether a source column shows up in `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Always in `*`.
    Visible,
    /// In `*` only with `show_hidden_columns=true` (`__DORIS_DELETE_SIGN__`, ...).
    Hidden,
    /// Never in `*`; only when named (`__DORIS_BINLOG_OP__`, ...).
    NamedOnly,
}

/// A source column.
#[derive(Debug, Clone)]
pub struct RelColumn {
    /// Name, type, nullability.
    pub meta: ColumnMeta,
    /// Whether `*` includes it.
    pub visibility: Visibility,
}

impl RelColumn {
    /// A visible column.
    pub fn visible(name: &str, ty: DorisType, nullable: bool) -> Self {
        Self {
            meta: ColumnMeta {
                name: name.to_string(),
                ty,
                nullable,
            },
            visibility: Visibility::Visible,
        }
    }
}

/// Rows from one source, with the names (table, alias) its columns may be qualified with.
#[derive(Debug, Clone, Default)]
pub struct Relation {
    /// Columns.
    pub columns: Vec<RelColumn>,
    /// Rows, one value per column.
    pub rows: Vec<Vec<Value>>,
    /// Qualifiers accepted in `q.col`.
    pub qualifiers: Vec<String>,
}

/// Everything evaluation needs besides the row.
pub struct EvalCtx<'a> {
    /// The cluster.
    pub doris: &'a Doris,
    /// The session.
    pub session: &'a Session,
    /// Statement time, epoch ms (one value for the whole statement, as in Doris).
    pub now_ms: i64,
    /// Session time zone.
    pub tz: TimeZone,
}

impl EvalCtx<'_> {
    fn now_wall_us(&self) -> i64 {
        time::ms_to_wall_micros(&self.tz, self.now_ms)
    }
}

/// A row being evaluated, plus the group it stands for in aggregate mode.
pub struct RowRef<'a> {
    /// The source.
    pub rel: &'a Relation,
    /// The row's values (all NULL for an empty group).
    pub values: &'a [Value],
    /// Row indexes of the group, in aggregate mode.
    pub group: Option<&'a [usize]>,
}

/// Doris's message for an unknown column.
pub fn unknown_column(name: &str) -> DorisError {
    DorisError::analysis(format!("Unknown column '{name}' in 'table list'"))
}

/// Name the clause in an unknown-column error, as Nereids does (`... in 'table list' in FILTER clause`).
pub fn clause_error(e: DorisError, clause: &str) -> DorisError {
    if e.message.ends_with("in 'table list'") {
        DorisError::new(e.code, format!("{} in {clause} clause", e.message))
    } else {
        e
    }
}

/// [`clause_error`] over a result.
pub fn in_clause<T>(r: Result<T>, clause: &str) -> Result<T> {
    r.map_err(|e| clause_error(e, clause))
}

/// Find a column by (optional qualifier and) name, case-insensitively.
pub fn resolve(rel: &Relation, qualifier: Option<&str>, name: &str) -> Option<usize> {
    if let Some(q) = qualifier
        && !rel.qualifiers.iter().any(|x| x.eq_ignore_ascii_case(q))
    {
        return None;
    }
    rel.columns
        .iter()
        .position(|c| c.meta.name.eq_ignore_ascii_case(name))
}

// ------------------------------------------------------------------------------------------------
// numbers

#[derive(Debug, Clone, Copy)]
enum Num {
    /// unscaled, scale, was-largeint
    Exact(i128, u8, bool),
    F(f64),
}

fn to_num(v: &Value) -> Option<Num> {
    match v {
        Value::Bool(b) => Some(Num::Exact(*b as i128, 0, false)),
        Value::Int(i) => Some(Num::Exact(*i as i128, 0, false)),
        Value::LargeInt(i) => Some(Num::Exact(*i, 0, true)),
        Value::Decimal(u, s) => Some(Num::Exact(*u, *s, false)),
        Value::Float(f) => Some(Num::F(*f)),
        Value::Str(s) => parse_num_prefix(s).map(Num::F),
        Value::Date(d) => {
            // MySQL: a date in numeric context is yyyymmdd
            let us = *d as i64 * MICROS_PER_DAY;
            let t = Value::DateTime(us).to_text(&DorisType::Date)?;
            t.replace('-', "")
                .parse::<i128>()
                .ok()
                .map(|x| Num::Exact(x, 0, false))
        }
        _ => None,
    }
}

/// MySQL-style string → number: the longest numeric prefix, 0 when there is none.
fn parse_num_prefix(s: &str) -> Option<f64> {
    let t = s.trim();
    if let Ok(f) = t.parse::<f64>() {
        return Some(f);
    }
    let mut end = 0;
    for (i, c) in t.char_indices() {
        if c.is_ascii_digit() || c == '.' || ((c == '-' || c == '+') && i == 0) {
            end = i + c.len_utf8();
        } else {
            break;
        }
    }
    Some(t[..end].parse::<f64>().unwrap_or(0.0))
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

fn rescale(u: i128, from: u8, to: u8) -> Option<i128> {
    if to >= from {
        u.checked_mul(pow10((to - from) as u32)?)
    } else {
        Some(u / pow10((from - to) as u32)?)
    }
}

fn num_f64(n: Num) -> f64 {
    match n {
        Num::Exact(u, s, _) => u as f64 / 10f64.powi(s as i32),
        Num::F(f) => f,
    }
}

fn exact_value(u: i128, s: u8, large: bool) -> Value {
    if s == 0 {
        if !large && let Ok(i) = i64::try_from(u) {
            return Value::Int(i);
        }
        return Value::LargeInt(u);
    }
    Value::Decimal(u, s)
}

fn overflow() -> DorisError {
    DorisError::analysis("Arithmetic overflow")
}

/// `a op b` for + - * / % DIV.
pub fn arith(op: BinOp, a: &Value, b: &Value) -> Result<Value> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    let (Some(x), Some(y)) = (to_num(a), to_num(b)) else {
        return Err(DorisError::analysis(format!(
            "Can not apply arithmetic to {} and {}",
            default_type_of(a).display_name(),
            default_type_of(b).display_name()
        )));
    };
    match op {
        BinOp::Div => {
            let d = num_f64(y);
            if d == 0.0 {
                return Ok(Value::Null);
            }
            Ok(Value::Float(num_f64(x) / d))
        }
        BinOp::IntDiv => {
            let d = num_f64(y);
            if d == 0.0 {
                return Ok(Value::Null);
            }
            if let (Num::Exact(ua, sa, la), Num::Exact(ub, sb, lb)) = (x, y) {
                let s = sa.max(sb);
                let (ua, ub) = (
                    rescale(ua, sa, s).ok_or_else(overflow)?,
                    rescale(ub, sb, s).ok_or_else(overflow)?,
                );
                return Ok(exact_value(ua / ub, 0, la || lb));
            }
            Ok(Value::Int((num_f64(x) / d).trunc() as i64))
        }
        _ => match (x, y) {
            (Num::Exact(ua, sa, la), Num::Exact(ub, sb, lb)) => {
                let large = la || lb;
                match op {
                    BinOp::Mul => {
                        let u = ua.checked_mul(ub).ok_or_else(overflow)?;
                        Ok(exact_value(u, sa + sb, large))
                    }
                    _ => {
                        let s = sa.max(sb);
                        let ua = rescale(ua, sa, s).ok_or_else(overflow)?;
                        let ub = rescale(ub, sb, s).ok_or_else(overflow)?;
                        let u = match op {
                            BinOp::Add => ua.checked_add(ub),
                            BinOp::Sub => ua.checked_sub(ub),
                            BinOp::Mod => {
                                if ub == 0 {
                                    return Ok(Value::Null);
                                }
                                ua.checked_rem(ub)
                            }
                            _ => None,
                        }
                        .ok_or_else(overflow)?;
                        Ok(exact_value(u, s, large))
                    }
                }
            }
            (x, y) => {
                let (x, y) = (num_f64(x), num_f64(y));
                Ok(match op {
                    BinOp::Add => Value::Float(x + y),
                    BinOp::Sub => Value::Float(x - y),
                    BinOp::Mul => Value::Float(x * y),
                    BinOp::Mod => {
                        if y == 0.0 {
                            Value::Null
                        } else {
                            Value::Float(x % y)
                        }
                    }
                    _ => Value::Null,
                })
            }
        },
    }
}

/// SQL comparison with MySQL-ish implicit conversion (string vs number compares numerically,
/// string vs date parses the string). `None` when either side is NULL.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    if let Some(o) = a.sql_cmp(b) {
        return Some(o);
    }
    match (a, b) {
        (Value::Str(s), other) | (other, Value::Str(s)) if to_num(other).is_some() => {
            let sv = parse_num_prefix(s)?;
            let ov = num_f64(to_num(other)?);
            let o = sv.partial_cmp(&ov)?;
            Some(if matches!(a, Value::Str(_)) {
                o
            } else {
                o.reverse()
            })
        }
        (Value::Json(x), Value::Str(y)) | (Value::Str(x), Value::Json(y)) => {
            let o = x.cmp(y);
            Some(if matches!(a, Value::Json(_)) {
                o
            } else {
                o.reverse()
            })
        }
        _ => {
            let ta = a.to_text(&default_type_of(a))?;
            let tb = b.to_text(&default_type_of(b))?;
            Some(ta.cmp(&tb))
        }
    }
}

/// Ordering for ORDER BY: NULLs first (Doris's default for ASC).
pub fn order_cmp(a: &Value, b: &Value) -> Ordering {
    match (a.is_null(), b.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => compare(a, b).unwrap_or(Ordering::Equal),
    }
}

/// SQL truth value of a value (`None` = NULL/unknown).
pub fn truth(v: &Value) -> Option<bool> {
    match v {
        Value::Null => None,
        Value::Bool(b) => Some(*b),
        other => to_num(other).map(|n| num_f64(n) != 0.0).or(Some(true)),
    }
}

fn bool_val(b: Option<bool>) -> Value {
    b.map(Value::Bool).unwrap_or(Value::Null)
}

/// `LIKE` matching with `%`, `_` and `\` escapes.
pub fn like(s: &str, pattern: &str) -> bool {
    let s: Vec<char> = s.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    // iterative matcher with backtracking on the last '%'
    let (mut i, mut j) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if j < p.len() {
            match p[j] {
                '%' => {
                    star = Some((j, i));
                    j += 1;
                    continue;
                }
                '_' => {
                    i += 1;
                    j += 1;
                    continue;
                }
                '\\' if j + 1 < p.len() && p[j + 1] == s[i] => {
                    i += 1;
                    j += 2;
                    continue;
                }
                '\\' if j + 1 < p.len() => {}
                c if c == s[i] => {
                    i += 1;
                    j += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sj, si)) => {
                j = sj + 1;
                i = si + 1;
                star = Some((sj, si + 1));
            }
            None => return false,
        }
    }
    while j < p.len() && p[j] == '%' {
        j += 1;
    }
    j == p.len()
}

// ------------------------------------------------------------------------------------------------
// literals

/// The value of a literal.
pub fn literal_value(l: &Literal) -> Result<Value> {
    Ok(match l {
        Literal::Null => Value::Null,
        Literal::Bool(b) => Value::Bool(*b),
        Literal::Str(s) => Value::Str(s.clone()),
        Literal::Number(n) => parse_number_literal(n)
            .ok_or_else(|| DorisError::analysis(format!("Invalid number format: {n}")))?,
    })
}

fn parse_number_literal(n: &str) -> Option<Value> {
    if n.contains(['e', 'E']) {
        return n.parse::<f64>().ok().map(Value::Float);
    }
    if let Some((ip, fp)) = n.split_once('.') {
        let neg = ip.starts_with('-');
        let digits = format!("{}{}", ip.trim_start_matches('-'), fp);
        let digits = if digits.is_empty() {
            "0".to_string()
        } else {
            digits
        };
        let scale = fp.len();
        if scale > 38 {
            return n.parse::<f64>().ok().map(Value::Float);
        }
        return match digits.parse::<i128>() {
            Ok(u) => Some(Value::Decimal(if neg { -u } else { u }, scale as u8)),
            Err(_) => n.parse::<f64>().ok().map(Value::Float),
        };
    }
    if let Ok(i) = n.parse::<i64>() {
        return Some(Value::Int(i));
    }
    if let Ok(i) = n.parse::<i128>() {
        return Some(Value::LargeInt(i));
    }
    n.parse::<f64>().ok().map(Value::Float)
}

// ------------------------------------------------------------------------------------------------
// evaluation

/// True when the expression contains an aggregate function.
pub fn contains_agg(e: &Expr) -> bool {
    match e {
        Expr::Func { name, args, .. } => is_agg(name) || args.iter().any(contains_agg),
        Expr::Unary(_, x) | Expr::Cast(x, _) => contains_agg(x),
        Expr::Binary(_, a, b) => contains_agg(a) || contains_agg(b),
        Expr::IsNull { expr, .. } => contains_agg(expr),
        Expr::InList { expr, list, .. } => contains_agg(expr) || list.iter().any(contains_agg),
        Expr::Between { expr, lo, hi, .. } => {
            contains_agg(expr) || contains_agg(lo) || contains_agg(hi)
        }
        Expr::Like { expr, pattern, .. } => contains_agg(expr) || contains_agg(pattern),
        Expr::Case {
            operand,
            whens,
            else_,
        } => {
            operand.as_deref().is_some_and(contains_agg)
                || whens
                    .iter()
                    .any(|(a, b)| contains_agg(a) || contains_agg(b))
                || else_.as_deref().is_some_and(contains_agg)
        }
        _ => false,
    }
}

fn is_agg(name: &str) -> bool {
    matches!(name, "count" | "sum" | "min" | "max" | "avg" | "any_value")
}

/// Evaluate `e` for `row` (or with no row: constant context).
pub fn eval(ctx: &EvalCtx<'_>, e: &Expr, row: Option<&RowRef<'_>>) -> Result<Value> {
    match e {
        Expr::Lit(l) => literal_value(l),
        Expr::Column { qualifier, name } => {
            let Some(r) = row else {
                return Err(unknown_column(name));
            };
            let i =
                resolve(r.rel, qualifier.as_deref(), name).ok_or_else(|| unknown_column(name))?;
            Ok(r.values.get(i).cloned().unwrap_or(Value::Null))
        }
        Expr::SysVar { name } => Ok(sys_var_value(ctx.session, name)?),
        Expr::UserVar(name) => Ok(ctx
            .session
            .variables
            .get(&format!("@{name}"))
            .map(|s| Value::Str(s.clone()))
            .unwrap_or(Value::Null)),
        Expr::Unary(UnOp::Neg, x) => {
            let v = eval(ctx, x, row)?;
            arith(BinOp::Sub, &Value::Int(0), &v)
        }
        Expr::Unary(UnOp::Not, x) => {
            let v = eval(ctx, x, row)?;
            Ok(bool_val(truth(&v).map(|b| !b)))
        }
        Expr::Binary(op, a, b) => match op {
            BinOp::And => {
                let x = truth(&eval(ctx, a, row)?);
                if x == Some(false) {
                    return Ok(Value::Bool(false));
                }
                let y = truth(&eval(ctx, b, row)?);
                Ok(bool_val(match (x, y) {
                    (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                }))
            }
            BinOp::Or => {
                let x = truth(&eval(ctx, a, row)?);
                if x == Some(true) {
                    return Ok(Value::Bool(true));
                }
                let y = truth(&eval(ctx, b, row)?);
                Ok(bool_val(match (x, y) {
                    (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                }))
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::IntDiv => {
                let x = eval(ctx, a, row)?;
                let y = eval(ctx, b, row)?;
                arith(*op, &x, &y)
            }
            BinOp::NullSafeEq => {
                let x = eval(ctx, a, row)?;
                let y = eval(ctx, b, row)?;
                Ok(Value::Bool(match (x.is_null(), y.is_null()) {
                    (true, true) => true,
                    (false, false) => compare(&x, &y) == Some(Ordering::Equal),
                    _ => false,
                }))
            }
            cmp => {
                let x = eval(ctx, a, row)?;
                let y = eval(ctx, b, row)?;
                let o = compare(&x, &y);
                Ok(bool_val(o.map(|o| match cmp {
                    BinOp::Eq => o == Ordering::Equal,
                    BinOp::Ne => o != Ordering::Equal,
                    BinOp::Lt => o == Ordering::Less,
                    BinOp::Le => o != Ordering::Greater,
                    BinOp::Gt => o == Ordering::Greater,
                    _ => o != Ordering::Less,
                })))
            }
        },
        Expr::IsNull { expr, negated } => {
            let v = eval(ctx, expr, row)?;
            Ok(Value::Bool(v.is_null() != *negated))
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let v = eval(ctx, expr, row)?;
            if v.is_null() {
                return Ok(Value::Null);
            }
            let mut saw_null = false;
            for item in list {
                let c = eval(ctx, item, row)?;
                match compare(&v, &c) {
                    Some(Ordering::Equal) => return Ok(Value::Bool(!*negated)),
                    None => saw_null = true,
                    _ => {}
                }
            }
            Ok(if saw_null {
                Value::Null
            } else {
                Value::Bool(*negated)
            })
        }
        Expr::Between {
            expr,
            lo,
            hi,
            negated,
        } => {
            let v = eval(ctx, expr, row)?;
            let l = eval(ctx, lo, row)?;
            let h = eval(ctx, hi, row)?;
            let a = compare(&v, &l).map(|o| o != Ordering::Less);
            let b = compare(&v, &h).map(|o| o != Ordering::Greater);
            let r = match (a, b) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            Ok(bool_val(r.map(|x| x != *negated)))
        }
        Expr::Like {
            expr,
            pattern,
            negated,
        } => {
            let v = eval(ctx, expr, row)?;
            let p = eval(ctx, pattern, row)?;
            if v.is_null() || p.is_null() {
                return Ok(Value::Null);
            }
            let s = text_of(&v);
            let p = text_of(&p);
            Ok(Value::Bool(like(&s, &p) != *negated))
        }
        Expr::Cast(x, ty) => {
            let v = eval(ctx, x, row)?;
            Ok(cast_value(v, ty))
        }
        Expr::Case {
            operand,
            whens,
            else_,
        } => {
            let op = match operand {
                Some(o) => Some(eval(ctx, o, row)?),
                None => None,
            };
            for (c, r) in whens {
                let cv = eval(ctx, c, row)?;
                let hit = match &op {
                    Some(o) => compare(o, &cv) == Some(Ordering::Equal),
                    None => truth(&cv) == Some(true),
                };
                if hit {
                    return eval(ctx, r, row);
                }
            }
            match else_ {
                Some(e) => eval(ctx, e, row),
                None => Ok(Value::Null),
            }
        }
        Expr::Func {
            name,
            args,
            star,
            distinct,
        } => {
            if is_agg(name) {
                return eval_agg(ctx, name, args, *star, *distinct, row);
            }
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(ctx, a, row)?);
            }
            call_function(ctx, name, vals)
        }
    }
}

/// A value's text for string functions.
pub fn text_of(v: &Value) -> String {
    v.to_text(&default_type_of(v)).unwrap_or_default()
}

fn cast_value(v: Value, ty: &DorisType) -> Value {
    let v = match (&v, ty) {
        // a string cast to an integer takes its numeric prefix, as MySQL does
        (
            Value::Str(s),
            DorisType::TinyInt | DorisType::SmallInt | DorisType::Int | DorisType::BigInt,
        ) => match s.trim().parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => match parse_num_prefix(s) {
                Some(f) => Value::Float(f),
                None => return Value::Null,
            },
        },
        _ => v,
    };
    coerce(ty, v).unwrap_or(Value::Null)
}

fn eval_agg(
    ctx: &EvalCtx<'_>,
    name: &str,
    args: &[Expr],
    star: bool,
    distinct: bool,
    row: Option<&RowRef<'_>>,
) -> Result<Value> {
    let Some(r) = row else {
        // aggregate without FROM: over the one empty row
        if name == "count" {
            return Ok(Value::Int(if star { 1 } else { 0 }));
        }
        let v = match args.first() {
            Some(a) => eval(ctx, a, None)?,
            None => Value::Null,
        };
        return Ok(v);
    };
    let Some(group) = r.group else {
        return Err(DorisError::analysis(format!(
            "aggregate function {name}() is not allowed in this context"
        )));
    };
    if name == "count" && star {
        return Ok(Value::Int(group.len() as i64));
    }
    let Some(arg) = args.first() else {
        return Err(DorisError::analysis(format!("{name} requires an argument")));
    };
    let mut vals = Vec::with_capacity(group.len());
    for &i in group {
        let Some(values) = r.rel.rows.get(i) else {
            continue;
        };
        let rr = RowRef {
            rel: r.rel,
            values,
            group: None,
        };
        let v = eval(ctx, arg, Some(&rr))?;
        if !v.is_null() {
            vals.push(v);
        }
    }
    if distinct {
        let mut uniq: Vec<Value> = Vec::new();
        for v in vals {
            if !uniq.iter().any(|u| compare(u, &v) == Some(Ordering::Equal)) {
                uniq.push(v);
            }
        }
        vals = uniq;
    }
    match name {
        "count" => Ok(Value::Int(vals.len() as i64)),
        "any_value" => Ok(vals.into_iter().next().unwrap_or(Value::Null)),
        "min" | "max" => {
            let mut best: Option<Value> = None;
            for v in vals {
                best = Some(match best {
                    None => v,
                    Some(b) => {
                        let o = order_cmp(&v, &b);
                        if (name == "min" && o == Ordering::Less)
                            || (name == "max" && o == Ordering::Greater)
                        {
                            v
                        } else {
                            b
                        }
                    }
                });
            }
            Ok(best.unwrap_or(Value::Null))
        }
        "sum" | "avg" => {
            if vals.is_empty() {
                return Ok(Value::Null);
            }
            let n = vals.len();
            let mut acc = Value::Int(0);
            for v in &vals {
                acc = arith(BinOp::Add, &acc, v)?;
            }
            if name == "sum" {
                return Ok(acc);
            }
            match acc {
                Value::Decimal(u, s) => {
                    // Doris keeps decimals exact for AVG; widen the scale by 4 like MySQL
                    let us = rescale(u, s, s.saturating_add(4).min(38)).ok_or_else(overflow)?;
                    Ok(Value::Decimal(us / n as i128, s.saturating_add(4).min(38)))
                }
                other => Ok(Value::Float(
                    num_f64(to_num(&other).unwrap_or(Num::F(0.0))) / n as f64,
                )),
            }
        }
        _ => Ok(Value::Null),
    }
}

/// Session variable defaults, as `SHOW VARIABLES` and `@@name` report them.
pub const VARIABLE_DEFAULTS: &[(&str, &str)] = &[
    ("auto_increment_increment", "1"),
    ("auto_increment_offset", "1"),
    ("autocommit", "1"),
    (
        "change_visible_timeout_ms",
        super::DEFAULT_CHANGE_VISIBLE_TIMEOUT_MS_STR,
    ),
    ("character_set_client", "utf8mb4"),
    ("character_set_connection", "utf8mb4"),
    ("character_set_database", "utf8mb4"),
    ("character_set_results", "utf8mb4"),
    ("character_set_server", "utf8mb4"),
    ("collation_connection", "utf8mb4_0900_bin"),
    ("collation_database", "utf8mb4_0900_bin"),
    ("collation_server", "utf8mb4_0900_bin"),
    ("enable_unique_key_partial_update", "false"),
    ("exec_mem_limit", "2147483648"),
    ("init_connect", ""),
    ("insert_timeout", "14400"),
    ("interactive_timeout", "3600"),
    ("language", "/palo/share/english/"),
    ("license", "Apache License, Version 2.0"),
    ("lower_case_table_names", "0"),
    ("max_allowed_packet", "16777216"),
    ("net_buffer_length", "16384"),
    ("net_read_timeout", "60"),
    ("net_write_timeout", "60"),
    ("parallel_pipeline_task_num", "0"),
    ("performance_schema", "0"),
    ("query_cache_size", "1048576"),
    ("query_cache_type", "0"),
    ("query_timeout", "900"),
    ("show_hidden_columns", "false"),
    ("sql_auto_is_null", "0"),
    ("sql_mode", "ONLY_FULL_GROUP_BY"),
    ("sql_select_limit", "9223372036854775807"),
    ("system_time_zone", "UTC"),
    ("time_zone", time::DEFAULT_TIME_ZONE),
    ("transaction_isolation", "REPEATABLE-READ"),
    ("transaction_read_only", "0"),
    ("tx_isolation", "REPEATABLE-READ"),
    ("tx_read_only", "0"),
    ("version", super::MYSQL_VERSION),
    ("version_comment", super::VERSION_COMMENT),
    ("wait_timeout", "28800"),
];

/// Variables reported as numbers by `@@name`.
fn numeric_var(name: &str) -> bool {
    matches!(
        name,
        "auto_increment_increment"
            | "auto_increment_offset"
            | "autocommit"
            | "change_visible_timeout_ms"
            | "exec_mem_limit"
            | "insert_timeout"
            | "interactive_timeout"
            | "lower_case_table_names"
            | "max_allowed_packet"
            | "net_buffer_length"
            | "net_read_timeout"
            | "net_write_timeout"
            | "parallel_pipeline_task_num"
            | "performance_schema"
            | "query_cache_size"
            | "query_cache_type"
            | "query_timeout"
            | "sql_auto_is_null"
            | "sql_select_limit"
            | "transaction_read_only"
            | "tx_read_only"
            | "wait_timeout"
    )
}

/// The current value of a session variable (session value, else default), as text.
pub fn var_text(session: &Session, name: &str) -> Option<String> {
    let n = name.to_ascii_lowercase();
    if let Some(v) = session.variables.get(&n) {
        return Some(v.clone());
    }
    VARIABLE_DEFAULTS
        .iter()
        .find(|(k, _)| *k == n)
        .map(|(_, v)| v.to_string())
}

fn sys_var_value(session: &Session, name: &str) -> Result<Value> {
    if name == "socket" {
        return Ok(Value::Null);
    }
    match var_text(session, name) {
        Some(t) => {
            if numeric_var(name)
                && let Ok(i) = t.parse::<i64>()
            {
                return Ok(Value::Int(i));
            }
            if numeric_var(name) {
                match t.to_ascii_lowercase().as_str() {
                    "true" | "on" => return Ok(Value::Int(1)),
                    "false" | "off" => return Ok(Value::Int(0)),
                    _ => {}
                }
            }
            Ok(Value::Str(t))
        }
        None => Err(DorisError::analysis(format!(
            "Unknown system variable '{name}'"
        ))),
    }
}

fn arg_count(name: &str, vals: &[Value], min: usize, max: usize) -> Result<()> {
    if vals.len() < min || vals.len() > max {
        return Err(DorisError::analysis(format!(
            "Can not found function '{}' which has {} arity. Candidate functions are: [{}]",
            name,
            vals.len(),
            name
        )));
    }
    Ok(())
}

fn to_wall_us(v: &Value) -> Option<i64> {
    match v {
        Value::DateTime(us) => Some(*us),
        Value::Date(d) => Some(*d as i64 * MICROS_PER_DAY),
        Value::Str(s) => match Value::parse_text(&DorisType::DateTime(6), s) {
            Ok(Value::DateTime(us)) => Some(us),
            _ => None,
        },
        _ => None,
    }
}

fn trunc_precision(us: i64, p: u8) -> i64 {
    let unit = 10i64.pow(6u32.saturating_sub(p as u32).min(6));
    us - us.rem_euclid(unit)
}

fn call_function(ctx: &EvalCtx<'_>, name: &str, vals: Vec<Value>) -> Result<Value> {
    let v0 = || vals.first().cloned().unwrap_or(Value::Null);
    match name {
        "now" | "current_timestamp" | "localtime" | "localtimestamp" | "sysdate" => {
            arg_count(name, &vals, 0, 1)?;
            let p = precision_arg(&vals)?;
            Ok(Value::DateTime(trunc_precision(ctx.now_wall_us(), p)))
        }
        "utc_timestamp" => {
            arg_count(name, &vals, 0, 1)?;
            let p = precision_arg(&vals)?;
            Ok(Value::DateTime(trunc_precision(ctx.now_ms * 1000, p)))
        }
        "curdate" | "current_date" => {
            arg_count(name, &vals, 0, 0)?;
            Ok(Value::Date(
                ctx.now_wall_us().div_euclid(MICROS_PER_DAY) as i32
            ))
        }
        "unix_timestamp" => {
            arg_count(name, &vals, 0, 1)?;
            if vals.is_empty() {
                return Ok(Value::Int(ctx.now_ms.div_euclid(1000)));
            }
            let Some(us) = to_wall_us(&vals[0]) else {
                return Ok(Value::Null);
            };
            let ms = time::wall_micros_to_ms(&ctx.tz, us).unwrap_or(0);
            Ok(Value::Int(ms.div_euclid(1000)))
        }
        "from_unixtime" => {
            arg_count(name, &vals, 1, 2)?;
            let secs = match to_num(&vals[0]) {
                None => return Ok(Value::Null),
                Some(Num::Exact(u, s, _)) => {
                    let d = pow10(s as u32).unwrap_or(1);
                    let q = u.div_euclid(d);
                    i64::try_from(q).unwrap_or(i64::MAX)
                }
                Some(Num::F(f)) if f.is_finite() => f.floor() as i64,
                Some(Num::F(_)) => return Ok(Value::Null),
            };
            // Doris: out of [0, 32536771199] → NULL
            if !(0..=32_536_771_199).contains(&secs) {
                return Ok(Value::Null);
            }
            let wall = time::ms_to_wall_micros(&ctx.tz, secs * 1000);
            let fmt = match vals.get(1) {
                None => "%Y-%m-%d %H:%i:%s".to_string(),
                Some(Value::Null) => return Ok(Value::Null),
                Some(f) => text_of(f),
            };
            Ok(time::mysql_format(wall, &fmt)
                .map(Value::Str)
                .unwrap_or(Value::Null))
        }
        "date_format" => {
            arg_count(name, &vals, 2, 2)?;
            let Some(us) = to_wall_us(&vals[0]) else {
                return Ok(Value::Null);
            };
            if vals[1].is_null() {
                return Ok(Value::Null);
            }
            Ok(time::mysql_format(us, &text_of(&vals[1]))
                .map(Value::Str)
                .unwrap_or(Value::Null))
        }
        "database" | "schema" => {
            arg_count(name, &vals, 0, 0)?;
            Ok(ctx
                .session
                .current_db
                .clone()
                .map(Value::Str)
                .unwrap_or(Value::Null))
        }
        "user" | "session_user" | "system_user" => {
            arg_count(name, &vals, 0, 0)?;
            Ok(Value::Str(format!(
                "'{}'@'{}'",
                ctx.session.user, ctx.doris.config.host
            )))
        }
        "current_user" => {
            arg_count(name, &vals, 0, 0)?;
            Ok(Value::Str(format!("'{}'@'%'", ctx.session.user)))
        }
        "version" => {
            arg_count(name, &vals, 0, 0)?;
            Ok(Value::Str(super::MYSQL_VERSION.to_string()))
        }
        "connection_id" => {
            arg_count(name, &vals, 0, 0)?;
            Ok(Value::Int(ctx.session.connection_id as i64))
        }
        "last_insert_id" => Ok(Value::Int(0)),
        "concat" => {
            if vals.iter().any(Value::is_null) {
                return Ok(Value::Null);
            }
            Ok(Value::Str(vals.iter().map(text_of).collect()))
        }
        "concat_ws" => {
            arg_count(name, &vals, 1, usize::MAX)?;
            if vals[0].is_null() {
                return Ok(Value::Null);
            }
            let sep = text_of(&vals[0]);
            let parts: Vec<String> = vals[1..]
                .iter()
                .filter(|v| !v.is_null())
                .map(text_of)
                .collect();
            Ok(Value::Str(parts.join(&sep)))
        }
        "upper" | "ucase" | "lower" | "lcase" | "length" | "char_length" | "character_length"
        | "trim" | "ltrim" | "rtrim" => {
            arg_count(name, &vals, 1, 1)?;
            let v = v0();
            if v.is_null() {
                return Ok(Value::Null);
            }
            let s = text_of(&v);
            Ok(match name {
                "upper" | "ucase" => Value::Str(s.to_uppercase()),
                "lower" | "lcase" => Value::Str(s.to_lowercase()),
                "length" => Value::Int(s.len() as i64),
                "trim" => Value::Str(s.trim().to_string()),
                "ltrim" => Value::Str(s.trim_start().to_string()),
                "rtrim" => Value::Str(s.trim_end().to_string()),
                _ => Value::Int(s.chars().count() as i64),
            })
        }
        "substring" | "substr" => {
            arg_count(name, &vals, 2, 3)?;
            if vals.iter().any(Value::is_null) {
                return Ok(Value::Null);
            }
            let chars: Vec<char> = text_of(&vals[0]).chars().collect();
            let pos = to_num(&vals[1]).map(num_f64).unwrap_or(0.0) as i64;
            let n = chars.len() as i64;
            let start = if pos > 0 {
                pos - 1
            } else if pos < 0 {
                n + pos
            } else {
                return Ok(Value::Str(String::new()));
            };
            if start < 0 || start >= n {
                return Ok(Value::Str(String::new()));
            }
            let len = match vals.get(2) {
                Some(l) => (to_num(l).map(num_f64).unwrap_or(0.0) as i64).max(0),
                None => n,
            };
            let end = (start + len).min(n);
            Ok(Value::Str(
                chars[start as usize..end as usize].iter().collect(),
            ))
        }
        "coalesce" => Ok(vals
            .into_iter()
            .find(|v| !v.is_null())
            .unwrap_or(Value::Null)),
        "ifnull" | "nvl" => {
            arg_count(name, &vals, 2, 2)?;
            Ok(if vals[0].is_null() {
                vals[1].clone()
            } else {
                vals[0].clone()
            })
        }
        "nullif" => {
            arg_count(name, &vals, 2, 2)?;
            Ok(if compare(&vals[0], &vals[1]) == Some(Ordering::Equal) {
                Value::Null
            } else {
                vals[0].clone()
            })
        }
        "if" => {
            arg_count(name, &vals, 3, 3)?;
            Ok(if truth(&vals[0]) == Some(true) {
                vals[1].clone()
            } else {
                vals[2].clone()
            })
        }
        "abs" => {
            arg_count(name, &vals, 1, 1)?;
            let v = v0();
            match compare(&v, &Value::Int(0)) {
                Some(Ordering::Less) => arith(BinOp::Sub, &Value::Int(0), &v),
                _ => Ok(v),
            }
        }
        "floor" | "ceil" | "ceiling" | "round" | "truncate" => {
            arg_count(name, &vals, 1, 2)?;
            let v = v0();
            let Some(n) = to_num(&v) else {
                return Ok(Value::Null);
            };
            let d = match vals.get(1) {
                Some(x) => to_num(x).map(num_f64).unwrap_or(0.0) as i32,
                None => 0,
            };
            let f = num_f64(n) * 10f64.powi(d);
            let r = match name {
                "floor" => f.floor(),
                "ceil" | "ceiling" => f.ceil(),
                "truncate" => f.trunc(),
                _ => f.round(),
            } / 10f64.powi(d);
            if d <= 0 && r.abs() < 9.2e18 {
                Ok(Value::Int(r as i64))
            } else {
                Ok(Value::Float(r))
            }
        }
        "__default" => Err(DorisError::analysis(
            "DEFAULT is only allowed in INSERT VALUES",
        )),
        other => Err(DorisError::analysis(format!(
            "Can not found function '{other}'"
        ))),
    }
}

fn precision_arg(vals: &[Value]) -> Result<u8> {
    match vals.first() {
        None => Ok(0),
        Some(Value::Int(p)) if (0..=6).contains(p) => Ok(*p as u8),
        Some(other) => Err(DorisError::analysis(format!(
            "The precision of the datetime must be between 0 and 6, but got {}",
            text_of(other)
        ))),
    }
}

/// The static result type of an expression, when it can be told without evaluating.
pub fn infer_type(e: &Expr, rel: Option<&Relation>) -> Option<(DorisType, bool)> {
    match e {
        Expr::Column { qualifier, name } => {
            let r = rel?;
            let i = resolve(r, qualifier.as_deref(), name)?;
            let m = &r.columns[i].meta;
            Some((m.ty, m.nullable))
        }
        Expr::Lit(Literal::Str(s)) => Some((DorisType::Varchar(s.len().max(1) as u32), false)),
        Expr::Lit(Literal::Bool(_)) => Some((DorisType::Boolean, false)),
        Expr::Cast(_, ty) => Some((*ty, true)),
        Expr::IsNull { .. } => Some((DorisType::Boolean, false)),
        Expr::InList { .. } | Expr::Between { .. } | Expr::Like { .. } => {
            Some((DorisType::Boolean, true))
        }
        Expr::Binary(op, a, b) => match op {
            BinOp::And
            | BinOp::Or
            | BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge => Some((DorisType::Boolean, true)),
            BinOp::NullSafeEq => Some((DorisType::Boolean, false)),
            BinOp::Div => Some((DorisType::Double, true)),
            _ => {
                let (ta, na) = infer_type(a, rel)?;
                let (tb, nb) = infer_type(b, rel)?;
                let t = match (ta, tb) {
                    (DorisType::Double | DorisType::Float, _)
                    | (_, DorisType::Double | DorisType::Float) => DorisType::Double,
                    (
                        DorisType::Decimal { scale: sa, .. },
                        DorisType::Decimal { scale: sb, .. },
                    ) => DorisType::Decimal {
                        precision: 38,
                        scale: if *op == BinOp::Mul {
                            (sa + sb).min(38)
                        } else {
                            sa.max(sb)
                        },
                    },
                    (DorisType::Decimal { scale, .. }, _)
                    | (_, DorisType::Decimal { scale, .. }) => DorisType::Decimal {
                        precision: 38,
                        scale,
                    },
                    (DorisType::LargeInt, _) | (_, DorisType::LargeInt) => DorisType::LargeInt,
                    (
                        DorisType::Boolean
                        | DorisType::TinyInt
                        | DorisType::SmallInt
                        | DorisType::Int
                        | DorisType::BigInt,
                        DorisType::Boolean
                        | DorisType::TinyInt
                        | DorisType::SmallInt
                        | DorisType::Int
                        | DorisType::BigInt,
                    ) => DorisType::BigInt,
                    _ => DorisType::Double,
                };
                Some((t, na || nb || matches!(op, BinOp::Mod | BinOp::IntDiv)))
            }
        },
        Expr::Func { name, args, .. } => match name.as_str() {
            "count" => Some((DorisType::BigInt, false)),
            "now" | "current_timestamp" | "localtime" | "localtimestamp" | "sysdate"
            | "utc_timestamp" => {
                let p = match args.first() {
                    Some(Expr::Lit(Literal::Number(n))) => {
                        n.parse::<u8>().ok().filter(|p| *p <= 6).unwrap_or(0)
                    }
                    _ => 0,
                };
                Some((DorisType::DateTime(p), false))
            }
            "curdate" | "current_date" => Some((DorisType::Date, false)),
            "unix_timestamp" | "connection_id" | "last_insert_id" | "length" | "char_length"
            | "character_length" => Some((DorisType::BigInt, true)),
            "from_unixtime" | "date_format" | "concat" | "concat_ws" | "upper" | "ucase"
            | "lower" | "lcase" | "substring" | "substr" | "trim" | "ltrim" | "rtrim" => {
                Some((DorisType::Varchar(65533), true))
            }
            "database" | "schema" | "user" | "session_user" | "system_user" | "current_user"
            | "version" => Some((DorisType::Varchar(64), true)),
            "min" | "max" | "any_value" => {
                let (t, _) = infer_type(args.first()?, rel)?;
                Some((t, true))
            }
            "sum" => {
                let (t, _) = infer_type(args.first()?, rel)?;
                Some((
                    match t {
                        DorisType::Decimal { scale, .. } => DorisType::Decimal {
                            precision: 38,
                            scale,
                        },
                        DorisType::Float | DorisType::Double => DorisType::Double,
                        DorisType::LargeInt => DorisType::LargeInt,
                        _ => DorisType::BigInt,
                    },
                    true,
                ))
            }
            "avg" => {
                let (t, _) = infer_type(args.first()?, rel)?;
                Some((
                    match t {
                        DorisType::Decimal { scale, .. } => DorisType::Decimal {
                            precision: 38,
                            scale: (scale + 4).min(38),
                        },
                        _ => DorisType::Double,
                    },
                    true,
                ))
            }
            _ => None,
        },
        _ => None,
    }
}

// ------------------------------------------------------------------------------------------------
// the relational pipeline

/// Keep the rows for which `pred` is true.
pub fn filter(ctx: &EvalCtx<'_>, rel: &mut Relation, pred: &Expr) -> Result<()> {
    if contains_agg(pred) {
        return Err(DorisError::analysis(
            "LOGICAL_FILTER can not contains AggregateFunction expression",
        ));
    }
    let rows = std::mem::take(&mut rel.rows);
    let mut keep = Vec::with_capacity(rows.len());
    for r in rows {
        let rr = RowRef {
            rel,
            values: &r,
            group: None,
        };
        if truth(&in_clause(eval(ctx, pred, Some(&rr)), "FILTER")?) == Some(true) {
            keep.push(r);
        }
    }
    rel.rows = keep;
    Ok(())
}

struct OutCol {
    meta: Option<ColumnMeta>,
    name: String,
    kind: OutKind,
}

enum OutKind {
    Source(usize),
    Expr(Expr),
}

/// Run projection, aggregation, ORDER BY and LIMIT over an already filtered relation.
pub fn project(ctx: &EvalCtx<'_>, rel: &Relation, sel: &Select) -> Result<ResultSet> {
    let show_hidden = var_text(ctx.session, "show_hidden_columns")
        .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    // expand the select list
    let mut outs: Vec<OutCol> = Vec::new();
    for item in &sel.items {
        match item {
            SelectItem::Wildcard | SelectItem::QualifiedWildcard(_) => {
                if let SelectItem::QualifiedWildcard(q) = item
                    && !rel.qualifiers.iter().any(|x| x.eq_ignore_ascii_case(q))
                {
                    return Err(DorisError::analysis(format!("unknown qualifier: {q}")));
                }
                if sel.from.is_none() {
                    return Err(DorisError::analysis("SELECT * must have a FROM clause"));
                }
                for (i, c) in rel.columns.iter().enumerate() {
                    let include = match c.visibility {
                        Visibility::Visible => true,
                        Visibility::Hidden => show_hidden,
                        Visibility::NamedOnly => false,
                    };
                    if include {
                        outs.push(OutCol {
                            meta: Some(c.meta.clone()),
                            name: c.meta.name.clone(),
                            kind: OutKind::Source(i),
                        });
                    }
                }
            }
            SelectItem::Expr { expr, alias, text } => {
                if let Expr::Column { qualifier, name } = expr
                    && sel.from.is_some()
                {
                    {
                        let i = resolve(rel, qualifier.as_deref(), name)
                            .ok_or_else(|| unknown_column(name))
                            .map_err(|e| clause_error(e, "PROJECT"))?;
                        let mut meta = rel.columns[i].meta.clone();
                        if let Some(a) = alias {
                            meta.name = a.clone();
                        }
                        outs.push(OutCol {
                            name: meta.name.clone(),
                            meta: Some(meta),
                            kind: OutKind::Source(i),
                        });
                        continue;
                    }
                }
                let name = alias.clone().unwrap_or_else(|| text.clone());
                let meta = infer_type(expr, Some(rel)).map(|(ty, nullable)| ColumnMeta {
                    name: name.clone(),
                    ty,
                    nullable,
                });
                outs.push(OutCol {
                    meta,
                    name,
                    kind: OutKind::Expr(expr.clone()),
                });
            }
        }
    }
    let aggregate = !sel.group_by.is_empty()
        || sel.having.is_some()
        || sel
            .items
            .iter()
            .any(|i| matches!(i, SelectItem::Expr { expr, .. } if contains_agg(expr)));

    // units of output: (representative row values, group)
    let null_row: Vec<Value> = vec![Value::Null; rel.columns.len()];
    let groups: Vec<(Vec<Value>, Option<Vec<usize>>)> = if aggregate {
        if sel.group_by.is_empty() {
            let idx: Vec<usize> = (0..rel.rows.len()).collect();
            let rep = rel
                .rows
                .first()
                .cloned()
                .unwrap_or_else(|| null_row.clone());
            vec![(rep, Some(idx))]
        } else {
            let mut keys: Vec<Vec<Value>> = Vec::new();
            let mut members: Vec<Vec<usize>> = Vec::new();
            for (i, r) in rel.rows.iter().enumerate() {
                let rr = RowRef {
                    rel,
                    values: r,
                    group: None,
                };
                let mut k = Vec::with_capacity(sel.group_by.len());
                for g in &sel.group_by {
                    k.push(in_clause(eval(ctx, g, Some(&rr)), "AGGREGATE")?);
                }
                match keys.iter().position(|x| {
                    x.iter().zip(&k).all(|(a, b)| {
                        (a.is_null() && b.is_null()) || compare(a, b) == Some(Ordering::Equal)
                    })
                }) {
                    Some(p) => members[p].push(i),
                    None => {
                        keys.push(k);
                        members.push(vec![i]);
                    }
                }
            }
            members
                .into_iter()
                .map(|m| (rel.rows[m[0]].clone(), Some(m)))
                .collect()
        }
    } else {
        rel.rows.iter().map(|r| (r.clone(), None)).collect()
    };

    // evaluate outputs and sort keys
    let mut produced: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(groups.len());
    for (rep, group) in &groups {
        let rr = RowRef {
            rel,
            values: rep,
            group: group.as_deref(),
        };
        let row_opt = if sel.from.is_some() || aggregate {
            Some(&rr)
        } else {
            None
        };
        if let Some(h) = &sel.having
            && truth(&in_clause(eval(ctx, h, row_opt), "HAVING")?) != Some(true)
        {
            continue;
        }
        let mut out = Vec::with_capacity(outs.len());
        for o in &outs {
            out.push(match &o.kind {
                OutKind::Source(i) => rep.get(*i).cloned().unwrap_or(Value::Null),
                OutKind::Expr(e) => in_clause(eval(ctx, e, row_opt), "PROJECT")?,
            });
        }
        let mut keys = Vec::with_capacity(sel.order_by.len());
        for ob in &sel.order_by {
            keys.push(in_clause(
                sort_key(ctx, &ob.expr, &outs, &out, row_opt),
                "SORT",
            )?);
        }
        produced.push((out, keys));
    }
    if sel.distinct {
        let mut uniq: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(produced.len());
        for p in produced {
            let dup = uniq.iter().any(|u| {
                u.0.iter().zip(&p.0).all(|(a, b)| {
                    (a.is_null() && b.is_null()) || compare(a, b) == Some(Ordering::Equal)
                })
            });
            if !dup {
                uniq.push(p);
            }
        }
        produced = uniq;
    }
    if !sel.order_by.is_empty() {
        let spec: Vec<(bool, bool)> = sel
            .order_by
            .iter()
            .map(|o| (o.desc, o.nulls_first))
            .collect();
        produced.sort_by(|a, b| {
            for (i, (desc, nulls_first)) in spec.iter().enumerate() {
                let (x, y) = (&a.1[i], &b.1[i]);
                let o = match (x.is_null(), y.is_null()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => {
                        if *nulls_first {
                            Ordering::Less
                        } else {
                            Ordering::Greater
                        }
                    }
                    (false, true) => {
                        if *nulls_first {
                            Ordering::Greater
                        } else {
                            Ordering::Less
                        }
                    }
                    _ => {
                        let o = order_cmp(x, y);
                        if *desc { o.reverse() } else { o }
                    }
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        });
    }
    let offset = sel.offset.unwrap_or(0) as usize;
    let limit = sel.limit.map(|l| l as usize).unwrap_or(usize::MAX);
    let rows: Vec<Vec<Value>> = produced
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|p| p.0)
        .collect();

    // column metadata: static where known, else from the values
    let columns = outs
        .iter()
        .enumerate()
        .map(|(i, o)| match &o.meta {
            Some(m) => m.clone(),
            None => {
                let first = rows.iter().map(|r| &r[i]).find(|v| !v.is_null());
                let ty = match first {
                    Some(Value::Str(_)) | None => DorisType::Varchar(65533),
                    Some(v) => default_type_of(v),
                };
                ColumnMeta {
                    name: o.name.clone(),
                    ty,
                    nullable: true,
                }
            }
        })
        .collect();
    Ok(ResultSet { columns, rows })
}

fn sort_key(
    ctx: &EvalCtx<'_>,
    e: &Expr,
    outs: &[OutCol],
    out: &[Value],
    row: Option<&RowRef<'_>>,
) -> Result<Value> {
    match e {
        Expr::Lit(Literal::Number(n)) => {
            if let Ok(k) = n.parse::<usize>()
                && k >= 1
                && k <= out.len()
            {
                return Ok(out[k - 1].clone());
            }
            Err(DorisError::analysis(format!(
                "ORDER BY position {n} is not in select list"
            )))
        }
        Expr::Column {
            qualifier: None,
            name,
        } => {
            if let Some(i) = outs.iter().position(|o| o.name.eq_ignore_ascii_case(name)) {
                return Ok(out[i].clone());
            }
            eval(ctx, e, row)
        }
        _ => eval(ctx, e, row),
    }
}

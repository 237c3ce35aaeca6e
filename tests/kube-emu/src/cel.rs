//! A small CEL evaluator for CRD `x-kubernetes-validations` rules: literals, field access,
//! `has()`, boolean and comparison operators, arithmetic, `in`, the ternary, `size()`,
//! `duration()`, string `matches`/`startsWith`/`endsWith`/`contains`, and the `all`/`exists`
//! macros. Rules using anything else (or `oldSelf`) are skipped, not guessed at.

use std::cmp::Ordering;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    Num(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
}

const OPS: &[&str] = &[
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "(", ")", "[", "]", ".", ",", "?", ":", "+",
    "-", "*", "/", "%",
];

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let b = src.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            let t = &src[start..i];
            out.push(if t.contains('.') {
                Tok::Num(t.parse().map_err(|_| format!("bad number {t}"))?)
            } else {
                Tok::Int(t.parse().map_err(|_| format!("bad number {t}"))?)
            });
            if i < b.len() && b[i] == b'u' {
                i += 1;
            }
        } else if c == '\'' || c == '"' {
            let quote = b[i];
            i += 1;
            let mut s = String::new();
            while i < b.len() && b[i] != quote {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                    s.push(match b[i] {
                        b'n' => '\n',
                        b't' => '\t',
                        other => other as char,
                    });
                } else {
                    let ch = src[i..].chars().next().ok_or("bad string")?;
                    s.push(ch);
                    i += ch.len_utf8() - 1;
                }
                i += 1;
            }
            if i >= b.len() {
                return Err("unterminated string".into());
            }
            i += 1;
            out.push(Tok::Str(s));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && ((b[i] as char).is_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(src[start..i].to_string()));
        } else if let Some(op) = OPS.iter().find(|op| src[i..].starts_with(**op)) {
            out.push(Tok::Op(op));
            i += op.len();
        } else {
            return Err(format!("unexpected character {c:?}"));
        }
    }
    Ok(out)
}

#[derive(Debug, Clone)]
enum Expr {
    Lit(Val),
    Ident(String),
    Member(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Call(Option<Box<Expr>>, String, Vec<Expr>),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
}

/// A CEL value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// null
    Null,
    /// bool
    Bool(bool),
    /// int
    Int(i64),
    /// double
    Num(f64),
    /// string
    Str(String),
    /// list
    List(Vec<Val>),
    /// map / object
    Map(serde_json::Map<String, Value>),
    /// duration in nanoseconds
    Duration(i128),
}

fn from_json(v: &Value) -> Val {
    match v {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => n
            .as_i64()
            .map(Val::Int)
            .unwrap_or_else(|| Val::Num(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => Val::Str(s.clone()),
        Value::Array(a) => Val::List(a.iter().map(from_json).collect()),
        Value::Object(m) => Val::Map(m.clone()),
    }
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("expected {op}"))
        }
    }
    fn expr(&mut self) -> Result<Expr, String> {
        let c = self.or()?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            return Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
        }
        Ok(c)
    }
    fn or(&mut self) -> Result<Expr, String> {
        let mut l = self.and()?;
        while self.eat("||") {
            l = Expr::Binary("||", Box::new(l), Box::new(self.and()?));
        }
        Ok(l)
    }
    fn and(&mut self) -> Result<Expr, String> {
        let mut l = self.rel()?;
        while self.eat("&&") {
            l = Expr::Binary("&&", Box::new(l), Box::new(self.rel()?));
        }
        Ok(l)
    }
    fn rel(&mut self) -> Result<Expr, String> {
        let mut l = self.add()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Op(o)) if ["==", "!=", "<", "<=", ">", ">="].contains(o) => *o,
                Some(Tok::Ident(i)) if i == "in" => "in",
                _ => return Ok(l),
            };
            self.pos += 1;
            l = Expr::Binary(op, Box::new(l), Box::new(self.add()?));
        }
    }
    fn add(&mut self) -> Result<Expr, String> {
        let mut l = self.mul()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Op(o)) if ["+", "-"].contains(o) => *o,
                _ => return Ok(l),
            };
            self.pos += 1;
            l = Expr::Binary(op, Box::new(l), Box::new(self.mul()?));
        }
    }
    fn mul(&mut self) -> Result<Expr, String> {
        let mut l = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Op(o)) if ["*", "/", "%"].contains(o) => *o,
                _ => return Ok(l),
            };
            self.pos += 1;
            l = Expr::Binary(op, Box::new(l), Box::new(self.unary()?));
        }
    }
    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            return Ok(Expr::Unary("!", Box::new(self.unary()?)));
        }
        if self.eat("-") {
            return Ok(Expr::Unary("-", Box::new(self.unary()?)));
        }
        self.postfix()
    }
    fn args(&mut self) -> Result<Vec<Expr>, String> {
        let mut args = Vec::new();
        if !self.eat(")") {
            loop {
                args.push(self.expr()?);
                if self.eat(")") {
                    break;
                }
                self.expect(",")?;
            }
        }
        Ok(args)
    }
    fn postfix(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let Some(Tok::Ident(name)) = self.peek().cloned() else {
                    return Err("expected field name".into());
                };
                self.pos += 1;
                if self.eat("(") {
                    e = Expr::Call(Some(Box::new(e)), name, self.args()?);
                } else {
                    e = Expr::Member(Box::new(e), name);
                }
            } else if self.eat("[") {
                let idx = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(idx));
            } else {
                return Ok(e);
            }
        }
    }
    fn primary(&mut self) -> Result<Expr, String> {
        let t = self.peek().cloned().ok_or("unexpected end")?;
        self.pos += 1;
        Ok(match t {
            Tok::Int(i) => Expr::Lit(Val::Int(i)),
            Tok::Num(n) => Expr::Lit(Val::Num(n)),
            Tok::Str(s) => Expr::Lit(Val::Str(s)),
            Tok::Ident(i) if i == "true" => Expr::Lit(Val::Bool(true)),
            Tok::Ident(i) if i == "false" => Expr::Lit(Val::Bool(false)),
            Tok::Ident(i) if i == "null" => Expr::Lit(Val::Null),
            Tok::Ident(i) => {
                if self.eat("(") {
                    Expr::Call(None, i, self.args()?)
                } else {
                    Expr::Ident(i)
                }
            }
            Tok::Op("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                e
            }
            Tok::Op("[") => {
                let mut items = Vec::new();
                if !self.eat("]") {
                    loop {
                        items.push(self.expr()?);
                        if self.eat("]") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Expr::List(items)
            }
            other => return Err(format!("unexpected {other:?}")),
        })
    }
}

/// Parses a Go-style duration (`1h30m`, `500ms`, `1.5s`) into nanoseconds.
pub fn parse_duration(s: &str) -> Option<i128> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let value: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_len] {
            "h" => 3.6e12,
            "m" => 6e10,
            "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" => 1e3,
            "ns" => 1.0,
            _ => return None,
        };
        total += value * mult;
        rest = &rest[unit_len..];
    }
    Some(if neg { -(total as i128) } else { total as i128 })
}

struct Env<'a> {
    vars: Vec<(String, Val)>,
    _p: std::marker::PhantomData<&'a ()>,
}

impl Env<'_> {
    fn lookup(&self, n: &str) -> Result<Val, String> {
        self.vars
            .iter()
            .rev()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("undeclared reference to '{n}'"))
    }
}

fn truthy(v: Val) -> Result<bool, String> {
    match v {
        Val::Bool(b) => Ok(b),
        other => Err(format!("no such overload: expected bool, got {other:?}")),
    }
}

fn compare(a: &Val, b: &Val) -> Option<Ordering> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => x.partial_cmp(y),
        (Val::Num(x), Val::Num(y)) => x.partial_cmp(y),
        (Val::Int(x), Val::Num(y)) => (*x as f64).partial_cmp(y),
        (Val::Num(x), Val::Int(y)) => x.partial_cmp(&(*y as f64)),
        (Val::Str(x), Val::Str(y)) => x.partial_cmp(y),
        (Val::Duration(x), Val::Duration(y)) => x.partial_cmp(y),
        (Val::Bool(x), Val::Bool(y)) => x.partial_cmp(y),
        _ => None,
    }
}

fn eval(e: &Expr, env: &mut Env<'_>) -> Result<Val, String> {
    Ok(match e {
        Expr::Lit(v) => v.clone(),
        Expr::Ident(n) => env.lookup(n)?,
        Expr::List(items) => Val::List(
            items
                .iter()
                .map(|i| eval(i, env))
                .collect::<Result<_, _>>()?,
        ),
        Expr::Member(obj, f) => match eval(obj, env)? {
            Val::Map(m) => from_json(m.get(f).ok_or_else(|| format!("no such key: {f}"))?),
            other => return Err(format!("no such key: {f} on {other:?}")),
        },
        Expr::Index(obj, idx) => match (eval(obj, env)?, eval(idx, env)?) {
            (Val::List(l), Val::Int(i)) => {
                l.get(i as usize).cloned().ok_or("index out of range")?
            }
            (Val::Map(m), Val::Str(k)) => {
                from_json(m.get(&k).ok_or_else(|| format!("no such key: {k}"))?)
            }
            _ => return Err("bad index".into()),
        },
        Expr::Unary("!", x) => Val::Bool(!truthy(eval(x, env)?)?),
        Expr::Unary(_, x) => match eval(x, env)? {
            Val::Int(i) => Val::Int(-i),
            Val::Num(n) => Val::Num(-n),
            _ => return Err("bad negation".into()),
        },
        Expr::Binary("&&", a, b) => {
            // CEL's && and || are commutative over errors; evaluating left first is enough here.
            let l = eval(a, env).and_then(truthy);
            match l {
                Ok(false) => Val::Bool(false),
                Ok(true) => Val::Bool(truthy(eval(b, env)?)?),
                Err(e) => match eval(b, env).and_then(truthy) {
                    Ok(false) => Val::Bool(false),
                    _ => return Err(e),
                },
            }
        }
        Expr::Binary("||", a, b) => {
            let l = eval(a, env).and_then(truthy);
            match l {
                Ok(true) => Val::Bool(true),
                Ok(false) => Val::Bool(truthy(eval(b, env)?)?),
                Err(e) => match eval(b, env).and_then(truthy) {
                    Ok(true) => Val::Bool(true),
                    _ => return Err(e),
                },
            }
        }
        Expr::Binary(op, a, b) => {
            let (x, y) = (eval(a, env)?, eval(b, env)?);
            match *op {
                "==" => Val::Bool(compare(&x, &y).map_or(x == y, |o| o == Ordering::Equal)),
                "!=" => Val::Bool(!compare(&x, &y).map_or(x == y, |o| o == Ordering::Equal)),
                "<" | "<=" | ">" | ">=" => {
                    let o = compare(&x, &y).ok_or("no such overload for comparison")?;
                    Val::Bool(match *op {
                        "<" => o == Ordering::Less,
                        "<=" => o != Ordering::Greater,
                        ">" => o == Ordering::Greater,
                        _ => o != Ordering::Less,
                    })
                }
                "in" => match y {
                    Val::List(l) => Val::Bool(l.contains(&x)),
                    Val::Map(m) => Val::Bool(matches!(&x, Val::Str(k) if m.contains_key(k))),
                    _ => return Err("bad 'in'".into()),
                },
                "+" => match (x, y) {
                    (Val::Int(a), Val::Int(b)) => Val::Int(a + b),
                    (Val::Str(a), Val::Str(b)) => Val::Str(a + &b),
                    (Val::Duration(a), Val::Duration(b)) => Val::Duration(a + b),
                    (Val::List(mut a), Val::List(b)) => {
                        a.extend(b);
                        Val::List(a)
                    }
                    (Val::Num(a), Val::Num(b)) => Val::Num(a + b),
                    _ => return Err("no such overload for +".into()),
                },
                "-" | "*" | "/" | "%" => match (x, y) {
                    (Val::Int(a), Val::Int(b)) => Val::Int(match *op {
                        "-" => a - b,
                        "*" => a * b,
                        "/" if b != 0 => a / b,
                        "%" if b != 0 => a % b,
                        _ => return Err("division by zero".into()),
                    }),
                    (Val::Num(a), Val::Num(b)) => Val::Num(match *op {
                        "-" => a - b,
                        "*" => a * b,
                        _ => a / b,
                    }),
                    (Val::Duration(a), Val::Duration(b)) if *op == "-" => Val::Duration(a - b),
                    _ => return Err(format!("no such overload for {op}")),
                },
                _ => return Err(format!("unsupported operator {op}")),
            }
        }
        Expr::Cond(c, a, b) => {
            if truthy(eval(c, env)?)? {
                eval(a, env)?
            } else {
                eval(b, env)?
            }
        }
        Expr::Call(None, f, args) if f == "has" => {
            let [Expr::Member(obj, field)] = args.as_slice() else {
                return Err("has() needs a field selection".into());
            };
            match eval(obj, env)? {
                Val::Map(m) => Val::Bool(m.contains_key(field)),
                _ => return Err("has() on a non-object".into()),
            }
        }
        Expr::Call(target, f, args)
            if (f == "all" || f == "exists" || f == "exists_one") && args.len() == 2 =>
        {
            let Some(t) = target else {
                return Err(format!("{f} needs a target"));
            };
            let Expr::Ident(var) = &args[0] else {
                return Err(format!("{f} needs a variable"));
            };
            let items: Vec<Val> = match eval(t, env)? {
                Val::List(l) => l,
                Val::Map(m) => m.keys().map(|k| Val::Str(k.clone())).collect(),
                _ => return Err(format!("{f} on a non-list")),
            };
            let mut count = 0;
            for it in items {
                env.vars.push((var.clone(), it));
                let r = eval(&args[1], env).and_then(truthy);
                env.vars.pop();
                if r? {
                    count += 1;
                } else if f == "all" {
                    return Ok(Val::Bool(false));
                }
            }
            Val::Bool(match f.as_str() {
                "all" => true,
                "exists" => count > 0,
                _ => count == 1,
            })
        }
        Expr::Call(target, f, args) => {
            let mut vals = Vec::new();
            if let Some(t) = target {
                vals.push(eval(t, env)?);
            }
            for a in args {
                vals.push(eval(a, env)?);
            }
            call(f, vals)?
        }
    })
}

fn call(f: &str, args: Vec<Val>) -> Result<Val, String> {
    Ok(match (f, args.as_slice()) {
        ("size", [Val::Str(s)]) => Val::Int(s.chars().count() as i64),
        ("size", [Val::List(l)]) => Val::Int(l.len() as i64),
        ("size", [Val::Map(m)]) => Val::Int(m.len() as i64),
        ("duration", [Val::Str(s)]) => {
            Val::Duration(parse_duration(s).ok_or_else(|| format!("invalid duration {s:?}"))?)
        }
        ("matches", [Val::Str(s), Val::Str(re)]) => Val::Bool(
            regex::Regex::new(re)
                .map_err(|e| e.to_string())?
                .is_match(s),
        ),
        ("startsWith", [Val::Str(s), Val::Str(p)]) => Val::Bool(s.starts_with(p.as_str())),
        ("endsWith", [Val::Str(s), Val::Str(p)]) => Val::Bool(s.ends_with(p.as_str())),
        ("contains", [Val::Str(s), Val::Str(p)]) => Val::Bool(s.contains(p.as_str())),
        ("int", [Val::Int(i)]) => Val::Int(*i),
        ("int", [Val::Str(s)]) => Val::Int(s.parse().map_err(|_| "bad int")?),
        ("string", [v]) => Val::Str(match v {
            Val::Str(s) => s.clone(),
            Val::Int(i) => i.to_string(),
            other => format!("{other:?}"),
        }),
        _ => return Err(format!("unsupported function {f}")),
    })
}

/// Outcome of a rule.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The rule holds.
    Pass,
    /// The rule does not hold.
    Fail,
    /// The rule uses something this evaluator does not support; it is not enforced.
    Skipped(String),
}

/// Evaluates a rule with `self` bound to a value.
pub fn check(rule: &str, value: &Value) -> Outcome {
    if rule.contains("oldSelf") {
        return Outcome::Skipped("transition rules are not evaluated".into());
    }
    let toks = match lex(rule) {
        Ok(t) => t,
        Err(e) => return Outcome::Skipped(e),
    };
    let mut p = Parser { toks, pos: 0 };
    let expr = match p.expr() {
        Ok(e) if p.pos == p.toks.len() => e,
        Ok(_) => return Outcome::Skipped("trailing tokens".into()),
        Err(e) => return Outcome::Skipped(e),
    };
    let mut env = Env {
        vars: vec![("self".into(), from_json(value))],
        _p: std::marker::PhantomData,
    };
    match eval(&expr, &mut env) {
        Ok(Val::Bool(true)) => Outcome::Pass,
        Ok(Val::Bool(false)) => Outcome::Fail,
        Ok(other) => Outcome::Skipped(format!("rule returned {other:?}")),
        Err(e) if e.starts_with("unsupported") => Outcome::Skipped(e),
        // Evaluation errors (a missing key, a bad overload) reject the object, as Kubernetes does.
        Err(_) => Outcome::Fail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_dcs_rules_evaluate() {
        let one_sink = "has(self.doris) != has(self.stdout)";
        assert_eq!(check(one_sink, &json!({"doris": {}})), Outcome::Pass);
        assert_eq!(
            check(one_sink, &json!({"doris": {}, "stdout": {}})),
            Outcome::Fail
        );
        let ts = "has(self.timestamp) == (has(self.mode) && self.mode == 'fromTimestamp')";
        assert_eq!(
            check(ts, &json!({"mode": "fromTimestamp", "timestamp": "x"})),
            Outcome::Pass
        );
        assert_eq!(
            check(ts, &json!({"mode": "snapshot", "timestamp": "x"})),
            Outcome::Fail
        );
        let poll = "!self.matches('^([0-9]+(ms|s|m|h))+$') || duration(self) >= duration('1s')";
        assert_eq!(check(poll, &json!("10s")), Outcome::Pass);
        assert_eq!(check(poll, &json!("500ms")), Outcome::Fail);
        let filter = "!has(self.source.filter) || !has(self.startup) || !has(self.startup.mode) || self.startup.mode == 'snapshot'";
        assert_eq!(
            check(
                filter,
                &json!({"source": {"filter": "a"}, "startup": {"mode": "latest"}})
            ),
            Outcome::Fail
        );
        assert_eq!(check(filter, &json!({"source": {}})), Outcome::Pass);
    }

    #[test]
    fn macros_sizes_and_ternaries() {
        assert_eq!(
            check(
                "self.all(x, x > 0) && size(self) == 2 && self.exists(x, x == 2)",
                &json!([1, 2])
            ),
            Outcome::Pass
        );
        assert_eq!(
            check(
                "self.a > 1 ? self.b == 'x' : true",
                &json!({"a": 2, "b": "y"})
            ),
            Outcome::Fail
        );
        assert_eq!(
            check("'a' in self.tags", &json!({"tags": ["a"]})),
            Outcome::Pass
        );
        assert!(matches!(
            check("self.x == oldSelf.x", &json!({})),
            Outcome::Skipped(_)
        ));
        assert!(matches!(
            check("quantity(self) > 1", &json!({})),
            Outcome::Skipped(_)
        ));
    }
}

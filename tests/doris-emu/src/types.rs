//! Column types, values and result sets shared by every protocol front end.
//!
//! The SQL engine produces [`ResultSet`]s; the MySQL front end renders them as text rows, the
//! statement API as JSON, Flight as Arrow batches (mapping in docs/doris-protocols.md §3.5).

/// A Doris column type (the subset the emulator supports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DorisType {
    /// BOOLEAN
    Boolean,
    /// TINYINT
    TinyInt,
    /// SMALLINT
    SmallInt,
    /// INT
    Int,
    /// BIGINT
    BigInt,
    /// LARGEINT (128-bit)
    LargeInt,
    /// FLOAT
    Float,
    /// DOUBLE
    Double,
    /// DECIMAL(p, s) (DECIMALV3), p ≤ 38
    Decimal {
        /// Precision.
        precision: u8,
        /// Scale.
        scale: u8,
    },
    /// CHAR(n)
    Char(u32),
    /// VARCHAR(n)
    Varchar(u32),
    /// STRING
    String,
    /// DATE (DATEV2)
    Date,
    /// DATETIME(p) (DATETIMEV2), p in 0..=6
    DateTime(u8),
    /// JSON
    Json,
}

/// A single cell. Integers of every width are `Int`; FLOAT and DOUBLE are both `Float`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// BOOLEAN.
    Bool(bool),
    /// TINYINT..BIGINT.
    Int(i64),
    /// LARGEINT.
    LargeInt(i128),
    /// FLOAT / DOUBLE.
    Float(f64),
    /// DECIMAL: unscaled value and scale (`12.50` at scale 2 is `Decimal(1250, 2)`).
    Decimal(i128, u8),
    /// CHAR / VARCHAR / STRING.
    Str(String),
    /// DATE: days since 1970-01-01.
    Date(i32),
    /// DATETIME: microseconds since 1970-01-01 00:00:00 of the wall clock (no time zone).
    DateTime(i64),
    /// JSON, as normalised JSON text.
    Json(String),
}

/// A result column: name, type and nullability.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnMeta {
    /// Column name as the client sees it.
    pub name: String,
    /// Doris type.
    pub ty: DorisType,
    /// Whether the column may hold NULL.
    pub nullable: bool,
}

/// Rows and their columns, as a query returns them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResultSet {
    /// Column descriptions, in order.
    pub columns: Vec<ColumnMeta>,
    /// Rows; each has one value per column.
    pub rows: Vec<Vec<Value>>,
}

/// What a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryResult {
    /// A result set (SELECT, SHOW, ...).
    Rows(ResultSet),
    /// An OK packet (DDL, DML, SET, USE): affected rows and an info string.
    Ok {
        /// Rows inserted, updated or deleted.
        affected_rows: u64,
        /// Info text (may be empty).
        info: String,
    },
}

// ------------------------------------------------------------------------------------------------
// Type names, text parsing and printing, comparison and coercion.
// ------------------------------------------------------------------------------------------------

use std::cmp::Ordering;

const MICROS_PER_SEC: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SEC;

impl DorisType {
    /// The type as `SHOW CREATE TABLE` prints it (`int`, `decimal(10,2)`, `varchar(64)`, `text` for
    /// STRING, `datetime(3)`, `datetime` for precision 0, ...).
    pub fn sql_name(&self) -> String {
        match self {
            DorisType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            DorisType::Char(n) => format!("char({n})"),
            DorisType::Varchar(n) => format!("varchar({n})"),
            DorisType::DateTime(0) => "datetime".to_string(),
            DorisType::DateTime(p) => format!("datetime({p})"),
            other => other.data_type_name().to_string(),
        }
    }

    /// The lower-case base name, as `information_schema.columns.DATA_TYPE` shows it.
    pub fn data_type_name(&self) -> &'static str {
        match self {
            DorisType::Boolean => "boolean",
            DorisType::TinyInt => "tinyint",
            DorisType::SmallInt => "smallint",
            DorisType::Int => "int",
            DorisType::BigInt => "bigint",
            DorisType::LargeInt => "largeint",
            DorisType::Float => "float",
            DorisType::Double => "double",
            DorisType::Decimal { .. } => "decimal",
            DorisType::Char(_) => "char",
            DorisType::Varchar(_) => "varchar",
            DorisType::String => "text",
            DorisType::Date => "date",
            DorisType::DateTime(_) => "datetime",
            DorisType::Json => "json",
        }
    }

    /// The upper-case name used in error messages (`INT`, `DECIMAL(10,2)`, `VARCHAR(64)`, ...).
    pub fn display_name(&self) -> String {
        match self {
            DorisType::String => "STRING".to_string(),
            other => other.sql_name().to_uppercase(),
        }
    }

    /// Doris's `PrimitiveType` name (`INT`, `DECIMAL64`, `DATETIMEV2`, ...), as `_schema` and
    /// Flight's GetTables report it.
    pub fn primitive_name(&self) -> &'static str {
        match self {
            DorisType::Boolean => "BOOLEAN",
            DorisType::TinyInt => "TINYINT",
            DorisType::SmallInt => "SMALLINT",
            DorisType::Int => "INT",
            DorisType::BigInt => "BIGINT",
            DorisType::LargeInt => "LARGEINT",
            DorisType::Float => "FLOAT",
            DorisType::Double => "DOUBLE",
            DorisType::Decimal { precision, .. } if *precision <= 9 => "DECIMAL32",
            DorisType::Decimal { precision, .. } if *precision <= 18 => "DECIMAL64",
            DorisType::Decimal { .. } => "DECIMAL128",
            DorisType::Char(_) => "CHAR",
            DorisType::Varchar(_) => "VARCHAR",
            DorisType::String => "STRING",
            DorisType::Date => "DATEV2",
            DorisType::DateTime(_) => "DATETIMEV2",
            DorisType::Json => "JSON",
        }
    }

    /// Integer range of the integer types up to BIGINT.
    fn int_range(&self) -> Option<(i64, i64)> {
        match self {
            DorisType::TinyInt => Some((i8::MIN as i64, i8::MAX as i64)),
            DorisType::SmallInt => Some((i16::MIN as i64, i16::MAX as i64)),
            DorisType::Int => Some((i32::MIN as i64, i32::MAX as i64)),
            DorisType::BigInt => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }
}

// --- calendar helpers (proleptic Gregorian, days since 1970-01-01) ---

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `yyyy-MM-dd` (month and day may have one digit) → days since the epoch.
fn parse_date_part(s: &str) -> Option<i32> {
    let mut it = s.split('-');
    let (y, m, d) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || y.len() != 4 || !all_digits(y) {
        return None;
    }
    if !(1..=2).contains(&m.len())
        || !all_digits(m)
        || !(1..=2).contains(&d.len())
        || !all_digits(d)
    {
        return None;
    }
    let (y, m, d): (i64, u32, u32) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    i32::try_from(days_from_civil(y, m, d)).ok()
}

/// `HH:mm:ss[.f...]` → microseconds of the day, rounded to `precision` fractional digits. May
/// return 86_400_000_000 or more after rounding up (the caller carries into the date).
fn parse_time_part(s: &str, precision: u8) -> Option<i64> {
    let (hms, frac) = match s.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let mut it = hms.split(':');
    let (h, mi, se) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() {
        return None;
    }
    for p in [h, mi, se] {
        if !(1..=2).contains(&p.len()) || !all_digits(p) {
            return None;
        }
    }
    let (h, mi, se): (i64, i64, i64) = (h.parse().ok()?, mi.parse().ok()?, se.parse().ok()?);
    if h > 23 || mi > 59 || se > 59 {
        return None;
    }
    let mut micros = (h * 3600 + mi * 60 + se) * MICROS_PER_SEC;
    if let Some(f) = frac {
        if !f.is_empty() && !all_digits(f) {
            return None;
        }
        // Keep `precision` digits, round half up on the next one.
        let p = precision.min(6) as usize;
        let digits: Vec<i64> = f.bytes().map(|b| (b - b'0') as i64).collect();
        let mut kept = 0i64;
        for i in 0..6 {
            kept = kept * 10
                + if i < p {
                    digits.get(i).copied().unwrap_or(0)
                } else {
                    0
                };
        }
        if digits.get(p).copied().unwrap_or(0) >= 5 {
            kept += 10i64.pow((6 - p) as u32);
        }
        micros += kept;
    }
    Some(micros)
}

/// A datetime text (`yyyy-MM-dd[( |T)HH:mm:ss[.ffffff]]`) → microseconds since the epoch.
fn parse_datetime_text(s: &str, precision: u8) -> Option<i64> {
    let (date, time) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], Some(s[i + 1..].trim_start())),
        None => (s, None),
    };
    let days = parse_date_part(date)? as i64;
    let micros = match time {
        Some(t) if !t.is_empty() => parse_time_part(t, precision)?,
        _ => 0,
    };
    let total = days.checked_mul(MICROS_PER_DAY)?.checked_add(micros)?;
    // Rounding must not leave year 9999.
    if total >= days_from_civil(10_000, 1, 1) * MICROS_PER_DAY {
        return None;
    }
    Some(total)
}

fn format_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

fn format_datetime(micros: i64, precision: u8) -> String {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rem = micros.rem_euclid(MICROS_PER_DAY);
    let secs = rem / MICROS_PER_SEC;
    let frac = rem % MICROS_PER_SEC;
    let mut out = format!(
        "{} {:02}:{:02}:{:02}",
        format_date(days),
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    );
    let p = precision.min(6) as u32;
    if p > 0 {
        let f = frac / 10i64.pow(6 - p);
        out.push_str(&format!(".{:0width$}", f, width = p as usize));
    }
    out
}

/// Round a datetime to `precision` fractional digits (half up).
fn round_datetime(micros: i64, precision: u8) -> i64 {
    let p = precision.min(6) as u32;
    let unit = 10i64.pow(6 - p);
    if unit == 1 {
        return micros;
    }
    let floor = micros.div_euclid(unit) * unit;
    if micros - floor >= unit / 2 {
        floor + unit
    } else {
        floor
    }
}

// --- decimals ---

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

/// Rescale an unscaled decimal from scale `from` to `to`, rounding half away from zero.
fn rescale(unscaled: i128, from: u8, to: u8) -> Option<i128> {
    if to >= from {
        unscaled.checked_mul(pow10((to - from) as u32)?)
    } else {
        let div = pow10((from - to) as u32)?;
        let q = unscaled / div;
        let r = unscaled % div;
        if r.abs() * 2 >= div {
            Some(q + unscaled.signum())
        } else {
            Some(q)
        }
    }
}

fn decimal_fits(unscaled: i128, precision: u8) -> bool {
    match pow10(precision as u32) {
        Some(limit) => unscaled.abs() < limit,
        None => true,
    }
}

/// Parse decimal text (`-12.345`, `+1`, `.5`, `1e3`) into an unscaled value at `scale`.
fn parse_decimal_text(s: &str, scale: u8) -> Option<i128> {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (neg, body) = match mantissa.as_bytes().first()? {
        b'-' => (true, &mantissa[1..]),
        b'+' => (false, &mantissa[1..]),
        _ => (false, mantissa),
    };
    let (int_part, frac_part) = match body.split_once('.') {
        Some((a, b)) => (a, b),
        None => (body, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !(int_part.is_empty() || all_digits(int_part))
        || !(frac_part.is_empty() || all_digits(frac_part))
    {
        return None;
    }
    // digits as an integer with `frac_len - exp` implied decimals
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    let implied = frac_part.len() as i64 - exp as i64;
    let target = scale as i64;
    let mut value: i128 = 0;
    // Keep only the digits that matter at the target scale, plus one for rounding.
    let keep = (digits.len() as i64 - (implied - target)).max(0) as usize;
    let keep = keep.min(digits.len());
    if keep > 39 {
        return None;
    }
    for b in digits[..keep].bytes() {
        value = value.checked_mul(10)?.checked_add((b - b'0') as i128)?;
    }
    let dropped = digits.len() - keep;
    let shift = (implied - target) - dropped as i64; // remaining implied decimals beyond target
    // After keeping `keep` digits, the value has `implied - dropped` decimals.
    let round_up = if dropped > 0 {
        digits.as_bytes()[keep] >= b'5'
    } else {
        false
    };
    let mut v = if shift >= 0 {
        value
    } else {
        value.checked_mul(pow10((-shift) as u32)?)?
    };
    if round_up {
        v += 1;
    }
    Some(if neg { -v } else { v })
}

fn format_decimal(unscaled: i128, scale: u8) -> String {
    let neg = unscaled < 0;
    let abs = unscaled.unsigned_abs().to_string();
    let s = scale as usize;
    let body = if s == 0 {
        abs
    } else if abs.len() > s {
        format!("{}.{}", &abs[..abs.len() - s], &abs[abs.len() - s..])
    } else {
        format!("0.{}{}", "0".repeat(s - abs.len()), abs)
    };
    if neg { format!("-{body}") } else { body }
}

fn decimal_to_f64(unscaled: i128, scale: u8) -> f64 {
    unscaled as f64 / 10f64.powi(scale as i32)
}

/// Shortest round-trip text of a double, with Doris's exponent form for very large/small values.
fn format_f64(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let s = format!("{v:e}");
        return match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => s,
        };
    }
    format!("{v}")
}

fn format_f32(v: f32) -> String {
    if v.is_nan() || v.is_infinite() {
        return format_f64(v as f64);
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let s = format!("{v:e}");
        return match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => s,
        };
    }
    format!("{v}")
}

/// Valid JSON text without insignificant whitespace; key order and number spelling are kept.
fn compact_json(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let (mut in_str, mut escaped) = (false, false);
    for c in s.chars() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            if c == '"' {
                in_str = true;
            }
            out.push(c);
        }
    }
    out
}

fn invalid(s: &str, ty: &DorisType) -> String {
    format!("'{s}' is not a valid {}", ty.display_name())
}

impl Value {
    /// True for SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Parse one text cell (CSV field, JSON string, SQL string literal) into a value of `ty`, as
    /// Doris's text parsers accept it. The caller handles NULL markers (`\N`); this never returns
    /// `Value::Null`.
    pub fn parse_text(ty: &DorisType, s: &str) -> Result<Value, String> {
        match ty {
            DorisType::Boolean => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" => Ok(Value::Bool(true)),
                "false" | "0" => Ok(Value::Bool(false)),
                _ => Err(invalid(s, ty)),
            },
            DorisType::TinyInt | DorisType::SmallInt | DorisType::Int | DorisType::BigInt => {
                let t = s.trim();
                let t = t.strip_prefix('+').unwrap_or(t);
                let v: i64 = match t.parse() {
                    Ok(v) => v,
                    Err(_) => {
                        let body = t.strip_prefix('-').unwrap_or(t);
                        return if all_digits(body) {
                            Err(format!("'{s}' is out of range for {}", ty.display_name()))
                        } else {
                            Err(invalid(s, ty))
                        };
                    }
                };
                let (lo, hi) = ty.int_range().expect("integer type");
                if v < lo || v > hi {
                    return Err(format!("'{s}' is out of range for {}", ty.display_name()));
                }
                Ok(Value::Int(v))
            }
            DorisType::LargeInt => {
                let t = s.trim();
                let t = t.strip_prefix('+').unwrap_or(t);
                match t.parse::<i128>() {
                    Ok(v) => Ok(Value::LargeInt(v)),
                    Err(_) if all_digits(t.strip_prefix('-').unwrap_or(t)) => {
                        Err(format!("'{s}' is out of range for LARGEINT"))
                    }
                    Err(_) => Err(invalid(s, ty)),
                }
            }
            DorisType::Float | DorisType::Double => {
                let t = s.trim();
                let lower = t.to_ascii_lowercase();
                let ok_chars = t
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
                    || matches!(
                        lower.as_str(),
                        "nan" | "inf" | "-inf" | "+inf" | "infinity" | "-infinity" | "+infinity"
                    );
                let v: f64 = match (ok_chars, t.parse::<f64>()) {
                    (true, Ok(v)) => v,
                    _ => return Err(invalid(s, ty)),
                };
                if *ty == DorisType::Float {
                    let f = v as f32;
                    if f.is_infinite() && v.is_finite() {
                        return Err(format!("'{s}' is out of range for FLOAT"));
                    }
                    Ok(Value::Float(f as f64))
                } else {
                    Ok(Value::Float(v))
                }
            }
            DorisType::Decimal { precision, scale } => {
                let unscaled =
                    parse_decimal_text(s.trim(), *scale).ok_or_else(|| invalid(s, ty))?;
                if !decimal_fits(unscaled, *precision) {
                    return Err(format!("'{s}' is out of range for {}", ty.display_name()));
                }
                Ok(Value::Decimal(unscaled, *scale))
            }
            DorisType::Char(n) | DorisType::Varchar(n) => {
                if s.len() > *n as usize {
                    return Err(format!(
                        "'{s}' is too long for {}: {} bytes",
                        ty.display_name(),
                        s.len()
                    ));
                }
                Ok(Value::Str(s.to_string()))
            }
            DorisType::String => Ok(Value::Str(s.to_string())),
            DorisType::Date => {
                let t = s.trim();
                if let Some(d) = parse_date_part(t) {
                    return Ok(Value::Date(d));
                }
                // A datetime text is accepted and truncated to its date.
                match parse_datetime_text(t, 6) {
                    Some(us) if t.len() > 10 => {
                        Ok(Value::Date(us.div_euclid(MICROS_PER_DAY) as i32))
                    }
                    _ => Err(invalid(s, ty)),
                }
            }
            DorisType::DateTime(p) => parse_datetime_text(s.trim(), *p)
                .map(Value::DateTime)
                .ok_or_else(|| invalid(s, ty)),
            DorisType::Json => match serde_json::from_str::<serde::de::IgnoredAny>(s) {
                Ok(_) => Ok(Value::Json(compact_json(s))),
                Err(_) => Err(invalid(s, ty)),
            },
        }
    }

    /// The value as Doris prints it in a text result (MySQL protocol, statement API); `None` for
    /// NULL. DATETIME has exactly `p` fractional digits, DECIMAL exactly `scale` digits, BOOLEAN is
    /// `1`/`0`, FLOAT/DOUBLE the shortest round-trip text, JSON compact text.
    pub fn to_text(&self, ty: &DorisType) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            Value::Bool(b) => match ty {
                DorisType::Char(_)
                | DorisType::Varchar(_)
                | DorisType::String
                | DorisType::Json => if *b { "true" } else { "false" }.to_string(),
                _ => if *b { "1" } else { "0" }.to_string(),
            },
            Value::Int(i) => match ty {
                DorisType::Decimal { scale, .. } => format_decimal(
                    (*i as i128).saturating_mul(pow10(*scale as u32).unwrap_or(1)),
                    *scale,
                ),
                _ => i.to_string(),
            },
            Value::LargeInt(i) => i.to_string(),
            Value::Float(f) => match ty {
                DorisType::Float => format_f32(*f as f32),
                _ => format_f64(*f),
            },
            Value::Decimal(u, s) => match ty {
                DorisType::Decimal { scale, .. } => {
                    format_decimal(rescale(*u, *s, *scale).unwrap_or(*u), *scale)
                }
                _ => format_decimal(*u, *s),
            },
            Value::Str(s) => s.clone(),
            Value::Date(d) => match ty {
                DorisType::DateTime(p) => format_datetime(*d as i64 * MICROS_PER_DAY, *p),
                _ => format_date(*d as i64),
            },
            Value::DateTime(us) => match ty {
                DorisType::DateTime(p) => format_datetime(*us, *p),
                DorisType::Date => format_date(us.div_euclid(MICROS_PER_DAY)),
                _ => format_datetime(*us, 6),
            },
            Value::Json(j) => j.clone(),
        })
    }

    /// SQL comparison: `None` when either side is NULL or the two are not comparable. Numbers
    /// compare across INT/LARGEINT/FLOAT/DECIMAL, strings by bytes, DATE against DATETIME at
    /// midnight.
    pub fn sql_cmp(&self, other: &Value) -> Option<Ordering> {
        use Value::*;
        match (self, other) {
            (Null, _) | (_, Null) => None,
            (Bool(a), Bool(b)) => Some(a.cmp(b)),
            (Str(a), Str(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (Json(a), Json(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (Date(a), Date(b)) => Some(a.cmp(b)),
            (DateTime(a), DateTime(b)) => Some(a.cmp(b)),
            (Date(a), DateTime(b)) => Some((*a as i64 * MICROS_PER_DAY).cmp(b)),
            (DateTime(a), Date(b)) => Some(a.cmp(&(*b as i64 * MICROS_PER_DAY))),
            (Date(_) | DateTime(_), Str(s)) => {
                let parsed = Value::parse_text(&DorisType::DateTime(6), s).ok()?;
                self.sql_cmp(&parsed)
            }
            (Str(_), Date(_) | DateTime(_)) => other.sql_cmp(self).map(Ordering::reverse),
            _ => {
                let a = self.as_num()?;
                let b = other.as_num()?;
                a.cmp_num(&b)
            }
        }
    }

    fn as_num(&self) -> Option<Num> {
        match self {
            Value::Bool(b) => Some(Num::Exact(*b as i128, 0)),
            Value::Int(i) => Some(Num::Exact(*i as i128, 0)),
            Value::LargeInt(i) => Some(Num::Exact(*i, 0)),
            Value::Decimal(u, s) => Some(Num::Exact(*u, *s)),
            Value::Float(f) => Some(Num::Float(*f)),
            _ => None,
        }
    }
}

/// A number for cross-type comparison.
enum Num {
    Exact(i128, u8),
    Float(f64),
}

impl Num {
    fn to_f64(&self) -> f64 {
        match self {
            Num::Exact(u, s) => decimal_to_f64(*u, *s),
            Num::Float(f) => *f,
        }
    }

    fn cmp_num(&self, other: &Num) -> Option<Ordering> {
        if let (Num::Exact(a, sa), Num::Exact(b, sb)) = (self, other) {
            let s = (*sa).max(*sb);
            if let (Some(a), Some(b)) = (rescale(*a, *sa, s), rescale(*b, *sb, s)) {
                return Some(a.cmp(&b));
            }
        }
        self.to_f64().partial_cmp(&other.to_f64())
    }
}

/// Convert a value (typically a SQL literal) to a column's type, as INSERT does: numbers widen or
/// narrow with range checks, strings are parsed with [`Value::parse_text`], dates widen to
/// datetimes. NULL stays NULL (nullability is checked by the caller).
pub fn coerce(ty: &DorisType, v: Value) -> Result<Value, String> {
    use DorisType as T;
    if v.is_null() {
        return Ok(Value::Null);
    }
    let out_of_range = |v: &Value| {
        format!(
            "'{}' is out of range for {}",
            v.to_text(&T::String).unwrap_or_default(),
            ty.display_name()
        )
    };
    let cannot = |v: &Value| {
        format!(
            "cannot convert '{}' to {}",
            v.to_text(&T::String).unwrap_or_default(),
            ty.display_name()
        )
    };
    match ty {
        T::Boolean => match v {
            Value::Bool(_) => Ok(v),
            Value::Int(i) => Ok(Value::Bool(i != 0)),
            Value::LargeInt(i) => Ok(Value::Bool(i != 0)),
            Value::Float(f) => Ok(Value::Bool(f != 0.0)),
            Value::Decimal(u, _) => Ok(Value::Bool(u != 0)),
            Value::Str(s) => Value::parse_text(ty, &s),
            other => Err(cannot(&other)),
        },
        T::TinyInt | T::SmallInt | T::Int | T::BigInt => {
            let (lo, hi) = ty.int_range().expect("integer type");
            let wide: i128 = match &v {
                Value::Bool(b) => *b as i128,
                Value::Int(i) => *i as i128,
                Value::LargeInt(i) => *i,
                Value::Decimal(u, s) => *u / pow10(*s as u32).unwrap_or(1),
                Value::Float(f) if f.is_finite() && f.trunc().abs() < 1.8e19 => f.trunc() as i128,
                Value::Float(_) => return Err(out_of_range(&v)),
                Value::Str(s) => return Value::parse_text(ty, s),
                _ => return Err(cannot(&v)),
            };
            if wide < lo as i128 || wide > hi as i128 {
                return Err(out_of_range(&v));
            }
            Ok(Value::Int(wide as i64))
        }
        T::LargeInt => match v {
            Value::Bool(b) => Ok(Value::LargeInt(b as i128)),
            Value::Int(i) => Ok(Value::LargeInt(i as i128)),
            Value::LargeInt(_) => Ok(v),
            Value::Decimal(u, s) => Ok(Value::LargeInt(u / pow10(s as u32).unwrap_or(1))),
            Value::Float(f) if f.is_finite() && f.trunc().abs() < 1.7e38 => {
                Ok(Value::LargeInt(f.trunc() as i128))
            }
            Value::Str(s) => Value::parse_text(ty, &s),
            other => Err(out_of_range(&other)),
        },
        T::Float | T::Double => {
            let f = match &v {
                Value::Bool(b) => *b as i64 as f64,
                Value::Int(i) => *i as f64,
                Value::LargeInt(i) => *i as f64,
                Value::Decimal(u, s) => decimal_to_f64(*u, *s),
                Value::Float(f) => *f,
                Value::Str(s) => return Value::parse_text(ty, s),
                _ => return Err(cannot(&v)),
            };
            if *ty == T::Float {
                let n = f as f32;
                if n.is_infinite() && f.is_finite() {
                    return Err(out_of_range(&v));
                }
                Ok(Value::Float(n as f64))
            } else {
                Ok(Value::Float(f))
            }
        }
        T::Decimal { precision, scale } => {
            let unscaled = match &v {
                Value::Bool(b) => rescale(*b as i128, 0, *scale),
                Value::Int(i) => rescale(*i as i128, 0, *scale),
                Value::LargeInt(i) => rescale(*i, 0, *scale),
                Value::Decimal(u, s) => rescale(*u, *s, *scale),
                Value::Float(f) if f.is_finite() => parse_decimal_text(&format!("{f:e}"), *scale),
                Value::Float(_) => None,
                Value::Str(s) => return Value::parse_text(ty, s),
                _ => return Err(cannot(&v)),
            };
            match unscaled {
                Some(u) if decimal_fits(u, *precision) => Ok(Value::Decimal(u, *scale)),
                _ => Err(out_of_range(&v)),
            }
        }
        T::Char(_) | T::Varchar(_) | T::String => {
            let s = match v {
                Value::Str(s) => s,
                other => other.to_text(&default_type_of(&other)).unwrap_or_default(),
            };
            match ty {
                T::Char(n) | T::Varchar(n) if s.len() > *n as usize => Value::parse_text(ty, &s),
                _ => Ok(Value::Str(s)),
            }
        }
        T::Date => match v {
            Value::Date(_) => Ok(v),
            Value::DateTime(us) => Ok(Value::Date(us.div_euclid(MICROS_PER_DAY) as i32)),
            Value::Str(s) => Value::parse_text(ty, &s),
            Value::Int(i) => parse_compact_date(i)
                .map(Value::Date)
                .ok_or_else(|| invalid(&i.to_string(), ty)),
            other => Err(cannot(&other)),
        },
        T::DateTime(p) => match v {
            Value::DateTime(us) => Ok(Value::DateTime(round_datetime(us, *p))),
            Value::Date(d) => Ok(Value::DateTime(d as i64 * MICROS_PER_DAY)),
            Value::Str(s) => Value::parse_text(ty, &s),
            Value::Int(i) => parse_compact_date(i)
                .map(|d| Value::DateTime(d as i64 * MICROS_PER_DAY))
                .ok_or_else(|| invalid(&i.to_string(), ty)),
            other => Err(cannot(&other)),
        },
        T::Json => match v {
            Value::Json(_) => Ok(v),
            Value::Str(s) => Value::parse_text(ty, &s),
            Value::Bool(b) => Ok(Value::Json(b.to_string())),
            Value::Int(_) | Value::LargeInt(_) | Value::Float(_) | Value::Decimal(..) => {
                let text = v.to_text(&default_type_of(&v)).unwrap_or_default();
                Value::parse_text(ty, &text)
            }
            other => Err(cannot(&other)),
        },
    }
}

/// `20240102` → the date.
fn parse_compact_date(i: i64) -> Option<i32> {
    if !(10_000_101..=99_991_231).contains(&i) {
        return None;
    }
    let s = i.to_string();
    parse_date_part(&format!("{}-{}-{}", &s[..4], &s[4..6], &s[6..8]))
}

/// The natural type of a value, for printing it outside a column.
pub fn default_type_of(v: &Value) -> DorisType {
    match v {
        Value::Null | Value::Str(_) => DorisType::String,
        Value::Bool(_) => DorisType::Boolean,
        Value::Int(_) => DorisType::BigInt,
        Value::LargeInt(_) => DorisType::LargeInt,
        Value::Float(_) => DorisType::Double,
        Value::Decimal(_, s) => DorisType::Decimal {
            precision: 38,
            scale: *s,
        },
        Value::Date(_) => DorisType::Date,
        Value::DateTime(us) => DorisType::DateTime(if us % MICROS_PER_SEC == 0 { 0 } else { 6 }),
        Value::Json(_) => DorisType::Json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ty: DorisType, s: &str) -> Result<Value, String> {
        Value::parse_text(&ty, s)
    }

    fn text(ty: DorisType, s: &str) -> String {
        p(ty, s).unwrap().to_text(&ty).unwrap()
    }

    #[test]
    fn sql_names() {
        assert_eq!(DorisType::Int.sql_name(), "int");
        assert_eq!(DorisType::LargeInt.sql_name(), "largeint");
        assert_eq!(
            DorisType::Decimal {
                precision: 10,
                scale: 2
            }
            .sql_name(),
            "decimal(10,2)"
        );
        assert_eq!(DorisType::Varchar(64).sql_name(), "varchar(64)");
        assert_eq!(DorisType::Char(10).sql_name(), "char(10)");
        assert_eq!(DorisType::String.sql_name(), "text");
        assert_eq!(DorisType::DateTime(3).sql_name(), "datetime(3)");
        assert_eq!(DorisType::DateTime(0).sql_name(), "datetime");
        assert_eq!(DorisType::Json.sql_name(), "json");
        assert_eq!(
            DorisType::Decimal {
                precision: 10,
                scale: 2
            }
            .data_type_name(),
            "decimal"
        );
        assert_eq!(DorisType::DateTime(3).data_type_name(), "datetime");
        assert_eq!(DorisType::Varchar(3).data_type_name(), "varchar");
    }

    #[test]
    fn integers() {
        assert_eq!(p(DorisType::TinyInt, "127"), Ok(Value::Int(127)));
        assert_eq!(
            p(DorisType::TinyInt, "128"),
            Err("'128' is out of range for TINYINT".into())
        );
        assert_eq!(p(DorisType::SmallInt, "-32768"), Ok(Value::Int(-32768)));
        assert_eq!(
            p(DorisType::Int, "2147483648"),
            Err("'2147483648' is out of range for INT".into())
        );
        assert_eq!(
            p(DorisType::Int, "abc"),
            Err("'abc' is not a valid INT".into())
        );
        assert_eq!(
            p(DorisType::Int, "1.5"),
            Err("'1.5' is not a valid INT".into())
        );
        assert_eq!(p(DorisType::BigInt, " +42 "), Ok(Value::Int(42)));
        assert_eq!(
            p(DorisType::BigInt, "9223372036854775808"),
            Err("'9223372036854775808' is out of range for BIGINT".into())
        );
        assert_eq!(
            p(
                DorisType::LargeInt,
                "170141183460469231731687303715884105727"
            ),
            Ok(Value::LargeInt(i128::MAX))
        );
        assert!(p(DorisType::LargeInt, "x").is_err());
    }

    #[test]
    fn floats() {
        assert_eq!(text(DorisType::Double, "0.1"), "0.1");
        assert_eq!(text(DorisType::Float, "1.1"), "1.1");
        assert_eq!(text(DorisType::Double, "3"), "3");
        assert_eq!(text(DorisType::Double, "-2.5e-1"), "-0.25");
        assert_eq!(text(DorisType::Double, "1e20"), "1e+20");
        assert_eq!(
            Value::Float(0.1 + 0.2).to_text(&DorisType::Double).unwrap(),
            "0.30000000000000004"
        );
        assert!(p(DorisType::Double, "1.2.3").is_err());
        assert!(p(DorisType::Double, "abc").is_err());
        assert!(p(DorisType::Float, "1e39").is_err());
    }

    #[test]
    fn decimals() {
        let d = DorisType::Decimal {
            precision: 5,
            scale: 2,
        };
        assert_eq!(p(d, "12.5"), Ok(Value::Decimal(1250, 2)));
        assert_eq!(text(d, "12.5"), "12.50");
        assert_eq!(text(d, "-0.005"), "-0.01");
        assert_eq!(text(d, "0.004"), "0.00");
        assert_eq!(text(d, "999.994"), "999.99");
        assert_eq!(
            p(d, "999.995"),
            Err("'999.995' is out of range for DECIMAL(5,2)".into())
        );
        assert_eq!(
            p(d, "1000"),
            Err("'1000' is out of range for DECIMAL(5,2)".into())
        );
        assert_eq!(text(d, ".5"), "0.50");
        assert_eq!(text(d, "1e2"), "100.00");
        assert_eq!(p(d, "1x"), Err("'1x' is not a valid DECIMAL(5,2)".into()));
        let d0 = DorisType::Decimal {
            precision: 38,
            scale: 0,
        };
        assert_eq!(
            text(d0, "12345678901234567890123456789012345678"),
            "12345678901234567890123456789012345678"
        );
        assert_eq!(text(d0, "2.5"), "3");
        let d10 = DorisType::Decimal {
            precision: 27,
            scale: 9,
        };
        assert_eq!(text(d10, "0.000000000123"), "0.000000000");
    }

    #[test]
    fn booleans() {
        for (s, b) in [
            ("true", true),
            ("TRUE", true),
            ("1", true),
            ("False", false),
            ("0", false),
        ] {
            assert_eq!(p(DorisType::Boolean, s), Ok(Value::Bool(b)));
        }
        assert_eq!(
            p(DorisType::Boolean, "yes"),
            Err("'yes' is not a valid BOOLEAN".into())
        );
        assert_eq!(Value::Bool(true).to_text(&DorisType::Boolean).unwrap(), "1");
    }

    #[test]
    fn dates_and_datetimes() {
        assert_eq!(p(DorisType::Date, "1970-01-01"), Ok(Value::Date(0)));
        assert_eq!(p(DorisType::Date, "2024-02-29"), Ok(Value::Date(19782)));
        assert_eq!(text(DorisType::Date, "2024-02-29"), "2024-02-29");
        assert_eq!(
            p(DorisType::Date, "2023-02-29"),
            Err("'2023-02-29' is not a valid DATE".into())
        );
        assert_eq!(text(DorisType::Date, "2024-01-02 10:00:00"), "2024-01-02");
        assert!(p(DorisType::Date, "2024/01/02").is_err());
        assert_eq!(text(DorisType::Date, "0001-01-01"), "0001-01-01");
        assert_eq!(text(DorisType::Date, "9999-12-31"), "9999-12-31");
        assert_eq!(text(DorisType::Date, "1969-12-31"), "1969-12-31");

        let dt3 = DorisType::DateTime(3);
        assert_eq!(
            text(dt3, "2024-01-02 03:04:05.123"),
            "2024-01-02 03:04:05.123"
        );
        assert_eq!(text(dt3, "2024-01-02 03:04:05"), "2024-01-02 03:04:05.000");
        assert_eq!(
            text(dt3, "2024-01-02 03:04:05.1234"),
            "2024-01-02 03:04:05.123"
        );
        assert_eq!(
            text(dt3, "2024-01-02 03:04:05.1235"),
            "2024-01-02 03:04:05.124"
        );
        assert_eq!(text(dt3, "2024-01-02"), "2024-01-02 00:00:00.000");
        assert_eq!(
            text(dt3, "2024-01-02T03:04:05.5"),
            "2024-01-02 03:04:05.500"
        );
        assert_eq!(
            text(DorisType::DateTime(0), "2024-12-31 23:59:59.7"),
            "2025-01-01 00:00:00"
        );
        assert_eq!(
            text(DorisType::DateTime(6), "2024-01-02 03:04:05.000001"),
            "2024-01-02 03:04:05.000001"
        );
        assert_eq!(
            text(DorisType::DateTime(0), "2024-01-02 03:04:05"),
            "2024-01-02 03:04:05"
        );
        assert!(p(dt3, "2024-01-02 24:00:00").is_err());
        assert!(p(dt3, "2024-01-02 03:04").is_err());
        assert_eq!(
            p(dt3, "nope"),
            Err("'nope' is not a valid DATETIME(3)".into())
        );
        assert_eq!(
            p(DorisType::DateTime(0), "1970-01-01 00:00:01"),
            Ok(Value::DateTime(1_000_000))
        );
    }

    #[test]
    fn strings_and_json() {
        assert_eq!(
            p(DorisType::Varchar(3), "abc"),
            Ok(Value::Str("abc".into()))
        );
        assert_eq!(
            p(DorisType::Varchar(3), "abcd"),
            Err("'abcd' is too long for VARCHAR(3): 4 bytes".into())
        );
        // bytes, not characters
        assert!(p(DorisType::Varchar(3), "éé").is_err());
        assert!(p(DorisType::Char(2), "abc").is_err());
        assert_eq!(
            p(DorisType::String, "anything"),
            Ok(Value::Str("anything".into()))
        );
        assert_eq!(
            p(DorisType::Json, r#" { "a" : [1, 2] } "#),
            Ok(Value::Json(r#"{"a":[1,2]}"#.into()))
        );
        assert_eq!(
            p(DorisType::Json, "{"),
            Err("'{' is not a valid JSON".into())
        );
    }

    #[test]
    fn comparisons() {
        use Ordering::*;
        assert_eq!(Value::Int(1).sql_cmp(&Value::Null), None);
        assert_eq!(Value::Null.sql_cmp(&Value::Null), None);
        assert_eq!(Value::Int(2).sql_cmp(&Value::LargeInt(3)), Some(Less));
        assert_eq!(Value::Int(2).sql_cmp(&Value::Decimal(200, 2)), Some(Equal));
        assert_eq!(
            Value::Decimal(250, 2).sql_cmp(&Value::Float(2.4)),
            Some(Greater)
        );
        assert_eq!(
            Value::Decimal(25, 1).sql_cmp(&Value::Decimal(250, 2)),
            Some(Equal)
        );
        assert_eq!(
            Value::Str("a".into()).sql_cmp(&Value::Str("b".into())),
            Some(Less)
        );
        assert_eq!(
            Value::Str("B".into()).sql_cmp(&Value::Str("a".into())),
            Some(Less)
        );
        assert_eq!(
            Value::Date(1).sql_cmp(&Value::DateTime(MICROS_PER_DAY)),
            Some(Equal)
        );
        assert_eq!(
            Value::Date(0).sql_cmp(&Value::Str("1970-01-02".into())),
            Some(Less)
        );
        assert_eq!(Value::Int(1).sql_cmp(&Value::Str("x".into())), None);
        assert!(Value::Null.is_null());
        assert!(!Value::Int(0).is_null());
    }

    #[test]
    fn coercions() {
        let d = DorisType::Decimal {
            precision: 10,
            scale: 2,
        };
        assert_eq!(coerce(&d, Value::Int(5)), Ok(Value::Decimal(500, 2)));
        assert_eq!(
            coerce(&d, Value::Decimal(12345, 3)),
            Ok(Value::Decimal(1235, 2))
        );
        assert_eq!(coerce(&d, Value::Float(1.25)), Ok(Value::Decimal(125, 2)));
        assert_eq!(
            coerce(&d, Value::Str("7.1".into())),
            Ok(Value::Decimal(710, 2))
        );
        assert!(
            coerce(
                &DorisType::Decimal {
                    precision: 3,
                    scale: 2
                },
                Value::Int(10)
            )
            .is_err()
        );
        assert_eq!(
            coerce(&DorisType::Double, Value::Int(5)),
            Ok(Value::Float(5.0))
        );
        assert_eq!(
            coerce(&DorisType::LargeInt, Value::Int(5)),
            Ok(Value::LargeInt(5))
        );
        assert_eq!(
            coerce(&DorisType::Int, Value::LargeInt(5)),
            Ok(Value::Int(5))
        );
        assert_eq!(
            coerce(&DorisType::TinyInt, Value::Int(300)),
            Err("'300' is out of range for TINYINT".into())
        );
        assert_eq!(
            coerce(&DorisType::Int, Value::Str("12".into())),
            Ok(Value::Int(12))
        );
        assert_eq!(
            coerce(&DorisType::Date, Value::Str("2024-01-02".into())),
            Ok(Value::Date(19724))
        );
        assert_eq!(
            coerce(
                &DorisType::DateTime(0),
                Value::Str("1970-01-01 00:00:01".into())
            ),
            Ok(Value::DateTime(1_000_000))
        );
        assert_eq!(
            coerce(&DorisType::DateTime(0), Value::Date(1)),
            Ok(Value::DateTime(MICROS_PER_DAY))
        );
        assert_eq!(
            coerce(&DorisType::Varchar(5), Value::Int(12)),
            Ok(Value::Str("12".into()))
        );
        assert!(coerce(&DorisType::Varchar(1), Value::Int(12)).is_err());
        assert_eq!(
            coerce(&DorisType::Boolean, Value::Int(1)),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            coerce(&DorisType::Json, Value::Str("[1, 2]".into())),
            Ok(Value::Json("[1,2]".into()))
        );
        assert_eq!(coerce(&DorisType::Int, Value::Null), Ok(Value::Null));
        assert_eq!(
            coerce(&DorisType::Date, Value::Int(20240102)),
            Ok(Value::Date(19724))
        );
    }

    #[test]
    fn json_keeps_key_order_and_strings() {
        assert_eq!(
            Value::parse_text(&DorisType::Json, "{\"b\": \"x y\\\" z\", \"a\": 1.50}"),
            Ok(Value::Json(r#"{"b":"x y\" z","a":1.50}"#.into()))
        );
        assert!(Value::parse_text(&DorisType::Json, "{\"a\":1} x").is_err());
    }
}

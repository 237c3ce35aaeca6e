//! Session time zones: wall clock ↔ instant, and MySQL-style date formatting.
//!
//! The emulator's default `time_zone` is `UTC` (a real FE defaults to its host's zone, often
//! `Asia/Shanghai`); clients that care set it with `SET time_zone = ...`.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{Offset, TimeZone};

/// The emulator's default session time zone.
pub const DEFAULT_TIME_ZONE: &str = "UTC";

const MICROS_PER_SEC: i64 = 1_000_000;

/// Resolve a MySQL/Doris time zone name: `+08:00`, `-5:30`, `UTC`, `Z`, `SYSTEM`, `CST`
/// (Doris maps it to Asia/Shanghai) or an IANA name.
pub fn parse_tz(name: &str) -> Option<TimeZone> {
    let n = name.trim();
    if n.is_empty() {
        return None;
    }
    let lower = n.to_ascii_lowercase();
    match lower.as_str() {
        "utc" | "z" | "gmt" | "etc/utc" | "system" | "+00:00" | "-00:00" => {
            return Some(TimeZone::UTC);
        }
        "cst" => return Some(named_or_fixed("Asia/Shanghai", 8 * 3600)),
        _ => {}
    }
    if let Some(rest) = n
        .strip_prefix('+')
        .map(|r| (1, r))
        .or_else(|| n.strip_prefix('-').map(|r| (-1, r)))
    {
        let (sign, body) = rest;
        let (h, m) = body.split_once(':')?;
        if h.is_empty() || h.len() > 2 || m.len() != 2 {
            return None;
        }
        let h: i32 = h.parse().ok()?;
        let m: i32 = m.parse().ok()?;
        if h > 14 || m > 59 {
            return None;
        }
        let secs = sign * (h * 3600 + m * 60);
        return Offset::from_seconds(secs).ok().map(TimeZone::fixed);
    }
    if lower == "asia/shanghai" {
        return Some(named_or_fixed("Asia/Shanghai", 8 * 3600));
    }
    TimeZone::get(n).ok()
}

fn named_or_fixed(name: &str, secs: i32) -> TimeZone {
    TimeZone::get(name)
        .ok()
        .unwrap_or_else(|| TimeZone::fixed(Offset::from_seconds(secs).unwrap_or(Offset::UTC)))
}

/// The session's zone (falls back to UTC for a value we cannot resolve).
pub fn session_tz(name: Option<&str>) -> TimeZone {
    name.and_then(parse_tz).unwrap_or(TimeZone::UTC)
}

/// Epoch milliseconds → the wall clock in `tz`, as microseconds since 1970-01-01 00:00:00 of that
/// wall clock (the representation of [`crate::types::Value::DateTime`]).
pub fn ms_to_wall_micros(tz: &TimeZone, ms: i64) -> i64 {
    let Ok(ts) = Timestamp::from_millisecond(ms) else {
        return ms.saturating_mul(1000);
    };
    let offset = tz.to_offset(ts).seconds() as i64;
    ms.saturating_mul(1000)
        .saturating_add(offset * MICROS_PER_SEC)
}

/// A wall clock in `tz` (microseconds as in [`ms_to_wall_micros`]) → epoch milliseconds.
pub fn wall_micros_to_ms(tz: &TimeZone, wall_us: i64) -> Option<i64> {
    let secs = wall_us.div_euclid(MICROS_PER_SEC);
    let sub_us = wall_us.rem_euclid(MICROS_PER_SEC);
    let naive = Timestamp::from_second(secs).ok()?;
    let civil: DateTime = naive.to_zoned(TimeZone::UTC).datetime();
    let zoned = civil.to_zoned(tz.clone()).ok()?;
    Some(zoned.timestamp().as_millisecond() + sub_us / 1000)
}

/// Parse exactly `yyyy-MM-dd HH:mm:ss` (the @incr / FOR TIME AS OF format) into wall microseconds.
pub fn parse_wall_seconds(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b' '
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        if !t.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    let dt = DateTime::new(y as i16, mo as i8, d as i8, h as i8, mi as i8, se as i8, 0).ok()?;
    let ts = dt.to_zoned(TimeZone::UTC).ok()?.timestamp();
    Some(ts.as_second() * MICROS_PER_SEC)
}

/// Split wall microseconds into civil fields.
fn civil(wall_us: i64) -> Option<(DateTime, i64)> {
    let secs = wall_us.div_euclid(MICROS_PER_SEC);
    let us = wall_us.rem_euclid(MICROS_PER_SEC);
    let ts = Timestamp::from_second(secs).ok()?;
    Some((ts.to_zoned(TimeZone::UTC).datetime(), us))
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Format wall microseconds with a MySQL `DATE_FORMAT` pattern (`%Y-%m-%d %H:%i:%s`, ...).
pub fn mysql_format(wall_us: i64, fmt: &str) -> Option<String> {
    let (dt, us) = civil(wall_us)?;
    let mut out = String::new();
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(f) = it.next() else {
            out.push('%');
            break;
        };
        let h12 = {
            let h = dt.hour() % 12;
            if h == 0 { 12 } else { h }
        };
        match f {
            'Y' => out.push_str(&format!("{:04}", dt.year())),
            'y' => out.push_str(&format!("{:02}", dt.year().rem_euclid(100))),
            'm' => out.push_str(&format!("{:02}", dt.month())),
            'c' => out.push_str(&dt.month().to_string()),
            'd' => out.push_str(&format!("{:02}", dt.day())),
            'e' => out.push_str(&dt.day().to_string()),
            'H' => out.push_str(&format!("{:02}", dt.hour())),
            'k' => out.push_str(&dt.hour().to_string()),
            'h' | 'I' => out.push_str(&format!("{h12:02}")),
            'l' => out.push_str(&h12.to_string()),
            'i' => out.push_str(&format!("{:02}", dt.minute())),
            's' | 'S' => out.push_str(&format!("{:02}", dt.second())),
            'f' => out.push_str(&format!("{us:06}")),
            'p' => out.push_str(if dt.hour() < 12 { "AM" } else { "PM" }),
            'T' => out.push_str(&format!(
                "{:02}:{:02}:{:02}",
                dt.hour(),
                dt.minute(),
                dt.second()
            )),
            'r' => out.push_str(&format!(
                "{h12:02}:{:02}:{:02} {}",
                dt.minute(),
                dt.second(),
                if dt.hour() < 12 { "AM" } else { "PM" }
            )),
            'j' => out.push_str(&format!("{:03}", dt.day_of_year())),
            'M' => out.push_str(MONTHS[(dt.month() as usize).saturating_sub(1) % 12]),
            'b' => out.push_str(&MONTHS[(dt.month() as usize).saturating_sub(1) % 12][..3]),
            'W' => out.push_str(DAYS[dt.weekday().to_monday_zero_offset() as usize % 7]),
            'a' => out.push_str(&DAYS[dt.weekday().to_monday_zero_offset() as usize % 7][..3]),
            'w' => out.push_str(&dt.weekday().to_sunday_zero_offset().to_string()),
            'D' => {
                let d = dt.day();
                let suffix = match (d % 10, d) {
                    (_, 11..=13) => "th",
                    (1, _) => "st",
                    (2, _) => "nd",
                    (3, _) => "rd",
                    _ => "th",
                };
                out.push_str(&format!("{d}{suffix}"));
            }
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_and_conversion() {
        let sh = parse_tz("+08:00").unwrap();
        let ms = 1_700_000_000_123;
        let wall = ms_to_wall_micros(&sh, ms);
        assert_eq!(
            mysql_format(wall, "%Y-%m-%d %H:%i:%s").unwrap(),
            "2023-11-15 06:13:20"
        );
        assert_eq!(wall_micros_to_ms(&sh, wall), Some(ms));
        assert_eq!(
            mysql_format(
                ms_to_wall_micros(&TimeZone::UTC, ms),
                "%Y-%m-%d %H:%i:%s.%f"
            )
            .unwrap(),
            "2023-11-14 22:13:20.123000"
        );
        assert!(parse_tz("Asia/Shanghai").is_some());
        assert!(parse_tz("Mars/Olympus").is_none());
        assert!(parse_tz("+8").is_none());
        assert_eq!(
            parse_wall_seconds("2023-11-14 22:13:20"),
            Some(1_700_000_000 * 1_000_000)
        );
        assert_eq!(parse_wall_seconds("2023-11-14T22:13:20"), None);
        assert_eq!(parse_wall_seconds("2023-13-14 22:13:20"), None);
        assert_eq!(parse_wall_seconds("2023-11-14 22:13"), None);
    }
}

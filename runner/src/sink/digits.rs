//! Number and date text without `std::fmt` (pure): the encoder's hot path writes millions of
//! integers, decimals and datetimes per second, and `write!` costs more than the digits.

/// `00` … `99`, two digits at a time.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Append the decimal digits of `v`.
pub fn write_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + v as u8;
    }
    out.extend_from_slice(&buf[i..]);
}

/// Append `v` in decimal, with a `-` when negative.
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(out, v.unsigned_abs());
}

/// Append the decimal digits of `v`.
pub fn write_u128(out: &mut Vec<u8>, v: u128) {
    if let Ok(small) = u64::try_from(v) {
        return write_u64(out, small);
    }
    // Split into a high part and 19 low digits, each a u64.
    const TEN19: u128 = 10_000_000_000_000_000_000;
    write_u128(out, v / TEN19);
    write_padded(out, (v % TEN19) as u64, 19);
}

/// Append `v` in decimal, with a `-` when negative.
pub fn write_i128(out: &mut Vec<u8>, v: i128) {
    if v < 0 {
        out.push(b'-');
    }
    write_u128(out, v.unsigned_abs());
}

/// Append `v` as exactly `width` digits, zero-padded on the left (`v` must have at most
/// `width` digits; `width` at most 20).
pub fn write_padded(out: &mut Vec<u8>, mut v: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    while v > 0 && i > buf.len() - width {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.extend_from_slice(&buf[buf.len() - width..]);
}

/// Append `v` (< 100) as two digits.
fn write_two(out: &mut Vec<u8>, v: u32) {
    let pair = (v as usize % 100) * 2;
    out.extend_from_slice(&PAIRS[pair..pair + 2]);
}

/// Append `v` as exactly `width` digits, for `v` < 10^38 (a DECIMAL fraction).
pub fn write_padded_u128(out: &mut Vec<u8>, v: u128, width: usize) {
    if width <= 19 {
        return write_padded(out, v as u64, width);
    }
    const TEN19: u128 = 10_000_000_000_000_000_000;
    write_padded(out, (v / TEN19) as u64, width - 19);
    write_padded(out, (v % TEN19) as u64, 19);
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March first
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Append `yyyy-MM-dd` for a day count since 1970-01-01; `false` (nothing written) when the year
/// is outside 0..=9999.
pub fn write_date(out: &mut Vec<u8>, days: i64) -> bool {
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return false;
    }
    write_padded(out, year as u64, 4);
    out.push(b'-');
    write_two(out, month);
    out.push(b'-');
    write_two(out, day);
    true
}

/// Append `yyyy-MM-dd HH:mm:ss.ffffff` for microseconds since 1970-01-01 00:00:00 of a wall
/// clock; `false` (nothing written) when the year is outside 0..=9999.
pub fn write_datetime_micros(out: &mut Vec<u8>, micros: i64) -> bool {
    const DAY: i64 = 86_400_000_000;
    let days = micros.div_euclid(DAY);
    let in_day = micros.rem_euclid(DAY);
    if !write_date(out, days) {
        return false;
    }
    let secs = (in_day / 1_000_000) as u32;
    out.push(b' ');
    write_two(out, secs / 3600);
    out.push(b':');
    write_two(out, secs / 60 % 60);
    out.push(b':');
    write_two(out, secs % 60);
    out.push(b'.');
    write_padded(out, (in_day % 1_000_000) as u64, 6);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn integers_match_display() {
        for v in [
            0i64,
            7,
            -7,
            10,
            99,
            100,
            12_345,
            -1_000_000,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(text(|o| write_i64(o, v)), v.to_string());
        }
        assert_eq!(text(|o| write_u64(o, u64::MAX)), u64::MAX.to_string());
        for v in [
            0i128,
            -5,
            i128::MAX,
            i128::MIN,
            10i128.pow(19),
            -(10i128.pow(30)) - 7,
        ] {
            assert_eq!(text(|o| write_i128(o, v)), v.to_string());
        }
        assert_eq!(text(|o| write_padded(o, 42, 6)), "000042");
        assert_eq!(text(|o| write_padded(o, 0, 2)), "00");
        assert_eq!(
            text(|o| write_padded_u128(o, 12_345, 30)),
            format!("{:030}", 12_345)
        );
    }

    #[test]
    fn dates_and_datetimes_match_jiff() {
        for days in [-719_528i64, -1, 0, 1, 11_016, 19_000, 2_932_896, -100_000] {
            let expected = jiff::civil::date(1970, 1, 1)
                .checked_add(jiff::Span::new().days(days))
                .unwrap()
                .strftime("%Y-%m-%d")
                .to_string();
            assert_eq!(text(|o| assert!(write_date(o, days))), expected, "{days}");
        }
        assert!(text(|o| assert!(!write_date(o, 2_932_897))).is_empty());
        for micros in [
            0i64,
            1_700_000_000_123_456,
            -1,
            -62_167_219_200_000_000, // 0000-01-01
            253_402_207_199_999_999, // jiff's last instant in 9999
        ] {
            let dt = jiff::Timestamp::from_microsecond(micros)
                .unwrap()
                .to_zoned(jiff::tz::TimeZone::UTC)
                .datetime();
            let expected = format!(
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}",
                dt.year(),
                dt.month(),
                dt.day(),
                dt.hour(),
                dt.minute(),
                dt.second(),
                dt.subsec_nanosecond() / 1_000
            );
            assert_eq!(
                text(|o| assert!(write_datetime_micros(o, micros))),
                expected
            );
        }
        assert_eq!(
            text(|o| assert!(write_datetime_micros(o, 253_402_300_799_999_999))),
            "9999-12-31 23:59:59.999999"
        );
        assert!(text(|o| assert!(!write_datetime_micros(o, 253_402_300_800_000_000))).is_empty());
    }
}

//! Durations written the Kubernetes way: `500ms`, `10s`, `5m`, `1h30m`, `0s`.
//!
//! The grammar is the subset of Go's `time.ParseDuration` that the API server's CEL `duration()`
//! also understands, so a value the CRD's CEL rules accept parses here too, and the other way round.
//! Days are not a unit (`24h` is); fractions are not allowed (`1500ms`, not `1.5s`).

use std::time::Duration;

/// The units a duration may use, longest first so that `ms` wins over `m`.
const UNITS: [(&str, u64); 4] = [("ms", 1), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)];

/// A regular expression for the schema (`pattern`) that matches exactly what [`parse_duration`] accepts.
pub const DURATION_PATTERN: &str = "^([0-9]+(ms|s|m|h))+$";

/// Why a duration string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The string was empty.
    #[error("is empty; write a duration such as \"10s\", \"5m\" or \"1h30m\"")]
    Empty,
    /// A number was not followed by a unit.
    #[error("{input:?} has a number without a unit; add one of ms, s, m, h (e.g. \"{number}s\")")]
    MissingUnit {
        /// The whole input.
        input: String,
        /// The number that lacks its unit.
        number: String,
    },
    /// A unit was not one of `ms`, `s`, `m`, `h`.
    #[error("{input:?} uses the unknown unit {unit:?}; use ms, s, m or h (e.g. \"24h\" for a day)")]
    UnknownUnit {
        /// The whole input.
        input: String,
        /// The unit as written.
        unit: String,
    },
    /// Something other than digits and units (a space, a sign, a decimal point).
    #[error(
        "{input:?} is not a duration; write whole numbers with units and nothing else, \
         e.g. \"10s\", \"500ms\" or \"1h30m\""
    )]
    Malformed {
        /// The whole input.
        input: String,
    },
    /// The value does not fit in a `u64` of milliseconds.
    #[error("{input:?} is too large")]
    Overflow {
        /// The whole input.
        input: String,
    },
}

/// Parses a Kubernetes-style duration (`10s`, `5m`, `1h30m`, `500ms`, `0s`).
///
/// # Errors
/// Returns a [`DurationError`] that says what is wrong and what a valid value looks like.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    if input.is_empty() {
        return Err(DurationError::Empty);
    }
    let malformed = || DurationError::Malformed {
        input: input.to_owned(),
    };
    let overflow = || DurationError::Overflow {
        input: input.to_owned(),
    };
    let mut rest = input;
    let mut total_ms: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(malformed());
        }
        let (number, after) = rest.split_at(digits);
        let unit_len = after.len()
            - after
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        if unit_len == 0 {
            if after.is_empty() {
                return Err(DurationError::MissingUnit {
                    input: input.to_owned(),
                    number: number.to_owned(),
                });
            }
            return Err(malformed());
        }
        let (unit, after_unit) = after.split_at(unit_len);
        let factor = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, factor)| *factor)
            .ok_or_else(|| DurationError::UnknownUnit {
                input: input.to_owned(),
                unit: unit.to_owned(),
            })?;
        let value: u64 = number.parse().map_err(|_| overflow())?;
        let part = value.checked_mul(factor).ok_or_else(overflow)?;
        total_ms = total_ms.checked_add(part).ok_or_else(overflow)?;
        rest = after_unit;
    }
    Ok(Duration::from_millis(total_ms))
}

/// Formats a duration the way [`parse_duration`] reads it, largest units first (`1h30m`, `500ms`, `0s`).
pub fn format_duration(duration: Duration) -> String {
    let mut ms = duration.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (unit, factor) in [("h", 3_600_000u128), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
        if ms >= factor {
            out.push_str(&format!("{}{unit}", ms / factor));
            ms %= factor;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit_and_combinations() {
        let cases = [
            ("0s", 0),
            ("500ms", 500),
            ("1s", 1_000),
            ("10s", 10_000),
            ("5m", 300_000),
            ("1h", 3_600_000),
            ("1h30m", 5_400_000),
            ("2m30s", 150_000),
            ("1s500ms", 1_500),
            ("24h", 86_400_000),
        ];
        for (input, ms) in cases {
            assert_eq!(
                parse_duration(input),
                Ok(Duration::from_millis(ms)),
                "{input}"
            );
        }
    }

    #[test]
    fn rejects_bad_input_with_a_hint() {
        let cases = [
            (
                "",
                "is empty; write a duration such as \"10s\", \"5m\" or \"1h30m\"",
            ),
            (
                "10",
                "\"10\" has a number without a unit; add one of ms, s, m, h (e.g. \"10s\")",
            ),
            (
                "1d",
                "\"1d\" uses the unknown unit \"d\"; use ms, s, m or h (e.g. \"24h\" for a day)",
            ),
            (
                "5min",
                "\"5min\" uses the unknown unit \"min\"; use ms, s, m or h (e.g. \"24h\" for a day)",
            ),
            (
                "10 s",
                "\"10 s\" is not a duration; write whole numbers with units and nothing else, e.g. \"10s\", \"500ms\" or \"1h30m\"",
            ),
            (
                "1.5s",
                "\"1.5s\" is not a duration; write whole numbers with units and nothing else, e.g. \"10s\", \"500ms\" or \"1h30m\"",
            ),
            (
                "-1s",
                "\"-1s\" is not a duration; write whole numbers with units and nothing else, e.g. \"10s\", \"500ms\" or \"1h30m\"",
            ),
            (
                "s",
                "\"s\" is not a duration; write whole numbers with units and nothing else, e.g. \"10s\", \"500ms\" or \"1h30m\"",
            ),
            (
                "99999999999999999999h",
                "\"99999999999999999999h\" is too large",
            ),
            ("9999999999999999h", "\"9999999999999999h\" is too large"),
        ];
        for (input, message) in cases {
            let err = parse_duration(input).expect_err(input);
            assert_eq!(err.to_string(), message, "{input}");
        }
    }

    #[test]
    fn format_round_trips() {
        for ms in [
            0u64, 1, 500, 1_000, 10_000, 61_000, 5_400_000, 86_400_000, 3_723_004,
        ] {
            let d = Duration::from_millis(ms);
            assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{ms}");
        }
        assert_eq!(format_duration(Duration::from_millis(5_400_000)), "1h30m");
        assert_eq!(format_duration(Duration::from_millis(1_500)), "1s500ms");
    }
}

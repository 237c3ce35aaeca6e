//! Byte sizes written as Kubernetes quantities: `10Mi`, `1Gi`, `500k`, `1048576`.

/// Binary suffixes (powers of 1024) and decimal suffixes (powers of 1000), as Kubernetes spells them.
const SUFFIXES: [(&str, u128); 12] = [
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
];

/// Why a byte quantity could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not a number followed by an optional suffix.
    #[error(
        "{input:?} is not a byte quantity; write a number with an optional suffix \
         (Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E), e.g. \"10Mi\""
    )]
    Malformed {
        /// The whole input.
        input: String,
    },
    /// The quantity is not a whole number of bytes (`0.5`, `1.0001k`).
    #[error("{input:?} is not a whole number of bytes")]
    Fractional {
        /// The whole input.
        input: String,
    },
    /// The quantity does not fit in a `u64`.
    #[error("{input:?} is too large")]
    Overflow {
        /// The whole input.
        input: String,
    },
}

/// Parses a byte count written as a Kubernetes quantity (`10Mi`, `1Gi`, `500k`, `1.5Ki`, `1048576`).
///
/// # Errors
/// Returns a [`QuantityError`] when the text is not a quantity or not a whole number of bytes.
pub fn parse_byte_quantity(input: &str) -> Result<u64, QuantityError> {
    let malformed = || QuantityError::Malformed {
        input: input.to_owned(),
    };
    let overflow = || QuantityError::Overflow {
        input: input.to_owned(),
    };
    let number_len = input.len()
        - input
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')
            .len();
    let (number, suffix) = input.split_at(number_len);
    let multiplier = if suffix.is_empty() {
        1
    } else {
        SUFFIXES
            .iter()
            .find(|(name, _)| *name == suffix)
            .map(|(_, m)| *m)
            .ok_or_else(malformed)?
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(malformed());
    }
    // Exact integer arithmetic: value = digits / 10^fraction_len * multiplier.
    let digits: String = [whole, fraction].concat();
    if digits.len() > 30 {
        return Err(overflow());
    }
    let mantissa: u128 = digits.parse().map_err(|_| malformed())?;
    let scale = 10u128.pow(u32::try_from(fraction.len()).map_err(|_| overflow())?);
    let scaled = mantissa.checked_mul(multiplier).ok_or_else(overflow)?;
    if scaled % scale != 0 {
        return Err(QuantityError::Fractional {
            input: input.to_owned(),
        });
    }
    u64::try_from(scaled / scale).map_err(|_| overflow())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_decimal_and_plain() {
        let cases = [
            ("0", 0),
            ("1048576", 1_048_576),
            ("10Mi", 10 * 1024 * 1024),
            ("1Gi", 1024 * 1024 * 1024),
            ("1Ki", 1024),
            ("1.5Ki", 1536),
            ("500k", 500_000),
            ("2M", 2_000_000),
            ("1G", 1_000_000_000),
            ("1.000", 1),
        ];
        for (input, bytes) in cases {
            assert_eq!(parse_byte_quantity(input), Ok(bytes), "{input}");
        }
    }

    #[test]
    fn rejects_with_reasons() {
        let malformed = |s: &str| {
            format!(
                "{s:?} is not a byte quantity; write a number with an optional suffix \
                 (Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E), e.g. \"10Mi\""
            )
        };
        let cases = [
            ("", malformed("")),
            ("Mi", malformed("Mi")),
            ("10MB", malformed("10MB")),
            ("10 Mi", malformed("10 Mi")),
            ("-1", malformed("-1")),
            ("1.2.3", malformed("1.2.3")),
            ("100m", malformed("100m")),
            ("0.5", "\"0.5\" is not a whole number of bytes".to_owned()),
            (
                "1.0001k",
                "\"1.0001k\" is not a whole number of bytes".to_owned(),
            ),
            ("20Ei", "\"20Ei\" is too large".to_owned()),
        ];
        for (input, message) in cases {
            let err = parse_byte_quantity(input).expect_err(input);
            assert_eq!(err.to_string(), message, "{input}");
        }
    }
}

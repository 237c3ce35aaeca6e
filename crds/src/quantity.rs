//! Kubernetes quantities: byte sizes (`10Mi`, `1Gi`, `500k`, `1048576`) and the resource quantities
//! of requests and limits (`250m`, `0.5`, `512Mi`, `1e3`).

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
    /// Not a resource quantity (a request or limit).
    #[error(
        "{input:?} is not a quantity; write a number with an optional suffix (m, k, M, G, T, P, E, \
         Ki, Mi, Gi, Ti, Pi, Ei) or exponent, e.g. \"250m\", \"0.5\" or \"512Mi\""
    )]
    NotAQuantity {
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

/// A resource quantity as an exact count of billionths (Kubernetes keeps nano precision and rounds
/// finer values up), so requests and limits can be compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResourceQuantity(u128);

impl ResourceQuantity {
    /// The value in billionths of the unit (`250m` is 250 000 000).
    pub fn nanos(self) -> u128 {
        self.0
    }
}

/// Parses a request or limit as Kubernetes writes it (`<number><suffix>`, the suffix a decimal SI
/// one `n u m k M G T P E`, a binary one `Ki … Ei`, or an exponent `e3`/`E-2`), not negative.
///
/// # Errors
/// [`QuantityError::NotAQuantity`] for any other text, [`QuantityError::Overflow`] when the value
/// in billionths does not fit in a `u128` (about `3E29`).
pub fn parse_resource_quantity(input: &str) -> Result<ResourceQuantity, QuantityError> {
    let bad = || QuantityError::NotAQuantity {
        input: input.to_owned(),
    };
    let overflow = || QuantityError::Overflow {
        input: input.to_owned(),
    };
    let text = input.strip_prefix('+').unwrap_or(input);
    let number_len = text.len()
        - text
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')
            .len();
    let (number, suffix) = text.split_at(number_len);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(bad());
    }
    let (pow2, pow10): (u32, i64) = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E']).ok_or_else(bad)?;
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            (0, digits.parse::<i64>().map_err(|_| overflow())?)
        }
    };
    let digits = [whole, fraction].concat();
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(overflow());
    }
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| bad())?
    };
    // value in nanos = mantissa * 2^pow2 * 10^(pow10 + 9 - fraction digits)
    let scaled = mantissa.checked_mul(1u128 << pow2).ok_or_else(overflow)?;
    // An exponent written near i64's ends must not overflow the arithmetic (found by fuzzing).
    let exp10 = i64::try_from(fraction.len())
        .ok()
        .and_then(|f| pow10.checked_add(9)?.checked_sub(f))
        .ok_or_else(overflow)?;
    let nanos = if exp10 >= 0 {
        let factor = u32::try_from(exp10)
            .ok()
            .and_then(|e| 10u128.checked_pow(e))
            .ok_or_else(overflow)?;
        scaled.checked_mul(factor).ok_or_else(overflow)?
    } else {
        match u32::try_from(-exp10)
            .ok()
            .and_then(|e| 10u128.checked_pow(e))
        {
            Some(divisor) => scaled.div_ceil(divisor),
            // Smaller than 10^-38 of a nano: rounds up to one, or is zero.
            None => u128::from(scaled > 0),
        }
    };
    Ok(ResourceQuantity(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exponent_at_the_ends_of_i64_is_an_error_not_a_panic() {
        for input in ["1e9223372036854775807", "1e9223372036854775799"] {
            assert_eq!(
                parse_resource_quantity(input),
                Err(QuantityError::Overflow {
                    input: input.to_owned()
                }),
                "{input}"
            );
        }
        // At the other end the value is a sliver of a nano: it rounds up to one.
        assert_eq!(
            parse_resource_quantity("1.5e-9223372036854775808"),
            Ok(ResourceQuantity(1))
        );
    }

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

    #[test]
    fn resource_quantities_compare_exactly() {
        let q = |s: &str| parse_resource_quantity(s).unwrap().nanos();
        assert_eq!(q("250m"), 250_000_000);
        assert_eq!(q("0.25"), 250_000_000);
        assert_eq!(q(".25"), 250_000_000);
        assert_eq!(q("+1"), 1_000_000_000);
        assert_eq!(q("2"), 2_000_000_000);
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("1E3"), q("1k"));
        assert_eq!(q("1E"), 10u128.pow(27));
        assert_eq!(q("12e-1"), 1_200_000_000);
        assert_eq!(q("128Mi"), 128 * (1u128 << 20) * 1_000_000_000);
        assert_eq!(q("1.5Gi"), 3 * (1u128 << 29) * 1_000_000_000);
        assert_eq!(q("100n"), 100);
        assert_eq!(q("1u"), 1_000);
        assert_eq!(q("0"), 0);
        assert_eq!(q("0.0000000001"), 1, "finer than a nano rounds up");
        assert!(q("512Mi") < q("1Gi"));
        assert!(q("1G") < q("1Gi"));
        assert!(q("100m") < q("1"));
    }

    #[test]
    fn resource_quantities_reject_with_the_input() {
        for input in [
            "", "-1", "1.2.3", "10MB", "1 Gi", "Mi", "1e", "1e+", "1ee3", "m", "1Mi5",
        ] {
            let err = parse_resource_quantity(input).expect_err(input);
            assert_eq!(
                err.to_string(),
                format!(
                    "{input:?} is not a quantity; write a number with an optional suffix (m, k, M, \
                     G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent, e.g. \"250m\", \"0.5\" or \"512Mi\""
                ),
                "{input}"
            );
        }
        for input in [
            "1e40",
            "99999999999999999999999999999999",
            "1e99999999999999999999",
        ] {
            assert_eq!(
                parse_resource_quantity(input).unwrap_err().to_string(),
                format!("{input:?} is too large"),
                "{input}"
            );
        }
    }
}

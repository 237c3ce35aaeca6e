//! A stored row in a compact form: one shared byte buffer instead of a vector of values.
//!
//! A `Vec<Value>` costs 32 bytes a value plus an allocation per text; the bench's five-column row
//! took about 440 bytes with its key, so ten million rows did not fit on the test machine. A
//! [`Row`] is the values' tagged, variable-length encoding in one reference-counted allocation
//! (about 36 bytes for that row), shared between the current rows and the history images, and
//! decoded when read. It starts with the row's tablet index, so a scan of some tablets decides
//! without decoding.

use std::sync::Arc;

use crate::types::Value;

/// A row's values, encoded. Cloning shares the bytes.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Row(Arc<[u8]>);

/// The tablet index a row stores when there are more tablets than it can name.
const UNKNOWN_TABLET: u16 = u16::MAX;

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const INT: u8 = 3;
const LARGE_INT: u8 = 4;
const FLOAT: u8 = 5;
const DECIMAL: u8 = 6;
const STR: u8 = 7;
const DATE: u8 = 8;
const DATE_TIME: u8 = 9;
const JSON: u8 = 10;

fn push_varint(out: &mut Vec<u8>, mut v: u128) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i128) -> u128 {
    ((v << 1) ^ (v >> 127)) as u128
}

fn unzigzag(v: u128) -> i128 {
    ((v >> 1) as i128) ^ -((v & 1) as i128)
}

fn push_text(out: &mut Vec<u8>, s: &str) {
    push_varint(out, s.len() as u128);
    out.extend_from_slice(s.as_bytes());
}

impl Row {
    /// Encodes `values`, recording `tablet` (the index into the table's tablets).
    pub fn encode(values: &[Value], tablet: usize) -> Row {
        let mut out = Vec::with_capacity(2 + values.len() * 6);
        let tablet = u16::try_from(tablet)
            .ok()
            .filter(|t| *t != UNKNOWN_TABLET)
            .unwrap_or(UNKNOWN_TABLET);
        out.extend_from_slice(&tablet.to_le_bytes());
        for v in values {
            match v {
                Value::Null => out.push(NULL),
                Value::Bool(false) => out.push(FALSE),
                Value::Bool(true) => out.push(TRUE),
                Value::Int(i) => {
                    out.push(INT);
                    push_varint(&mut out, zigzag(*i as i128));
                }
                Value::LargeInt(i) => {
                    out.push(LARGE_INT);
                    push_varint(&mut out, zigzag(*i));
                }
                Value::Float(f) => {
                    out.push(FLOAT);
                    out.extend_from_slice(&f.to_bits().to_le_bytes());
                }
                Value::Decimal(u, s) => {
                    out.push(DECIMAL);
                    out.push(*s);
                    push_varint(&mut out, zigzag(*u));
                }
                Value::Str(s) => {
                    out.push(STR);
                    push_text(&mut out, s);
                }
                Value::Date(d) => {
                    out.push(DATE);
                    push_varint(&mut out, zigzag(*d as i128));
                }
                Value::DateTime(t) => {
                    out.push(DATE_TIME);
                    push_varint(&mut out, zigzag(*t as i128));
                }
                Value::Json(j) => {
                    out.push(JSON);
                    push_text(&mut out, j);
                }
            }
        }
        Row(out.into())
    }

    /// The tablet index recorded at encoding; `None` when the table had too many tablets to
    /// record it (then the caller hashes the values).
    pub fn tablet(&self) -> Option<usize> {
        let t = u16::from_le_bytes([self.0[0], self.0[1]]);
        (t != UNKNOWN_TABLET).then_some(t as usize)
    }

    /// The values. The bytes were written by [`Row::encode`] in this process, so a malformed
    /// buffer is a bug here, not outside input.
    pub fn decode(&self) -> Vec<Value> {
        let mut r = Reader { b: &self.0, at: 2 };
        let mut out = Vec::new();
        while r.at < r.b.len() {
            out.push(r.value());
        }
        out
    }
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.decode()).finish()
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.b[self.at];
        self.at += 1;
        b
    }

    fn varint(&mut self) -> u128 {
        let mut v = 0u128;
        let mut shift = 0;
        loop {
            let b = self.byte();
            v |= ((b & 0x7f) as u128) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    fn signed(&mut self) -> i128 {
        unzigzag(self.varint())
    }

    fn text(&mut self) -> String {
        let n = self.varint() as usize;
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        // Written from a `&str` by `encode`.
        String::from_utf8(s.to_vec()).expect("row text is UTF-8")
    }

    fn value(&mut self) -> Value {
        match self.byte() {
            NULL => Value::Null,
            FALSE => Value::Bool(false),
            TRUE => Value::Bool(true),
            INT => Value::Int(self.signed() as i64),
            LARGE_INT => Value::LargeInt(self.signed()),
            FLOAT => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.b[self.at..self.at + 8]);
                self.at += 8;
                Value::Float(f64::from_bits(u64::from_le_bytes(b)))
            }
            DECIMAL => {
                let s = self.byte();
                Value::Decimal(self.signed(), s)
            }
            STR => Value::Str(self.text()),
            DATE => Value::Date(self.signed() as i32),
            DATE_TIME => Value::DateTime(self.signed() as i64),
            JSON => Value::Json(self.text()),
            tag => unreachable!("row tag {tag} was never written"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::Int),
            any::<i128>().prop_map(Value::LargeInt),
            any::<f64>().prop_map(Value::Float),
            (any::<i128>(), 0u8..=38).prop_map(|(u, s)| Value::Decimal(u, s)),
            ".*".prop_map(Value::Str),
            any::<i32>().prop_map(Value::Date),
            any::<i64>().prop_map(Value::DateTime),
            ".*".prop_map(Value::Json),
        ]
    }

    /// Values compared by their bits, so NaN and -0.0 must come back as they went in.
    fn bits(vs: &[Value]) -> Vec<String> {
        vs.iter()
            .map(|v| match v {
                Value::Float(f) => format!("f{:x}", f.to_bits()),
                other => format!("{other:?}"),
            })
            .collect()
    }

    proptest! {
        #[test]
        fn a_row_decodes_to_the_values_it_was_encoded_from(
            vs in proptest::collection::vec(value(), 0..12),
            tablet in 0usize..70_000,
        ) {
            let row = Row::encode(&vs, tablet);
            prop_assert_eq!(bits(&row.decode()), bits(&vs));
            let want = if tablet < UNKNOWN_TABLET as usize { Some(tablet) } else { None };
            prop_assert_eq!(row.tablet(), want);
        }
    }

    #[test]
    fn the_ends_of_every_width_survive() {
        let vs = vec![
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::LargeInt(i128::MIN),
            Value::LargeInt(i128::MAX),
            Value::Decimal(i128::MIN, 38),
            Value::Date(i32::MIN),
            Value::DateTime(i64::MAX),
            Value::Float(f64::NEG_INFINITY),
            Value::Float(-0.0),
            Value::Str(String::new()),
            Value::Str("a\0é".into()),
        ];
        assert_eq!(bits(&Row::encode(&vs, 3).decode()), bits(&vs));
        // The bench's row: an id, a short name, an age, a score, a time: about 30 bytes.
        let bench = [
            Value::Int(123_456),
            Value::Str("name-123456".into()),
            Value::Int(42),
            Value::Decimal(9_950, 2),
            Value::DateTime(1_764_000_000_000_000),
        ];
        let len = Row::encode(&bench, 0).0.len();
        assert!(len <= 40, "{len} bytes");
    }
}

//! Comparable, hashable encodings of values, used as unique-key map keys and for tablet routing.

use crate::types::Value;

/// One value in a form that is totally ordered, hashable and equal across INT/LARGEINT widths.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum KeyPart {
    Null,
    Bool(bool),
    Int(i128),
    /// Order-preserving bits of an `f64` (see [`ordered_bits`]).
    Float(u64),
    Dec(i128, u8),
    Str(String),
    Date(i32),
    DateTime(i64),
    Json(String),
}

/// A row's key: the key parts of the key columns, in key order.
pub(crate) type Key = Vec<KeyPart>;

fn ordered_bits(f: f64) -> u64 {
    let f = if f == 0.0 { 0.0 } else { f };
    let b = f.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

impl From<&Value> for KeyPart {
    fn from(v: &Value) -> Self {
        match v {
            Value::Null => KeyPart::Null,
            Value::Bool(b) => KeyPart::Bool(*b),
            Value::Int(i) => KeyPart::Int(*i as i128),
            Value::LargeInt(i) => KeyPart::Int(*i),
            Value::Float(f) => KeyPart::Float(ordered_bits(*f)),
            Value::Decimal(u, s) => KeyPart::Dec(*u, *s),
            Value::Str(s) => KeyPart::Str(s.clone()),
            Value::Date(d) => KeyPart::Date(*d),
            Value::DateTime(t) => KeyPart::DateTime(*t),
            Value::Json(j) => KeyPart::Json(j.clone()),
        }
    }
}

/// The key of `row` made of the columns at `idx`.
pub(crate) fn key_of(row: &[Value], idx: &[usize]) -> Key {
    idx.iter().map(|&i| KeyPart::from(&row[i])).collect()
}

/// The whole row as a key (duplicate-key tables: row identity).
pub(crate) fn row_key(row: &[Value]) -> Key {
    row.iter().map(KeyPart::from).collect()
}

/// FNV-1a over a canonical byte encoding: stable across runs and platforms.
pub(crate) fn stable_hash(row: &[Value], idx: &[usize]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    let mut one = |v: &Value| match v {
        Value::Null => feed(&[0]),
        Value::Bool(b) => feed(&[1, *b as u8]),
        Value::Int(i) => {
            feed(&[2]);
            feed(&(*i as i128).to_le_bytes())
        }
        Value::LargeInt(i) => {
            feed(&[2]);
            feed(&i.to_le_bytes())
        }
        Value::Float(f) => {
            feed(&[3]);
            feed(&ordered_bits(*f).to_le_bytes())
        }
        Value::Decimal(u, s) => {
            feed(&[4, *s]);
            feed(&u.to_le_bytes())
        }
        Value::Str(s) => {
            feed(&[5]);
            feed(s.as_bytes());
            feed(&[0xff])
        }
        Value::Date(d) => {
            feed(&[6]);
            feed(&d.to_le_bytes())
        }
        Value::DateTime(t) => {
            feed(&[7]);
            feed(&t.to_le_bytes())
        }
        Value::Json(j) => {
            feed(&[8]);
            feed(j.as_bytes());
            feed(&[0xff])
        }
    };
    if idx.is_empty() {
        row.iter().for_each(&mut one);
    } else {
        idx.iter().for_each(|&i| one(&row[i]));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_widths_are_one_key_and_floats_order() {
        assert_eq!(
            KeyPart::from(&Value::Int(5)),
            KeyPart::from(&Value::LargeInt(5))
        );
        let mut fs: Vec<KeyPart> = [3.5, -1.0, 0.0, -0.0, -7.25, 2.0]
            .iter()
            .map(|f| KeyPart::from(&Value::Float(*f)))
            .collect();
        fs.sort();
        let back: Vec<KeyPart> = [-7.25, -1.0, 0.0, 0.0, 2.0, 3.5]
            .iter()
            .map(|f| KeyPart::from(&Value::Float(*f)))
            .collect();
        assert_eq!(fs, back);
        let row = vec![Value::Int(1), Value::Str("a".into())];
        assert_eq!(
            stable_hash(&row, &[0]),
            stable_hash(&[Value::LargeInt(1)], &[0])
        );
        assert_ne!(stable_hash(&row, &[0]), stable_hash(&row, &[1]));
    }
}

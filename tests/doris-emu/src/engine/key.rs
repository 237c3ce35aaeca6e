//! Comparable, hashable encodings of values, used as unique-key map keys and for tablet routing.

use crate::types::Value;

/// A row's key in a memcomparable form: the bytes of the key parts, one after another, so that
/// comparing two keys' bytes orders them as their values (by type first, then value; INT and
/// LARGEINT widths are one type, floats in numeric order with -0.0 equal to 0.0). Short keys (any
/// integer key, short strings) are stored inline; a key is one small value in a map, not a vector
/// of parts.
#[derive(Clone)]
pub(crate) struct Key(KeyBuf);

/// Bytes a key holds without an allocation.
const INLINE: usize = 22;

#[derive(Clone)]
enum KeyBuf {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Key {
    fn from_bytes(b: &[u8]) -> Key {
        if b.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..b.len()].copy_from_slice(b);
            Key(KeyBuf::Inline {
                len: b.len() as u8,
                bytes,
            })
        } else {
            Key(KeyBuf::Heap(b.into()))
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            KeyBuf::Inline { len, bytes } => &bytes[..*len as usize],
            KeyBuf::Heap(b) => b,
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}
impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}
impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({:02x?})", self.as_bytes())
    }
}

fn ordered_bits(f: f64) -> u64 {
    let f = if f == 0.0 { 0.0 } else { f };
    let b = f.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

/// Text bytes, order-preserving and self-delimiting: 0x00 becomes 0x00 0xFF, the end 0x00 0x00.
fn push_text(out: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Appends one value's memcomparable bytes: a type byte, then the value in an order-preserving,
/// self-delimiting form (signed integers with the sign bit flipped, big-endian).
fn push_part(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(0),
        Value::Bool(b) => out.extend_from_slice(&[1, *b as u8]),
        Value::Int(i) => {
            out.push(2);
            out.extend_from_slice(&((*i as i128 as u128) ^ (1 << 127)).to_be_bytes())
        }
        Value::LargeInt(i) => {
            out.push(2);
            out.extend_from_slice(&((*i as u128) ^ (1 << 127)).to_be_bytes())
        }
        Value::Float(f) => {
            out.push(3);
            out.extend_from_slice(&ordered_bits(*f).to_be_bytes())
        }
        Value::Decimal(u, s) => {
            out.push(4);
            out.extend_from_slice(&((*u as u128) ^ (1 << 127)).to_be_bytes());
            out.push(*s)
        }
        Value::Str(s) => {
            out.push(5);
            push_text(out, s)
        }
        Value::Date(d) => {
            out.push(6);
            out.extend_from_slice(&((*d as u32) ^ (1 << 31)).to_be_bytes())
        }
        Value::DateTime(t) => {
            out.push(7);
            out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes())
        }
        Value::Json(j) => {
            out.push(8);
            push_text(out, j)
        }
    }
}

/// The key of `row` made of the columns at `idx`.
pub(crate) fn key_of(row: &[Value], idx: &[usize]) -> Key {
    let mut out = Vec::with_capacity(INLINE);
    for &i in idx {
        push_part(&mut out, &row[i]);
    }
    Key::from_bytes(&out)
}

/// The whole row as a key (duplicate-key tables: row identity).
pub(crate) fn row_key(row: &[Value]) -> Key {
    let mut out = Vec::with_capacity(INLINE);
    for v in row {
        push_part(&mut out, v);
    }
    Key::from_bytes(&out)
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

    fn k(vs: &[Value]) -> Key {
        row_key(vs)
    }

    #[test]
    fn int_widths_are_one_key_and_floats_order() {
        assert_eq!(k(&[Value::Int(5)]), k(&[Value::LargeInt(5)]));
        let mut fs: Vec<Key> = [3.5, -1.0, 0.0, -0.0, -7.25, 2.0]
            .iter()
            .map(|f| k(&[Value::Float(*f)]))
            .collect();
        fs.sort();
        let back: Vec<Key> = [-7.25, -1.0, 0.0, 0.0, 2.0, 3.5]
            .iter()
            .map(|f| k(&[Value::Float(*f)]))
            .collect();
        assert_eq!(fs, back);
        let row = vec![Value::Int(1), Value::Str("a".into())];
        assert_eq!(
            stable_hash(&row, &[0]),
            stable_hash(&[Value::LargeInt(1)], &[0])
        );
        assert_ne!(stable_hash(&row, &[0]), stable_hash(&row, &[1]));
    }

    /// The order a key's bytes give, for values of one type, is the values' order; a shorter text
    /// sorts first, a NUL inside a text sorts after its end; tuples compare part by part.
    #[test]
    fn key_bytes_order_as_the_values() {
        let ints = [
            i128::MIN,
            i64::MIN as i128 - 1,
            -300,
            -1,
            0,
            1,
            255,
            256,
            i64::MAX as i128 + 1,
            i128::MAX,
        ];
        for w in ints.windows(2) {
            assert!(
                k(&[Value::LargeInt(w[0])]) < k(&[Value::LargeInt(w[1])]),
                "{w:?}"
            );
        }
        let texts = ["", "\0", "\0\0", "a", "a\0", "a\0b", "ab", "b", "é"];
        for w in texts.windows(2) {
            assert!(
                k(&[Value::Str(w[0].into())]) < k(&[Value::Str(w[1].into())]),
                "{w:?}"
            );
        }
        for w in [i32::MIN, -1, 0, 1, i32::MAX].windows(2) {
            assert!(k(&[Value::Date(w[0])]) < k(&[Value::Date(w[1])]));
        }
        for w in [i64::MIN, -1, 0, 1, i64::MAX].windows(2) {
            assert!(k(&[Value::DateTime(w[0])]) < k(&[Value::DateTime(w[1])]));
        }
        assert!(k(&[Value::Decimal(-5, 2)]) < k(&[Value::Decimal(3, 2)]));
        // (a, z) < (ab, a): the first part decides, however the second compares.
        let a_z = k(&[Value::Str("a".into()), Value::Str("z".into())]);
        let ab_a = k(&[Value::Str("ab".into()), Value::Str("a".into())]);
        assert!(a_z < ab_a);
        assert!(k(&[Value::Null]) < k(&[Value::Int(i64::MIN)]));
        // A long key is kept whole.
        let long = "x".repeat(100);
        assert_ne!(
            k(&[Value::Str(long.clone())]),
            k(&[Value::Str(long.clone() + "y")])
        );
        assert_eq!(k(&[Value::Str(long.clone())]), k(&[Value::Str(long)]));
    }
}

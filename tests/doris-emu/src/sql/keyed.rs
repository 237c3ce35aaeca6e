//! Which keys a WHERE names. A predicate that pins every key column of a UNIQUE table to
//! literals (`k = 1`, `k IN (1, 2)`, `k1 = 1 AND k2 = 'a'`, among other conjuncts) can only be true
//! on the rows with those keys, so a statement looks those rows up instead of reading the whole
//! table (the point reads and deletes a client sends at a high rate). The whole predicate is
//! still evaluated on the rows found, so the outcome is the scan's. Pure: no engine access.

use super::ast::{BinOp, Expr, Literal};
use crate::engine::{KeysType, TableInfo};
use crate::types::{DorisType, Value};

/// At most this many key tuples are looked up; a longer product of lists scans instead.
pub(super) const MAX_KEYS: usize = 10_000;

/// The key tuples (key columns' values in key order) outside of which `pred` is never true on
/// the UNIQUE table `info`, read by the relation names `qualifiers`. `None` when the predicate
/// does not pin every key column to literals this can compare exactly as the table stores them
/// (integer literals on integer keys, string literals on VARCHAR and STRING keys), or the
/// tuples would be more than [`MAX_KEYS`]: the caller then scans.
pub(super) fn pinned_keys(
    info: &TableInfo,
    qualifiers: &[String],
    pred: &Expr,
) -> Option<Vec<Vec<Value>>> {
    if info.keys_type != KeysType::Unique || info.key_columns.is_empty() {
        return None;
    }
    let mut conjuncts = Vec::new();
    flatten_and(pred, &mut conjuncts);
    let mut tuples: Vec<Vec<Value>> = vec![Vec::new()];
    for key in &info.key_columns {
        let ty = info.columns.iter().find(|c| &c.name == key)?.ty;
        let values = conjuncts
            .iter()
            .find_map(|c| pinned_values(c, key, qualifiers))?
            .iter()
            .map(|l| key_value(&ty, l))
            .collect::<Option<Vec<Value>>>()?;
        if tuples.len().checked_mul(values.len())? > MAX_KEYS {
            return None;
        }
        tuples = tuples
            .iter()
            .flat_map(|t| {
                values.iter().map(move |v| {
                    let mut t = t.clone();
                    t.push(v.clone());
                    t
                })
            })
            .collect();
    }
    Some(tuples)
}

fn flatten_and<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            flatten_and(a, out);
            flatten_and(b, out);
        }
        other => out.push(other),
    }
}

/// The literals `conjunct` restricts column `key` to: `key = lit`, `lit = key` or
/// `key IN (lit, ...)`.
fn pinned_values<'e>(
    conjunct: &'e Expr,
    key: &str,
    qualifiers: &[String],
) -> Option<Vec<&'e Literal>> {
    let names_key = |e: &Expr| match e {
        Expr::Column { qualifier, name } => {
            name.eq_ignore_ascii_case(key)
                && qualifier
                    .as_ref()
                    .is_none_or(|q| qualifiers.iter().any(|x| x.eq_ignore_ascii_case(q)))
        }
        _ => false,
    };
    match conjunct {
        Expr::Binary(BinOp::Eq, a, b) => match (a.as_ref(), b.as_ref()) {
            (c, Expr::Lit(l)) | (Expr::Lit(l), c) if names_key(c) => Some(vec![l]),
            _ => None,
        },
        Expr::InList {
            expr,
            list,
            negated: false,
        } if names_key(expr) => list
            .iter()
            .map(|e| match e {
                Expr::Lit(l) => Some(l),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// A literal as a key column of type `ty` stores it, when it is exactly that value: a whole
/// number for an integer column, a string for a VARCHAR or STRING column. Anything else (a
/// NULL, a decimal, a string compared with a number, a CHAR key) is left to the scan.
fn key_value(ty: &DorisType, lit: &Literal) -> Option<Value> {
    use DorisType as T;
    match (ty, lit) {
        (T::TinyInt | T::SmallInt | T::Int | T::BigInt | T::LargeInt, Literal::Number(n)) => {
            let n = n.trim();
            let digits = n.strip_prefix('-').unwrap_or(n);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            n.parse::<i128>().ok().map(|i| match i64::try_from(i) {
                Ok(i) => Value::Int(i),
                Err(_) => Value::LargeInt(i),
            })
        }
        (T::Varchar(_) | T::String, Literal::Str(s)) => Some(Value::Str(s.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parser;

    fn info(
        keys_type: KeysType,
        keys: &[(&str, DorisType)],
        values: &[(&str, DorisType)],
    ) -> TableInfo {
        let col = |(name, ty): &(&str, DorisType), is_key: bool| crate::engine::ColumnDef {
            name: name.to_string(),
            ty: *ty,
            nullable: !is_key,
            is_key,
            default: None,
            comment: String::new(),
        };
        TableInfo {
            id: 1,
            db: "d".into(),
            name: "t".into(),
            columns: keys
                .iter()
                .map(|c| col(c, true))
                .chain(values.iter().map(|c| col(c, false)))
                .collect(),
            keys_type,
            key_columns: keys.iter().map(|(n, _)| n.to_string()).collect(),
            properties: Default::default(),
            changelog: crate::engine::ChangelogConfig {
                enabled: true,
                spelling: crate::engine::ChangelogSpelling::Changelog,
                need_historical_value: true,
                ttl_seconds: 86_400,
            },
            tablets: vec![1],
            distribution: crate::engine::Distribution {
                hash_columns: keys.iter().map(|(n, _)| n.to_string()).collect(),
                buckets: Some(1),
            },
            auto_partition: None,
        }
    }

    fn where_of(sql: &str) -> Expr {
        match parser::parse(&format!("SELECT * FROM t WHERE {sql}")).unwrap() {
            crate::sql::ast::Statement::Select(s) => s.where_.unwrap(),
            other => panic!("not a select: {other:?}"),
        }
    }

    fn keys(info: &TableInfo, sql: &str) -> Option<Vec<Vec<Value>>> {
        pinned_keys(info, &["t".to_string(), "a".to_string()], &where_of(sql))
    }

    #[test]
    fn equalities_and_lists_on_every_key_column_name_the_keys() {
        let one = info(
            KeysType::Unique,
            &[("id", DorisType::BigInt)],
            &[("v", DorisType::Int)],
        );
        assert_eq!(keys(&one, "id = 5"), Some(vec![vec![Value::Int(5)]]));
        assert_eq!(keys(&one, "-7 = id"), Some(vec![vec![Value::Int(-7)]]));
        assert_eq!(
            keys(&one, "ID IN (1, 2) AND v > 3"),
            Some(vec![vec![Value::Int(1)], vec![Value::Int(2)]])
        );
        assert_eq!(keys(&one, "a.id = 5"), Some(vec![vec![Value::Int(5)]]));
        let two = info(
            KeysType::Unique,
            &[("k", DorisType::Int), ("s", DorisType::Varchar(10))],
            &[],
        );
        assert_eq!(
            keys(&two, "s IN ('x', 'y') AND k = 1"),
            Some(vec![
                vec![Value::Int(1), Value::Str("x".into())],
                vec![Value::Int(1), Value::Str("y".into())],
            ])
        );
    }

    #[test]
    fn anything_short_of_exact_literals_on_every_key_column_scans() {
        let one = info(
            KeysType::Unique,
            &[("id", DorisType::BigInt)],
            &[("v", DorisType::Int)],
        );
        for sql in [
            "v = 5",
            "id = 5 OR v = 1",
            "id > 5",
            "id NOT IN (1, 2)",
            "id IN (1, v)",
            "id = '5'",
            "id = 5.0",
            "id = 1e1",
            "id = NULL",
            "id + 0 = 5",
            "other.id = 5",
            "NOT id = 5",
        ] {
            assert_eq!(keys(&one, sql), None, "{sql}");
        }
        let two = info(
            KeysType::Unique,
            &[("k", DorisType::Int), ("c", DorisType::Char(4))],
            &[],
        );
        assert_eq!(keys(&two, "k = 1"), None, "a key column unpinned");
        assert_eq!(
            keys(&two, "k = 1 AND c = 'ab'"),
            None,
            "CHAR keys are padded"
        );
        let dup = info(KeysType::Duplicate, &[("id", DorisType::BigInt)], &[]);
        assert_eq!(keys(&dup, "id = 5"), None, "a DUPLICATE key names no row");
    }

    #[test]
    fn a_product_of_lists_past_the_bound_scans() {
        let two = info(
            KeysType::Unique,
            &[("a", DorisType::Int), ("b", DorisType::Int)],
            &[],
        );
        let list = (0..200)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        assert_eq!(
            keys(&two, &format!("a IN ({list}) AND b IN ({list})")),
            None
        );
        assert_eq!(
            keys(&two, &format!("a IN ({list}) AND b = 1")).map(|k| k.len()),
            Some(200)
        );
    }
}

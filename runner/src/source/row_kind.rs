//! Changelog operations (`__DORIS_BINLOG_OP__`) as row kinds (docs/doris-protocols.md §2.5).

use arrow_array::{Array, Int8Array};

use crate::{Error, Result};

/// What a changelog row means, as the Flink connector's `RowKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowKind {
    /// Op 0 (APPEND): a new row.
    Insert,
    /// Op 1: the row was deleted (the values are the row before).
    Delete,
    /// Op 2: the row before an update.
    UpdateBefore,
    /// Op 3: the row after an update.
    UpdateAfter,
}

impl RowKind {
    /// The kind of an op value; anything but 0..=3 is an error.
    ///
    /// # Errors
    /// [`Error::UnsupportedOperation`] (`Unsupported Doris binlog operation <n>`).
    pub fn from_op(op: i64) -> Result<Self> {
        match op {
            0 => Ok(Self::Insert),
            1 => Ok(Self::Delete),
            2 => Ok(Self::UpdateBefore),
            3 => Ok(Self::UpdateAfter),
            op => Err(Error::UnsupportedOperation { op }),
        }
    }

    /// The Flink short string: `+I`, `-D`, `-U`, `+U`.
    pub fn short_string(self) -> &'static str {
        match self {
            Self::Insert => "+I",
            Self::Delete => "-D",
            Self::UpdateBefore => "-U",
            Self::UpdateAfter => "+U",
        }
    }
}

/// The row kinds of an op column.
///
/// # Errors
/// [`Error::UnsupportedOperation`] for an unknown op, [`Error::UnexpectedResult`] for a NULL.
pub fn row_kinds(ops: &Int8Array) -> Result<Vec<RowKind>> {
    (0..ops.len())
        .map(|i| {
            if ops.is_null(i) {
                return Err(Error::UnexpectedResult {
                    context: "changelog operations".into(),
                    reason: format!("__DORIS_BINLOG_OP__ is NULL in row {i}"),
                });
            }
            RowKind::from_op(i64::from(ops.value(i)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_map_like_the_connector() {
        let ops = Int8Array::from(vec![0, 1, 2, 3]);
        assert_eq!(
            row_kinds(&ops).unwrap(),
            vec![
                RowKind::Insert,
                RowKind::Delete,
                RowKind::UpdateBefore,
                RowKind::UpdateAfter
            ]
        );
        assert_eq!(RowKind::UpdateBefore.short_string(), "-U");
    }

    #[test]
    fn unknown_ops_fail() {
        let e = row_kinds(&Int8Array::from(vec![0, 4])).unwrap_err();
        assert_eq!(e.to_string(), "Unsupported Doris binlog operation 4");
        assert!(row_kinds(&Int8Array::from(vec![Some(0), None])).is_err());
        assert!(RowKind::from_op(-1).is_err());
    }
}

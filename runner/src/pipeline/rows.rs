//! Record batches as the sink takes them (pure): cut into slices of at most a load, and split
//! into the table's columns and the change columns of the `@incr` read.

use arrow_array::{Array, Int8Array, Int64Array, RecordBatch};

use crate::sink::encode::{ChangeColumns, EncodeError};
use crate::source::changelog;
use crate::{Error, Result};

/// Rows encoded at a time, so one Flight batch never makes a load much larger than its limits.
pub(super) const SLICE_ROWS: usize = 1024;

/// `batch` in consecutive slices of at most `rows` rows (no copy).
pub(super) fn slices(batch: &RecordBatch, rows: usize) -> impl Iterator<Item = RecordBatch> + '_ {
    let n = batch.num_rows();
    let rows = rows.max(1);
    (0..n.div_ceil(rows)).map(move |i| {
        let offset = i * rows;
        batch.slice(offset, rows.min(n - offset))
    })
}

/// Call `f` with the table columns of `batch` and, for changelog batches, its change columns
/// (the hidden `@incr` columns are taken out of the data). `snapshot` gives snapshot rows
/// synthetic change columns (that op, that TSO, LSN 0) for changelog-mode sinks.
pub(super) fn with_changes<T>(
    batch: &RecordBatch,
    changelog: bool,
    snapshot: Option<(i8, i64)>,
    f: impl FnOnce(&RecordBatch, Option<ChangeColumns<'_>>) -> std::result::Result<T, EncodeError>,
) -> Result<T> {
    let encode_err = |e: EncodeError| Error::UnexpectedResult {
        context: "encoding rows for the sink".into(),
        reason: e.to_string(),
    };
    if !changelog {
        return match snapshot {
            None => f(batch, None).map_err(encode_err),
            Some((op, tso)) => {
                let n = batch.num_rows();
                let op = Int8Array::from(vec![op; n]);
                let tso = Int64Array::from(vec![tso; n]);
                let lsn = Int64Array::from(vec![0; n]);
                let changes = ChangeColumns {
                    op: &op,
                    tso: &tso,
                    lsn: &lsn,
                };
                f(batch, Some(changes)).map_err(encode_err)
            }
        };
    }
    let schema = batch.schema();
    let index = |name: &str| {
        schema
            .fields()
            .iter()
            .position(|f| f.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::UnexpectedResult {
                context: "changelog batch".into(),
                reason: format!("no column {name}"),
            })
    };
    let (op_i, tso_i, lsn_i) = (
        index(changelog::OP_COLUMN)?,
        index(changelog::TSO_COLUMN)?,
        index(changelog::LSN_COLUMN)?,
    );
    let data_cols: Vec<usize> = (0..schema.fields().len())
        .filter(|i| ![op_i, tso_i, lsn_i].contains(i))
        .collect();
    let data = batch
        .project(&data_cols)
        .map_err(|e| Error::UnexpectedResult {
            context: "changelog batch".into(),
            reason: e.to_string(),
        })?;
    let downcast_err = |name: &str| Error::UnexpectedResult {
        context: "changelog batch".into(),
        reason: format!("{name} has an unexpected type"),
    };
    let op = batch
        .column(op_i)
        .as_any()
        .downcast_ref::<Int8Array>()
        .ok_or_else(|| downcast_err(changelog::OP_COLUMN))?;
    let tso = batch
        .column(tso_i)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| downcast_err(changelog::TSO_COLUMN))?;
    let lsn = batch
        .column(lsn_i)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| downcast_err(changelog::LSN_COLUMN))?;
    f(&data, Some(ChangeColumns { op, tso, lsn })).map_err(encode_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{Int32Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    use crate::sink::encode::op;

    fn changelog_batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
            Field::new(changelog::TSO_COLUMN, DataType::Int64, false),
            Field::new(changelog::LSN_COLUMN, DataType::Int64, false),
            Field::new(changelog::OP_COLUMN, DataType::Int8, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![1, 1])),
                Arc::new(StringArray::from(vec![Some("a"), Some("b")])),
                Arc::new(Int64Array::from(vec![9, 9])),
                Arc::new(Int64Array::from(vec![0, 1])),
                Arc::new(Int8Array::from(vec![2, 3])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn change_columns_are_split_from_the_data() {
        let (cols, ops) = with_changes(&changelog_batch(), true, None, |data, changes| {
            let c = changes.unwrap();
            Ok((
                data.schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect::<Vec<_>>(),
                (0..2).map(|i| c.op.value(i)).collect::<Vec<_>>(),
            ))
        })
        .unwrap();
        assert_eq!(cols, ["id", "name"]);
        assert_eq!(ops, [2, 3]);
    }

    #[test]
    fn snapshot_rows_get_insert_changes_for_changelog_sinks() {
        let data = changelog_batch().project(&[0, 1]).unwrap();
        let tsos = with_changes(&data, false, Some((op::APPEND, 42)), |_, changes| {
            let c = changes.unwrap();
            Ok((c.op.value(0), c.tso.value(1), c.lsn.value(0)))
        })
        .unwrap();
        assert_eq!(tsos, (0, 42, 0));
        assert!(with_changes(&data, false, None, |_, c| Ok(c.is_none())).unwrap());
    }

    #[test]
    fn slices_cover_the_batch_in_order_without_gaps() {
        let batch = changelog_batch();
        let lens: Vec<usize> = slices(&batch, 1).map(|s| s.num_rows()).collect();
        assert_eq!(lens, [1, 1]);
        let lens: Vec<usize> = slices(&batch, 5).map(|s| s.num_rows()).collect();
        assert_eq!(lens, [2]);
        // A limit of 0 rows is taken as 1, never as an endless loop of empty slices.
        assert_eq!(slices(&batch, 0).count(), 2);
        let empty = batch.slice(0, 0);
        assert_eq!(slices(&empty, 3).count(), 0);
    }
}

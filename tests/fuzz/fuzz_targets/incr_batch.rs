//! An `@incr` result batch as a Flight stream may carry it (any FE a spec names can send any
//! columns): the batch check never panics, what it accepts has op codes the row kinds know, and
//! the seam cut keeps at most the rows it was given.
#![no_main]

use std::sync::Arc;

use arbitrary::Arbitrary;
use arrow_array::{ArrayRef, Int8Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use dcs_runner::source::changelog::{
    LSN_COLUMN, OP_COLUMN, TSO_COLUMN, drop_before_seam, validate_batch,
};
use dcs_runner::source::row_kind::row_kinds;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Name {
    Op,
    Tso,
    Lsn,
    Field(u8),
}

#[derive(Debug, Arbitrary)]
enum Values {
    Int8(Vec<Option<i8>>),
    Int64(Vec<Option<i64>>),
    Utf8(Vec<Option<String>>),
}

#[derive(Debug, Arbitrary)]
struct Input {
    columns: Vec<(Name, Values)>,
    fields: Vec<u8>,
    seam: i64,
}

fn name(n: &Name) -> String {
    match n {
        Name::Op => OP_COLUMN.to_owned(),
        Name::Tso => TSO_COLUMN.to_owned(),
        Name::Lsn => LSN_COLUMN.to_owned(),
        Name::Field(i) => format!("c{}", i % 4),
    }
}

fuzz_target!(|input: Input| {
    let rows = input
        .columns
        .iter()
        .map(|(_, v)| match v {
            Values::Int8(v) => v.len(),
            Values::Int64(v) => v.len(),
            Values::Utf8(v) => v.len(),
        })
        .min()
        .unwrap_or(0);
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (n, v) in &input.columns {
        let (data_type, array): (DataType, ArrayRef) = match v {
            Values::Int8(v) => (
                DataType::Int8,
                Arc::new(Int8Array::from(v[..rows].to_vec())),
            ),
            Values::Int64(v) => (
                DataType::Int64,
                Arc::new(Int64Array::from(v[..rows].to_vec())),
            ),
            Values::Utf8(v) => (
                DataType::Utf8,
                Arc::new(StringArray::from(v[..rows].to_vec())),
            ),
        };
        fields.push(Field::new(name(n), data_type, true));
        arrays.push(array);
    }
    let Ok(batch) = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays) else {
        return;
    };
    let expected: Vec<String> = input.fields.iter().map(|i| format!("c{}", i % 4)).collect();
    if validate_batch("db.t", &expected, &batch).is_err() {
        return;
    }
    let ops = batch
        .column_by_name(OP_COLUMN)
        .and_then(|c| c.as_any().downcast_ref::<Int8Array>())
        .expect("an accepted batch has an Int8 op column");
    assert!(row_kinds(ops).is_ok(), "accepted ops the row kinds refuse");
    if let Ok(Some(kept)) = drop_before_seam(batch.clone(), input.seam) {
        assert!(kept.num_rows() <= batch.num_rows());
    }
});

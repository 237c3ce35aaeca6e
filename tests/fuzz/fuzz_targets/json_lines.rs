//! The JSON-lines Stream Load body: whatever the values (any text, NULLs, any float), every
//! encoded row parses back to the same values, one JSON object per row, with the delete sign.
#![no_main]

use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use dcs_crds::SinkMode;
use dcs_runner::settings::EventPolicy;
use dcs_runner::sink::encode::{DELETE_SIGN_COLUMN, encode_json_lines};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

type Row = (Option<i64>, Option<String>, Option<f64>, Option<bool>);

fuzz_target!(|rows: Vec<Row>| {
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("x", DataType::Float64, true),
        Field::new("ok", DataType::Boolean, true),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            rows.iter().map(|r| r.2).collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(
            rows.iter().map(|r| r.3).collect::<Vec<_>>(),
        )),
    ];
    let batch = RecordBatch::try_new(Arc::new(schema), columns).expect("columns of equal length");
    let policy = EventPolicy {
        mode: SinkMode::Upsert,
        enable_delete: true,
        ignore_update_before: true,
    };
    let mut out = Vec::new();
    let counts = encode_json_lines(&batch, None, &policy, &mut out).expect("these types encode");
    assert_eq!(counts.upserts, rows.len() as u64);
    let text = std::str::from_utf8(&out).expect("the body is UTF-8");
    let lines: Vec<&str> = text.split('\n').filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), rows.len(), "one line per row");
    for (line, (id, s, x, ok)) in lines.iter().zip(&rows) {
        let v: Value = serde_json::from_str(line).expect("every line is JSON");
        assert_eq!(v["id"].as_i64(), *id, "{line}");
        assert_eq!(v["s"].as_str(), s.as_deref(), "{line}");
        match x {
            Some(x) if x.is_finite() => assert_eq!(v["x"].as_f64(), Some(*x), "{line}"),
            // JSON has no NaN or infinity: Doris reads them as text.
            Some(x) => assert_eq!(v["x"].as_str(), Some(x.to_string().as_str()), "{line}"),
            None => assert!(v["x"].is_null(), "{line}"),
        }
        assert_eq!(v["ok"].as_bool(), *ok, "{line}");
        assert_eq!(v[DELETE_SIGN_COLUMN].as_i64(), Some(0), "{line}");
    }
});

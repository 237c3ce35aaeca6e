//! Encoder throughput: dcs's JSON-lines encoder against arrow's own JSON writer on the same
//! batches (rows per second per core). Run with `cargo bench -p dcs-runner --bench encode`.

use std::hint::black_box;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, Decimal128Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dcs_crds::SinkMode;
use dcs_runner::settings::EventPolicy;
use dcs_runner::sink::encode::encode_json_lines;

const ROWS: usize = 8192;

fn student_batch() -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("age", DataType::Int32, true),
        Field::new("score", DataType::Decimal128(10, 2), true),
        Field::new(
            "updated",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
    ]);
    let ids: Vec<i64> = (0..ROWS as i64).collect();
    let names: Vec<Option<String>> = (0..ROWS)
        .map(|i| (i % 10 != 0).then(|| format!("student number {i}")))
        .collect();
    let ages: Vec<Option<i32>> = (0..ROWS).map(|i| Some(18 + (i % 30) as i32)).collect();
    let scores: Vec<Option<i128>> = (0..ROWS).map(|i| Some((i as i128 * 37) % 10_000)).collect();
    let updated: Vec<Option<i64>> = (0..ROWS)
        .map(|i| Some(1_700_000_000_000_000 + i as i64 * 1_000))
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids)),
        Arc::new(StringArray::from(names)),
        Arc::new(Int32Array::from(ages)),
        Arc::new(
            Decimal128Array::from(scores)
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(TimestampMicrosecondArray::from(updated)),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

fn bench(c: &mut Criterion) {
    let batch = student_batch();
    let policy = EventPolicy {
        mode: SinkMode::Upsert,
        enable_delete: true,
        ignore_update_before: true,
    };
    let mut group = c.benchmark_group("encode_json_lines");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.bench_function("dcs", |b| {
        let mut out = Vec::with_capacity(1 << 20);
        b.iter(|| {
            out.clear();
            encode_json_lines(black_box(&batch), None, &policy, &mut out).unwrap();
            black_box(out.len())
        })
    });
    group.bench_function("arrow_json", |b| {
        let mut out = Vec::with_capacity(1 << 20);
        b.iter(|| {
            out.clear();
            let mut w = arrow::json::LineDelimitedWriter::new(&mut out);
            w.write(black_box(&batch)).unwrap();
            w.finish().unwrap();
            drop(w);
            black_box(out.len())
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

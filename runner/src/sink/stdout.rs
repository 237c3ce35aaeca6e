//! The stdout sink (`spec.sink.stdout`, a debugging sink): one JSON object per change record.
//!
//! ```json
//! {"op":"+I","row":{"id":1,"name":"a"}}
//! {"op":"-U","tso":470903…,"lsn":0,"row":{"id":1,"name":"a"}}
//! {"op":"+U","tso":470903…,"lsn":1,"row":{"id":1,"name":"b"}}
//! {"op":"-D","tso":470904…,"lsn":0,"row":{"id":1,"name":"b"}}
//! ```
//!
//! `op` is the Flink RowKind short string; snapshot rows are `+I` without `tso` and `lsn`. Every
//! event is written, update-befores included: the EventPolicy of the Doris sink does not apply.
//! Values are written as the Doris sink writes them (see [`super::encode`]).
//!
//! As a [`Sink`], stdout takes every record batch at once (a batch is full as soon as it holds a
//! row) and writes it as one "load"; it has no transactions, so commit and abort have nothing to
//! do and nothing survives a restart but what was written.

use std::io::Write;
use std::time::Duration;

use arrow_array::RecordBatch;

use super::encode::{ChangeColumns, EncodeError, JsonValues, RowObjects, write_change_record};
use super::label::LabelScheme;
use super::{Encoding, LoadBatch, LoadResult, LostLoad, Sink};
use crate::checkpoint::{Checkpoint, PendingTxn};
use crate::settings::BatchLimits;
use crate::{Error, Result};

/// Append one record line per row of `data` to `out`; returns the number of lines.
///
/// # Errors
/// A value that cannot be written (as [`RowObjects::new`]), or an unknown op code.
pub fn encode_records(
    data: &RecordBatch,
    changes: Option<ChangeColumns<'_>>,
    out: &mut Vec<u8>,
) -> std::result::Result<u64, EncodeError> {
    let rows = RowObjects::new(data, JsonValues::StreamLoad)?;
    for row in 0..data.num_rows() {
        write_change_record(&rows, row, changes, out)?;
        out.push(b'\n');
    }
    Ok(data.num_rows() as u64)
}

/// The stdout sink.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdoutSink;

impl Sink for StdoutSink {
    fn two_phase(&self) -> bool {
        false
    }

    fn idempotent(&self) -> bool {
        false
    }

    fn encoding(&self) -> Encoding {
        Encoding::Records
    }

    /// Full at its first row: records are written as they come.
    fn limits(&self) -> BatchLimits {
        BatchLimits {
            max_rows: u64::MAX,
            max_bytes: u64::MAX,
            interval: Duration::ZERO,
        }
    }

    /// Nothing is in flight once a write returned.
    fn request_timeout(&self) -> Duration {
        Duration::ZERO
    }

    async fn load(&self, batch: LoadBatch, _checkpoint_id: u64, _seq: u32) -> Result<LoadResult> {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(&batch.body)
            .and_then(|()| stdout.flush())
            .map_err(|e| Error::io("writing to stdout", e))?;
        Ok(LoadResult {
            label: String::new(),
            pending: None,
            attempts: 1,
            dead_letter: None,
            labels: 1,
        })
    }

    async fn commit(&self, _txns: &[PendingTxn]) -> Result<Vec<LostLoad>> {
        Ok(Vec::new())
    }

    async fn abort(&self, _scheme: LabelScheme, _checkpoint_id: u64) -> Result<u32> {
        Ok(0)
    }

    async fn abort_txns(&self, _txns: &[PendingTxn]) -> usize {
        0
    }

    async fn recover(&self, _loaded: Option<&Checkpoint>) -> Result<Vec<LostLoad>> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{Int8Array, Int32Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn data() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("a\"b"), None])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn snapshot_rows_are_inserts() {
        let mut out = Vec::new();
        assert_eq!(encode_records(&data(), None, &mut out).unwrap(), 2);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"op\":\"+I\",\"row\":{\"id\":1,\"name\":\"a\\\"b\"}}\n{\"op\":\"+I\",\"row\":{\"id\":2,\"name\":null}}\n"
        );
    }

    #[test]
    fn change_rows_carry_op_tso_and_lsn() {
        let op = Int8Array::from(vec![2, 3]);
        let tso = Int64Array::from(vec![7, 7]);
        let lsn = Int64Array::from(vec![0, 1]);
        let changes = ChangeColumns {
            op: &op,
            tso: &tso,
            lsn: &lsn,
        };
        let mut out = Vec::new();
        encode_records(&data(), Some(changes), &mut out).unwrap();
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines[0],
            serde_json::json!({"op": "-U", "tso": 7, "lsn": 0, "row": {"id": 1, "name": "a\"b"}})
        );
        assert_eq!(lines[1]["op"], "+U");
        assert_eq!(lines[1]["row"]["name"], serde_json::Value::Null);
    }
}

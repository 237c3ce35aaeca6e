//! The snapshot reader (docs/doris-protocols.md §2.4): the schema from `_schema`, the tablets from
//! `_query_plan`, then one `SELECT … TABLET(…)` per split over Flight SQL, a few splits at a time.
//!
//! Batches flow through a bounded channel with the split they belong to, followed by a
//! [`SnapshotEvent::SplitDone`] naming the split's tablets, so the pipeline can checkpoint the
//! tablets whose rows are all in the sink. Memory stays bounded by the channel capacity.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use dcs_crds::spec::TableRef;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::fe_http::{FeHttpClient, FeRequest};
use super::flight::{FlightSession, resolve_flight_port};
use super::resumable::{ReadPlan, read_into};
pub use super::resume::Replay;
use crate::settings::SourceSettings;
use crate::settings::StreamRetry;
use crate::{Error, Result};

/// Most splits a snapshot is cut into.
pub const MAX_SPLITS: usize = 4;

/// A column of the source table as `_schema` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInfo {
    /// Column name.
    pub name: String,
    /// Doris type name (`INT`, `VARCHAR`, `DATETIMEV2`, …).
    pub doris_type: String,
    /// Part of the key.
    pub is_key: bool,
}

/// The source table's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// `UNIQUE_KEYS`, `DUP_KEYS` or `AGG_KEYS`.
    pub keys_type: String,
    /// Columns in table order.
    pub columns: Vec<ColumnInfo>,
}

impl TableSchema {
    /// Parse `_schema`'s `data`.
    ///
    /// # Errors
    /// When `properties` is missing or malformed.
    pub fn from_data(data: &Value) -> std::result::Result<Self, String> {
        let keys_type = data
            .get("keysType")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let props = data
            .get("properties")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("no properties in {data}"))?;
        let columns = props
            .iter()
            .map(|p| {
                let name = p
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("column without a name: {p}"))?;
                Ok(ColumnInfo {
                    name: name.to_owned(),
                    doris_type: p
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    is_key: p.get("is_key").and_then(Value::as_str).is_some_and(|k| {
                        k.eq_ignore_ascii_case("yes") || k.eq_ignore_ascii_case("true")
                    }),
                })
            })
            .collect::<std::result::Result<Vec<_>, String>>()?;
        Ok(Self { keys_type, columns })
    }

    /// Whether the table is a UNIQUE KEY table.
    pub fn is_unique(&self) -> bool {
        self.keys_type.eq_ignore_ascii_case("UNIQUE_KEYS")
    }
}

/// The columns to read: `spec.source.columns` (all columns when `None`). On a UNIQUE KEY table
/// the key columns are always read, put first when the list leaves them out, because the sink
/// needs them to apply updates and deletes.
///
/// # Errors
/// When a listed column is not in the table.
pub fn projection(schema: &TableSchema, columns: Option<&[String]>) -> Result<Vec<String>> {
    let Some(wanted) = columns else {
        return Ok(schema.columns.iter().map(|c| c.name.clone()).collect());
    };
    for w in wanted {
        if !schema
            .columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(w))
        {
            let known: Vec<&str> = schema.columns.iter().map(|c| c.name.as_str()).collect();
            return Err(Error::SourceConfig {
                reason: format!(
                    "source.columns names {w:?}, which the table does not have (it has {known:?})"
                ),
            });
        }
    }
    let mut out = Vec::new();
    if schema.is_unique() {
        for key in schema.columns.iter().filter(|c| c.is_key) {
            if !wanted.iter().any(|w| w.eq_ignore_ascii_case(&key.name)) {
                out.push(key.name.clone());
            }
        }
    }
    out.extend(wanted.iter().cloned());
    Ok(out)
}

/// A comma list of quoted columns, or `*` when there are none.
pub fn select_list(columns: &[String]) -> String {
    if columns.is_empty() {
        "*".to_owned()
    } else {
        columns
            .iter()
            .map(|c| dcs_doris_client::sql::quote_ident(c))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One part of the snapshot: a group of tablets read by one query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotSplit {
    /// Index of the split.
    pub id: usize,
    /// Its tablets.
    pub tablets: Vec<i64>,
}

/// Cut `tablets` into `min(tablets, max_splits)` groups of near-equal size, in tablet order.
pub fn plan_splits(tablets: &[i64], max_splits: usize) -> Vec<SnapshotSplit> {
    // Sorted and without duplicates.
    let sorted: Vec<i64> = tablets
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let n = sorted.len().min(max_splits.max(1));
    if n == 0 {
        return Vec::new();
    }
    let base = sorted.len() / n;
    let extra = sorted.len() % n;
    let mut out = Vec::with_capacity(n);
    let mut rest = sorted.as_slice();
    for id in 0..n {
        let take = base + usize::from(id < extra);
        let (head, tail) = rest.split_at(take);
        out.push(SnapshotSplit {
            id,
            tablets: head.to_vec(),
        });
        rest = tail;
    }
    out
}

/// `SELECT <cols> FROM `db`.`table` [FOR VERSION AS OF <tso>] TABLET(a, b) [WHERE <filter>]`
/// (Doris's `baseTableRef`: the snapshot clause before the tablet list; docs/doris-protocols.md
/// §1.8).
pub fn snapshot_sql(
    table: &TableRef,
    columns: &[String],
    tablets: &[i64],
    filter: Option<&str>,
    as_of: Option<i64>,
) -> String {
    let ids: Vec<String> = tablets.iter().map(i64::to_string).collect();
    let version = as_of.map_or_else(String::new, |tso| format!(" FOR VERSION AS OF {tso}"));
    let mut sql = format!(
        "SELECT {} FROM {}{version} TABLET({})",
        select_list(columns),
        table.quoted(),
        ids.join(", ")
    );
    if let Some(f) = filter.map(str::trim).filter(|f| !f.is_empty()) {
        sql.push_str(" WHERE ");
        sql.push_str(f);
    }
    sql
}

/// Read the schema with `GET /api/{db}/{table}/_schema`.
///
/// # Errors
/// As [`FeHttpClient::call`], or when the answer is not a schema.
pub async fn fetch_schema(http: &FeHttpClient, table: &TableRef) -> Result<TableSchema> {
    let context = format!("reading the schema of {table}");
    let data = http
        .call(
            &context,
            &format!("/api/{}/{}/_schema", table.database, table.table),
            FeRequest::Get,
        )
        .await?;
    TableSchema::from_data(&data).map_err(|reason| Error::UnexpectedResult {
        context: format!("schema of {table}"),
        reason,
    })
}

/// The tablet ids of the table from `POST /api/{db}/{table}/_query_plan`.
///
/// # Errors
/// As [`FeHttpClient::call`], or when the plan holds an exception or no partitions.
pub async fn fetch_tablets(
    http: &FeHttpClient,
    table: &TableRef,
    columns: &[String],
) -> Result<Vec<i64>> {
    let context = format!("planning the snapshot of {table}");
    let sql = format!("select {} from {}", select_list(columns), table);
    let data = http
        .call(
            &context,
            &format!("/api/{}/{}/_query_plan", table.database, table.table),
            FeRequest::Post(serde_json::json!({ "sql": sql })),
        )
        .await?;
    tablets_of_plan(&data).map_err(|message| Error::Doris { context, message })
}

/// The tablet ids in a `_query_plan` answer's `data` (`partitions` keyed by tablet id).
///
/// # Errors
/// Doris's exception text, or what is missing.
pub fn tablets_of_plan(data: &Value) -> std::result::Result<Vec<i64>, String> {
    if let Some(exception) = data.get("exception").and_then(Value::as_str) {
        return Err(exception.to_owned());
    }
    let partitions = data
        .get("partitions")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("no partitions in the query plan: {data}"))?;
    let mut ids = partitions
        .keys()
        .map(|k| {
            k.parse::<i64>()
                .map_err(|_| format!("tablet id {k:?} is not a number"))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    ids.sort_unstable();
    Ok(ids)
}

/// What the snapshot reader hands downstream.
#[derive(Debug)]
pub enum SnapshotEvent {
    /// Rows of one split.
    Batch {
        /// The split the rows came from.
        split: usize,
        /// The rows.
        batch: RecordBatch,
    },
    /// Every row of the split has been sent.
    SplitDone {
        /// The split.
        split: usize,
        /// Its tablets, now complete.
        tablets: Vec<i64>,
    },
}

/// How the snapshot is read.
#[derive(Debug, Clone)]
pub struct SnapshotOptions {
    /// `spec.source.columns`; on a UNIQUE KEY table its key columns are read too (see [`projection`]).
    pub columns: Option<Vec<String>>,
    /// `spec.source.filter` (snapshot mode only).
    pub filter: Option<String>,
    /// Read the table as of this commit TSO (`FOR VERSION AS OF`): T0, for a sink that keeps
    /// every event ([`super::seam`]); `None` reads the current data.
    pub as_of: Option<i64>,
    /// Tablets already in the sink (from the checkpoint); they are not read again.
    pub tablets_done: Vec<i64>,
    /// More tablets already in the sink, as ranges of tablet ids (`dcs_crds::checkpoint`).
    pub tablets_done_ranges: Vec<[i64; 2]>,
    /// Splits read at the same time, each on its own Flight SQL session.
    pub concurrency: usize,
    /// Capacity of the event channel.
    pub channel_capacity: usize,
    /// How a split whose stream broke is read again: skip the rows already sent (the default), or
    /// send them again (for sinks where that is harmless). See [`Replay`].
    pub replay: Replay,
    /// How often and how soon a broken split is read again.
    pub retry: StreamRetry,
    /// While this is `true`, workers start no new split (they finish the one they read). The
    /// pipeline holds them to reach a point where no split is half-delivered.
    pub hold: Option<watch::Receiver<bool>>,
    /// Read only the tablets of shard `(index, count)` (`dcs_crds::shard::shard_of_tablet`).
    pub shard: Option<(u32, u32)>,
}

/// What each worker needs to read its splits.
#[derive(Debug, Clone)]
struct WorkerRead {
    as_of: Option<i64>,
    replay: Replay,
    retry: StreamRetry,
    hold: Option<watch::Receiver<bool>>,
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        Self {
            columns: None,
            filter: None,
            as_of: None,
            tablets_done: Vec::new(),
            tablets_done_ranges: Vec::new(),
            concurrency: 2,
            channel_capacity: 4,
            replay: Replay::default(),
            retry: StreamRetry::default(),
            hold: None,
            shard: None,
        }
    }
}

/// A planned snapshot: what will be read, before any row is.
#[derive(Debug, Clone)]
pub struct SnapshotPlan {
    /// The table's schema.
    pub schema: TableSchema,
    /// Columns read, in order.
    pub columns: Vec<String>,
    /// Every tablet of the table (of the shard, when reading one).
    pub tablets_total: Vec<i64>,
    /// Every tablet of the table, a shard's plan too (what a snapshot records, and compares
    /// later plans with: `dcs_crds::tablets`).
    pub table_tablets: Vec<i64>,
    /// The splits still to read.
    pub splits: Vec<SnapshotSplit>,
}

/// Plan the snapshot: schema, projection, tablets, splits.
///
/// # Errors
/// As [`fetch_schema`], [`projection`] and [`fetch_tablets`].
pub async fn plan(http: &FeHttpClient, options: &SnapshotOptions) -> Result<SnapshotPlan> {
    let table = &http.settings().table;
    let schema = fetch_schema(http, table).await?;
    let columns = projection(&schema, options.columns.as_deref())?;
    let table_tablets = fetch_tablets(http, table, &columns).await?;
    let mut tablets_total = table_tablets.clone();
    if let Some((index, count)) = options.shard {
        tablets_total.retain(|t| dcs_crds::shard::shard_of_tablet(*t, count) == index);
    }
    let done: std::collections::HashSet<i64> = options.tablets_done.iter().copied().collect();
    let remaining: Vec<i64> = tablets_total
        .iter()
        .copied()
        .filter(|t| {
            !done.contains(t) && !crate::checkpoint::in_ranges(&options.tablets_done_ranges, *t)
        })
        .collect();
    let splits = plan_splits(&remaining, MAX_SPLITS);
    Ok(SnapshotPlan {
        schema,
        columns,
        tablets_total,
        table_tablets,
        splits,
    })
}

/// Start reading `plan`'s splits. Events arrive on the returned receiver; the task's result says
/// whether every split finished (an error stops all workers).
///
/// # Errors
/// The task fails with the first split error, e.g. Doris's message for a bad filter.
pub fn start(
    settings: SourceSettings,
    flight_port: u16,
    plan: &SnapshotPlan,
    options: &SnapshotOptions,
) -> (
    mpsc::Receiver<SnapshotEvent>,
    tokio::task::JoinHandle<Result<()>>,
) {
    let (tx, rx) = mpsc::channel(options.channel_capacity.max(1));
    let queue: Arc<Mutex<VecDeque<SnapshotSplit>>> =
        Arc::new(Mutex::new(plan.splits.iter().cloned().collect()));
    let workers = options
        .concurrency
        .clamp(1, MAX_SPLITS)
        .min(plan.splits.len().max(1));
    let columns = plan.columns.clone();
    let filter = options.filter.clone();
    let read = WorkerRead {
        as_of: options.as_of,
        replay: options.replay,
        retry: options.retry,
        hold: options.hold.clone(),
    };
    let handle = tokio::spawn(async move {
        let mut set = JoinSet::new();
        for _ in 0..workers {
            let (settings, queue, tx, columns, filter, read) = (
                settings.clone(),
                queue.clone(),
                tx.clone(),
                columns.clone(),
                filter.clone(),
                read.clone(),
            );
            set.spawn(async move {
                worker(settings, flight_port, queue, tx, columns, filter, read).await
            });
        }
        drop(tx);
        while let Some(joined) = set.join_next().await {
            let result = joined.map_err(|e| Error::SourceUnavailable {
                context: "snapshot worker".into(),
                reason: e.to_string(),
            })?;
            if let Err(e) = result {
                set.abort_all();
                return Err(e);
            }
        }
        Ok(())
    });
    (rx, handle)
}

/// Plan, resolve the Flight port and start: the usual entry point.
///
/// # Errors
/// As [`plan`] and [`resolve_flight_port`].
pub async fn read(
    http: &FeHttpClient,
    options: &SnapshotOptions,
) -> Result<(
    SnapshotPlan,
    mpsc::Receiver<SnapshotEvent>,
    tokio::task::JoinHandle<Result<()>>,
)> {
    read_checked(http, options, |_| Ok(())).await
}

/// [`read`], with `check` deciding on the plan before any split is read (the pipeline compares
/// the plan's tablets with those its snapshot recorded).
///
/// # Errors
/// As [`read`], and `check`'s.
pub async fn read_checked(
    http: &FeHttpClient,
    options: &SnapshotOptions,
    check: impl FnOnce(&SnapshotPlan) -> Result<()>,
) -> Result<(
    SnapshotPlan,
    mpsc::Receiver<SnapshotEvent>,
    tokio::task::JoinHandle<Result<()>>,
)> {
    let plan = plan(http, options).await?;
    check(&plan)?;
    let port = resolve_flight_port(http).await?;
    let (rx, handle) = start(http.settings().clone(), port, &plan, options);
    Ok((plan, rx, handle))
}

async fn worker(
    settings: SourceSettings,
    flight_port: u16,
    queue: Arc<Mutex<VecDeque<SnapshotSplit>>>,
    tx: mpsc::Sender<SnapshotEvent>,
    columns: Vec<String>,
    filter: Option<String>,
    mut read: WorkerRead,
) -> Result<()> {
    let next = || queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
    let Some(mut split) = next() else {
        return Ok(());
    };
    let mut session = FlightSession::connect(&settings, flight_port).await?;
    let result = async {
        loop {
            let sql = snapshot_sql(
                &settings.table,
                &columns,
                &split.tablets,
                filter.as_deref(),
                read.as_of,
            );
            let what = format!("snapshot split {}", split.id);
            tracing::debug!(split = split.id, tablets = ?split.tablets, "reading snapshot split");
            let plan = ReadPlan {
                sql: &sql,
                what: &what,
                replay: read.replay,
                retry: read.retry,
                skip: 0,
            };
            let id = split.id;
            let streamed = read_into(
                &mut session,
                plan,
                |_| Ok(()),
                &tx,
                |batch| SnapshotEvent::Batch { split: id, batch },
            )
            .await?;
            if !streamed.delivered {
                return Ok(()); // the pipeline stopped listening
            }
            if tx
                .send(SnapshotEvent::SplitDone {
                    split: split.id,
                    tablets: split.tablets.clone(),
                })
                .await
                .is_err()
            {
                return Ok(());
            }
            if let Some(hold) = &mut read.hold {
                // A dropped sender holds nothing.
                let _ = hold.wait_for(|held| !*held).await;
            }
            match next() {
                Some(s) => split = s,
                None => return Ok(()),
            }
        }
    }
    .await;
    session.close().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(keys: &str) -> TableSchema {
        let col = |n: &str, k: bool| ColumnInfo {
            name: n.into(),
            doris_type: "INT".into(),
            is_key: k,
        };
        TableSchema {
            keys_type: keys.into(),
            columns: vec![col("id", true), col("name", false), col("age", false)],
        }
    }

    #[test]
    fn unique_tables_always_read_their_keys() {
        let s = schema("UNIQUE_KEYS");
        assert_eq!(projection(&s, None).unwrap(), ["id", "name", "age"]);
        assert_eq!(
            projection(&s, Some(&["age".into()])).unwrap(),
            ["id", "age"]
        );
        assert_eq!(
            projection(&s, Some(&["age".into(), "id".into()])).unwrap(),
            ["age", "id"]
        );
        let d = schema("DUP_KEYS");
        assert_eq!(projection(&d, Some(&["age".into()])).unwrap(), ["age"]);
        assert!(
            projection(&s, Some(&["nope".into()]))
                .unwrap_err()
                .to_string()
                .contains("nope")
        );
    }

    #[test]
    fn splits_are_at_most_four_and_balanced() {
        let s = plan_splits(&[5, 1, 3, 2, 4, 6, 7, 8, 9, 10], 4);
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].tablets, [1, 2, 3]);
        assert_eq!(s[1].tablets, [4, 5, 6]);
        assert_eq!(s[2].tablets, [7, 8]);
        assert_eq!(s[3].tablets, [9, 10]);
        assert_eq!(plan_splits(&[7, 8], 4).len(), 2);
        assert!(plan_splits(&[], 4).is_empty());
    }

    #[test]
    fn snapshot_sql_names_tablets_and_filter() {
        let t: TableRef = "test.student".parse().unwrap();
        assert_eq!(
            snapshot_sql(
                &t,
                &["id".into(), "name".into()],
                &[10, 11],
                Some("age > 18"),
                None
            ),
            "SELECT `id`, `name` FROM `test`.`student` TABLET(10, 11) WHERE age > 18"
        );
        assert_eq!(
            snapshot_sql(&t, &[], &[1], None, None),
            "SELECT * FROM `test`.`student` TABLET(1)"
        );
        assert_eq!(
            snapshot_sql(
                &t,
                &["id".into()],
                &[3, 4],
                None,
                Some(461_373_440_032_243_713)
            ),
            "SELECT `id` FROM `test`.`student` FOR VERSION AS OF 461373440032243713 TABLET(3, 4)"
        );
    }

    #[test]
    fn plans_and_schemas_parse() {
        let plan = serde_json::json!({"partitions": {"10002": {}, "10001": {}}, "status": 200});
        assert_eq!(tablets_of_plan(&plan).unwrap(), [10001, 10002]);
        let bad = serde_json::json!({"status": 400, "exception": "requested database and table must consistent"});
        assert_eq!(
            tablets_of_plan(&bad).unwrap_err(),
            "requested database and table must consistent"
        );
        let s = TableSchema::from_data(&serde_json::json!({"keysType": "UNIQUE_KEYS", "properties": [
            {"name": "id", "type": "INT", "is_key": "Yes"}, {"name": "v", "type": "VARCHAR", "is_key": "No"}]}))
        .unwrap();
        assert!(s.is_unique());
        assert!(s.columns[0].is_key && !s.columns[1].is_key);
    }
}

//! `dcs-runner demo`: the whole runner against an embedded Doris emulator, with nothing installed.
//!
//! It starts `dcs-doris-emu` on free ports, creates a changelog-enabled UNIQUE KEY table
//! `demo.student` with a few thousand rows, then runs the real pipeline in `initial` mode (which
//! creates the sink table `demo_sink.student` from the source's schema, `createTable`) while a
//! writer keeps inserting, updating and deleting source rows. After the duration it stops the
//! writer, lets the pipeline read one window past the last write, stops it gracefully and compares
//! source and sink row by row over MySQL.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use dcs_doris_emu::{EmuConfig, RunningEmulator};
use mysql_async::prelude::Queryable;
use tokio::sync::watch;

use crate::checkpoint::FileStore;
use crate::pipeline::{self, Control, Phase, Progress};
use crate::settings::{Credentials, PipelineConfig};
use crate::{Error, Result};

/// What the demo does.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// How long the writer changes the source while the sync runs.
    pub duration: Duration,
    /// Rows in the source before the sync starts.
    pub rows: u32,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(30),
            rows: 5000,
        }
    }
}

/// The comparison at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Rows in the source.
    pub source_rows: usize,
    /// Rows in the sink.
    pub sink_rows: usize,
    /// Keys whose rows differ or exist on one side only.
    pub differing_keys: Vec<String>,
}

impl Comparison {
    /// Whether the sink equals the source.
    pub fn identical(&self) -> bool {
        self.differing_keys.is_empty() && self.source_rows == self.sink_rows
    }

    /// The result line the demo prints.
    pub fn summary(&self) -> String {
        let head = format!(
            "source {} rows, sink {} rows",
            self.source_rows, self.sink_rows
        );
        if self.identical() {
            format!("{head}: identical")
        } else {
            let shown: Vec<&str> = self
                .differing_keys
                .iter()
                .take(20)
                .map(String::as_str)
                .collect();
            format!(
                "{head}: {} keys differ: {}{}",
                self.differing_keys.len(),
                shown.join(", "),
                if self.differing_keys.len() > shown.len() {
                    ", …"
                } else {
                    ""
                }
            )
        }
    }
}

/// Compare rows keyed by their first column (both sides ordered by key).
pub fn compare(source: &[Vec<String>], sink: &[Vec<String>]) -> Comparison {
    use std::collections::BTreeMap;
    let by_key = |rows: &[Vec<String>]| -> BTreeMap<String, Vec<String>> {
        rows.iter()
            .map(|r| (r.first().cloned().unwrap_or_default(), r.clone()))
            .collect()
    };
    let (a, b) = (by_key(source), by_key(sink));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort_by_key(|k| (k.parse::<i64>().unwrap_or(i64::MAX), (*k).clone()));
    keys.dedup();
    let differing_keys = keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    Comparison {
        source_rows: source.len(),
        sink_rows: sink.len(),
        differing_keys,
    }
}

const COLUMNS: &str = "id INT NOT NULL, name VARCHAR(64), age SMALLINT, score DECIMAL(8,2), \
    balance DECIMAL(18,4), active BOOLEAN, birthday DATE, updated DATETIME(6), note STRING";

/// One source row as SQL values; NULLs and odd values sprinkled in by `id`.
fn row_sql(id: u32, version: u32) -> String {
    let v = id
        .wrapping_mul(2_654_435_761)
        .wrapping_add(version.wrapping_mul(40_503));
    let name = if v.is_multiple_of(11) {
        "NULL".to_owned()
    } else {
        format!("'student {id} v{version}'")
    };
    let age = if v.is_multiple_of(13) {
        "NULL".to_owned()
    } else {
        (18 + v % 50).to_string()
    };
    let note = match v % 5 {
        0 => "NULL".to_owned(),
        1 => "'tab\\tquote\\' backslash\\\\'".to_owned(),
        2 => "'ünïcödé ✓'".to_owned(),
        _ => format!("'note {}'", v % 1000),
    };
    format!(
        "({id}, {name}, {age}, {}.{:02}, -{}.{:04}, {}, '19{:02}-{:02}-{:02}', '2026-11-{:02} {:02}:{:02}:{:02}.{:06}', {note})",
        v % 1000,
        v % 100,
        v % 100_000,
        v % 10_000,
        if v.is_multiple_of(2) { "true" } else { "false" },
        70 + v % 30,
        1 + v % 12,
        1 + v % 28,
        1 + v % 28,
        v % 24,
        v % 60,
        (v / 7) % 60,
        v % 1_000_000,
    )
}

async fn mysql(emu: &RunningEmulator) -> Result<mysql_async::Conn> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(emu.ports().query_port)
        .user(Some("root"))
        .pass(Some(""))
        .prefer_socket(false);
    mysql_async::Conn::new(opts)
        .await
        .map_err(|e| crate::source::properties::mysql_error("connecting to the demo Doris", e))
}

async fn sql(conn: &mut mysql_async::Conn, stmt: &str) -> Result<()> {
    conn.query_drop(stmt)
        .await
        .map_err(|e| crate::source::properties::mysql_error("demo statement", e))
}

async fn rows_of(conn: &mut mysql_async::Conn, table: &str) -> Result<Vec<Vec<String>>> {
    let rows: Vec<mysql_async::Row> = conn
        .query(format!("SELECT * FROM {table} ORDER BY id"))
        .await
        .map_err(|e| crate::source::properties::mysql_error("reading for the comparison", e))?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| match r.as_ref(i) {
                    Some(mysql_async::Value::NULL) | None => "NULL".to_owned(),
                    Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                    Some(v) => v.as_sql(true),
                })
                .collect()
        })
        .collect())
}

async fn create_tables(emu: &RunningEmulator, rows: u32) -> Result<()> {
    let mut c = mysql(emu).await?;
    sql(&mut c, "CREATE DATABASE demo").await?;
    sql(
        &mut c,
        &format!(
            "CREATE TABLE demo.student ({COLUMNS}) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 4 \
             PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\", \
             \"changelog.need_historical_value\" = \"true\", \"changelog.ttl_seconds\" = \"86400\")"
        ),
    )
    .await?;
    let values: Vec<String> = (1..=rows).map(|id| row_sql(id, 0)).collect();
    for chunk in values.chunks(500) {
        sql(
            &mut c,
            &format!("INSERT INTO demo.student VALUES {}", chunk.join(", ")),
        )
        .await?;
    }
    let _ = c.disconnect().await;
    Ok(())
}

fn manifest(emu: &RunningEmulator) -> String {
    let fe = emu.fe_http_addr();
    let qp = emu.ports().query_port;
    format!(
        r#"apiVersion: dcs.dev/v1alpha1
kind: DorisChangelogSync
metadata: {{name: student-demo}}
spec:
  source: {{feNodes: ["{fe}"], queryPort: {qp}, table: demo.student, credentials: {{secretName: demo}}}}
  startup: {{mode: initial}}
  changelog: {{incrementType: detail, pollInterval: 1s}}
  checkpoint: {{interval: 2s}}
  expectedSnapshotDuration: 5m
  sink:
    doris:
      feNodes: ["{fe}"]
      table: demo_sink.student
      credentials: {{secretName: demo}}
      labelPrefix: demo
      batch: {{maxRows: 2000, maxBytes: 4Mi, interval: 1s}}
      createTable: {{properties: {{replication_num: "1"}}}}
"#
    )
}

/// Keep changing the source until `stop` turns true; returns the number of statements run.
async fn writer(
    emu: &RunningEmulator,
    first_new_id: u32,
    stop: watch::Receiver<bool>,
) -> Result<u64> {
    let mut c = mysql(emu).await?;
    let mut next_id = first_new_id;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut statements = 0;
    while !*stop.borrow() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let pick = (state >> 33) as u32;
        let existing = 1 + pick % (next_id - 1);
        let stmt = match pick % 10 {
            0..=3 => {
                next_id += 1;
                format!(
                    "INSERT INTO demo.student VALUES {}",
                    row_sql(next_id - 1, 0)
                )
            }
            4..=7 => format!(
                "INSERT INTO demo.student VALUES {}",
                row_sql(existing, pick % 1000 + 1)
            ),
            8 => format!("UPDATE demo.student SET note = NULL, age = 99 WHERE id = {existing}"),
            _ => format!("DELETE FROM demo.student WHERE id = {existing}"),
        };
        sql(&mut c, &stmt).await?;
        statements += 1;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let _ = c.disconnect().await;
    Ok(statements)
}

/// The live progress line.
fn progress_line(p: &Progress, rows_total: u32, elapsed: Duration) -> String {
    let c = &p.counters;
    let tail = format!(
        "written {} deleted {} loads {} checkpoint {}",
        c.rows_written, c.rows_deleted, c.loads, p.checkpoint_id
    );
    let head = match p.phase {
        Phase::Starting => "starting".to_owned(),
        Phase::Snapshot => format!(
            "snapshot {}/{} rows, tablets {}/{}",
            p.snapshot_rows_read, rows_total, p.tablets_done, p.tablets_total
        ),
        Phase::Changelog | Phase::Done => match &p.window_end {
            Some(w) => {
                let lag = jiff::Timestamp::now().as_millisecond() - w.epoch_ms;
                format!(
                    "changelog window to {} lag {:.1}s",
                    w.timestamp,
                    lag as f64 / 1000.0
                )
            }
            None => "changelog: first window".to_owned(),
        },
    };
    format!("[{:>4.1}s] {head} | {tail}", elapsed.as_secs_f64())
}

/// The demo's checkpoint directory, removed however the demo ends.
struct RemovedOnDrop(std::path::PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run the demo and print the comparison; `Ok(true)` when the sink equals the source.
///
/// # Errors
/// When the emulator cannot start or the pipeline fails.
pub async fn run(options: DemoOptions) -> Result<bool> {
    let started = Instant::now();
    let emu = dcs_doris_emu::start(EmuConfig::ephemeral())
        .await
        .map_err(|e| Error::io("starting the embedded Doris emulator", e))?;
    println!(
        "dcs demo: embedded Doris emulator on FE {} (MySQL port {})",
        emu.fe_http_addr(),
        emu.ports().query_port
    );
    create_tables(&emu, options.rows).await?;
    println!(
        "created demo.student ({} rows, changelog on); syncing in initial mode into demo_sink.student (created by the runner) for {:?}",
        options.rows, options.duration
    );
    let sync = dcs_crds::from_manifest(&manifest(&emu)).map_err(|e| Error::Config {
        reason: e.to_string(),
    })?;
    let creds = Credentials {
        source_user: "root".into(),
        sink_user: "root".into(),
        ..Credentials::default()
    };
    let config = PipelineConfig::from_sync(&sync, creds)?;
    let dir = RemovedOnDrop(std::env::temp_dir().join(format!("dcs-demo-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    let mut store = FileStore::open(&dir.0)?;
    let (control, mut handle) = Control::new();
    let mut sync_task =
        tokio::spawn(async move { pipeline::run(config, &mut store, control).await });

    let (stop_writer, stop_rx) = watch::channel(false);
    let writer_emu = &emu;
    let writer_fut = writer(writer_emu, options.rows + 1, stop_rx);
    tokio::pin!(writer_fut);
    let tty = std::io::stdout().is_terminal();
    let mut ticker = tokio::time::interval(if tty {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(2)
    });
    let deadline = tokio::time::Instant::now() + options.duration;
    let show = |p: &Progress| {
        let line = progress_line(p, options.rows, started.elapsed());
        if tty {
            print!("\r{line}\x1b[K");
            let _ = std::io::stdout().flush();
        } else {
            println!("{line}");
        }
    };
    // Phase 1: sync while the writer runs.
    let mut writer_result = None;
    let mut sync_result = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => show(&handle.progress.borrow()),
            () = tokio::time::sleep_until(deadline) => break,
            r = &mut writer_fut, if writer_result.is_none() => writer_result = Some(r),
            r = &mut sync_task => { sync_result = Some(r); break; }
        }
    }
    let _ = stop_writer.send(true);
    let statements = match writer_result {
        Some(r) => r?,
        None => writer_fut.await?,
    };
    if let Some(r) = sync_result {
        if tty {
            println!();
        }
        let r = r.map_err(|e| Error::SourceUnavailable {
            context: "demo pipeline".into(),
            reason: e.to_string(),
        })?;
        r?;
        return Err(Error::SourceUnavailable {
            context: "demo pipeline".into(),
            reason: "stopped early".into(),
        });
    }
    let last_write_ms = emu.doris.clock.now_ms();
    // Phase 2: one more window past the last write, then a graceful stop.
    let caught_up = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let done = {
                let p = handle.progress.borrow_and_update();
                if tty {
                    show(&p);
                }
                p.window_end
                    .as_ref()
                    .is_some_and(|w| w.epoch_ms > last_write_ms)
            };
            if done {
                return true;
            }
            if handle.progress.changed().await.is_err() {
                return false;
            }
        }
    })
    .await
    .unwrap_or(false);
    let _ = handle.shutdown.send(true);
    let outcome = sync_task.await.map_err(|e| Error::SourceUnavailable {
        context: "demo pipeline".into(),
        reason: e.to_string(),
    })?;
    show(&handle.progress.borrow());
    if tty {
        println!();
    }
    outcome?;
    if !caught_up {
        println!("the sync did not catch up with the last write within 120s");
    }
    println!("writer ran {statements} statements; comparing source and sink over MySQL");
    let mut c = mysql(&emu).await?;
    let source = rows_of(&mut c, "demo.student").await?;
    let sink = rows_of(&mut c, "demo_sink.student").await?;
    let _ = c.disconnect().await;
    let cmp = compare(&source, &sink);
    println!("{}", cmp.summary());
    Ok(cmp.identical() && caught_up)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(k: &str, v: &str) -> Vec<String> {
        vec![k.to_owned(), v.to_owned()]
    }

    #[test]
    fn comparison_names_differing_keys() {
        let a = vec![row("1", "a"), row("2", "b"), row("10", "c")];
        assert_eq!(
            compare(&a, &a).summary(),
            "source 3 rows, sink 3 rows: identical"
        );
        let b = vec![row("1", "a"), row("2", "x"), row("3", "y")];
        let c = compare(&a, &b);
        assert!(!c.identical());
        assert_eq!(c.differing_keys, ["2", "3", "10"]);
        assert_eq!(
            c.summary(),
            "source 3 rows, sink 3 rows: 3 keys differ: 2, 3, 10"
        );
    }

    #[test]
    fn demo_rows_are_valid_sql_values_with_nulls() {
        let rows: Vec<String> = (1..200).map(|id| row_sql(id, 0)).collect();
        assert!(rows.iter().any(|r| r.contains("NULL")));
        assert!(rows.iter().all(|r| r.starts_with('(') && r.ends_with(')')));
    }
}

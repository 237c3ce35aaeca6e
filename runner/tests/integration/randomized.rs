//! Randomized workloads, source against sink, for every startup mode × increment type × sink mode.
//!
//! Each case gets its own emulator and a source table with every column type the emulator has
//! (BOOLEAN, TINYINT..BIGINT, LARGEINT, FLOAT, DOUBLE, DECIMAL, CHAR, VARCHAR, STRING, DATE,
//! DATETIME(0/3/6), JSON), NULLs in every nullable column, and strings with quotes, backslashes,
//! control characters and non-ASCII text. The workload (seeded) inserts new keys, re-uses deleted
//! keys, upserts existing keys, updates a few columns and deletes, in three phases:
//!
//! - A: before the start point of `fromTimestamp` (T, a second boundary after A);
//! - B: after T, before the sync starts (the clock is moved on a second, so `latest` starts after B);
//! - C: while the sync runs (not in `snapshot` mode), across several changelog windows.
//!
//! Then the sync reads a window past the last write and stops, and the sink is compared with what
//! it must hold, over MySQL:
//!
//! - upsert sink, detail / minDelta: the source's rows (for `latest` / `fromTimestamp` only the
//!   keys written after the start point; under minDelta a key whose changes cancel out within a
//!   window gets no event, so there every sink row must be the source's and every key that
//!   changed since the start point must be present);
//! - upsert sink, appendOnly: only inserts reach the sink, so per key the row of its last insert
//!   (the source's `@incr` APPEND_ONLY output), over the snapshot for `initial`;
//! - changelog sink, detail / appendOnly: exactly the source's `@incr` output over the same range
//!   (plus the snapshot as `+I` at T0 for `initial`);
//! - changelog sink, minDelta (folded per window, so not one `@incr` over the whole range): the
//!   events replayed in (TSO, LSN) order from the table as it was at the start point are
//!   consistent (every `-U`/`-D` removes exactly the row the sink holds, every `+I`/`+U` adds an
//!   absent key), unique, and end at the source's rows;
//! - `snapshot` mode: the source's rows (as `+I` rows with TSO 0 in a changelog sink).
//!
//! Writes race the snapshot only in `initial` × detail × upsert. Under minDelta that race is a
//! known gap: a window from T0 folds away a change the snapshot already saw (a key inserted after
//! T0, read by the snapshot, deleted in the same window stays in the sink).
//!
//! `DCS_TEST_SEED` replays a run; each test prints its seed.

use crate::source_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use dcs_crds::testing::SyncBuilder;
use dcs_crds::{IncrementType, SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_runner::pipeline::{self, Control, Outcome, Phase};
use dcs_runner::settings::{Credentials, PipelineConfig};
use dcs_runner::source::tso::{floor_to_second, format_timestamp};
use source_support::{Rng, exec, mysql_rows, seed, window_past};

/// The value columns (after `id INT NOT NULL`), every one nullable.
const COLUMNS: [(&str, &str); 18] = [
    ("c_bool", "BOOLEAN"),
    ("c_tiny", "TINYINT"),
    ("c_small", "SMALLINT"),
    ("c_int", "INT"),
    ("c_big", "BIGINT"),
    ("c_large", "LARGEINT"),
    ("c_float", "FLOAT"),
    ("c_double", "DOUBLE"),
    ("c_dec", "DECIMAL(18,4)"),
    ("c_dec38", "DECIMAL(38,10)"),
    ("c_char", "CHAR(8)"),
    ("c_varchar", "VARCHAR(48)"),
    ("c_string", "STRING"),
    ("c_date", "DATE"),
    ("c_dt", "DATETIME"),
    ("c_dt3", "DATETIME(3)"),
    ("c_dt6", "DATETIME(6)"),
    ("c_json", "JSON"),
];

fn column_list() -> String {
    std::iter::once("id")
        .chain(COLUMNS.iter().map(|(n, _)| *n))
        .collect::<Vec<_>>()
        .join(", ")
}

fn table_ddl(table: &str, extra: &str, keys: &str, props: &str) -> String {
    let cols: Vec<String> = COLUMNS.iter().map(|(n, t)| format!("{n} {t}")).collect();
    format!(
        "CREATE TABLE {table} (id INT NOT NULL, {}{extra}) {keys}(id) DISTRIBUTED BY HASH(id) \
         BUCKETS 3 PROPERTIES (\"replication_num\" = \"1\"{props})",
        cols.join(", ")
    )
}

fn sql_str(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

fn text(rng: &mut Rng, max_chars: u64, fancy: bool) -> String {
    const PLAIN: &[char] = &['a', 'b', 'x', 'Y', 'z', '0', '7', '_', '-', '.'];
    const FANCY: &[char] = &[
        'a', 'b', 'Z', ' ', '\'', '"', '\\', '\n', '\t', '/', 'é', 'ß', '中', '文', '😀', '{', ',',
    ];
    let n = rng.range(0, max_chars + 1);
    (0..n)
        .map(|_| *rng.pick(if fancy { FANCY } else { PLAIN }))
        .collect()
}

fn signed(rng: &mut Rng, magnitude: u64) -> i64 {
    let v = rng.range(0, magnitude) as i64;
    if rng.chance(50) { -v } else { v }
}

/// A random SQL literal for a column type (NULL sometimes).
fn value(rng: &mut Rng, ty: &str) -> String {
    if rng.chance(15) {
        return "NULL".into();
    }
    match ty {
        "BOOLEAN" => rng.pick(&["true", "false"]).to_string(),
        "TINYINT" => match rng.range(0, 4) {
            0 => "-128".into(),
            1 => "127".into(),
            _ => signed(rng, 128).to_string(),
        },
        "SMALLINT" => signed(rng, 32_768).to_string(),
        "INT" => signed(rng, 1 << 31).to_string(),
        "BIGINT" => match rng.range(0, 4) {
            0 => i64::MAX.to_string(),
            1 => (i64::MIN + 1).to_string(),
            _ => (rng.next() as i64).to_string(),
        },
        "LARGEINT" => {
            let v = (i128::from(rng.next()) << 62) | i128::from(rng.next() >> 2);
            let v = if rng.chance(50) { -v } else { v };
            format!("'{v}'")
        }
        "FLOAT" => format!("{}", signed(rng, 2_000_000) as f64 / 64.0),
        "DOUBLE" => format!("{}", signed(rng, 1 << 52) as f64 / 1000.0),
        "DECIMAL(18,4)" => format!(
            "{}{}.{:04}",
            if rng.chance(50) { "-" } else { "" },
            rng.range(0, 100_000_000_000_000),
            rng.range(0, 10_000)
        ),
        "DECIMAL(38,10)" => format!(
            "{}{}{:014}.{:010}",
            if rng.chance(50) { "-" } else { "" },
            rng.range(0, 100_000_000_000_000),
            rng.range(0, 100_000_000_000_000),
            rng.range(0, 10_000_000_000)
        ),
        "CHAR(8)" => {
            let mut s = text(rng, 8, false);
            if s.is_empty() {
                s.push('c');
            }
            sql_str(&s)
        }
        "VARCHAR(48)" => sql_str(&text(rng, 10, true)),
        "STRING" => sql_str(&text(rng, 60, true)),
        "DATE" => format!("'{}'", date(rng)),
        "DATETIME" => format!("'{} {}'", date(rng), time(rng)),
        "DATETIME(3)" => format!("'{} {}.{:03}'", date(rng), time(rng), rng.range(0, 1000)),
        "DATETIME(6)" => format!(
            "'{} {}.{:06}'",
            date(rng),
            time(rng),
            rng.range(0, 1_000_000)
        ),
        "JSON" => {
            let s = text(rng, 6, false);
            let b = rng.pick(&["true", "false", "null"]).to_string();
            sql_str(&format!(
                "{{\"k\":{},\"s\":\"{s}\",\"a\":[{b},{}]}}",
                signed(rng, 1_000_000),
                rng.range(0, 100)
            ))
        }
        other => panic!("no generator for {other}"),
    }
}

fn date(rng: &mut Rng) -> String {
    format!(
        "{:04}-{:02}-{:02}",
        rng.range(1900, 2100),
        rng.range(1, 13),
        rng.range(1, 29)
    )
}

fn time(rng: &mut Rng) -> String {
    format!(
        "{:02}:{:02}:{:02}",
        rng.range(0, 24),
        rng.range(0, 60),
        rng.range(0, 60)
    )
}

fn row(rng: &mut Rng, id: u64) -> String {
    let vals: Vec<String> = COLUMNS.iter().map(|(_, t)| value(rng, t)).collect();
    format!("({id}, {})", vals.join(", "))
}

/// The writer's knowledge of the source: which keys exist, which were deleted, which were written
/// since the last `mark`.
struct Workload {
    rng: Rng,
    next_id: u64,
    present: BTreeSet<u64>,
    deleted: Vec<u64>,
    touched: BTreeSet<u64>,
}

impl Workload {
    fn new(seed: u64) -> Self {
        Self {
            rng: Rng(seed),
            next_id: 1,
            present: BTreeSet::new(),
            deleted: Vec::new(),
            touched: BTreeSet::new(),
        }
    }

    fn existing(&mut self) -> Option<u64> {
        if self.present.is_empty() {
            return None;
        }
        let n = self.rng.range(0, self.present.len() as u64) as usize;
        self.present.iter().nth(n).copied()
    }

    /// One random statement, applied to the model.
    fn statement(&mut self) -> String {
        let choice = self.rng.range(0, 100);
        if choice < 10 && !self.deleted.is_empty() {
            // Key reuse.
            let i = self.rng.range(0, self.deleted.len() as u64) as usize;
            let id = self.deleted.swap_remove(i);
            self.present.insert(id);
            self.touched.insert(id);
            return format!("INSERT INTO r.src VALUES {}", row(&mut self.rng, id));
        }
        if (10..45).contains(&choice)
            && let Some(id) = self.existing()
        {
            if choice < 20 {
                // An INSERT over an existing key: an upsert.
                self.touched.insert(id);
                return format!("INSERT INTO r.src VALUES {}", row(&mut self.rng, id));
            }
            let n = self.rng.range(1, 5);
            let sets: Vec<String> = (0..n)
                .map(|_| {
                    let (c, t) = *self.rng.pick(&COLUMNS);
                    (c, value(&mut self.rng, t))
                })
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .map(|(c, v)| format!("{c} = {v}"))
                .collect();
            self.touched.insert(id);
            return format!("UPDATE r.src SET {} WHERE id = {id}", sets.join(", "));
        }
        if (45..62).contains(&choice)
            && let Some(id) = self.existing()
        {
            self.present.remove(&id);
            self.deleted.push(id);
            self.touched.insert(id);
            return format!("DELETE FROM r.src WHERE id = {id}");
        }
        // New keys, one to three in one statement (one commit, several LSNs).
        let n = self.rng.range(1, 4);
        let rows: Vec<String> = (0..n)
            .map(|_| {
                let id = self.next_id;
                self.next_id += 1;
                self.present.insert(id);
                self.touched.insert(id);
                row(&mut self.rng, id)
            })
            .collect();
        format!("INSERT INTO r.src VALUES {}", rows.join(", "))
    }

    async fn run(&mut self, emu: &RunningEmulator, statements: usize) {
        for _ in 0..statements {
            let stmt = self.statement();
            exec(emu, &[&stmt]).await;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Startup {
    Snapshot,
    Initial,
    Latest,
    FromTimestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Incr {
    Detail,
    MinDelta,
    AppendOnly,
}

impl Incr {
    fn increment_type(self) -> IncrementType {
        match self {
            Incr::Detail => IncrementType::Detail,
            Incr::MinDelta => IncrementType::MinDelta,
            Incr::AppendOnly => IncrementType::AppendOnly,
        }
    }

    fn sql(self) -> &'static str {
        match self {
            Incr::Detail => "DETAIL",
            Incr::MinDelta => "MIN_DELTA",
            Incr::AppendOnly => "APPEND_ONLY",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    Upsert,
    Changelog,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    startup: Startup,
    incr: Incr,
    sink: Sink,
}

impl Case {
    fn name(&self) -> String {
        format!("{:?}/{:?}/{:?}", self.startup, self.incr, self.sink)
    }
}

fn manifest(emu: &RunningEmulator, case: &Case, from_timestamp: &str) -> String {
    let fe = emu.fe_http_addr();
    let sync = SyncBuilder::new()
        .name("rnd")
        .source_fe(&fe)
        .query_port(emu.ports().query_port)
        .source_table("r.src")
        .source_secret("s")
        .poll_interval("1s")
        .increment_type(case.incr.increment_type())
        .checkpoint_interval("1s")
        .sink_fe(&fe)
        .sink_table("r.dst")
        .sink_secret("d")
        .sink_mode(match case.sink {
            Sink::Upsert => SinkMode::Upsert,
            Sink::Changelog => SinkMode::Changelog,
        })
        .max_rows(40)
        .batch_interval("1s");
    match case.startup {
        Startup::Snapshot => sync.mode(StartupMode::Snapshot),
        Startup::Initial => sync.mode(StartupMode::Initial),
        Startup::Latest => sync.mode(StartupMode::Latest),
        Startup::FromTimestamp => sync.from_timestamp(from_timestamp),
    }
    .yaml()
}

fn config(yaml: &str) -> PipelineConfig {
    let sync = dcs_crds::from_manifest(yaml).unwrap();
    let creds = Credentials {
        source_user: "root".into(),
        source_password: String::new(),
        sink_user: "root".into(),
        sink_password: String::new(),
    };
    let mut c = PipelineConfig::from_sync(&sync, creds).unwrap();
    c.changelog.poll_interval = Duration::from_millis(150);
    c.changelog.retry_delay = Duration::from_millis(50);
    c.checkpoint_interval = Duration::from_millis(300);
    if let dcs_runner::settings::SinkConfig::Doris(d) = &mut c.sink {
        d.backoff.base = Duration::from_millis(20);
    }
    c
}

fn advance_a_second(emu: &RunningEmulator) {
    emu.doris.clock.advance_ms(1000);
}

const OP_NAMES: [&str; 4] = ["+I", "-D", "-U", "+U"];

fn op_rank(op: &str) -> usize {
    match op {
        "+I" => 0,
        "-D" => 1,
        "-U" => 2,
        "+U" => 3,
        other => panic!("unknown dcs_op {other}"),
    }
}

/// The source's `@incr` output over `[start, end)`, each row as the columns, then op text, TSO,
/// LSN (the changelog sink's layout).
async fn incr(emu: &RunningEmulator, incr: Incr, start_ms: i64, end_ms: i64) -> Vec<Vec<String>> {
    let sql = format!(
        "SELECT {}, __DORIS_BINLOG_OP__, __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__ FROM \
         r.src@incr('startTimestamp' = '{}', 'endTimestamp' = '{}', 'incrementType' = '{}') \
         ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__",
        column_list(),
        format_timestamp(start_ms),
        format_timestamp(end_ms),
        incr.sql()
    );
    let n = COLUMNS.len() + 1;
    mysql_rows(emu, &sql)
        .await
        .into_iter()
        .map(|mut r| {
            let op: usize = r[n].parse().unwrap();
            r[n] = OP_NAMES[op].to_owned();
            r
        })
        .collect()
}

fn by_key(rows: &[Vec<String>]) -> BTreeMap<String, Vec<String>> {
    rows.iter().map(|r| (r[0].clone(), r.clone())).collect()
}

fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

/// Run one case; returns a description of what is wrong, if anything.
async fn run_case(case: Case, seed: u64) -> Result<(), String> {
    let name = case.name();
    let emu = source_support::emu().await;
    let changelog_props = ", \"changelog.enable\" = \"true\", \
                           \"changelog.need_historical_value\" = \"true\"";
    let sink_ddl = match case.sink {
        Sink::Upsert => table_ddl("r.dst", "", "UNIQUE KEY", ""),
        Sink::Changelog => table_ddl(
            "r.dst",
            ", dcs_op VARCHAR(2), dcs_tso BIGINT, dcs_lsn BIGINT",
            "DUPLICATE KEY",
            "",
        ),
    };
    exec(
        &emu,
        &[
            "CREATE DATABASE r",
            &table_ddl("r.src", "", "UNIQUE KEY", changelog_props),
            &sink_ddl,
        ],
    )
    .await;
    let cols = column_list();
    let select_src = format!("SELECT {cols} FROM r.src ORDER BY id");
    let mut w = Workload::new(seed);
    // A: the table before T.
    w.run(&emu, 150).await;
    advance_a_second(&emu);
    let t_ms = floor_to_second(emu.doris.clock.now_ms());
    let state_t = mysql_rows(&emu, &select_src).await;
    w.touched.clear();
    // B: after T, before the sync.
    w.run(&emu, 40).await;
    advance_a_second(&emu);
    let s_ms = floor_to_second(emu.doris.clock.now_ms());
    let state_s = mysql_rows(&emu, &select_src).await;
    let touched_b = std::mem::take(&mut w.touched);

    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&manifest(&emu, &case, &format_timestamp(t_ms)));
    let dir_path = dir.path().to_path_buf();
    let (control, mut handle) = Control::new();
    let mut task = tokio::spawn(async move {
        let mut store = dcs_runner::checkpoint::FileStore::open(&dir_path).unwrap();
        pipeline::run(cfg, &mut store, control).await
    });
    let wait = Duration::from_secs(40);
    let concurrent = racing_writes(case.startup);
    let outcome = if case.startup == Startup::Snapshot {
        tokio::time::timeout(wait, &mut task)
            .await
            .map_err(|_| format!("{name}: the snapshot did not finish"))?
            .unwrap()
    } else {
        // C: while the sync runs. Writes race the snapshot of `initial` syncs (and the start of
        // `fromTimestamp` ones, whose start point is fixed); see `racing_writes`.
        if !concurrent {
            tokio::time::timeout(wait, async {
                while handle.progress.borrow_and_update().phase != Phase::Changelog {
                    handle.progress.changed().await.unwrap();
                }
            })
            .await
            .map_err(|_| format!("{name}: no changelog phase"))?;
        }
        for _ in 0..3 {
            w.run(&emu, 25).await;
            tokio::time::sleep(Duration::from_millis(w.rng.range(50, 250))).await;
            // A window boundary between the rounds.
            advance_a_second(&emu);
            w.run(&emu, 15).await;
        }
        let last = emu.doris.clock.now_ms();
        advance_a_second(&emu);
        if !window_past(&mut handle, last, wait).await {
            return Err(format!("{name}: the changelog did not pass the last write"));
        }
        handle.shutdown.send(true).unwrap();
        tokio::time::timeout(wait, &mut task)
            .await
            .map_err(|_| format!("{name}: did not stop"))?
            .unwrap()
    };
    let outcome = outcome.map_err(|e| format!("{name}: the sync failed: {e}"))?;
    let expected_outcome = if case.startup == Startup::Snapshot {
        Outcome::Done
    } else {
        Outcome::Stopped
    };
    if outcome != expected_outcome {
        return Err(format!("{name}: outcome {outcome:?}"));
    }
    let cp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("checkpoint.json")).unwrap())
            .unwrap();
    let end_ms = cp["position"]["offset"]["epochMs"].as_i64();
    let source = mysql_rows(&emu, &select_src).await;
    let touched_c = std::mem::take(&mut w.touched);

    // Where the changelog starts, and the table as it was there.
    let (start_ms, base) = match case.startup {
        Startup::Snapshot => (None, state_s.clone()),
        Startup::Initial => (
            Some(
                cp["startPoint"]["epochMs"]
                    .as_i64()
                    .ok_or(format!("{name}: no T0 in {cp}"))?,
            ),
            state_s.clone(),
        ),
        Startup::Latest => (Some(s_ms), state_s.clone()),
        Startup::FromTimestamp => (Some(t_ms), state_t.clone()),
    };
    let touched: BTreeSet<String> = match case.startup {
        Startup::Latest => touched_c.iter().map(u64::to_string).collect(),
        Startup::FromTimestamp => touched_b.union(&touched_c).map(u64::to_string).collect(),
        _ => source.iter().map(|r| r[0].clone()).collect(),
    };
    let n = COLUMNS.len() + 1;
    // The changes an `initial` sync replays: those after T0's TSO (the earlier ones, committed
    // in T0's second, are in the snapshot).
    let seam_tso = match case.startup {
        Startup::Initial => cp["startPoint"]["tso"].as_i64(),
        _ => None,
    };
    let changes: Vec<Vec<String>> = match (start_ms, end_ms) {
        (Some(s), Some(e)) => incr(&emu, case.incr, s, e).await,
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|r| seam_tso.is_none_or(|t0| r[n + 1].parse::<i64>().unwrap() > t0))
    .collect();
    let snapshot_rows = matches!(case.startup, Startup::Snapshot | Startup::Initial);

    // The snapshot of an `initial` sync raced the writes: it read each key at some moment, so
    // what it delivered is only known to be one of the key's versions.
    let racy_snapshot = concurrent && case.startup == Startup::Initial;
    let versions = match (racy_snapshot, end_ms) {
        (true, Some(e)) => Some(Versions::read(&emu, &state_s, s_ms, e, n).await),
        _ => None,
    };

    match case.sink {
        Sink::Upsert => {
            let sink = mysql_rows(&emu, &format!("SELECT {cols} FROM r.dst ORDER BY id")).await;
            if let (Some(v), Incr::AppendOnly) = (&versions, case.incr) {
                // Each key's last insert since T0 wins (the changelog follows the snapshot);
                // any other row is what the snapshot read: a version of its key.
                let mut last_insert = BTreeMap::new();
                for c in &changes {
                    last_insert.insert(c[0].clone(), c[..n].to_vec());
                }
                let (inserted, read): (Vec<Vec<String>>, Vec<Vec<String>>) = sink
                    .into_iter()
                    .partition(|r| last_insert.contains_key(&r[0]));
                let expected: Vec<Vec<String>> = last_insert.into_values().collect();
                if sorted(inserted.clone()) != sorted(expected.clone()) {
                    return Err(format!(
                        "{name}: the keys inserted since T0: {}",
                        source_support::row_diff(&sorted(expected), &sorted(inserted))
                    ));
                }
                return v.check_snapshot_rows(&name, &read);
            }
            let expected: Vec<Vec<String>> =
                if case.incr == Incr::AppendOnly && case.startup != Startup::Snapshot {
                    // Only inserts arrive: the snapshot, overwritten by each key's last insert.
                    let mut rows = if snapshot_rows {
                        by_key(&base)
                    } else {
                        BTreeMap::new()
                    };
                    for c in &changes {
                        rows.insert(c[0].clone(), c[..n].to_vec());
                    }
                    sorted(rows.into_values().collect())
                } else {
                    source
                        .iter()
                        .filter(|r| touched.contains(&r[0]))
                        .cloned()
                        .collect()
                };
            let sink = sorted(sink);
            let expected = sorted(expected);
            if case.incr == Incr::MinDelta && !snapshot_rows {
                // A key whose changes cancel out within a window (an update back to the row it
                // had, or to the same values) has no net change there, so minDelta gives no
                // event: such keys may be missing. Every sink row must be the source's row,
                // and every key that changed between the start point and now must be there.
                let source_rows: BTreeSet<&Vec<String>> = source.iter().collect();
                let base_rows: BTreeSet<&Vec<String>> = base.iter().collect();
                let sink_rows: BTreeSet<&Vec<String>> = sink.iter().collect();
                let stale: Vec<_> = sink.iter().filter(|r| !source_rows.contains(r)).collect();
                let missing: Vec<_> = expected
                    .iter()
                    .filter(|r| !base_rows.contains(r) && !sink_rows.contains(r))
                    .collect();
                if !stale.is_empty() || !missing.is_empty() {
                    return Err(format!(
                        "{name}: sink rows not in the source {stale:?}; changed rows missing \
                         {missing:?}"
                    ));
                }
                return Ok(());
            }
            if sink != expected {
                return Err(format!(
                    "{name}: {}",
                    source_support::row_diff(&expected, &sink)
                ));
            }
        }
        Sink::Changelog => {
            let sink = mysql_rows(
                &emu,
                &format!("SELECT {cols}, dcs_op, dcs_tso, dcs_lsn FROM r.dst"),
            )
            .await;
            let t0_tso = cp["startPoint"]["tso"].as_i64().unwrap_or(0).to_string();
            let (snap, events): (Vec<Vec<String>>, Vec<Vec<String>>) = sink
                .into_iter()
                .partition(|r| snapshot_rows && r[n] == "+I" && r[n + 1] == t0_tso);
            let snap: Vec<Vec<String>> = snap.into_iter().map(|r| r[..n].to_vec()).collect();
            if let Some(v) = &versions {
                v.check_snapshot_rows(&name, &snap)?;
            } else if snapshot_rows && sorted(snap.clone()) != sorted(base.clone()) {
                return Err(format!(
                    "{name}: the snapshot rows: {}",
                    source_support::row_diff(&sorted(base.clone()), &sorted(snap))
                ));
            }
            match case.incr {
                Incr::Detail | Incr::AppendOnly => {
                    let (e, a) = (sorted(changes.clone()), sorted(events.clone()));
                    if e != a {
                        return Err(format!(
                            "{name}: the events: {}",
                            source_support::row_diff(&e, &a)
                        ));
                    }
                }
                Incr::MinDelta => {}
            }
            if versions.is_some() {
                // No known table to replay from: the snapshot rows are where each key starts.
                if case.incr != Incr::AppendOnly {
                    final_state_matches(&name, &snap, events, &source, n)?;
                }
            } else if case.incr != Incr::AppendOnly && case.startup != Startup::Snapshot {
                replay(&name, &base, events, &source, n)?;
            }
        }
    }
    Ok(())
}

/// Whether the writes of phase C start with the sync rather than after it reached the changelog.
///
/// - `initial`: they race the snapshot; the seam rule (the window at T0 read as DETAIL) makes
///   minDelta exact there too.
/// - `fromTimestamp`: they race the start, which is fixed.
/// - `latest`: not racing. Its start is Doris's now when the run resolves it, not recorded
///   anywhere, so writes racing it could fall before or after it.
/// - `snapshot`: bounded, no phase C.
fn racing_writes(startup: Startup) -> bool {
    matches!(startup, Startup::Initial | Startup::FromTimestamp)
}

/// Every version each key had from a point on: its row there and every before and after image
/// of the DETAIL changelog since.
struct Versions {
    of: BTreeMap<String, BTreeSet<Vec<String>>>,
    /// Keys with no change since, and their rows.
    untouched: BTreeMap<String, Vec<String>>,
}

impl Versions {
    async fn read(
        emu: &RunningEmulator,
        state: &[Vec<String>],
        from_ms: i64,
        end_ms: i64,
        n: usize,
    ) -> Self {
        let mut of: BTreeMap<String, BTreeSet<Vec<String>>> = BTreeMap::new();
        let mut untouched = by_key(state);
        for r in state {
            of.entry(r[0].clone()).or_default().insert(r.clone());
        }
        for c in incr(emu, Incr::Detail, from_ms, end_ms).await {
            untouched.remove(&c[0]);
            of.entry(c[0].clone()).or_default().insert(c[..n].to_vec());
        }
        Self { of, untouched }
    }

    /// Rows a snapshot racing the writes delivered: each key at most once, as one of its
    /// versions, and every key that did not change since present as it was.
    fn check_snapshot_rows(&self, name: &str, rows: &[Vec<String>]) -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for r in rows {
            if !seen.insert(r[0].clone()) {
                return Err(format!("{name}: key {} read twice by the snapshot", r[0]));
            }
            if !self.of.get(&r[0]).is_some_and(|v| v.contains(r)) {
                return Err(format!("{name}: {r:?} is no version its key had"));
            }
        }
        let got = by_key(rows);
        for (key, row) in &self.untouched {
            if got.get(key) != Some(row) {
                return Err(format!(
                    "{name}: unchanged key {key} should read {row:?}, the sink has {:?}",
                    got.get(key)
                ));
            }
        }
        Ok(())
    }
}

/// A changelog sink whose snapshot raced the writes: events in (TSO, LSN, OP) order, none
/// repeated; each key ends as its last event leaves it (an insert or update-after: that row; a
/// delete: absent), or as the snapshot read it when it has no event; and that is the source.
/// Every change after T0 has an event (under minDelta thanks to the seam rule), so whenever the
/// snapshot read a key, its later changes follow as events.
fn final_state_matches(
    name: &str,
    snapshot: &[Vec<String>],
    mut events: Vec<Vec<String>>,
    source: &[Vec<String>],
    n: usize,
) -> Result<(), String> {
    let order = |r: &Vec<String>| {
        (
            r[n + 1].parse::<i64>().unwrap(),
            r[n + 2].parse::<i64>().unwrap(),
            op_rank(&r[n]),
        )
    };
    events.sort_by_key(order);
    let mut seen = BTreeSet::new();
    let mut state: BTreeMap<String, Option<Vec<String>>> = snapshot
        .iter()
        .map(|r| (r[0].clone(), Some(r.clone())))
        .collect();
    for e in &events {
        if !seen.insert(order(e)) {
            return Err(format!("{name}: a repeated event {e:?}"));
        }
        let after = matches!(e[n].as_str(), "+I" | "+U").then(|| e[..n].to_vec());
        state.insert(e[0].clone(), after);
    }
    let got = sorted(state.into_values().flatten().collect());
    let want = sorted(source.to_vec());
    if got != want {
        return Err(format!(
            "{name}: the sink's final state: {}",
            source_support::row_diff(&want, &got)
        ));
    }
    Ok(())
}

/// Apply changelog-sink events in order to `base`: each must be consistent with the state, no
/// event may repeat, and the result must be `source`.
fn replay(
    name: &str,
    base: &[Vec<String>],
    mut events: Vec<Vec<String>>,
    source: &[Vec<String>],
    n: usize,
) -> Result<(), String> {
    let order = |r: &Vec<String>| {
        (
            r[n + 1].parse::<i64>().unwrap(),
            r[n + 2].parse::<i64>().unwrap(),
            op_rank(&r[n]),
        )
    };
    events.sort_by_key(order);
    let mut seen = BTreeSet::new();
    let mut state = by_key(base);
    for e in &events {
        if !seen.insert(order(e)) {
            return Err(format!("{name}: a repeated event {e:?}"));
        }
        let data = e[..n].to_vec();
        match e[n].as_str() {
            "+I" | "+U" => {
                if let Some(old) = state.insert(e[0].clone(), data) {
                    return Err(format!("{name}: {e:?} over a present row {old:?}"));
                }
            }
            _ => match state.remove(&e[0]) {
                Some(old) if old == data => {}
                other => return Err(format!("{name}: {e:?} removes {other:?}")),
            },
        }
    }
    let got = sorted(state.into_values().collect());
    let want = sorted(source.to_vec());
    if got != want {
        return Err(format!(
            "{name}: replayed events: {}",
            source_support::row_diff(&want, &got)
        ));
    }
    Ok(())
}

async fn run_cases(test: &str, cases: Vec<Case>) {
    let seed = seed(test);
    let runs = cases.iter().enumerate().map(|(i, c)| {
        let case = *c;
        let s = seed.wrapping_add(i as u64 * 7919);
        tokio::spawn(async move { (case, run_case(case, s).await) })
    });
    let mut failures = Vec::new();
    for r in futures::future::join_all(runs).await {
        let (case, result) = r.unwrap();
        match result {
            Ok(()) => println!("{}: ok", case.name()),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
}

fn cases(startup: Startup) -> Vec<Case> {
    let incrs: &[Incr] = if startup == Startup::Snapshot {
        &[Incr::Detail]
    } else {
        &[Incr::Detail, Incr::MinDelta, Incr::AppendOnly]
    };
    let mut out = Vec::new();
    for &incr in incrs {
        for sink in [Sink::Upsert, Sink::Changelog] {
            out.push(Case {
                startup,
                incr,
                sink,
            });
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_mode_into_both_sink_modes() {
    run_cases("snapshot", cases(Startup::Snapshot)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_mode_every_increment_type_and_sink_mode() {
    run_cases("initial", cases(Startup::Initial)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_mode_every_increment_type_and_sink_mode() {
    run_cases("latest", cases(Startup::Latest)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_timestamp_mode_every_increment_type_and_sink_mode() {
    run_cases("fromTimestamp", cases(Startup::FromTimestamp)).await;
}

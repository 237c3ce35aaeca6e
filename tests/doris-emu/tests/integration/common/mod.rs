//! Shared set-up for the emulator's protocol tests: an in-process emulator on free ports.
#![allow(dead_code)]

use dcs_doris_emu::sql::{self, Session};
use dcs_doris_emu::types::QueryResult;
use dcs_doris_emu::{EmuConfig, RunningEmulator};

/// Start an emulator on free ports with user `root` and an empty password.
pub async fn emu() -> RunningEmulator {
    dcs_doris_emu::start(EmuConfig::ephemeral())
        .await
        .expect("emulator starts")
}

/// Start an emulator with a custom configuration (ports forced to 0).
pub async fn emu_with(f: impl FnOnce(&mut EmuConfig)) -> RunningEmulator {
    let mut c = EmuConfig::ephemeral();
    f(&mut c);
    dcs_doris_emu::start(c).await.expect("emulator starts")
}

/// Run set-up SQL directly against the engine (assertions should go through a protocol).
pub async fn setup_sql(emu: &RunningEmulator, stmts: &[&str]) {
    let mut s = Session::new("root");
    for stmt in stmts {
        if let Err(e) = sql::execute(&emu.doris, &mut s, stmt).await {
            panic!("set-up statement failed: {stmt}: {e}");
        }
    }
}

/// Run one statement directly and return its result.
pub async fn run_sql(
    emu: &RunningEmulator,
    stmt: &str,
) -> Result<QueryResult, dcs_doris_emu::error::DorisError> {
    let mut s = Session::new("root");
    sql::execute(&emu.doris, &mut s, stmt).await
}

/// The seed DDL: a UNIQUE KEY table with the changelog on.
pub const STUDENT_DDL: &str = "CREATE TABLE test.student (
    id INT NOT NULL,
    name VARCHAR(64),
    age INT,
    score DECIMAL(10, 2),
    updated DATETIME(3)
) UNIQUE KEY(id)
DISTRIBUTED BY HASH(id) BUCKETS 4
PROPERTIES (
    \"replication_num\" = \"1\",
    \"changelog.enable\" = \"true\",
    \"changelog.need_historical_value\" = \"true\",
    \"changelog.ttl_seconds\" = \"86400\"
)";

/// A plaintext reqwest client (reqwest has no crypto provider of its own in this workspace).
pub fn plain_reqwest() -> reqwest::Client {
    plain_reqwest_builder().build().expect("HTTP client")
}

/// A reqwest builder with the plaintext TLS configuration already given.
pub fn plain_reqwest_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().tls_backend_preconfigured(dcs_doris_emu::tls::plain_client_config())
}

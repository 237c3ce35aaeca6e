//! The FE settings that shape transactions (Doris `fe.conf`, changed at run time with
//! `ADMIN SET FRONTEND CONFIG` or the control API's `/_emu/config`).
//!
//! Doris's rules (fe `TransactionState.isTimeout`, `DatabaseTransactionMgr`):
//! - a PREPARE transaction (a load still running) is aborted `timeout` seconds after it began: the
//!   load's `timeout` header, else `stream_load_default_timeout_second`;
//! - a PRECOMMITTED transaction (a two-phase load waiting for its commit) is aborted
//!   `stream_load_default_precommit_timeout_second` after its pre-commit, whatever the load's
//!   `timeout` header said; the abort reason is `timeout by txn manager`;
//! - a database holds at most `max_running_txn_num_per_db` PREPARE and PRECOMMITTED transactions;
//!   beyond that a new load is refused with `current running txns on db <id> is <n>, larger than
//!   limit <limit>`.

use std::sync::atomic::{AtomicI64, Ordering};

use serde::{Deserialize, Serialize};

/// Doris's default `max_running_txn_num_per_db`.
pub const DEFAULT_MAX_RUNNING_TXN_NUM_PER_DB: i64 = 1000;
/// Doris's default `stream_load_default_timeout_second` (3 days).
pub const DEFAULT_STREAM_LOAD_TIMEOUT_SECOND: i64 = 259_200;
/// Doris's default `stream_load_default_precommit_timeout_second`.
pub const DEFAULT_PRECOMMIT_TIMEOUT_SECOND: i64 = 3600;
/// The abort reason Doris gives a transaction it timed out.
pub const TIMEOUT_REASON: &str = "timeout by txn manager";

/// The FE settings, changeable while the emulator runs.
#[derive(Debug)]
pub struct FeConfig {
    max_running_txn_num_per_db: AtomicI64,
    stream_load_default_timeout_second: AtomicI64,
    stream_load_default_precommit_timeout_second: AtomicI64,
}

impl Default for FeConfig {
    fn default() -> Self {
        Self {
            max_running_txn_num_per_db: AtomicI64::new(DEFAULT_MAX_RUNNING_TXN_NUM_PER_DB),
            stream_load_default_timeout_second: AtomicI64::new(DEFAULT_STREAM_LOAD_TIMEOUT_SECOND),
            stream_load_default_precommit_timeout_second: AtomicI64::new(
                DEFAULT_PRECOMMIT_TIMEOUT_SECOND,
            ),
        }
    }
}

/// The settings as values, for the control API (`GET`/`PUT /_emu/config`; a `PUT` sets the
/// fields it names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FeConfigValues {
    /// `max_running_txn_num_per_db`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running_txn_num_per_db: Option<i64>,
    /// `stream_load_default_timeout_second`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_load_default_timeout_second: Option<i64>,
    /// `stream_load_default_precommit_timeout_second`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_load_default_precommit_timeout_second: Option<i64>,
}

impl FeConfig {
    /// `max_running_txn_num_per_db`.
    pub fn max_running_txn_num_per_db(&self) -> i64 {
        self.max_running_txn_num_per_db.load(Ordering::SeqCst)
    }

    /// `stream_load_default_timeout_second`, in milliseconds.
    pub fn default_load_timeout_ms(&self) -> i64 {
        self.stream_load_default_timeout_second
            .load(Ordering::SeqCst)
            .saturating_mul(1000)
    }

    /// `stream_load_default_precommit_timeout_second`, in milliseconds.
    pub fn precommit_timeout_ms(&self) -> i64 {
        self.stream_load_default_precommit_timeout_second
            .load(Ordering::SeqCst)
            .saturating_mul(1000)
    }

    /// Every setting.
    pub fn values(&self) -> FeConfigValues {
        FeConfigValues {
            max_running_txn_num_per_db: Some(self.max_running_txn_num_per_db()),
            stream_load_default_timeout_second: Some(
                self.stream_load_default_timeout_second
                    .load(Ordering::SeqCst),
            ),
            stream_load_default_precommit_timeout_second: Some(
                self.stream_load_default_precommit_timeout_second
                    .load(Ordering::SeqCst),
            ),
        }
    }

    /// Set the named settings; every value must be positive.
    ///
    /// # Errors
    /// Doris's wording for a value out of range, naming the setting.
    pub fn set(&self, values: FeConfigValues) -> Result<(), String> {
        let checked = |name: &str, v: Option<i64>| match v {
            Some(v) if v <= 0 => Err(format!("Config '{name}' must be greater than 0, got {v}")),
            other => Ok(other),
        };
        let max = checked(
            "max_running_txn_num_per_db",
            values.max_running_txn_num_per_db,
        )?;
        let timeout = checked(
            "stream_load_default_timeout_second",
            values.stream_load_default_timeout_second,
        )?;
        let precommit = checked(
            "stream_load_default_precommit_timeout_second",
            values.stream_load_default_precommit_timeout_second,
        )?;
        for (slot, v) in [
            (&self.max_running_txn_num_per_db, max),
            (&self.stream_load_default_timeout_second, timeout),
            (
                &self.stream_load_default_precommit_timeout_second,
                precommit,
            ),
        ] {
            if let Some(v) = v {
                slot.store(v, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// Set one setting by its Doris name and text value (`ADMIN SET FRONTEND CONFIG`).
    ///
    /// # Errors
    /// An unknown name, or a value that is not a positive integer.
    pub fn set_named(&self, name: &str, value: &str) -> Result<(), String> {
        let v: i64 = value
            .trim()
            .parse()
            .map_err(|_| format!("Config '{name}' type is int, got value {value}"))?;
        let mut values = FeConfigValues::default();
        match name {
            "max_running_txn_num_per_db" => values.max_running_txn_num_per_db = Some(v),
            "stream_load_default_timeout_second" => {
                values.stream_load_default_timeout_second = Some(v);
            }
            "stream_load_default_precommit_timeout_second" => {
                values.stream_load_default_precommit_timeout_second = Some(v);
            }
            other => return Err(format!("Config '{other}' does not exist or is not mutable")),
        }
        self.set(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_doris_defaults_and_set_names_fields() {
        let c = FeConfig::default();
        assert_eq!(c.max_running_txn_num_per_db(), 1000);
        assert_eq!(c.precommit_timeout_ms(), 3_600_000);
        assert_eq!(c.default_load_timeout_ms(), 259_200_000);
        c.set(FeConfigValues {
            max_running_txn_num_per_db: Some(5),
            ..FeConfigValues::default()
        })
        .unwrap();
        assert_eq!(c.max_running_txn_num_per_db(), 5);
        assert_eq!(c.precommit_timeout_ms(), 3_600_000, "unnamed fields stay");
        c.set_named("stream_load_default_precommit_timeout_second", "60")
            .unwrap();
        assert_eq!(c.precommit_timeout_ms(), 60_000);
        assert!(c.set_named("nope", "1").unwrap_err().contains("'nope'"));
        assert!(
            c.set_named("max_running_txn_num_per_db", "0")
                .unwrap_err()
                .contains("greater than 0")
        );
        assert!(c.set_named("max_running_txn_num_per_db", "x").is_err());
    }
}

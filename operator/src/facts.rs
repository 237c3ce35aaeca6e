//! What a probe of Doris found for a sync: the source table's facts and Doris's clock
//! ([`SourceProbe`]), or why they could not be read ([`ProbeFailure`]). Pure data: the probe
//! ([`crate::probe`]) fills it in, the plan ([`crate::reconcile::plan`]) decides on it.

use dcs_crds::doris_table::SourceTableInfo;

/// Facts about the source table and Doris's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceProbe {
    /// What the table's properties and key model say (the runner reads the same).
    pub table: SourceTableInfo,
    /// Doris's current time (TSO physical ms), when it could be read.
    pub doris_now_ms: Option<i64>,
}

impl SourceProbe {
    /// `*.ttl_seconds`, as status and the headroom arithmetic use it.
    pub fn ttl_seconds(&self) -> i64 {
        i64::try_from(self.table.ttl_seconds).unwrap_or(i64::MAX)
    }
}

/// Why the source could not be probed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeFailure {
    /// A CamelCase reason (SourceUnreachable, ...).
    pub reason: &'static str,
    /// What went wrong and what to do; never a secret.
    pub message: String,
}

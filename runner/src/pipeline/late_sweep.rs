//! The late sweep: a run that resumes from a checkpoint skips the checkpoint id after it (whose
//! labels the previous run may still have had loads in flight under, see [`Flow::open_run`]) and
//! aborts that id's loads once more when they must have landed.

use tokio::time::Instant;

use super::Flow;
use crate::checkpoint::CheckpointStore;
use crate::sink::Sink;
use crate::sink::label::LabelScheme;

/// A sweep of the labels of one checkpoint id, due at a time.
#[derive(Debug, Clone, Copy)]
pub(super) struct LateSweep {
    pub(super) checkpoint_id: u64,
    pub(super) scheme: LabelScheme,
    pub(super) due: Instant,
}

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    /// How long after its start a run sweeps the previous run's labels again: a load that run had
    /// in flight is answered (or given up) within the sink's load timeout.
    pub(super) fn late_sweep_delay(&self) -> std::time::Duration {
        self.loads.sink.request_timeout()
    }

    /// Abort, once more, the loads the previous run may have had in flight under the checkpoint id
    /// this run skipped ([`Flow::open_run`]), once they must have landed (`due`) or when the run
    /// stops (`now`). Best effort: what is left is never committed and Doris times it out.
    pub(super) async fn late_sweep(&mut self, now: bool) {
        let Some(sweep) = self.late_sweep else {
            return;
        };
        if !now && Instant::now() < sweep.due {
            return;
        }
        self.late_sweep = None;
        match self
            .loads
            .sink
            .abort(sweep.scheme, sweep.checkpoint_id)
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                checkpoint_id = sweep.checkpoint_id,
                loads = n,
                "aborted loads of the previous run that landed after this run started"
            ),
            Err(e) => tracing::warn!(
                checkpoint_id = sweep.checkpoint_id,
                "could not sweep the previous run's labels again: {e}"
            ),
        }
    }
}

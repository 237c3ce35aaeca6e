//! A directory's checkpoint read without the runner's lock: for `dcs-runner check`, and for the
//! changelog run after a sharded snapshot, which reads the shards' checkpoints while they may
//! still run.

use std::path::Path;

use super::{Checkpoint, CheckpointStore};
use crate::{Error, Result};

/// Read the checkpoint file of `dir` without taking the runner's lock (a running runner may
/// hold it).
#[derive(Debug)]
pub struct ReadOnlyDir {
    dir: std::path::PathBuf,
}

impl ReadOnlyDir {
    /// A reader of `dir/checkpoint.json`.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }
}

impl CheckpointStore for ReadOnlyDir {
    async fn load(&mut self) -> Result<Option<Checkpoint>> {
        let path = self.dir.join(super::file::CHECKPOINT_FILE);
        match std::fs::read_to_string(&path) {
            Ok(json) => super::parse(&path.display().to_string(), &json).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
        }
    }

    async fn save(&mut self, _checkpoint: &Checkpoint) -> Result<()> {
        Err(Error::Config {
            reason: "check never writes a checkpoint".into(),
        })
    }
}

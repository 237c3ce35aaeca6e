//! Checkpoints in a directory, for runs outside Kubernetes (`--checkpoint-dir`).
//!
//! `checkpoint.json` is replaced atomically (write a temporary file, fsync, rename, fsync the
//! directory), so a crash leaves either the old or the new checkpoint, never half of one. A lock on
//! `runner.lock`, held for the store's life, keeps a second runner out of the directory.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Checkpoint, CheckpointStore};
use crate::{Error, Result};

pub(super) const CHECKPOINT_FILE: &str = "checkpoint.json";
const LOCK_FILE: &str = "runner.lock";

/// A directory holding one sync's checkpoint.
#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
    /// Held (locked) while the store lives; the OS releases it when the process dies.
    _lock: File,
    /// Checkpoint id last loaded or saved: the precondition for the next save.
    expected: Option<u64>,
}

impl FileStore {
    /// Open (creating) the directory and take its lock.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| {
            Error::io(
                format!("creating checkpoint directory {}", dir.display()),
                e,
            )
        })?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(format!("opening {}", lock_path.display()), e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(Error::CheckpointLocked { dir }),
            Err(TryLockError::Error(e)) => {
                return Err(Error::io(format!("locking {}", lock_path.display()), e));
            }
        }
        Ok(Self {
            dir,
            _lock: lock,
            expected: None,
        })
    }

    fn path(&self) -> PathBuf {
        self.dir.join(CHECKPOINT_FILE)
    }

    fn read(&self) -> Result<Option<Checkpoint>> {
        let path = self.path();
        match fs::read_to_string(&path) {
            Ok(json) => crate::checkpoint::parse(&path.display().to_string(), &json).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
        }
    }
}

impl CheckpointStore for FileStore {
    async fn load(&mut self) -> Result<Option<Checkpoint>> {
        let cp = self.read()?;
        self.expected = cp.as_ref().map(|c| c.checkpoint_id);
        Ok(cp)
    }

    async fn save(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        let found = self.read()?.map(|c| c.checkpoint_id);
        if found != self.expected {
            let revision = |id: Option<u64>| {
                id.map_or("no checkpoint".to_owned(), |id| format!("checkpoint {id}"))
            };
            return Err(Error::Fenced {
                expected: revision(self.expected),
                found: revision(found),
            });
        }
        let path = self.path();
        let tmp = self.dir.join(format!(".{CHECKPOINT_FILE}.tmp"));
        let ctx = |what: &str| format!("{what} {}", tmp.display());
        let mut f = File::create(&tmp).map_err(|e| Error::io(ctx("creating"), e))?;
        f.write_all(checkpoint.to_json().as_bytes())
            .map_err(|e| Error::io(ctx("writing"), e))?;
        f.sync_all().map_err(|e| Error::io(ctx("syncing"), e))?;
        drop(f);
        fs::rename(&tmp, &path)
            .map_err(|e| Error::io(format!("replacing {}", path.display()), e))?;
        if let Ok(d) = File::open(&self.dir) {
            // Persist the rename itself; not every file system supports syncing a directory.
            let _ = d.sync_all();
        }
        self.expected = Some(checkpoint.checkpoint_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    #[tokio::test]
    async fn saves_and_loads_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut store = FileStore::open(dir.path()).unwrap();
            assert_eq!(store.load().await.unwrap(), None);
            store.save(&sample(1)).await.unwrap();
            store.save(&sample(2)).await.unwrap();
        }
        let mut store = FileStore::open(dir.path()).unwrap();
        assert_eq!(store.load().await.unwrap(), Some(sample(2)));
        assert!(!dir.path().join(".checkpoint.json.tmp").exists());
    }

    #[tokio::test]
    async fn a_second_runner_cannot_open_a_locked_directory() {
        let dir = tempfile::tempdir().unwrap();
        let _first = FileStore::open(dir.path()).unwrap();
        let err = FileStore::open(dir.path()).unwrap_err();
        assert!(matches!(err, Error::CheckpointLocked { .. }), "{err}");
        assert!(
            err.to_string().contains("locked by another dcs-runner"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_save_over_someone_elses_checkpoint_is_fenced() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStore::open(dir.path()).unwrap();
        store.load().await.unwrap();
        store.save(&sample(1)).await.unwrap();
        // Someone replaces the file behind the store's back (e.g. an operator reset).
        fs::write(dir.path().join(CHECKPOINT_FILE), sample(5).to_json()).unwrap();
        let err = store.save(&sample(2)).await.unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Fenced { expected, found } if expected == "checkpoint 1" && found == "checkpoint 5"
            ),
            "{err}"
        );
        assert_eq!(
            store.read().unwrap(),
            Some(sample(5)),
            "the fenced save must not write"
        );
    }
}

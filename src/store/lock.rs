//! The store's lock: held for the whole of each transaction, it serializes
//! writers across every process sharing the state directory.

use std::fs::{self, File, OpenOptions};
use std::path::PathBuf;

use super::{Store, StoreError, io_err};

/// Held while a transaction runs; dropping it lets the next one in.
pub struct Lock {
    _file: File,
}

impl Store {
    /// Waits for and takes the transaction lock, once the removals this
    /// process began are filed: whatever runs under it sees them in the history.
    pub fn lock(&self) -> Result<Lock, StoreError> {
        self.settle_removals();
        self.lock_only()
    }

    /// `lock`, but only if no transaction holds it now: `None` then.
    pub fn try_lock(&self) -> Result<Option<Lock>, StoreError> {
        self.settle_removals();
        let (file, path) = self.lock_file()?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Lock { _file: file })),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(io_err("lock", &path)(e)),
        }
    }

    /// Waits for and takes the transaction lock as it is.
    pub(super) fn lock_only(&self) -> Result<Lock, StoreError> {
        let (file, path) = self.lock_file()?;
        file.lock().map_err(io_err("lock", &path))?;
        Ok(Lock { _file: file })
    }

    fn lock_file(&self) -> Result<(File, PathBuf), StoreError> {
        let path = self.dir.join("lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        Ok((file, path))
    }
}

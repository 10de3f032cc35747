//! The open file handles: what each is (a real file, an `F.edit` payload, a
//! virtual file's bytes), by the number the kernel names it with.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::budget::Charge;
use super::edit_buffer::EditBuffer;
use super::types::{Errno, Res};

/// What an open file handle is.
pub enum Handle {
    File {
        file: File,
        ino: u64,
        /// Opened for writing: read from the open's flags, so no request asks
        /// the descriptor again.
        writer: bool,
    },
    Edit(Mutex<EditBuffer>),
    /// A virtual file's content, fixed when it was opened; what `.editfs/`
    /// renders for a reader (a long log) is charged to the reader's buffer budget.
    Bytes {
        bytes: Vec<u8>,
        _charge: Option<Charge>,
    },
}

/// The open handles, by number. Its lock comes after `nodes` and before
/// `settling` (the lock order is in `core.rs`).
pub struct Handles {
    table: Mutex<HashMap<u64, Arc<Handle>>>,
    next: AtomicU64,
}

impl Default for Handles {
    fn default() -> Self {
        Handles {
            table: Mutex::default(),
            next: AtomicU64::new(1),
        }
    }
}

impl Handles {
    /// Keeps `h` open under a new number.
    pub fn add(&self, h: Handle) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed);
        self.table.lock().insert(fh, Arc::new(h));
        fh
    }

    /// Handle `fh`, or EBADF.
    pub fn get(&self, fh: u64) -> Res<Arc<Handle>> {
        self.table.lock().get(&fh).cloned().ok_or(Errno::EBADF)
    }

    /// Handle `fh` is released.
    pub fn remove(&self, fh: u64) -> Option<Arc<Handle>> {
        self.table.lock().remove(&fh)
    }

    /// A handle open on real node `ino`, if any.
    pub fn open_on(&self, ino: u64) -> Option<Arc<Handle>> {
        self.table.lock().values().find(|h| h.is_on(ino)).cloned()
    }

    /// Every handle open on real node `ino`.
    pub fn all_open_on(&self, ino: u64) -> Vec<Arc<Handle>> {
        self.table
            .lock()
            .values()
            .filter(|h| h.is_on(ino))
            .cloned()
            .collect()
    }
}

impl Handle {
    /// Whether this is a handle of real node `ino`.
    pub fn is_on(&self, ino: u64) -> bool {
        matches!(self, Handle::File { ino: i, .. } if *i == ino)
    }
}

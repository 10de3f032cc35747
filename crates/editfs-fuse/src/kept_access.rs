//! Who may read each kept version of the state directory, from the log.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::store::{Access, LogEntry};

/// Who may read each kept version: the `access` its log line recorded, indexed
/// as the log grows, so a lookup reads only lines it has not seen.
#[derive(Default)]
pub struct KeptAccess {
    /// Each version's file's access, and the directories above it others
    /// could not search (see `FileEntry::above`).
    known: HashMap<(String, u64), (Access, Vec<Access>)>,
    /// The inode of the log read so far, and how many of its bytes.
    read: (u64, u64),
}

impl KeptAccess {
    pub fn get(&mut self, state: &Path, path: &str, tx: u64) -> Option<(Access, Vec<Access>)> {
        let key = (path.to_owned(), tx);
        if !self.known.contains_key(&key) {
            self.catch_up(state);
        }
        self.known.get(&key).cloned()
    }

    /// Whether a version of `path`, or of a file beneath it, was kept behind a
    /// directory not everyone could search then.
    pub fn private_at(&mut self, state: &Path, path: &str) -> bool {
        self.catch_up(state);
        let beneath = format!("{path}/");
        self.known
            .iter()
            .any(|((p, _), (_, above))| !above.is_empty() && (p == path || p.starts_with(&beneath)))
    }

    /// Reads the log's new lines; after a rotation (the log is a new file), it
    /// starts over from both files, so what it keeps is bounded as the log is.
    fn catch_up(&mut self, state: &Path) {
        let [old, log] = crate::store::log_files(state);
        let Ok(meta) = fs::metadata(&log) else { return };
        if meta.ino() != self.read.0 {
            self.known.clear();
            self.read_from(&old, 0);
            self.read = (meta.ino(), 0);
        }
        self.read.1 += self.read_from(&log, self.read.1);
    }

    /// Indexes the whole lines of `path` from `offset`; returns the bytes they took.
    fn read_from(&mut self, path: &Path, offset: u64) -> u64 {
        use std::io::{Read, Seek, SeekFrom};
        let mut bytes = Vec::new();
        let read = fs::File::open(path).and_then(|mut f| {
            f.seek(SeekFrom::Start(offset))?;
            f.read_to_end(&mut bytes)
        });
        if read.is_err() {
            return 0;
        }
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for line in bytes[..whole].split(|&b| b == b'\n') {
            let Ok(entry) = serde_json::from_slice::<LogEntry>(line) else {
                continue;
            };
            for f in entry.files {
                if let Some(a) = f.access {
                    self.known.insert((f.file, entry.tx), (a, f.above));
                }
            }
        }
        whole as u64
    }
}

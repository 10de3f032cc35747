//! The state directory seen read-only, as `history`, `show` and `diff` see it:
//! the log (whole, or as it grows), the versions kept, and what is still in
//! progress (commits a crash interrupted, removals not filed yet). Nothing here
//! writes, so it works on a read-only state directory and on the mount's
//! `.editfs/` view; a command that writes opens a `Store` instead.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::journal::Journal;
use super::logfile::lines_from;
use super::logline::LogEntry;
use super::objects::{Objects, Side};
use super::{entries_in, log_files, removals};

/// A state directory opened to read.
pub struct View {
    dir: PathBuf,
    objects: Objects,
}

impl View {
    pub fn new(dir: &Path) -> View {
        View {
            dir: dir.to_owned(),
            objects: Objects::new(dir),
        }
    }

    /// Every line of the log, oldest first.
    pub fn entries(&self) -> Vec<LogEntry> {
        entries_in(&self.dir)
    }

    /// The versions kept; outside the store, only to read.
    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    /// `rel` as kept on `side` of transaction `tx`, if it still is.
    pub fn read(&self, side: Side, rel: &str, tx: u64) -> Option<Vec<u8>> {
        self.objects.read(side, rel, tx)
    }

    /// How many commits a crash interrupted, which the next store opened on
    /// this directory completes or discards.
    pub fn interrupted(&self) -> usize {
        Journal::new(&self.dir).interrupted()
    }

    /// Waits at most `limit` for the removals a mount made to be filed in the
    /// log; whether they all were.
    pub fn wait_filed(&self, limit: Duration) -> bool {
        removals::wait_filed(&self.dir, limit)
    }
}

/// The log read as it grows. Lines are only appended, whole; past a bound the
/// store moves the log to `log.1` and starts a new one, and the mount's view of
/// it is rendered anew, so a file that changed or shrank is read again from its
/// start, and transactions already returned are skipped.
#[derive(Default)]
pub struct Tail {
    /// Bytes of the log already read, up to the end of a complete line.
    read: u64,
    /// The inode of the log being read; none before the first read.
    ino: Option<u64>,
    returned: HashSet<u64>,
}

impl Tail {
    /// The entries logged in `view` since the last call (at the first, every
    /// one kept), by transaction id.
    pub fn new_entries(&mut self, view: &View) -> Vec<LogEntry> {
        let [old, log] = log_files(&view.dir);
        let Ok(file) = File::open(log) else {
            return Vec::new();
        };
        let Ok(meta) = file.metadata() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        match self.ino {
            None => out.extend(lines_from(File::open(&old).ok(), &mut 0)),
            Some(ino) if ino != meta.ino() => {
                // The log moved to log.1: first the rest of it, then the new one.
                let moved = File::open(&old)
                    .ok()
                    .filter(|f| f.metadata().is_ok_and(|m| m.ino() == ino));
                out.extend(lines_from(moved, &mut self.read));
                self.read = 0;
            }
            Some(_) if meta.len() < self.read => self.read = 0,
            Some(_) => {}
        }
        self.ino = Some(meta.ino());
        out.extend(lines_from(Some(file), &mut self.read));
        out.retain(|e| self.returned.insert(e.tx));
        // A line is appended when its transaction ends, which may be after a
        // later one's (a file made through a mount is logged a moment after
        // it took its id): returned by id, as the history is numbered.
        out.sort_by_key(|e| e.tx);
        out
    }
}

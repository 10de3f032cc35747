//! The transaction counter (`txid`): ids handed out one at a time across
//! every process (the counter's own lock, held for a read and a write),
//! written in place and unsynced, and moved past the log at open.

use std::io;

use super::logfile::last_logged_tx;
use std::fs::File;
use std::path::Path;

use super::{Store, StoreError, io_err};

/// The counter held by one thread of one process (see `Store::counting`).
struct Counting<'s> {
    counter: &'s File,
    _turn: parking_lot::MutexGuard<'s, ()>,
}

impl Drop for Counting<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.counter.unlock() {
            log::error!("cannot unlock the transaction counter: {e}");
        }
    }
}

impl Store {
    /// Moves the counter past the last id in the log, should a machine crash
    /// have lost an unsynced counter but not the log lines written under it.
    pub(super) fn counter_past_the_log(&self) -> Result<(), StoreError> {
        let Some(last) = last_logged_tx(&self.dir.join("log")) else {
            return Ok(());
        };
        let path = self.dir.join("txid");
        let _counting = self.counting(&path)?;
        let counter = self.read_counter().ok();
        let behind = match counter.as_deref().map(counter_text) {
            None | Some("") => true,
            Some(c) => c.parse::<u64>().is_ok_and(|c| c < last),
        };
        if behind {
            log::warn!("the transaction counter was behind the log: moved to {last}");
            let text = format!("{last}\n");
            use std::os::unix::fs::FileExt;
            self.counter
                .write_all_at(text.as_bytes(), 0)
                .and_then(|()| self.counter.set_len(text.len() as u64))
                .and_then(|()| self.counter.sync_data())
                .map_err(io_err("write", &path))?;
        }
        Ok(())
    }

    /// The last transaction id handed out so far, read without its lock (0 when
    /// the counter cannot be read).
    pub fn last_tx(&self) -> u64 {
        let text = self.read_counter().unwrap_or_default();
        counter_text(&text).parse().unwrap_or(0)
    }

    /// Hands out the next transaction id. It is written in place and
    /// unsynced: at open the counter is moved past the log (see commit.rs),
    /// and no new inode is made per id (what made `rm -r` slow). A
    /// transaction takes its id holding its files' locks, so the ids of one
    /// file's transactions follow the order they commit in.
    pub fn next_tx(&self) -> Result<u64, StoreError> {
        let path = self.dir.join("txid");
        let _counting = self.counting(&path)?;
        let last = match self.read_counter().map_err(io_err("read", &path))? {
            s if counter_text(&s).is_empty() => 0,
            s => counter_text(&s)
                .parse::<u64>()
                .map_err(|_| StoreError::BadCounter {
                    path: path.clone(),
                    content: s,
                })?,
        };
        let next = last + 1;
        // The counter only grows, so the new text always covers the old one.
        std::os::unix::fs::FileExt::write_all_at(&self.counter, format!("{next}\n").as_bytes(), 0)
            .map_err(io_err("write", &path))?;
        Ok(next)
    }

    /// The counter to itself: this process's threads take turns at its
    /// mutex, processes at its `flock`, let go when the guard drops.
    fn counting(&self, path: &Path) -> Result<Counting<'_>, StoreError> {
        let turn = self.counting.lock();
        self.counter.lock().map_err(io_err("lock", path))?;
        Ok(Counting {
            counter: &self.counter,
            _turn: turn,
        })
    }

    /// The counter's text: one read, as it is a few bytes.
    fn read_counter(&self) -> io::Result<String> {
        let mut buf = [0u8; 64];
        let n = std::os::unix::fs::FileExt::read_at(&self.counter, &mut buf, 0)?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }
}

/// The counter's text, less what an unsynced write cut short by a machine crash
/// may leave around it (blanks, zero bytes).
fn counter_text(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\0')
}

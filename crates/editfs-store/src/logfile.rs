//! The log: one JSON line per transaction appended to `log`, which moves to
//! `log.1` past its bound, and read back from both, oldest first.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::logline::LogEntry;
use super::{Store, StoreError, io_err, logline, reaper};

/// The log file as opened, and which file it is.
pub(super) struct LogFile {
    file: File,
    id: (u64, u64),
}

impl Store {
    /// Every log line, oldest first. Removals this process began are in it
    /// once filed: `lock` and `settle_removals` file them (this does not, as
    /// it may be called with the lock held). Only what was appended since the
    /// last call is read and parsed: the log holds up to 16 MiB of lines, and
    /// a user who reads `.editfs/history` in a loop would otherwise have every
    /// one of them parsed for each read, on the threads that serve everyone.
    pub fn entries(&self) -> Vec<LogEntry> {
        self.recent_of(usize::MAX).0
    }

    /// The latest `most` log lines, oldest first (see `entries`), and how
    /// many older ones the log holds besides.
    pub fn recent_of(&self, most: usize) -> (Vec<LogEntry>, usize) {
        let before = self.parsed.lock().clone();
        let now = Arc::new(before.updated(&self.dir));
        // Whichever of two readers at once stores last, the next one checks
        // it against the files again.
        *self.parsed.lock() = Arc::clone(&now);
        let all = now.old.len() + now.new.len();
        let skip = all.saturating_sub(most);
        let lines = now.old.iter().chain(now.new.iter()).skip(skip).cloned();
        (lines.collect(), skip)
    }

    /// The last transaction the log records that changed `rel` (or removed
    /// it, kept or not): what a re-sent deletion is judged by
    /// (`engine::deleted_before`).
    pub fn last_change(&self, rel: &str) -> Option<LogEntry> {
        use logline::Outcome;
        self.entries().into_iter().rev().find(|e| {
            matches!(e.outcome, Outcome::Ok | Outcome::Skipped)
                && e.file(rel).is_some_and(logline::FileEntry::touched)
        })
    }

    /// Appends `entries` to the log in one write (see `log`).
    pub(super) fn log_many(&self, entries: &[LogEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let path = self.dir.join("log");
        let mut text = String::new();
        for entry in entries {
            text += &serde_json::to_string(entry)
                .map_err(|e| io_err("encode a line of", &path)(e.into()))?;
            text.push('\n');
        }
        self.append_to_log(&text)
    }

    /// Appends one JSON line to the log, unsynced: the next checkpoint syncs it
    /// (see commit.rs), so a burst of transactions, or an `rm -r` of a tree,
    /// pays one sync, not one a line.
    pub fn log(&self, entry: &LogEntry) -> Result<(), StoreError> {
        let path = self.dir.join("log");
        let mut line = serde_json::to_string(entry)
            .map_err(|e| io_err("encode a line of", &path)(e.into()))?;
        line.push('\n');
        self.append_to_log(&line)
    }

    fn append_to_log(&self, text: &str) -> Result<(), StoreError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.dir.join("log");
        let now = fs::metadata(&path).ok();
        let rotated = rotate(&path, now.as_ref(), self.objects.reaper());
        {
            let mut held = self.log_file.lock();
            let same = |l: &LogFile| now.as_ref().is_some_and(|m| l.id == (m.dev(), m.ino()));
            let file = match held.take().filter(|l| !rotated && same(l)) {
                Some(open) => held.insert(open),
                None => held.insert(open_log(&path)?),
            };
            (&file.file)
                .write_all(text.as_bytes())
                .map_err(io_err("append to", &path))?;
        }
        let mut u = self.unsettled.lock();
        u.lines = true;
        u.rotated |= rotated;
        Ok(())
    }
}

/// Opens the log at `path` for appending, creating it if needed.
fn open_log(path: &Path) -> Result<LogFile, StoreError> {
    use std::os::unix::fs::MetadataExt;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_err("open", path))?;
    let meta = file.metadata().map_err(io_err("stat", path))?;
    Ok(LogFile {
        id: (meta.dev(), meta.ino()),
        file,
    })
}

/// Bytes past which the log starts anew, its lines moving to `log.1` (replacing
/// the previous `log.1`): the log holds the latest 8 to 16 MiB of lines (tens of
/// thousands of transactions), however many writers send however much.
pub(super) const LOG_ROTATE: u64 = 8 << 20;

/// The name the log's older lines move to.
pub(super) const OLD_LOG: &str = "log.1";

/// Moves the log at `path` to `log.1` once it has passed `LOG_ROTATE`; called
/// with the transaction lock held, before a line is appended. Says whether it did.
/// The previous `log.1`, whose lines go, is handed to `reaper` first: freeing
/// its megabytes is the reaper's wait, not the transaction's.
fn rotate(path: &Path, now: Option<&fs::Metadata>, reaper: &reaper::Reaper) -> bool {
    if now.is_none_or(|m| m.len() < LOG_ROTATE) {
        return false;
    }
    let old = path.with_file_name(OLD_LOG);
    let _ = reaper.remove(&old);
    match fs::rename(path, &old) {
        Ok(()) => true,
        Err(e) => {
            log::warn!("cannot move {} to {}: {e}", path.display(), old.display());
            false
        }
    }
}

/// The highest id among the last lines of the log at `path` (its tail only, so
/// a long log costs nothing more), or of `log.1` when the log was just moved.
pub(super) fn last_logged_tx(path: &Path) -> Option<u64> {
    last_in(path).or_else(|| last_in(&path.with_file_name(OLD_LOG)))
}

pub(super) fn last_in(path: &Path) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 64 << 10;
    let mut file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    String::from_utf8_lossy(&tail)
        .lines()
        .filter_map(|l| serde_json::from_str::<LogEntry>(l).ok())
        .map(|e| e.tx)
        .max()
}

/// The lines of the log files as parsed, with which files (device and inode)
/// and how far, so that a later read parses only what was appended since.
#[derive(Default)]
pub(crate) struct Parsed {
    /// `log.1` (device, inode and size) and its lines.
    old_id: Option<(u64, u64, u64)>,
    old: Arc<Vec<LogEntry>>,
    /// `log` (device and inode) and the bytes of it parsed: up to the end of
    /// its last whole line.
    log: Option<((u64, u64), u64)>,
    new: Arc<Vec<LogEntry>>,
}

impl Parsed {
    /// These lines brought up to date with the log files in `dir`: a file
    /// that is no longer the one parsed (moved to `log.1`, replaced) is parsed
    /// again whole; the log itself, grown, only past what was parsed.
    fn updated(&self, dir: &Path) -> Parsed {
        use std::os::unix::fs::MetadataExt;
        let [old_path, log_path] = log_files(dir);
        let old_id = fs::metadata(&old_path)
            .ok()
            .map(|m| (m.dev(), m.ino(), m.len()));
        // A log moved to `log.1` since: the log is new too, and may even
        // have the inode number of a `log.1` removed meanwhile.
        let moved = old_id != self.old_id;
        let old = match moved {
            false => Arc::clone(&self.old),
            true => Arc::new(lines_from(File::open(&old_path).ok(), &mut 0)),
        };
        let Ok(file) = File::open(&log_path) else {
            return Parsed {
                old_id,
                old,
                ..Parsed::default()
            };
        };
        let id = file.metadata().map(|m| (m.dev(), m.ino())).ok();
        let (mut read, mut new) = match (id, self.log) {
            (Some(id), Some((had, len))) if id == had && !moved => (len, self.new.to_vec()),
            _ => (0, Vec::new()),
        };
        new.extend(lines_from(Some(file), &mut read));
        Parsed {
            old_id,
            old,
            log: id.map(|id| (id, read)),
            new: Arc::new(new),
        }
    }
}

/// The entries of the complete lines of `file` past byte `read`, which moves
/// to the end of the last of them.
pub(crate) fn lines_from(file: Option<File>, read: &mut u64) -> Vec<LogEntry> {
    let mut bytes = Vec::new();
    let Some(mut file) = file else {
        return Vec::new();
    };
    if file.seek(SeekFrom::Start(*read)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    *read += complete as u64;
    String::from_utf8_lossy(&bytes[..complete])
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Every line of the log in state directory `dir`, oldest first; reads only, so
/// it works on a read-only state directory or the mount's `.editfs/` view.
pub fn entries_in(dir: &Path) -> Vec<LogEntry> {
    log_files(dir)
        .iter()
        .flat_map(|path| {
            let text = fs::read_to_string(path).unwrap_or_default();
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The files the log's lines are in, oldest first.
pub fn log_files(dir: &Path) -> [PathBuf; 2] {
    [dir.join(OLD_LOG), dir.join("log")]
}

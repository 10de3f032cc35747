//! The latest report of each file, as `F.status` shows it, bounded by bytes.
//!
//! Every transaction leaves a report on its file, and a report holds the diff
//! of a change or the diagnosis of each failing block: kept for every file
//! ever edited, they grew the daemon by megabytes per thousand files. The
//! table keeps reports up to `REPORT_BYTES` (each counted with the text and
//! JSON it may render to) and forgets the least recently used past it, so a
//! file edited long ago and not looked at since shows no report again (as
//! after a restart of the daemon); a report `editfs apply` left in the state
//! directory is shown then, as it would be.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};

use crate::transaction::report::{ErrorKind, ErrorReport, Form, Render, Report};

/// The latest reports a mount shows: each file's in its `F.status`, and that
/// of `.editfs/edit` or `.editfs/undo` in `.editfs/status`. Each lock is taken
/// alone and briefly (the lock order is in `core.rs`).
pub struct Reports {
    files: Mutex<Table>,
    state: Mutex<Option<StateReport>>,
    /// The last transaction id when the mount started: a report `editfs apply`
    /// left from before is not the latest on a file the mount may have changed since.
    started_after_tx: u64,
}

impl Reports {
    /// No report yet, the mount starting after transaction `started_after_tx`.
    pub fn new(started_after_tx: u64) -> Reports {
        Reports {
            files: Mutex::default(),
            state: Mutex::new(None),
            started_after_tx,
        }
    }

    /// See the field.
    pub fn started_after_tx(&self) -> u64 {
        self.started_after_tx
    }

    /// The latest report on the file at `rel`, if kept.
    pub fn of_file(&self, rel: &Path) -> Option<Arc<Shown>> {
        self.files.lock().get(rel).cloned()
    }

    /// Whether a report on the file at `rel` is kept.
    pub fn has(&self, rel: &Path) -> bool {
        self.files.lock().contains_key(rel)
    }

    /// Makes `shown` the latest report on the file at `rel`.
    pub fn show(&self, rel: PathBuf, shown: Arc<Shown>) {
        self.files.lock().insert(rel, shown);
    }

    /// After two names exchanged their files, each report follows its file.
    pub fn swap(&self, a: PathBuf, b: PathBuf) {
        let mut reports = self.files.lock();
        let (ra, rb) = (reports.remove(&a), reports.remove(&b));
        if let Some(r) = ra {
            reports.insert(b, r);
        }
        if let Some(r) = rb {
            reports.insert(a, r);
        }
    }

    /// After a rename or unlink of a file, its report follows it (or goes). A
    /// file renamed over another takes its own report there; without one, the
    /// replaced file's report stays when `keeps` (the new file shows it to no
    /// one the old did not: `F.status` follows the new file's mode and owner)
    /// and goes otherwise.
    pub fn follow(&self, from: PathBuf, to: Option<PathBuf>, keeps: bool) {
        let mut reports = self.files.lock();
        let moved = reports.remove(&from);
        if let Some(to) = to {
            match moved {
                Some(r) => {
                    reports.insert(to, r);
                }
                None if keeps => {}
                None => {
                    reports.remove(&to);
                }
            }
        }
    }

    /// Makes `report` the latest of `.editfs/edit` or `.editfs/undo`.
    pub fn set_state(&self, report: StateReport) {
        *self.state.lock() = Some(report);
    }

    /// The latest report of `.editfs/edit` or `.editfs/undo`, held while it is looked at.
    pub fn state(&self) -> MutexGuard<'_, Option<StateReport>> {
        self.state.lock()
    }
}

/// A report as `F.status` and `F.status.json` show it, each form rendered once,
/// when first asked for: the kernel asks for the size of a report, so for its
/// whole text, at every GETATTR, several times per edit round trip.
pub struct Shown {
    pub report: Report,
    text: OnceLock<Arc<[u8]>>,
    json: OnceLock<Arc<[u8]>>,
}

impl Shown {
    pub fn new(report: Report) -> Shown {
        Shown {
            report,
            text: OnceLock::new(),
            json: OnceLock::new(),
        }
    }

    pub fn text(&self) -> Arc<[u8]> {
        let render = || self.report.render(Form::Text).into_bytes().into();
        Arc::clone(self.text.get_or_init(render))
    }

    pub fn json(&self) -> Arc<[u8]> {
        let render = || self.report.render(Form::Json).into_bytes().into();
        Arc::clone(self.json.get_or_init(render))
    }
}

/// Whether `r` is of a file its caller was refused: the attempt changed
/// nothing of the file, and its report is the caller's alone, never the
/// file's `F.status` (which other users read).
pub fn refused(r: &Report) -> bool {
    r.error
        .as_ref()
        .is_some_and(|e| e.kind == ErrorKind::PermissionDenied)
}

/// The latest report of `.editfs/edit` or `.editfs/undo`, the files it names,
/// who made it and whether it wrote anything: `.editfs/status` shows it to its
/// maker and to root; to another user only when it wrote (a dry run's diff shows
/// a payload, or a kept version, that no file holds) and that user can read
/// every file it names now and could before it (`Core::may_see_state`).
pub struct StateReport {
    pub text: String,
    pub json: String,
    pub files: Vec<String>,
    /// The uid of the user who made it.
    pub by: u32,
    /// Its id, when it wrote one: its files' kept versions are kept under it.
    pub tx: Option<u64>,
    pub dry_run: bool,
}

/// Bytes the reports of one mount may hold, with their renderings.
pub const REPORT_BYTES: usize = 64 << 20;

/// Bytes a report is counted as besides its strings: its fixed fields and the
/// table's entry.
const ENTRY_BYTES: usize = 256;

struct Entry {
    shown: Arc<Shown>,
    bytes: usize,
    /// When it was last inserted or read, in the table's own count.
    used: u64,
}

/// The reports, by path relative to SOURCE.
struct Table {
    entries: HashMap<PathBuf, Entry>,
    bytes: usize,
    cap: usize,
    clock: u64,
}

impl Default for Table {
    fn default() -> Table {
        Table::with_cap(REPORT_BYTES)
    }
}

impl Table {
    fn with_cap(cap: usize) -> Table {
        Table {
            entries: HashMap::new(),
            bytes: 0,
            cap,
            clock: 0,
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    pub fn get(&mut self, rel: &Path) -> Option<&Arc<Shown>> {
        let now = self.tick();
        let e = self.entries.get_mut(rel)?;
        e.used = now;
        Some(&e.shown)
    }

    pub fn contains_key(&self, rel: &Path) -> bool {
        self.entries.contains_key(rel)
    }

    pub fn insert(&mut self, rel: PathBuf, shown: Arc<Shown>) {
        let bytes = cost(&shown.report);
        let used = self.tick();
        if let Some(old) = self.entries.insert(rel, Entry { shown, bytes, used }) {
            self.bytes -= old.bytes;
        }
        self.bytes += bytes;
        self.evict();
    }

    pub fn remove(&mut self, rel: &Path) -> Option<Arc<Shown>> {
        let e = self.entries.remove(rel)?;
        self.bytes -= e.bytes;
        Some(e.shown)
    }

    /// Forgets the least recently used reports until the rest fit the cap;
    /// the newest stays whatever its size (its transaction's caller reads it next).
    fn evict(&mut self) {
        if self.bytes <= self.cap {
            return;
        }
        let mut by_age: Vec<(u64, PathBuf)> = self
            .entries
            .iter()
            .map(|(p, e)| (e.used, p.clone()))
            .collect();
        by_age.sort_unstable();
        let newest = by_age.len().saturating_sub(1);
        // Down to three quarters, so that the next insertions do not sort again.
        let goal = self.cap / 4 * 3;
        for (_, p) in by_age.into_iter().take(newest) {
            if self.bytes <= goal {
                break;
            }
            self.remove(&p);
        }
    }

    /// Bytes held now, as counted.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Bytes `report` takes, times three: itself, and the text and JSON it
/// renders to once read.
fn cost(report: &Report) -> usize {
    let error = |e: &ErrorReport| {
        e.message.len()
            + e.hint.as_ref().map_or(0, String::len)
            + e.closest.as_ref().map_or(0, |c| c.diff.len())
    };
    let ops: usize = report
        .operations
        .iter()
        .map(|o| {
            ENTRY_BYTES
                + o.warnings.iter().map(String::len).sum::<usize>()
                + o.error.as_ref().map_or(0, error)
        })
        .sum();
    let own = ENTRY_BYTES
        + report.file.len()
        + report.diff.as_ref().map_or(0, String::len)
        + report.error.as_ref().map_or(0, error)
        + report.notes.iter().map(String::len).sum::<usize>()
        + ops;
    own * 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Outcome;

    fn shown(diff: usize) -> Arc<Shown> {
        let mut r = Report::new(Outcome::Ok, String::new());
        r.diff = Some("x".repeat(diff));
        Arc::new(Shown::new(r))
    }

    #[test]
    fn the_least_recently_used_reports_go_past_the_cap() {
        let mut t = Table::with_cap(100_000);
        for i in 0..1000 {
            t.insert(PathBuf::from(format!("f{i}")), shown(10_000));
            if i > 0 {
                // f0 is read all along, so it stays.
                assert!(t.get(Path::new("f0")).is_some(), "f0 went at {i}");
            }
            assert!(t.bytes() <= 100_000, "{} bytes held at {i}", t.bytes());
        }
        assert!(t.contains_key(Path::new("f999")));
        assert!(!t.contains_key(Path::new("f1")));
    }

    #[test]
    fn a_report_replaced_or_removed_gives_its_bytes_back() {
        let mut t = Table::with_cap(usize::MAX);
        t.insert(PathBuf::from("a"), shown(1000));
        let one = t.bytes();
        t.insert(PathBuf::from("a"), shown(1000));
        assert_eq!(t.bytes(), one);
        assert!(t.remove(Path::new("a")).is_some());
        assert_eq!(t.bytes(), 0);
    }

    #[test]
    fn the_newest_report_stays_even_when_it_alone_is_over_the_cap() {
        let mut t = Table::with_cap(10);
        t.insert(PathBuf::from("old"), shown(1));
        t.insert(PathBuf::from("big"), shown(1000));
        assert!(t.contains_key(Path::new("big")));
        assert!(!t.contains_key(Path::new("old")));
    }
}

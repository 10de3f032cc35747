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
use std::sync::Arc;

use super::control::Shown;
use crate::engine::Report;

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
pub struct Reports {
    entries: HashMap<PathBuf, Entry>,
    bytes: usize,
    cap: usize,
    clock: u64,
}

impl Default for Reports {
    fn default() -> Reports {
        Reports::with_cap(REPORT_BYTES)
    }
}

impl Reports {
    pub fn with_cap(cap: usize) -> Reports {
        Reports {
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
    let error = |e: &crate::engine::ErrorReport| {
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
    use crate::engine::{Outcome, Report};

    fn shown(diff: usize) -> Arc<Shown> {
        let mut r = Report::new(Outcome::Ok, String::new());
        r.diff = Some("x".repeat(diff));
        Arc::new(Shown::new(r))
    }

    #[test]
    fn the_least_recently_used_reports_go_past_the_cap() {
        let mut t = Reports::with_cap(100_000);
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
        let mut t = Reports::with_cap(usize::MAX);
        t.insert(PathBuf::from("a"), shown(1000));
        let one = t.bytes();
        t.insert(PathBuf::from("a"), shown(1000));
        assert_eq!(t.bytes(), one);
        assert!(t.remove(Path::new("a")).is_some());
        assert_eq!(t.bytes(), 0);
    }

    #[test]
    fn the_newest_report_stays_even_when_it_alone_is_over_the_cap() {
        let mut t = Reports::with_cap(10);
        t.insert(PathBuf::from("old"), shown(1));
        t.insert(PathBuf::from("big"), shown(1000));
        assert!(t.contains_key(Path::new("big")));
        assert!(!t.contains_key(Path::new("old")));
    }
}

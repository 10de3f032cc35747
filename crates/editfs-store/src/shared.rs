//! The latest report on each file made by a process other than the mount's
//! daemon (`editfs apply`), kept in the state directory so that the mount shows
//! it in `F.status`: the report of the most recent transaction on a file, by
//! anyone. The daemon keeps its own reports in memory and never writes here.
//!
//! One file per project path, `reports/<path>`, replaced whole (a temporary
//! file renamed over it) and unsynced: a report lost to a crash of the machine
//! only leaves `F.status` showing an older one, while the log and the history
//! keep the transaction.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Store, StoreError, atomic, io_err, objects::safe_rel};

/// A report as `F.status` and `F.status.json` show it (rendered by the
/// transaction that made it: its JSON is the object alone), with what a mount
/// needs of it besides: the transaction and the hash of the file it left.
#[derive(Debug, Serialize, Deserialize)]
pub struct Shared {
    pub tx: u64,
    /// The SHA-256 of the file the transaction left (as it still is, on
    /// failure); `None` in a report kept before it was recorded, or when no
    /// file was there to hash.
    #[serde(default)]
    pub sha256: Option<String>,
    pub text: String,
    pub json: String,
}

/// Where the report on `rel` is kept under the state directory `state`.
fn path_of(state: &Path, rel: &str) -> PathBuf {
    state.join("reports").join(safe_rel(rel))
}

/// Keeps `report` as the latest on `rel`.
pub fn keep(state: &Path, rel: &str, report: &Shared) -> Result<(), StoreError> {
    let path = path_of(state, rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    }
    let bytes = serde_json::to_vec(report).map_err(|e| io_err("write", &path)(e.into()))?;
    atomic::write_new(&path, &bytes, 0o600).map(drop)
}

/// The latest report kept on `rel`, if any (and whole).
pub fn latest(state: &Path, rel: &str) -> Option<Shared> {
    let bytes = std::fs::read(path_of(state, rel)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

impl Store {
    /// Keeps `report`, of a transaction this process made on `rel`, for a mount
    /// of the same project to show (see the module doc). A failure only costs that.
    pub fn share_report(&self, rel: &str, report: &Shared) {
        if let Err(e) = keep(&self.dir, rel, report) {
            log::warn!("the report of transaction {} is not shared: {e}", report.tx);
        }
    }

    /// The report `share_report` kept last on `rel`, if it is newer than `tx`.
    pub fn shared_report_after(&self, rel: &str, tx: u64) -> Option<Shared> {
        latest(&self.dir, rel).filter(|s| s.tx > tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_report_on_a_path_replaces_the_one_before() {
        let state = tempfile::tempdir().unwrap();
        assert!(latest(state.path(), "src/a.rs").is_none());
        for tx in [3, 7] {
            let report = Shared {
                tx,
                sha256: None,
                text: format!("OK src/a.rs (tx {tx})\n"),
                json: format!("{{\"tx\":{tx}}}"),
            };
            keep(state.path(), "src/a.rs", &report).unwrap();
        }
        let kept = latest(state.path(), "src/a.rs").unwrap();
        assert_eq!((kept.tx, kept.text.as_str()), (7, "OK src/a.rs (tx 7)\n"));
        assert!(latest(state.path(), "src/b.rs").is_none());
    }

    #[test]
    fn a_path_cannot_leave_the_reports_directory() {
        let state = tempfile::tempdir().unwrap();
        let report = Shared {
            tx: 1,
            sha256: None,
            text: String::new(),
            json: String::new(),
        };
        keep(state.path(), "../../escape", &report).unwrap();
        assert!(state.path().join("reports/escape").exists());
        assert!(!state.path().parent().unwrap().join("escape").exists());
    }
}

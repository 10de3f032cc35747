//! Durability: the state directory, transaction ids, pre-image snapshots and the log.
//!
//! Layout of a state directory (`SOURCE/.editfs/` by default):
//!
//! ```text
//! .gitignore              `*`, so the project's git never sees any of this
//! lock                    locked for the whole of each transaction (serializes writers)
//! txid                    the last transaction id handed out
//! log                     one JSON line per transaction, whatever its outcome
//! snapshots/<path>/<tx>   the file at <path> as it was before transaction <tx>
//! tmp/                    temporary files of commits in progress
//! ```

pub mod atomic;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// Name of the state directory inside a project.
pub const STATE_DIR: &str = ".editfs";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the transaction counter in {} is damaged: {content:?}", path.display())]
    BadCounter { path: PathBuf, content: String },
    #[error("{} is a symbolic link; edit the file it points to", name.to_string_lossy())]
    Symlink { name: std::ffi::OsString },
}

/// Wraps an `io::Error` with what was being done and to which path.
pub(crate) fn io_err<'p>(
    action: &'static str,
    path: &'p Path,
) -> impl FnOnce(io::Error) -> StoreError + 'p {
    move |source| StoreError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// An open state directory.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    /// `tmp/`, held open so commits name their temporary files relative to it.
    tmp: OwnedFd,
}

/// Held while a transaction runs; dropping it lets the next one in.
pub struct Lock {
    _file: File,
}

impl Store {
    /// Opens `dir`, creating its layout if needed.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        for sub in ["", "snapshots", "tmp"] {
            let d = dir.join(sub);
            fs::create_dir_all(&d).map_err(io_err("create the state directory", &d))?;
        }
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            fs::write(&ignore, "*\n").map_err(io_err("write", &ignore))?;
        }
        let swept = atomic::sweep(&dir.join("tmp"));
        if swept > 0 {
            log::info!("removed {swept} temporary file(s) left by an interrupted commit");
        }
        let tmp = atomic::open_dir(&dir.join("tmp"))?;
        Ok(Store {
            dir: dir.to_owned(),
            tmp,
        })
    }

    /// The state directory of the nearest ancestor of `file` that has one, as git finds `.git`.
    pub fn find_for(file: &Path) -> Option<PathBuf> {
        file.ancestors()
            .skip(1)
            .map(|a| a.join(STATE_DIR))
            .find(|d| d.is_dir())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn tmp_dir(&self) -> BorrowedFd<'_> {
        self.tmp.as_fd()
    }

    /// Waits for and takes the transaction lock.
    pub fn lock(&self) -> Result<Lock, StoreError> {
        let path = self.dir.join("lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        file.lock().map_err(io_err("lock", &path))?;
        Ok(Lock { _file: file })
    }

    /// Hands out the next transaction id; call with the lock held.
    pub fn next_tx(&self, _lock: &Lock) -> Result<u64, StoreError> {
        let path = self.dir.join("txid");
        let last = match fs::read_to_string(&path) {
            Ok(s) => s
                .trim()
                .parse::<u64>()
                .map_err(|_| StoreError::BadCounter {
                    path: path.clone(),
                    content: s,
                })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        let next = last + 1;
        atomic::write_new(&path, format!("{next}\n").as_bytes(), 0o644)?;
        Ok(next)
    }

    /// Keeps `bytes` as the pre-image of `rel` before transaction `tx`; returns
    /// its path relative to the state directory.
    pub fn snapshot(&self, tx: u64, rel: &str, bytes: &[u8]) -> Result<String, StoreError> {
        let name = format!("snapshots/{}/{tx}", safe_rel(rel));
        let path = self.dir.join(&name);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        }
        atomic::write_new(&path, bytes, 0o444)?;
        Ok(name)
    }

    /// Appends one JSON line to the log and syncs it.
    pub fn log(&self, entry: &serde_json::Value) -> Result<(), StoreError> {
        let path = self.dir.join("log");
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        let mut line = entry.to_string();
        line.push('\n');
        file.write_all(line.as_bytes())
            .map_err(io_err("append to", &path))?;
        file.sync_data().map_err(io_err("sync", &path))
    }
}

/// `rel` as a relative path with no `..`, `.` or root, so a snapshot stays inside `snapshots/`.
fn safe_rel(rel: &str) -> String {
    let parts: Vec<String> = Path::new(rel)
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        "_".into()
    } else {
        parts.join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_ids_snapshots_and_log() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join(".editfs")).unwrap();
        let lock = store.lock().unwrap();
        assert_eq!(store.next_tx(&lock).unwrap(), 1);
        assert_eq!(store.next_tx(&lock).unwrap(), 2);
        let name = store.snapshot(2, "src/a.rs", b"pre").unwrap();
        assert_eq!(name, "snapshots/src/a.rs/2");
        assert_eq!(fs::read(store.dir().join(&name)).unwrap(), b"pre");
        store.log(&serde_json::json!({"tx": 2})).unwrap();
        store.log(&serde_json::json!({"tx": 3})).unwrap();
        let log = fs::read_to_string(store.dir().join("log")).unwrap();
        assert_eq!(log, "{\"tx\":2}\n{\"tx\":3}\n");
        assert_eq!(
            fs::read_to_string(store.dir().join(".gitignore")).unwrap(),
            "*\n"
        );
    }

    #[test]
    fn snapshot_names_cannot_escape() {
        assert_eq!(safe_rel("../../etc/passwd"), "etc/passwd");
        assert_eq!(safe_rel("/abs/x"), "abs/x");
        assert_eq!(safe_rel(".."), "_");
    }

    #[test]
    fn nearest_state_dir_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join(".editfs")).unwrap();
        fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        let found = Store::find_for(&tmp.path().join("a/b/f.txt"));
        assert_eq!(found, Some(tmp.path().join(".editfs")));
    }
}

//! `MOUNT/.editfs/`: a read-only view of the state directory for the mount's users.
//!
//! It shows `README` (how to use the mount, written for an agent), `log`,
//! `history`, `snapshots/<path>/<tx>` (each file before transaction `tx`),
//! `versions/<path>/<tx>` (after it, for `editfs show`) and a `.gitignore` of `*`, and the control
//! files `edit` (multi-file transactions), `undo` (`PATH [TXID] [--force]`) and
//! `status` / `status.json` (their latest report). Everything else is read-only;
//! the lock, counter, journal and temporary files stay out of sight.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use fuser::{Errno, FileAttr, FileType};

use super::fs::{Core, Entry, Res, errno};
use super::nodes::{Kind, ROOT};

/// The name of the state directory in the mount.
pub const NAME: &str = ".editfs";

const README: &str = include_str!("agent-readme.md");
const GITIGNORE: &str = "*\n";
const FILES: [&str; 10] = [
    "README",
    "log",
    "history",
    ".gitignore",
    "snapshots",
    "versions",
    "edit",
    "undo",
    "status",
    "status.json",
];

/// The names in `.editfs/` that take transactions.
pub fn is_control(rel: &Path) -> bool {
    rel == Path::new("edit") || rel == Path::new("undo")
}

/// Where a path of the view lives in the state directory, if it is a real one.
fn backing(state: &Path, rel: &Path) -> Option<PathBuf> {
    let safe = rel.components().all(|c| matches!(c, Component::Normal(_)));
    let kept = rel.starts_with("snapshots") || rel.starts_with("versions");
    (safe && (rel == Path::new("log") || kept)).then(|| state.join(rel))
}

impl Core {
    /// The node of `.editfs` itself, for a lookup in the root.
    pub(super) fn state_root(&self, count: bool) -> u64 {
        self.nodes
            .write()
            .virtual_node(ROOT, OsStr::new(NAME), Kind::State(PathBuf::new()), count)
    }

    pub(super) fn state_lookup(&self, parent: u64, dir: &Path, name: &OsStr) -> Res<FileAttr> {
        let rel = dir.join(name);
        if dir.as_os_str().is_empty() && !FILES.iter().any(|f| OsStr::new(f) == name) {
            return Err(Errno::ENOENT);
        }
        let ino = self
            .nodes
            .write()
            .virtual_node(parent, name, Kind::State(rel.clone()), true);
        self.state_attr(ino, &rel)
    }

    pub(super) fn state_attr(&self, ino: u64, rel: &Path) -> Res<FileAttr> {
        let fixed =
            |text: &str| self.virtual_attr(ino, FileType::RegularFile, 0o444, text.len() as u64);
        match rel.to_str() {
            Some("") => return Ok(self.virtual_attr(ino, FileType::Directory, 0o555, 0)),
            Some("edit" | "undo") => {
                return Ok(self.virtual_attr(ino, FileType::RegularFile, 0o644, 0));
            }
            Some("status" | "status.json" | "history") => {
                let size = self.state_bytes(rel)?.len() as u64;
                return Ok(self.virtual_attr(ino, FileType::RegularFile, 0o444, size));
            }
            Some("README") => return Ok(fixed(README)),
            Some(".gitignore") => return Ok(fixed(GITIGNORE)),
            Some("log") if !self.store.dir().join("log").exists() => return Ok(fixed("")),
            _ => {}
        }
        let path = backing(self.store.dir(), rel).ok_or(Errno::ENOENT)?;
        let meta = fs::symlink_metadata(&path).map_err(errno)?;
        let (kind, perm) = if meta.is_dir() {
            (FileType::Directory, 0o555)
        } else {
            (FileType::RegularFile, 0o444)
        };
        let mut a = self.virtual_attr(ino, kind, perm, meta.len());
        a.mtime = meta.modified().unwrap_or(a.mtime);
        a.blocks = meta.blocks();
        Ok(a)
    }

    /// The content of a file of the view, read now.
    pub(super) fn state_bytes(&self, rel: &Path) -> Res<Vec<u8>> {
        match rel.to_str() {
            Some("status") => Ok(self.state_status(false)),
            Some("status.json") => Ok(self.state_status(true)),
            Some("history") => Ok(crate::history::table(&self.store.entries(), None).into_bytes()),
            Some("edit" | "undo") => Ok(self.state_status(false)),
            Some("README") => Ok(README.as_bytes().to_vec()),
            Some(".gitignore") => Ok(GITIGNORE.as_bytes().to_vec()),
            Some("log") if !self.store.dir().join("log").exists() => Ok(Vec::new()),
            _ => fs::read(backing(self.store.dir(), rel).ok_or(Errno::ENOENT)?).map_err(errno),
        }
    }

    pub(super) fn state_entries(&self, ino: u64, rel: &Path) -> Res<Vec<Entry>> {
        let mut out = Vec::new();
        if rel.as_os_str().is_empty() {
            for f in FILES {
                let kind = if f == "snapshots" || f == "versions" {
                    FileType::Directory
                } else {
                    FileType::RegularFile
                };
                let id = self.nodes.write().virtual_node(
                    ino,
                    OsStr::new(f),
                    Kind::State(PathBuf::from(f)),
                    false,
                );
                out.push(Entry {
                    ino: id,
                    kind,
                    name: f.into(),
                });
            }
            return Ok(out);
        }
        let path = backing(self.store.dir(), rel).ok_or(Errno::ENOENT)?;
        for e in fs::read_dir(&path).map_err(errno)?.flatten() {
            let name = e.file_name();
            let kind = if e.file_type().is_ok_and(|t| t.is_dir()) {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            let id =
                self.nodes
                    .write()
                    .virtual_node(ino, &name, Kind::State(rel.join(&name)), false);
            out.push(Entry {
                ino: id,
                kind,
                name,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_log_and_snapshots_are_backed() {
        let s = Path::new("/state");
        assert_eq!(
            backing(s, Path::new("log")),
            Some(PathBuf::from("/state/log"))
        );
        assert_eq!(
            backing(s, Path::new("snapshots/a/1")),
            Some(PathBuf::from("/state/snapshots/a/1"))
        );
        assert_eq!(backing(s, Path::new("lock")), None);
        assert_eq!(backing(s, Path::new("snapshots/../lock")), None);
    }

    #[test]
    fn the_readme_shows_an_example_to_copy() {
        assert!(README.contains("<<<<<<< SEARCH"));
        assert!(README.contains(".status"));
    }
}

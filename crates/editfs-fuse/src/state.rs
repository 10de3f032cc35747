//! `MOUNT/.editfs/`: a read-only view of the state directory for the mount's users.
//!
//! It shows `README` (how to use the mount, written for an agent), `log`,
//! `history`, `snapshots/<path>/<tx>` (each file before transaction `tx`),
//! `versions/<path>/<tx>` (after it, for `editfs show`) and a `.gitignore` of `*`, and the control
//! files `edit` (multi-file transactions), `dry-run` (what such a payload would
//! do, nothing written), `undo` (`PATH [TXID] [--force]`), `rewind`
//! (`--to TXID|NAME [--dry-run] [--force]`), `checkpoint` (`[NAME]`) and `status` /
//! `status.json` (their latest report). Everything else is read-only;
//! the lock, counter, journal and temporary files stay out of sight. Each user
//! sees only what concerns files that user may read (see `caller.rs`).

use std::ffi::OsStr;
use std::fs;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use super::core::Core;
use super::nodes::{Kind, ROOT};
use super::types::{Entry, Errno, FileAttr, FileType, Res, errno};
use crate::store::LogEntry;
use crate::transaction::Caller;
use crate::transaction::sight::Now;

/// The name of the state directory in the mount.
pub const NAME: &str = ".editfs";

/// The rules `README` gives after the section `editfs prompt` prints.
const REFERENCE: &str = include_str!("agent-readme.md");
const GITIGNORE: &str = "*\n";
const FILES: [&str; 13] = [
    "README",
    "log",
    "history",
    ".gitignore",
    "snapshots",
    "versions",
    "edit",
    "dry-run",
    "undo",
    "rewind",
    "checkpoint",
    "status",
    "status.json",
];

/// Log lines `history` and `log` show at most, the latest: each read renders
/// them on a thread that serves every user of the mount, so the work of one
/// read is bounded whatever the log holds (`editfs history` shows it all).
const SHOWN: usize = 1000;

/// The names in `.editfs/` that take transactions.
pub fn is_control(rel: &Path) -> bool {
    ["edit", "dry-run", "undo", "rewind", "checkpoint"]
        .iter()
        .any(|c| rel == Path::new(c))
}

/// Where a kept version or its directory lives in the state directory.
fn backing(state: &Path, rel: &Path) -> Option<PathBuf> {
    let safe = rel.components().all(|c| matches!(c, Component::Normal(_)));
    let kept = rel.starts_with("snapshots") || rel.starts_with("versions");
    (safe && kept).then(|| state.join(rel))
}

/// The project path and transaction of a kept version `snapshots/<path>/<tx>`.
fn version_of(rel: &Path) -> Option<(String, u64)> {
    let tx = rel.file_name()?.to_str()?.parse().ok()?;
    let path = rel.parent()?.strip_prefix(rel.components().next()?).ok()?;
    Some((path.to_str()?.to_owned(), tx))
}

/// Directory bits for a file's read bits: whoever could read it may list it.
fn listable(mode: u32) -> u16 {
    let read = mode & 0o444;
    (read | read >> 2) as u16
}

/// The status of the project's file or directory at `rel` now, and whether
/// an ACL is on it.
fn project_now(root: BorrowedFd<'_>, rel: &Path) -> Option<(rustix::fs::Stat, bool)> {
    let how = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(root, rel, how, Mode::empty()).ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    Some((st, crate::store::caller::has_acl(fd.as_fd())))
}

/// `perm`, left to the owner alone where an ACL (which the bits the kernel
/// is shown cannot carry) may shut others out.
fn owners_if(acl: bool, perm: u16) -> u16 {
    if acl { perm & 0o700 } else { perm }
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

    /// `README`: the section `editfs prompt` prints for this mount, then the rules.
    fn readme(&self) -> String {
        let mountpoint = self.source.mountpoint().display().to_string();
        format!(
            "{}\n{REFERENCE}",
            super::agent_prompt(super::Dialect::SearchReplace, &mountpoint)
        )
    }

    /// Attributes of a file of the view. Those whose content depends on who reads
    /// (status, history, log) say size 0, as `/proc` does: they are read with
    /// direct I/O, to the end, and no stat renders them.
    pub(super) fn state_attr(&self, ino: u64, rel: &Path) -> Res<FileAttr> {
        // What is shown includes every removal made before.
        self.store.settle_removals();
        let fixed =
            |text: &str| self.virtual_attr(ino, FileType::RegularFile, 0o444, text.len() as u64);
        match rel.to_str() {
            Some("") => return Ok(self.virtual_attr(ino, FileType::Directory, 0o555, 0)),
            // Under a root daemon any user may send a transaction: each file in
            // it is checked against that user's own rights. Any other daemon
            // could only check the files against its own user's.
            Some("edit" | "dry-run" | "undo" | "rewind" | "checkpoint") => {
                let perm = if self.owner.0 == 0 { 0o666 } else { 0o644 };
                return Ok(self.virtual_attr(ino, FileType::RegularFile, perm, 0));
            }
            Some("status" | "status.json" | "history" | "log") => {
                return Ok(self.virtual_attr(ino, FileType::RegularFile, 0o444, 0));
            }
            Some("README") => return Ok(fixed(&self.readme())),
            Some(".gitignore") => return Ok(fixed(GITIGNORE)),
            _ => {}
        }
        let path = backing(self.store.dir(), rel).ok_or(Errno::ENOENT)?;
        let meta = fs::symlink_metadata(&path).map_err(errno)?;
        let (kind, perm, owner) = self.kept_access(rel, meta.is_dir());
        let mut a = self.virtual_attr(ino, kind, perm, meta.len());
        if let Some((uid, gid)) = owner {
            (a.uid, a.gid) = (uid, gid);
        }
        a.mtime = meta.modified().unwrap_or(a.mtime);
        a.blocks = meta.blocks();
        Ok(a)
    }

    /// Type, permissions and owner (if not the daemon's) of a kept version or of
    /// a directory of them, so that the kernel's permission check shows each only
    /// to whom its file was readable. A version takes its file's mode and owner
    /// from when it was kept (read-only), narrowed to its owner's or to none
    /// where a directory above it then was not everyone's to search; one the log says nothing of (an older
    /// store, or a line rotated out) is the daemon's user's alone. A directory
    /// takes the bits of the project's directory or file at its path now; one for
    /// a path that is gone is open to all, and shows only version numbers,
    /// unless a version beneath it was kept behind a directory not everyone
    /// could search: then it is the daemon's user's alone.
    fn kept_access(&self, rel: &Path, dir: bool) -> (FileType, u16, Option<(u32, u32)>) {
        if !dir {
            let access = version_of(rel)
                .and_then(|(path, tx)| self.kept.lock().get(self.store.dir(), &path, tx));
            return match access.map(|(a, above)| a.behind(&above)) {
                Some(a) => (
                    FileType::RegularFile,
                    (a.mode & 0o444) as u16,
                    Some((a.uid, a.gid)),
                ),
                None => (FileType::RegularFile, 0o400, None),
            };
        }
        let project: PathBuf = rel.components().skip(1).collect();
        let now = (!project.as_os_str().is_empty())
            .then(|| project_now(self.source.root(), &project))
            .flatten();
        match now {
            Some((st, acl)) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => (
                FileType::Directory,
                owners_if(acl, (st.st_mode & 0o555) as u16),
                Some((st.st_uid, st.st_gid)),
            ),
            Some((st, acl)) if st.st_mode & libc::S_IFMT == libc::S_IFREG => (
                FileType::Directory,
                owners_if(acl, listable(st.st_mode)),
                Some((st.st_uid, st.st_gid)),
            ),
            // A path that is gone, once behind a directory not everyone could
            // search: its names are the daemon's user's alone.
            _ if project
                .to_str()
                .is_some_and(|p| self.kept.lock().private_at(self.store.dir(), p)) =>
            {
                (FileType::Directory, 0o500, None)
            }
            _ => (FileType::Directory, 0o555, None),
        }
    }

    /// The content of a file of the view for `caller`, read now: only what
    /// concerns files the caller may read (see `caller.rs`).
    pub(super) fn state_bytes(&self, rel: &Path, caller: &Caller) -> Res<Vec<u8>> {
        // What is shown includes every removal made before.
        self.store.settle_removals();
        match rel.to_str() {
            Some("status") => Ok(self.state_status(false, caller)),
            Some("status.json") => Ok(self.state_status(true, caller)),
            Some("history") => {
                let (mut entries, older) = self.store.recent_of(SHOWN);
                let mut now = Now::new();
                entries.retain(|e| caller.sees(&self.source.root(), e, &mut now));
                let mut text = crate::history::table(&entries, None);
                if older > 0 {
                    text.push_str(&format!(
                        "(only the latest {SHOWN} lines of the log are read here: `editfs history SOURCE` lists every transaction)\n"
                    ));
                }
                Ok(text.into_bytes())
            }
            Some("log") => Ok(self.log_for(caller)),
            Some("README") => Ok(self.readme().into_bytes()),
            Some(".gitignore") => Ok(GITIGNORE.as_bytes().to_vec()),
            _ => fs::read(backing(self.store.dir(), rel).ok_or(Errno::ENOENT)?).map_err(errno),
        }
    }

    /// The log's lines (both files, oldest first) on transactions `caller` may see.
    /// It reads without the store's lock: commits go on while a reader reads.
    fn log_for(&self, caller: &Caller) -> Vec<u8> {
        let files: Vec<Vec<u8>> = crate::store::log_files(self.store.dir())
            .iter()
            .map(|path| fs::read(path).unwrap_or_default())
            .collect();
        let lines: Vec<&[u8]> = files
            .iter()
            .flat_map(|bytes| bytes.split_inclusive(|&b| b == b'\n'))
            .collect();
        let skip = lines.len().saturating_sub(SHOWN);
        let mut out = Vec::new();
        let mut now = Now::new();
        for line in &lines[skip..] {
            let seen = caller.is_root()
                || serde_json::from_slice::<LogEntry>(line)
                    .is_ok_and(|e| caller.sees(&self.source.root(), &e, &mut now));
            if seen {
                out.extend_from_slice(line);
            }
        }
        out
    }

    pub(super) fn state_entries(&self, ino: u64, rel: &Path) -> Res<Vec<Entry>> {
        // What is shown includes every removal made before.
        self.store.settle_removals();
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
    fn only_kept_versions_are_backed() {
        let s = Path::new("/state");
        assert_eq!(backing(s, Path::new("log")), None);
        assert_eq!(
            backing(s, Path::new("snapshots/a/1")),
            Some(PathBuf::from("/state/snapshots/a/1"))
        );
        assert_eq!(backing(s, Path::new("lock")), None);
        assert_eq!(backing(s, Path::new("snapshots/../lock")), None);
    }

    #[test]
    fn a_version_names_its_path_and_transaction() {
        assert_eq!(
            version_of(Path::new("snapshots/src/a.rs/12")),
            Some(("src/a.rs".to_owned(), 12))
        );
        assert_eq!(
            version_of(Path::new("versions/a/3")),
            Some(("a".to_owned(), 3))
        );
        assert_eq!(version_of(Path::new("snapshots/src")), None);
        assert_eq!(listable(0o640), 0o550);
        assert_eq!(listable(0o600), 0o500);
    }

    #[test]
    fn the_readme_shows_an_example_to_copy() {
        assert!(REFERENCE.contains("<<<<<<< SEARCH"));
        assert!(REFERENCE.contains(".status"));
    }
}

//! The log's line format: one typed entry per transaction, read back by history
//! and undo, so a renamed field is a compile error rather than a silently empty
//! column.
//!
//! Every field has a default, so lines written by older versions still read.

use serde::{Deserialize, Serialize};

/// What kind of change a transaction was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Operations written to a control file (or `editfs apply`).
    #[default]
    Edit,
    /// A kept version restored.
    Undo,
    /// Every file changed since a point restored as it was then, as one
    /// transaction (an undo of many files, named for what was asked).
    Rewind,
    /// A write that bypassed the control files (`sed -i`, an editor's save).
    Direct,
    /// A file removed through the mount.
    Delete,
    /// A named point of the history (`editfs checkpoint`): changes nothing,
    /// names a point to diff or rewind to.
    Checkpoint,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Edit => "edit",
            Kind::Undo => "undo",
            Kind::Rewind => "rewind",
            Kind::Direct => "direct",
            Kind::Delete => "delete",
            Kind::Checkpoint => "checkpoint",
        }
    }
}

/// How a transaction ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It changed the files it names.
    Ok,
    /// It changed nothing: an operation did not apply, or the file system failed.
    #[default]
    Failed,
    /// It changed nothing: the payload was unusable.
    Rejected,
    /// A direct write or removal whose pre-image was not kept (over the size limit).
    Skipped,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Rejected => "rejected",
            Outcome::Skipped => "skipped",
        }
    }
}

impl From<crate::engine::Outcome> for Outcome {
    fn from(o: crate::engine::Outcome) -> Outcome {
        match o {
            crate::engine::Outcome::Ok => Outcome::Ok,
            crate::engine::Outcome::Failed => Outcome::Failed,
            crate::engine::Outcome::Rejected => Outcome::Rejected,
        }
    }
}

/// Why a transaction failed, as its report, the log and the history name it:
/// what the engine found (`Edit`), or what the transaction met on its way to
/// the files, which the engine never sees. Each serialises to the name the
/// contract gives `error.kind`, in the log as in reports. A new kind is one
/// variant here and one arm in each exhaustive match on it (the errno a
/// control file answers): the compiler finds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The file system failed under the transaction.
    Io,
    /// A path the request names is none of the project's.
    BadPath,
    /// A file's own operations matched, but another file of its transaction
    /// cannot be written, and a transaction writes all its files or none.
    NotWritten,
    /// A file changed in a way editfs did not record, which a restore would lose.
    OutsideChanges,
    IsDirectory,
    /// A path leads out of SOURCE (a symlink).
    OutsideSource,
    DanglingLink,
    /// A FIFO, socket, device or symlink loop.
    NotAFile,
    /// The caller may not do natively what the transaction asks.
    PermissionDenied,
    /// What the engine found wrong with the payload, an operation or the outcome
    /// (last: serde tries the transaction's own names first).
    #[serde(untagged)]
    Edit(crate::engine::ErrorKind),
}

impl ErrorKind {
    /// The name in reports, logs and history.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Io => "io",
            ErrorKind::BadPath => "bad_path",
            ErrorKind::NotWritten => "not_written",
            ErrorKind::OutsideChanges => "outside_changes",
            ErrorKind::IsDirectory => "is_directory",
            ErrorKind::OutsideSource => "outside_source",
            ErrorKind::DanglingLink => "dangling_link",
            ErrorKind::NotAFile => "not_a_file",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::Edit(k) => k.as_str(),
        }
    }
}

impl From<crate::engine::ErrorKind> for ErrorKind {
    fn from(k: crate::engine::ErrorKind) -> ErrorKind {
        ErrorKind::Edit(k)
    }
}

/// Kinds compare with their names, as tests spell them.
impl PartialEq<&str> for ErrorKind {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One file of a transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileEntry {
    /// Path relative to the project root.
    pub file: String,
    /// SHA-256 of the file before, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// SHA-256 of the file after (as it still is, when nothing changed); `None`
    /// when unknown, or when the transaction removed the file.
    pub sha256: Option<String>,
    pub lines_added: usize,
    pub lines_removed: usize,
    /// The file did not exist before this transaction: undoing it removes it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub created: bool,
    /// The file no longer exists after this transaction.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
    /// The directories this transaction made for the file, outermost first:
    /// undoing it removes them again when that leaves them empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<String>,
    /// Why no pre-image was kept, for a skipped one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The file's permission bits and owner before this transaction, where it
    /// existed: through the mount, its kept versions are readable by whom the
    /// file was then, whoever owns the name now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    /// The directories on the file's path (its own up to the project's root)
    /// that not everyone could search when this transaction ran: who could not
    /// search one of them could not see the file then, and is shown none of its
    /// versions, even once those directories are gone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub above: Vec<Access>,
}

impl FileEntry {
    /// Whether the transaction changed this file: a no-op on it (SEARCH equal
    /// to REPLACE, an edit already applied) left it as it was, its diff empty,
    /// and kept no version of it, so there is nothing of it to undo. A write
    /// whose result is unknown, or whose hash before differs from after,
    /// counts as a change whatever its line counts (a binary file's).
    pub fn touched(&self) -> bool {
        self.created
            || self.removed
            || self.lines_added + self.lines_removed > 0
            || self.sha256.is_none()
            || self
                .before
                .as_ref()
                .is_some_and(|b| Some(b) != self.sha256.as_ref())
    }
}

/// A file's permission bits and owner, and whether an ACL granted or denied
/// more than the bits say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// An access ACL beyond the bits was on it. Its entries are not recorded,
    /// so who else it let in cannot be told later: such a version counts as
    /// readable (and such a directory as searchable) by its owner alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub acl: bool,
}

impl Access {
    /// The directories from `dir`, the file `rel`'s own, up to the project's
    /// root that others may not search (see `FileEntry::above`), found through
    /// `..` from `dir`: whatever the names above are now, these are the
    /// directories the file is in.
    pub fn above(dir: std::os::fd::BorrowedFd<'_>, rel: &str) -> Vec<Access> {
        use rustix::fs::{Mode, OFlags};
        use std::os::fd::AsFd;
        let levels = rel.matches('/').count() + 1;
        let mut out = Vec::new();
        let mut up: Option<std::os::fd::OwnedFd> = None;
        for level in 0..levels {
            let at = up.as_ref().map_or(dir, |fd| fd.as_fd());
            let Some(access) = Access::of_fd(at) else {
                break;
            };
            if access.mode & 0o001 == 0 || access.acl {
                out.push(access);
            }
            if level + 1 < levels {
                let how = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
                match rustix::fs::openat(at, "..", how, Mode::empty()) {
                    Ok(fd) => up = Some(fd),
                    Err(_) => break,
                }
            }
        }
        out
    }

    /// The access of the file or directory `fd`.
    pub fn of_fd(fd: std::os::fd::BorrowedFd<'_>) -> Option<Access> {
        let st = rustix::fs::fstat(fd).ok()?;
        Some(Access {
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            acl: super::caller::has_acl(fd),
        })
    }

    /// The access of `name` in `dir`, a symlink not followed: the file that
    /// was there at the one look that read its bits and its ACL.
    pub fn at(dir: std::os::fd::BorrowedFd<'_>, name: &std::ffi::OsStr) -> Option<Access> {
        use rustix::fs::{Mode, OFlags};
        let how = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(dir, name, how, Mode::empty()).ok()?;
        Access::of_fd(std::os::fd::AsFd::as_fd(&fd))
    }

    /// This file's access as bits alone can show it, given the directories
    /// `above` it that not everyone could search, or under an ACL (whose
    /// entries are not recorded): group and others lose their bits, and the
    /// owner too if one of those directories shut it out. Conservative:
    /// it never shows the file to a user who could not reach it.
    pub fn behind(self, above: &[Access]) -> Access {
        if above.is_empty() && !self.acl {
            return self;
        }
        let owner_searches = above.iter().all(|d| {
            let shift = if d.uid == self.uid {
                6
            } else if d.gid == self.gid {
                3
            } else {
                0
            };
            (shift == 6 || !d.acl) && (d.mode >> shift) & 1 == 1
        });
        let mode = if owner_searches {
            self.mode & 0o7700
        } else {
            0
        };
        Access { mode, ..self }
    }
}

/// One line of the log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LogEntry {
    pub tx: u64,
    pub time: String,
    pub kind: Kind,
    pub outcome: Outcome,
    pub applied: usize,
    pub total: usize,
    pub files: Vec<FileEntry>,
    /// The error's kind, when it failed, by the name reports give it
    /// (`not_found`, `io`, ...), as lines have always held it.
    pub error: Option<ErrorKind>,
    pub pid: u32,
    pub command: String,
    /// A checkpoint's name, unique in the log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl LogEntry {
    /// This transaction's entry for `rel`, if it touched it.
    pub fn file(&self, rel: &str) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.file == rel)
    }

    /// Whether it changed files (and so kept their versions).
    pub fn changed(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

/// Lines added and removed by a unified diff.
pub fn count_changes(diff: &str) -> (usize, usize) {
    let body = diff
        .lines()
        .filter(|l| !l.starts_with("+++") && !l.starts_with("---"));
    body.fold((0, 0), |(a, r), l| match l.as_bytes().first() {
        Some(b'+') => (a + 1, r),
        Some(b'-') => (a, r + 1),
        _ => (a, r),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_lines_read_and_new_lines_round_trip() {
        let old = r#"{"tx":3,"time":"t","kind":"direct","outcome":"ok","files":[{"file":"a","before":"x","sha256":null,"lines_added":0,"lines_removed":0}],"error":null,"pid":7,"command":"sed"}"#;
        let e: LogEntry = serde_json::from_str(old).unwrap();
        assert_eq!((e.tx, e.kind, e.outcome), (3, Kind::Direct, Outcome::Ok));
        assert_eq!(e.file("a").unwrap().before.as_deref(), Some("x"));
        let back: LogEntry = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn a_failed_line_keeps_its_error_kind_by_name() {
        let old = r#"{"tx":4,"time":"t","kind":"edit","outcome":"failed","files":[],"error":"permission_denied","pid":7,"command":"x"}"#;
        let e: LogEntry = serde_json::from_str(old).unwrap();
        assert_eq!(e.error, Some(ErrorKind::PermissionDenied));
        let line = serde_json::to_string(&e).unwrap();
        assert!(line.contains(r#""error":"permission_denied""#), "{line}");
        let edit = old.replace("permission_denied", "not_found");
        let e: LogEntry = serde_json::from_str(&edit).unwrap();
        assert_eq!(e.error, Some(crate::engine::ErrorKind::NotFound.into()));
    }

    #[test]
    fn error_kinds_serialise_to_the_names_the_contract_and_the_log_use() {
        use crate::engine::ErrorKind as E;
        let names = [
            (ErrorKind::Io, "io"),
            (ErrorKind::BadPath, "bad_path"),
            (ErrorKind::NotWritten, "not_written"),
            (ErrorKind::OutsideChanges, "outside_changes"),
            (ErrorKind::IsDirectory, "is_directory"),
            (ErrorKind::OutsideSource, "outside_source"),
            (ErrorKind::DanglingLink, "dangling_link"),
            (ErrorKind::NotAFile, "not_a_file"),
            (ErrorKind::PermissionDenied, "permission_denied"),
            (E::NotFound.into(), "not_found"),
            (E::Stale.into(), "stale"),
            (E::TooLarge.into(), "too_large"),
            (E::Syntax.into(), "syntax"),
        ];
        for (kind, name) in names {
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.to_string(), name);
            assert_eq!(kind, name);
            let back: ErrorKind = serde_json::from_value(name.into()).unwrap();
            assert_eq!(back, kind);
        }
    }

    #[test]
    fn a_file_behind_a_private_directory_is_its_owners_at_most() {
        let file = Access {
            mode: 0o644,
            uid: 1000,
            gid: 1000,
            acl: false,
        };
        assert_eq!(file.behind(&[]), file);
        let mine = Access {
            mode: 0o700,
            uid: 1000,
            gid: 1000,
            acl: false,
        };
        assert_eq!(file.behind(&[mine]).mode, 0o600);
        let roots = Access {
            mode: 0o700,
            uid: 0,
            gid: 0,
            acl: false,
        };
        assert_eq!(file.behind(&[mine, roots]).mode, 0);
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let set = |p: &str, m: u32| {
            std::fs::set_permissions(tmp.path().join(p), std::fs::Permissions::from_mode(m))
                .unwrap()
        };
        set("", 0o755);
        set("a", 0o750);
        set("a/b", 0o755);
        let dir = std::fs::File::open(tmp.path().join("a/b")).unwrap();
        let above = Access::above(std::os::fd::AsFd::as_fd(&dir), "a/b/f");
        assert_eq!(above.len(), 1, "{above:?}");
        assert_eq!(above[0].mode, 0o750);
    }

    #[test]
    fn counts_diff_lines_but_not_headers() {
        let d = "--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n-a\n+b\n+c\n";
        assert_eq!(count_changes(d), (2, 1));
    }
}

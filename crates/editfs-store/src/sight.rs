//! What of editfs's history a caller may see, and so undo: what `stat` and `cat`
//! would show that user. A transaction shows to a user who can reach each of
//! its files now (every directory on the way searchable) and read it, and who
//! could read it before the transaction; a file that is gone shows only when the
//! directories of its path that still exist are searchable and the log says
//! the user could read it. Everything else reads as if it never happened, so
//! no answer tells a hidden name from one that never had a history.
//!
//! What the caller can reach and read now the kernel decides, asked with the
//! caller's credentials (ACLs count). What the caller could read when a
//! version was kept is read from the log's record of the file then: its
//! permission bits as the kernel reads them (owner class first, then group,
//! the primary group or any supplementary one, then others; root reads
//! everything), and, where an ACL was on the file or a directory above it
//! (its entries are not recorded), its owner alone.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{Mode, OFlags};

use super::Caller;
use crate::logline::{Access, LogEntry};

const READ: u32 = 4;
const SEARCH: u32 = 1;

impl Access {
    /// The permission bits that let in, of this version's owner, group and
    /// others, only those who could read it when it was kept: its own bits,
    /// less each class that one of the directories `above` it (those not
    /// everyone could search then) kept out. Where the record cannot tell
    /// (an ACL, a directory of another owner or group) the class counts as
    /// kept out: the narrower answer. A view that shows an old version as a
    /// file (a branch's base) shows it with these, so no one reads in it
    /// what they could not read then, whatever the file's bits are now.
    pub fn bits_then(&self, above: &[Access]) -> u32 {
        let mut bits = self.mode & 0o7777;
        if self.acl {
            bits &= !0o077;
        }
        for d in above {
            let owner_searches = d.mode & 0o100 != 0;
            if d.uid != self.uid || !owner_searches {
                bits &= !0o700;
            }
            let group = !d.acl && d.gid == self.gid && d.mode & 0o010 != 0 && owner_searches;
            if !group {
                bits &= !0o070;
            }
            bits &= !0o007;
        }
        bits
    }
}

// The one `Caller` type (caller.rs) says who asks; here are the
// rules for what of the state directory that user may see.
impl Caller {
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Whether `access` grants this caller every bit of `want` (`rwx` as 4, 2, 1).
    fn permits(&self, access: &Access, want: u32) -> bool {
        if self.is_root() {
            return true;
        }
        let shift = if self.uid == access.uid {
            6
        } else if access.acl {
            return false;
        } else if self.gid == access.gid || self.groups.contains(&access.gid) {
            3
        } else {
            0
        };
        (access.mode >> shift) & want == want
    }

    /// Whether the caller could read a file that had `access`.
    pub fn reads(&self, access: &Access) -> bool {
        self.permits(access, READ)
    }

    /// Whether the caller could read a file that had `access`, behind the
    /// directories `above` it that not everyone could search then.
    pub fn could_read(&self, access: &Access, above: &[Access]) -> bool {
        self.reads(access) && above.iter().all(|d| self.permits(d, SEARCH))
    }

    /// Whether the caller can read the regular file `rel` beneath `root` now: every
    /// directory on the way searchable, the file readable, no symlink followed.
    pub fn reads_now(&self, root: &impl AsFd, rel: &str) -> bool {
        if self.is_root() {
            return true;
        }
        let Some((file, dirs)) = parts(rel) else {
            return false;
        };
        let Way::Open(held) = self.search(root, &dirs) else {
            return false;
        };
        let at: &dyn AsFd = match &held {
            Some(fd) => fd,
            None => root,
        };
        matches!(self.look(at, file), Look::File(true))
    }

    /// Whether `rel` does not exist beneath `root` and the caller could learn so
    /// natively: every directory on the way that exists searchable. A report on
    /// a file a payload named wrongly then tells the caller nothing `ls` would not.
    pub fn sees_missing(&self, root: &impl AsFd, rel: &str) -> bool {
        let Some((file, dirs)) = parts(rel) else {
            return false;
        };
        match self.search(root, &dirs) {
            Way::Missing => true,
            Way::Denied => false,
            Way::Open(held) => {
                let at: &dyn AsFd = match &held {
                    Some(fd) => fd,
                    None => root,
                };
                matches!(self.look(at, file), Look::Nothing)
            }
        }
    }

    /// Walks `dirs` beneath `root` as the caller could: each searchable, no
    /// symlink followed.
    fn search(&self, root: &impl AsFd, dirs: &[&str]) -> Way {
        let searchable = |fd: BorrowedFd<'_>| {
            rustix::fs::fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
                && self.kernel_allows(fd, rustix::fs::Access::EXEC_OK, SEARCH)
        };
        if !searchable(root.as_fd()) {
            return Way::Denied;
        }
        let mut held: Option<OwnedFd> = None;
        for dir in dirs {
            let at: &dyn AsFd = match &held {
                Some(fd) => fd,
                None => root,
            };
            match open_path(at, dir) {
                Err(rustix::io::Errno::NOENT) => return Way::Missing,
                Ok(fd) if searchable(fd.as_fd()) => held = Some(fd),
                _ => return Way::Denied,
            }
        }
        Way::Open(held)
    }

    /// Whether the kernel lets this caller access `fd` as `how` says. Without
    /// an ACL the permission bits are the kernel's whole answer for a user
    /// who is not root, and are read from the file (a rewind asks this of
    /// every file its history names, and switching credentials to ask costs
    /// several calls each); with one, the kernel is asked with the caller's
    /// credentials, or, where the daemon cannot take them on (it does not run
    /// as root), the bits and the ACL flag decide for `want` instead.
    fn kernel_allows(&self, fd: BorrowedFd<'_>, how: rustix::fs::Access, want: u32) -> bool {
        if self.is_root() {
            return true;
        }
        let Some(access) = Access::of_fd(fd) else {
            return false;
        };
        let daemon = rustix::process::geteuid();
        match access.acl && (daemon.is_root() || daemon.as_raw() == self.uid) {
            true => self.may(fd, how).is_ok(),
            false => self.permits(&access, want),
        }
    }

    /// What is at `name` in `dir` for this caller, no symlink followed.
    fn look(&self, dir: &dyn AsFd, name: &str) -> Look {
        let fd = match open_path(dir, name) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Look::Nothing,
            Err(_) => return Look::Denied,
        };
        match rustix::fs::fstat(&fd) {
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => {
                Look::File(self.kernel_allows(fd.as_fd(), rustix::fs::Access::READ_OK, READ))
            }
            Ok(_) => Look::Other,
            Err(_) => Look::Denied,
        }
    }

    /// Whether the caller may see transaction `entry`: it can reach and read
    /// every file the transaction named now, and could read it before the
    /// transaction as well where the log says how it was (a file renamed over
    /// another user's must not show that user's transactions). A file that is
    /// gone counts as it was, behind the directories of its path that remain.
    /// `now` remembers each file's state across the entries of one rendering, so
    /// a long log costs one look per file, not per line.
    pub fn sees(&self, root: &impl AsFd, entry: &LogEntry, now: &mut Now) -> bool {
        self.is_root()
            || entry.files.iter().all(|f| {
                let then = f.access.map(|a| self.could_read(&a, &f.above));
                let seen = *now
                    .entry(f.file.clone())
                    .or_insert_with(|| self.sight(root, &f.file));
                match seen {
                    Sight::Readable => then != Some(false),
                    Sight::Gone => then == Some(true),
                    Sight::Hidden => false,
                }
            })
    }

    /// What the caller could learn of `rel` beneath `root` now, natively.
    pub fn sight(&self, root: &impl AsFd, rel: &str) -> Sight {
        let Some((file, dirs)) = parts(rel) else {
            return Sight::Hidden;
        };
        let held = match self.search(root, &dirs) {
            Way::Denied => return Sight::Hidden,
            Way::Missing => return Sight::Gone,
            Way::Open(held) => held,
        };
        let at: &dyn AsFd = match &held {
            Some(fd) => fd,
            None => root,
        };
        match self.look(at, file) {
            Look::Nothing | Look::Other => Sight::Gone,
            Look::File(true) => Sight::Readable,
            Look::File(false) | Look::Denied => Sight::Hidden,
        }
    }
}

/// What a caller could learn of a path natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sight {
    /// A regular file it can reach and read.
    Readable,
    /// Nothing is there, behind directories it can search.
    Gone,
    /// A directory on the way is not searchable, or the file is not readable.
    Hidden,
}

/// Where a walk of a path's directories (`Caller::search`) ended.
enum Way {
    /// Every one searchable: the last, held (`None`: the root itself).
    Open(Option<OwnedFd>),
    /// One does not exist; those before it were searchable.
    Missing,
    /// One could not be searched, or is no directory.
    Denied,
}

/// What `Caller::look` found at a name.
enum Look {
    Nothing,
    /// A regular file, and whether the caller may read it.
    File(bool),
    /// Something else: a directory, a symlink, a special file.
    Other,
    Denied,
}

/// A path's last part and the directories before it.
fn parts(rel: &str) -> Option<(&str, Vec<&str>)> {
    let mut parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    let file = parts.pop()?;
    Some((file, parts))
}

/// `name` in `dir` opened as a path only, no symlink followed.
fn open_path(dir: &dyn AsFd, name: &str) -> rustix::io::Result<OwnedFd> {
    let how = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir.as_fd(), name, how, Mode::empty())
}

/// What the caller could learn of each file now, by path.
pub type Now = std::collections::HashMap<String, Sight>;

#[cfg(test)]
mod tests {
    use super::*;

    fn access(mode: u32, uid: u32, gid: u32) -> Access {
        Access {
            mode,
            uid,
            gid,
            acl: false,
        }
    }

    #[test]
    fn a_version_behind_a_closed_directory_keeps_only_the_classes_that_could_search_it() {
        let file = access(0o644, 1000, 100);
        assert_eq!(file.bits_then(&[]), 0o644, "nothing above: its own bits");
        assert_eq!(
            file.bits_then(&[access(0o700, 1000, 100)]),
            0o600,
            "its owner's 0700 directory"
        );
        assert_eq!(
            file.bits_then(&[access(0o750, 1000, 100)]),
            0o640,
            "a directory its group may search"
        );
        assert_eq!(
            file.bits_then(&[access(0o750, 1000, 7)]),
            0o600,
            "a directory of another group"
        );
        assert_eq!(
            file.bits_then(&[access(0o750, 0, 0)]),
            0,
            "a directory of another owner: who of the file's owner got in is not known"
        );
        let acl = Access {
            acl: true,
            ..access(0o664, 1000, 100)
        };
        assert_eq!(
            acl.bits_then(&[]),
            0o600,
            "an ACL's entries are not recorded"
        );
        assert_eq!(access(0o4755, 1000, 100).bits_then(&[]), 0o4755);
    }

    #[test]
    fn the_owner_class_comes_first_then_groups_then_others() {
        let nobody = Caller {
            uid: 65534,
            gid: 65534,
            groups: vec![100],
            fsetid: false,
            umask: 0o022,
        };
        assert!(!nobody.reads(&access(0o600, 0, 0)));
        assert!(nobody.reads(&access(0o604, 0, 0)));
        assert!(
            nobody.reads(&access(0o640, 0, 100)),
            "a supplementary group"
        );
        assert!(
            !nobody.reads(&access(0o604, 0, 100)),
            "group class, not others"
        );
        assert!(
            !nobody.reads(&access(0o066, 65534, 0)),
            "owner class, not others"
        );
        assert!(Caller::of(0, 0, 0).reads(&access(0o000, 1, 1)));
    }

    #[test]
    fn every_directory_on_the_way_must_be_searchable() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let set = |p: &str, m: u32| {
            std::fs::set_permissions(tmp.path().join(p), std::fs::Permissions::from_mode(m))
                .unwrap()
        };
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::write(tmp.path().join("d/f"), "x").unwrap();
        set("", 0o755);
        set("d/f", 0o644);
        let root = crate::atomic::open_dir(tmp.path()).unwrap();
        let other = Caller {
            uid: 4242,
            gid: 4242,
            groups: Vec::new(),
            fsetid: false,
            umask: 0o022,
        };
        set("d", 0o755);
        assert!(other.reads_now(&root, "d/f"));
        set("d", 0o750);
        assert!(!other.reads_now(&root, "d/f"));
        assert!(!other.reads_now(&root, "d/missing"));
        assert!(!other.reads_now(&root, ""));
        // A missing file is seen missing only through searchable directories.
        assert!(!other.sees_missing(&root, "d/missing"));
        assert!(!other.sees_missing(&root, "d/missing/deeper"));
        assert!(other.sees_missing(&root, "none/f"));
        assert!(other.sees_missing(&root, "none"));
        set("d", 0o755);
        assert!(other.sees_missing(&root, "d/missing"));
        assert!(other.sees_missing(&root, "d/missing/deeper"));
        assert!(!other.sees_missing(&root, "d/f"), "it exists");
        assert!(
            !other.sees_missing(&root, "d/f/under"),
            "a file is no directory"
        );
        // A gone file shows as its log line says only behind searchable directories.
        let removed = |file: &str, mode: u32| LogEntry {
            files: vec![crate::logline::FileEntry {
                file: file.into(),
                access: Some(access(mode, 0, 0)),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(other.sees(&root, &removed("d/gone", 0o644), &mut Now::new()));
        assert!(!other.sees(&root, &removed("d/gone", 0o600), &mut Now::new()));
        assert!(other.sees(&root, &removed("none/gone", 0o644), &mut Now::new()));
        set("d", 0o700);
        assert!(!other.sees(&root, &removed("d/gone", 0o644), &mut Now::new()));
        assert!(!other.sees(&root, &removed("d/f", 0o644), &mut Now::new()));
    }
}

//! Which state directory a command may use, and holding it while it does.
//!
//! A state directory a command finds by itself (the nearest ancestor's
//! `.editfs/` for `editfs apply`, `SOURCE/.editfs` for `history`, `show` and
//! `undo`) may have been made by anyone who can write the project. It is used
//! only when it is owned by the user running the command or by root, and no
//! one else may write it, as git trusts a repository: otherwise its owner could
//! have made its files symbolic links to the runner's files, and a root
//! `editfs apply` would write through them. One named with `--state-dir` is the
//! user's choice and is used whoever owns it.
//!
//! Either way, the directory is opened once, without following a symbolic
//! link, and the store reaches everything in it through that descriptor (its
//! `/proc/self/fd` name), so a rename of the directory or of one above it
//! after the check changes nothing; and a store that will be written has no
//! symbolic link among its own entries (`log`, `txid`, `snapshots`, ...). Deeper
//! inside, only its owner could have made one in a directory trusted by its
//! owner; a given one others may write is walked whole once, and refused for a
//! link anywhere (a walk of a directory others may write cannot hold for later:
//! name one only if you trust who can write it).

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

/// How a command came to a state directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Came {
    /// Found by itself: trusted only when owned as this module says.
    Found,
    /// Named by the user (`--state-dir`): trusted whoever owns it.
    Given,
}

/// Why a state directory is not used.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    #[error("{} is a symbolic link", .0.display())]
    Link(PathBuf),
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{} is owned by uid {uid}, neither you nor root", dir.display())]
    Owner { dir: PathBuf, uid: u32 },
    #[error("{} is writable by others (mode {mode:o})", dir.display())]
    OthersWrite { dir: PathBuf, mode: u32 },
    #[error("{} is writable by its group (mode {mode:o})", dir.display())]
    GroupWrite { dir: PathBuf, mode: u32 },
    #[error(
        "{} holds a symbolic link, {}: nothing in a state directory is reached through one",
        dir.display(),
        inside.display()
    )]
    LinkInside { dir: PathBuf, inside: PathBuf },
    #[error("cannot open {}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        source: rustix::io::Errno,
    },
}

impl Untrusted {
    /// Whether the directory simply is not there (nothing to refuse).
    pub fn missing(&self) -> bool {
        matches!(self, Untrusted::Io { source, .. } if *source == rustix::io::Errno::NOENT)
    }
}

/// A state directory held open: the store names its files through `path`.
#[derive(Debug)]
pub struct Held {
    fd: OwnedFd,
    shown: PathBuf,
}

impl Held {
    /// The directory's name through its descriptor, for the store to open
    /// everything beneath it; valid while `self` lives.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// The directory as it was named, for messages.
    pub fn shown(&self) -> &Path {
        &self.shown
    }
}

/// Opens the state directory `dir` if it may be used, as `came` says. Its own
/// entries may not be symbolic links; with `written` (the store will write it),
/// one others may write is walked whole, and a link anywhere refuses it.
pub fn hold(dir: &Path, came: Came, written: bool) -> Result<Held, Untrusted> {
    let how = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::open(dir, how, Mode::empty()).map_err(|source| {
        // A link fails as no directory (`O_DIRECTORY` is checked first) or as a loop.
        let link = rustix::fs::lstat(dir)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
        match source {
            _ if link => Untrusted::Link(dir.to_owned()),
            rustix::io::Errno::NOTDIR => Untrusted::NotADirectory(dir.to_owned()),
            source => Untrusted::Io {
                dir: dir.to_owned(),
                source,
            },
        }
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|source| Untrusted::Io {
        dir: dir.to_owned(),
        source,
    })?;
    let trusted = match owned(dir, st.st_uid, st.st_mode & 0o7777) {
        Err(e) if came == Came::Found => return Err(e),
        owned => owned.is_ok(),
    };
    let deep = written && !trusted;
    if let Some(inside) = link_in(fd.as_fd(), Path::new(""), deep) {
        return Err(Untrusted::LinkInside {
            dir: dir.to_owned(),
            inside,
        });
    }
    Ok(Held {
        fd,
        shown: dir.to_owned(),
    })
}

/// Whether a directory owned by `uid` with `mode` may be trusted by this
/// process: its own or root's, and writable by nobody else.
fn owned(dir: &Path, uid: u32, mode: u32) -> Result<(), Untrusted> {
    let me = rustix::process::geteuid().as_raw();
    if uid != me && uid != 0 {
        return Err(Untrusted::Owner {
            dir: dir.to_owned(),
            uid,
        });
    }
    // A sticky directory still lets others make files in it.
    if mode & 0o002 != 0 {
        return Err(Untrusted::OthersWrite {
            dir: dir.to_owned(),
            mode,
        });
    }
    if mode & 0o020 != 0 {
        return Err(Untrusted::GroupWrite {
            dir: dir.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// The first symbolic link in directory `dir` (at `at` in the state
/// directory), looking into its subdirectories too when `deep`. A directory
/// that cannot be read is skipped: nothing can be reached through it either.
fn link_in(dir: BorrowedFd<'_>, at: &Path, deep: bool) -> Option<PathBuf> {
    let how = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(listing) = rustix::fs::openat(dir, ".", how, Mode::empty()).and_then(Dir::new) else {
        return None;
    };
    for entry in listing.flatten() {
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode)),
            kind => kind,
        };
        match kind {
            FileType::Symlink => return Some(at.join(name)),
            FileType::Directory if deep => {
                let Ok(sub) = rustix::fs::openat(dir, name, how, Mode::empty()) else {
                    continue;
                };
                if let Some(found) = link_in(sub.as_fd(), &at.join(name), deep) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::Project;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_found_directory_must_be_writable_by_its_owner_alone() {
        let p = Project::new();
        let dir = p.state();
        std::fs::create_dir_all(dir.join("snapshots/a")).unwrap();
        chmod(&dir, 0o700);
        assert!(hold(&dir, Came::Found, true).is_ok());
        chmod(&dir, 0o1777);
        let e = hold(&dir, Came::Found, true).unwrap_err();
        assert!(e.to_string().contains("writable by others"), "{e}");
        assert!(hold(&dir, Came::Given, true).is_ok(), "the user's choice");
        chmod(&dir, 0o770);
        let e = hold(&dir, Came::Found, false).unwrap_err();
        assert!(e.to_string().contains("writable by its group"), "{e}");
        chmod(&dir, 0o755);
        let held = hold(&dir, Came::Found, false).unwrap();
        assert!(
            held.path().join("snapshots/a").is_dir(),
            "reached beneath it"
        );
        assert_eq!(held.shown(), dir);
    }

    #[test]
    fn no_symbolic_link_is_trusted_outside_or_inside() {
        let p = Project::new();
        let dir = p.state();
        std::fs::create_dir_all(dir.join("snapshots/a")).unwrap();
        std::os::unix::fs::symlink(&dir, p.root().join("link")).unwrap();
        let e = hold(&p.root().join("link"), Came::Given, false).unwrap_err();
        assert!(matches!(e, Untrusted::Link(_)), "{e}");
        std::os::unix::fs::symlink("/etc", dir.join("snapshots/a/b")).unwrap();
        chmod(&dir, 0o700);
        assert!(
            hold(&dir, Came::Given, true).is_ok(),
            "only its owner could"
        );
        chmod(&dir, 0o777);
        assert!(hold(&dir, Came::Given, false).is_ok(), "not looked into");
        let e = hold(&dir, Came::Given, true).unwrap_err();
        assert!(e.to_string().contains("snapshots/a/b"), "{e}");
        std::fs::remove_file(dir.join("snapshots/a/b")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("log")).unwrap();
        let e = hold(&dir, Came::Given, false).unwrap_err();
        assert!(e.to_string().contains("symbolic link, log"), "{e}");
        assert!(
            hold(&p.root().join("none"), Came::Found, false)
                .unwrap_err()
                .missing()
        );
    }
}

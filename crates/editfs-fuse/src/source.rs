//! SOURCE, reached only beneath its directory descriptor.
//!
//! The path of every request is resolved by the kernel with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: no `..` out of SOURCE, no symlink
//! followed, whatever a user renamed or linked in the meantime. The last
//! component is then used with `*at` calls that do not follow it either.
//! (An `F.edit` transaction starts from the directory node the kernel looked
//! up; the files of `.editfs/edit`, `dry-run` and `undo` are resolved with
//! `RESOLVE_BENEATH` alone, with the caller's credentials: see
//! `store::parent_beneath_with`.)

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

pub struct Source {
    root: OwnedFd,
    path: std::path::PathBuf,
    mountpoint: std::path::PathBuf,
}

impl Source {
    /// Opens SOURCE at `path`, to be mirrored at `mountpoint`.
    pub fn open(path: &Path, mountpoint: &Path) -> io::Result<Source> {
        let root = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Source {
            root,
            path: path.to_owned(),
            mountpoint: mountpoint.to_owned(),
        })
    }

    /// Where SOURCE is, for the journal's recovery after a crash.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where SOURCE is mirrored: agents name files absolutely through it.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    pub fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// Opens directory `rel` (relative to SOURCE; empty for SOURCE itself).
    pub fn dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        let rel: &Path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        Ok(rustix::fs::openat2(
            &self.root,
            rel,
            flags,
            Mode::empty(),
            resolve,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_and_dotdot_do_not_lead_out() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::os::unix::fs::symlink("/etc", tmp.path().join("link")).unwrap();
        let s = Source::open(tmp.path(), Path::new("/mnt")).unwrap();
        assert!(s.dir(Path::new("d")).is_ok());
        assert!(s.dir(Path::new("link")).is_err());
        assert!(s.dir(Path::new("../..")).is_err());
        assert!(s.dir(Path::new("d/../..")).is_err());
        assert!(s.dir(Path::new("")).is_ok());
    }
}

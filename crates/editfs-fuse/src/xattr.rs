//! Extended attributes, access checks and file system statistics of real
//! nodes, passed through to SOURCE; control files and `.editfs/` have none.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, Mode, OFlags};

use super::core::Core;
use super::nodes::{Kind, ROOT};
use super::types::{Errno, Requester, Res, errno};

impl Core {
    /// An open descriptor of a real node for extended attributes; `None` for a symlink.
    fn xattr_fd(&self, ino: u64) -> Res<Option<std::os::fd::OwnedFd>> {
        if ino == ROOT {
            return rustix::io::dup(self.source.root()).map(Some).map_err(errno);
        }
        // Opened again through the node's own file, checked to be it (see
        // `node_file`): by name, a file renamed over it would take the change.
        let node = self.node_file(ino)?;
        let st = rustix::fs::fstat(&node).map_err(errno)?;
        if super::core::file_type(st.st_mode) == super::types::FileType::Symlink {
            return Ok(None);
        }
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&node));
        rustix::fs::open(path.as_str(), flags, Mode::empty())
            .map(Some)
            .map_err(errno)
    }

    pub(super) fn real_only(&self, ino: u64) -> Res<()> {
        match self.kind(ino)? {
            Kind::Real => Ok(()),
            Kind::State(_) => Err(Errno::EROFS),
            Kind::Control { .. } => Err(Errno::EPERM),
        }
    }

    /// Whether `who` may change the `user.` attributes of `ino`: the kernel
    /// asked the permission bits the mount shows, so where SOURCE's file has an
    /// ACL the kernel is asked again with the caller's credentials, as for a
    /// write (other namespaces the kernel checks by capability or ownership).
    fn may_set(&self, ino: u64, who: Requester, name: &OsStr) -> Res<()> {
        match name.as_bytes().starts_with(b"user.") {
            true => self.may_open(who, ino, libc::O_WRONLY),
            false => Ok(()),
        }
    }

    /// Sets `name` with the `setxattr(2)` flags `flags`.
    pub(super) fn setxattr(
        &self,
        ino: u64,
        who: Requester,
        name: &OsStr,
        value: &[u8],
        flags: i32,
    ) -> Res<()> {
        self.real_only(ino)?;
        self.may_set(ino, who, name)?;
        match self.xattr_fd(ino)? {
            Some(fd) => {
                let how = rustix::fs::XattrFlags::from_bits_retain(flags as u32);
                rustix::fs::fsetxattr(&fd, name, value, how).map_err(errno)
            }
            None => Err(Errno::EPERM),
        }
    }

    pub(super) fn getxattr(&self, ino: u64, name: &OsStr) -> Res<Vec<u8>> {
        if self.kind(ino)? != Kind::Real {
            return Err(Errno::ENODATA);
        }
        let fd = self.xattr_fd(ino)?.ok_or(Errno::ENODATA)?;
        let c = std::ffi::CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)?;
        match rustix::fs::fgetxattr_query(&fd, &c) {
            Ok(_) => crate::store::xattr_value(fd.as_fd(), &c).ok_or(Errno::ENODATA),
            Err(e) => Err(errno(e)),
        }
    }

    /// The names of a node's extended attributes, each ended by a NUL.
    pub(super) fn listxattr(&self, ino: u64) -> Res<Vec<u8>> {
        if self.kind(ino)? != Kind::Real {
            return Ok(Vec::new());
        }
        Ok(match self.xattr_fd(ino)? {
            Some(fd) => crate::store::xattr_names(fd.as_fd())
                .into_iter()
                .flat_map(|n| n.into_bytes_with_nul())
                .collect(),
            None => Vec::new(),
        })
    }

    pub(super) fn removexattr(&self, ino: u64, who: Requester, name: &OsStr) -> Res<()> {
        self.real_only(ino)?;
        self.may_set(ino, who, name)?;
        match self.xattr_fd(ino)? {
            Some(fd) => rustix::fs::fremovexattr(&fd, name).map_err(errno),
            None => Err(Errno::EPERM),
        }
    }

    /// `access(2)` with `mask` (`R_OK | W_OK | X_OK`, or `F_OK`).
    pub(super) fn access(&self, ino: u64, mask: u32) -> Res<()> {
        match self.kind(ino)? {
            Kind::Real if ino == ROOT => Ok(()),
            Kind::Real => {
                let l = self.loc(ino)?;
                let how = rustix::fs::Access::from_bits_retain(mask);
                rustix::fs::accessat(l.dir(), &l.name, how, AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(errno)
            }
            _ => Ok(()),
        }
    }

    pub(super) fn statfs(&self) -> Res<rustix::fs::StatVfs> {
        rustix::fs::fstatvfs(self.source.root()).map_err(errno)
    }
}

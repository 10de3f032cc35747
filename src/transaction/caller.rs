//! The user a transaction is made for, and what the kernel lets that user do.
//!
//! A daemon run by root acts for users who are not. Before a transaction reads
//! or writes a file for one of them, the kernel itself is asked whether that user
//! could do so natively: the caller's uid, gid and groups are put on the
//! committing thread for the question (Linux keeps credentials per thread), so
//! modes, ACLs and capabilities count exactly as they would outside the mount.
//! editfs never derives permissions from modes itself.

use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::fs::{Access, AtFlags};
use rustix::process::{Gid, Uid};

/// The capability that keeps set-user-ID and set-group-ID bits across a write.
const CAP_FSETID: u32 = 4;

/// A process's credentials, as they were when it opened a control file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// It holds CAP_FSETID: its writes keep a file's set-id bits.
    pub fsetid: bool,
}

impl Caller {
    /// Process `pid` of user `uid` and group `gid`, its groups and capabilities
    /// read from /proc. A process that is gone counts as having no supplementary
    /// group and no capability: the narrower answer.
    pub fn of(uid: u32, gid: u32, pid: u32) -> Caller {
        use std::io::Read;
        // /proc gives no size: room for the whole text up front makes it one
        // read (and the one that finds its end), not eight growing ones.
        let mut status = String::with_capacity(4096);
        let read = std::fs::File::open(format!("/proc/{pid}/status"))
            .and_then(|mut f| f.read_to_string(&mut status));
        if read.is_err() {
            status.clear();
        }
        Caller::from_status(uid, gid, &status)
    }

    /// The caller of an edit of one file, read from /proc only where its commit
    /// can use what is there: the groups when the daemon will take on the
    /// caller's credentials (it is root and the caller is not), the capabilities
    /// when the file has a set-id bit to keep. Reading /proc/PID/status costs a
    /// few percent of an edit's round trip, and neither is needed for most
    /// edits. A set-id bit set on the file after the open is then cleared by the
    /// commit, as a write by a process without CAP_FSETID clears it: the narrower
    /// answer.
    pub fn of_editor(uid: u32, gid: u32, pid: u32, setid_file: bool) -> Caller {
        let switches = uid != 0 && rustix::process::geteuid().is_root();
        if switches || setid_file {
            return Caller::of(uid, gid, pid);
        }
        Caller::from_status(uid, gid, "")
    }

    fn from_status(uid: u32, gid: u32, status: &str) -> Caller {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_default()
        };
        let groups = field("Groups:")
            .split_whitespace()
            .filter_map(|g| g.parse().ok())
            .collect();
        let caps = u64::from_str_radix(field("CapEff:").trim(), 16).unwrap_or(0);
        Caller {
            uid,
            gid,
            groups,
            fsetid: caps & (1 << CAP_FSETID) != 0,
        }
    }

    /// Whether the caller may access the file or directory `fd` as `how` says,
    /// as the kernel decides for the caller's own credentials.
    pub fn may(&self, fd: BorrowedFd<'_>, how: Access) -> rustix::io::Result<()> {
        // The descriptor's own link in /proc leads to exactly its file, whatever
        // its names are by now (rustix takes no empty path with `faccessat2`).
        let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
        self.with(|| rustix::fs::accessat(rustix::fs::CWD, link.as_str(), how, AtFlags::EACCESS))?
    }

    /// Runs `f` with the caller's credentials on this thread, then puts the
    /// daemon's back. Only root can take on another user's credentials: a daemon
    /// run by anyone else runs `f` as itself, which never grants more than that
    /// user has. A switch that cannot be made runs nothing (EACCES).
    pub fn with<T>(&self, f: impl FnOnce() -> T) -> rustix::io::Result<T> {
        let me = rustix::process::geteuid();
        if !me.is_root() || self.uid == 0 {
            return Ok(f());
        }
        let _back = Switched::to(self)?;
        Ok(f())
    }
}

/// The caller's credentials on this thread while it lives; the daemon's again after.
struct Switched {
    groups: Vec<Gid>,
    gid: Gid,
}

impl Switched {
    fn to(c: &Caller) -> rustix::io::Result<Switched> {
        let back = Switched {
            groups: rustix::process::getgroups()?,
            gid: rustix::process::getegid(),
        };
        let groups: Vec<Gid> = c.groups.iter().map(|g| Gid::from_raw(*g)).collect();
        // Groups and group first: once the user is not root, neither can be set.
        let switched = rustix::thread::set_thread_groups(&groups)
            .and_then(|()| rustix::thread::set_thread_res_gid(None, Gid::from_raw(c.gid), None))
            .and_then(|()| rustix::thread::set_thread_res_uid(None, Uid::from_raw(c.uid), None));
        if let Err(e) = switched {
            drop(back);
            log::error!("cannot act as uid {}: {e}", c.uid);
            return Err(rustix::io::Errno::ACCESS);
        }
        Ok(back)
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        // The saved user id stays root, so root can always be taken back.
        let back = rustix::thread::set_thread_res_uid(None, Uid::ROOT, None)
            .and_then(|()| rustix::thread::set_thread_res_gid(None, self.gid, None))
            .and_then(|()| rustix::thread::set_thread_groups(&self.groups));
        if let Err(e) = back {
            log::error!("cannot take back the daemon's credentials on this thread: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_the_fsetid_capability_come_from_the_process_status() {
        let status = "Name:\tsh\nGroups:\t4 24 27 \nCapEff:\t0000000000000010\n";
        let c = Caller::from_status(1000, 1000, status);
        assert_eq!(c.groups, [4, 24, 27]);
        assert!(c.fsetid);
        let c = Caller::from_status(1000, 1000, "Groups:\t\nCapEff:\t0000000000000000\n");
        assert!(c.groups.is_empty() && !c.fsetid);
        assert_eq!(Caller::from_status(1, 1, ""), Caller::of(1, 1, u32::MAX));
    }

    #[test]
    fn an_editors_status_is_read_only_where_its_commit_uses_it() {
        let me = std::process::id();
        let full = Caller::of(0, 0, me);
        assert_eq!(Caller::of_editor(0, 0, me, true), full);
        let plain = Caller::of_editor(0, 0, me, false);
        assert!(plain.groups.is_empty() && !plain.fsetid);
        if rustix::process::geteuid().is_root() {
            assert_eq!(
                Caller::of_editor(1000, 1000, me, false),
                Caller::of(1000, 1000, me)
            );
        }
    }

    #[test]
    fn a_switched_thread_gets_the_callers_answer_and_then_its_own_again() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: no other user's credentials to take; skipping");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "x").unwrap();
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&path, private).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let fd = std::os::fd::AsFd::as_fd(&file);
        let nobody = Caller::of(65534, 65534, u32::MAX);
        assert_eq!(
            nobody.may(fd, Access::READ_OK),
            Err(rustix::io::Errno::ACCESS)
        );
        let root = Caller::of(0, 0, std::process::id());
        assert_eq!(root.may(fd, Access::READ_OK | Access::WRITE_OK), Ok(()));
        assert!(rustix::process::geteuid().is_root(), "root again after");
        assert_eq!(root.may(fd, Access::READ_OK), Ok(()));
    }
}

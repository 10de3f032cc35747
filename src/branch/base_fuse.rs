//! The base view as a FUSE file system: read-only, lookup, getattr,
//! readdir, read and readlink of `base.rs`'s answers. It passes no file
//! through to the kernel, so overlayfs takes it as a lower layer (see
//! docs/branches.md#how-a-branch-mount-is-built). What it shows never
//! changes, so the kernel keeps its answers and pages for long.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLseek, ReplyOpen, ReplyXattr, Request,
};
use parking_lot::Mutex;

use super::base::{At, Base};

/// The extended attributes the base view answers: POSIX ACLs alone.
const ACLS: [&str; 2] = ["system.posix_acl_access", "system.posix_acl_default"];

/// How long the kernel may keep an answer: the base never changes.
const TTL: Duration = Duration::from_secs(3600);

/// The paths handed out as inode numbers; the root is 1. Numbers are never
/// reused, so an answer the kernel kept stays true.
#[derive(Default)]
struct Inodes {
    by_path: HashMap<String, u64>,
    paths: Vec<String>,
}

impl Inodes {
    fn ino(&mut self, rel: &str) -> u64 {
        if self.paths.is_empty() {
            self.paths.push(String::new());
            self.by_path.insert(String::new(), 1);
        }
        if let Some(&ino) = self.by_path.get(rel) {
            return ino;
        }
        self.paths.push(rel.to_owned());
        let ino = self.paths.len() as u64;
        self.by_path.insert(rel.to_owned(), ino);
        ino
    }

    fn path(&self, ino: u64) -> Option<String> {
        match ino {
            1 => Some(String::new()),
            _ => self
                .paths
                .get(usize::try_from(ino).ok()?.checked_sub(1)?)
                .cloned(),
        }
    }
}

/// The base view served to the kernel.
pub struct BaseFs {
    base: Base,
    inodes: Mutex<Inodes>,
    /// The owner of what SOURCE no longer has (the branch's base time for
    /// its times): SOURCE's root's.
    owner: (u32, u32),
    time: SystemTime,
}

fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_i32(e.raw_os_error())
}

impl BaseFs {
    pub fn new(base: Base, owner: (u32, u32), time: SystemTime) -> BaseFs {
        BaseFs {
            base,
            inodes: Mutex::new(Inodes::default()),
            owner,
            time,
        }
    }

    /// ACL `name` of node `ino` at the base, `None` when it has none; any
    /// other attribute is none the base view has.
    fn acl(&self, ino: INodeNo, name: &OsStr) -> Result<Option<Vec<u8>>, Errno> {
        if !ACLS.iter().any(|a| OsStr::new(a) == name) {
            return Ok(None);
        }
        let name = std::ffi::CString::new(name.as_encoded_bytes()).map_err(|_| Errno::EINVAL)?;
        self.base.acl(&self.path(ino)?, &name).map_err(errno)
    }

    fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        self.inodes.lock().path(ino.0).ok_or(Errno::ENOENT)
    }

    /// The attributes of `rel` at the base, with its inode number. A name
    /// is numbered only once it is found: lookups of names that never were
    /// (any number an agent may make up) leave nothing behind, so the table
    /// holds at most the base's own names.
    fn attr(&self, rel: &str) -> Result<FileAttr, Errno> {
        let at = self.base.at(rel).map_err(errno)?;
        let mut a = FileAttr {
            ino: INodeNo(0),
            size: 0,
            blocks: 0,
            atime: self.time,
            mtime: self.time,
            ctime: self.time,
            crtime: self.time,
            kind: FileType::Directory,
            perm: 0o755,
            nlink: 1,
            uid: self.owner.0,
            gid: self.owner.1,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        };
        let from = |a: &mut FileAttr, st: &rustix::fs::Stat| {
            a.perm = (st.st_mode & 0o7777) as u16;
            a.uid = st.st_uid;
            a.gid = st.st_gid;
        };
        match at {
            At::Absent => return Err(Errno::ENOENT),
            At::Removed { closed } => a.perm = if closed { 0o700 } else { 0o755 },
            At::Dir(st) => {
                if let Some(st) = st {
                    from(&mut a, &st);
                    a.mtime = time(st.st_mtime, st.st_mtime_nsec);
                    a.ctime = a.mtime;
                }
            }
            At::Source(st) => {
                from(&mut a, &st);
                a.kind = kind(rustix::fs::FileType::from_raw_mode(st.st_mode));
                a.size = st.st_size as u64;
                a.blocks = st.st_blocks as u64;
                a.mtime = time(st.st_mtime, st.st_mtime_nsec);
                a.ctime = a.mtime;
            }
            At::Kept(bytes, then) => {
                a.kind = FileType::RegularFile;
                a.perm = then.mode as u16;
                a.uid = then.uid;
                a.gid = then.gid;
                a.size = bytes.len() as u64;
                a.blocks = a.size.div_ceil(512);
            }
        }
        a.ino = INodeNo(self.inodes.lock().ino(rel));
        Ok(a)
    }
}

fn time(secs: i64, nsecs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::new(secs.max(0) as u64, nsecs.min(999_999_999) as u32)
}

fn kind(t: rustix::fs::FileType) -> FileType {
    use rustix::fs::FileType as T;
    match t {
        T::Directory => FileType::Directory,
        T::Symlink => FileType::Symlink,
        T::Fifo => FileType::NamedPipe,
        T::Socket => FileType::Socket,
        T::CharacterDevice => FileType::CharDevice,
        T::BlockDevice => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

fn child(parent: &str, name: &OsStr) -> Result<String, Errno> {
    let name = name.to_str().ok_or(Errno::ENOENT)?;
    Ok(match parent {
        "" => name.to_owned(),
        p => format!("{p}/{name}"),
    })
}

impl Filesystem for BaseFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.path(parent).and_then(|p| self.attr(&child(&p, name)?)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.path(ino).and_then(|p| self.attr(&p)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self
            .path(ino)
            .and_then(|p| self.base.link(&p).map_err(errno))
        {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(e),
        }
    }

    /// What never changes is cached by the kernel as long as it likes:
    /// names, links, directory listings; opening a file costs no request.
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // POSIX ACLs: the kernel asks for SOURCE's (`getxattr`) and
        // overlayfs above checks them.
        let want = InitFlags::FUSE_NO_OPEN_SUPPORT
            | InitFlags::FUSE_CACHE_SYMLINKS
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_POSIX_ACL;
        if let Err(missing) = config.add_capabilities(want) {
            let _ = config.add_capabilities(want - missing);
        }
        Ok(())
    }

    /// Not implemented, so the kernel opens files itself from then on,
    /// keeping their pages (see `init`); the mount is read-only, so no
    /// open for writing comes here.
    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.error(Errno::ENOSYS);
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(
            FileHandle(0),
            FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR,
        );
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let read = self
            .path(ino)
            .and_then(|p| self.base.read(&p, offset, size as usize).map_err(errno));
        match read {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let listed = self
            .path(ino)
            .and_then(|p| Ok((self.base.list(&p).map_err(errno)?, p)));
        let (names, dir) = match listed {
            Ok(found) => found,
            Err(e) => return reply.error(e),
        };
        let parent = Path::new(&dir)
            .parent()
            .and_then(Path::to_str)
            .unwrap_or("")
            .to_owned();
        let mut entries = vec![
            (ino.0, FileType::Directory, ".".to_owned()),
            (
                self.inodes.lock().ino(&parent),
                FileType::Directory,
                "..".to_owned(),
            ),
        ];
        for (name, t) in names {
            let rel = child(&dir, OsStr::new(&name)).unwrap_or_default();
            entries.push((self.inodes.lock().ino(&rel), kind(t), name));
        }
        for (i, (ino, t, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, t, &name) {
                break;
            }
        }
        reply.ok();
    }

    /// overlayfs asks for a file's flags as it copies it up: it has none
    /// (answered quietly; fuser's default logs each call).
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY);
    }

    /// The calls below are answered "not implemented" quietly (fuser's
    /// defaults log each): the kernel stops sending them, and does without.
    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let value = self.acl(ino, name).and_then(|v| v.ok_or(Errno::NO_XATTR));
        match value {
            Err(e) => reply.error(e),
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
            Ok(v) => reply.data(&v),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let mut names = Vec::new();
        for name in ACLS {
            match self.acl(ino, OsStr::new(name)) {
                Ok(Some(_)) => {
                    names.extend_from_slice(name.as_bytes());
                    names.push(0);
                }
                Ok(None) => {}
                Err(e) => return reply.error(e),
            }
        }
        match size {
            0 => reply.size(names.len() as u32),
            s if names.len() > s as usize => reply.error(Errno::ERANGE),
            _ => reply.data(&names),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.error(Errno::ENOSYS);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: i64,
        _whence: i32,
        reply: ReplyLseek,
    ) {
        reply.error(Errno::ENOSYS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Retention, Store};

    #[test]
    fn a_name_that_was_never_there_is_not_numbered() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "a\n").unwrap();
        let store = Store::open_with(&tmp.path().join(".editfs"), Retention::default()).unwrap();
        let root = crate::store::open_dir(tmp.path()).unwrap();
        let base = Base::new(root, vec![".editfs".into()], std::sync::Arc::new(store), 0);
        let fs = BaseFs::new(base, (0, 0), SystemTime::now());
        for i in 0..100 {
            assert_eq!(fs.attr(&format!("made-up-{i}")).err(), Some(Errno::ENOENT));
        }
        assert!(fs.attr("a.txt").is_ok());
        assert_eq!(fs.inodes.lock().paths.len(), 2, "the root and a.txt");
    }
}

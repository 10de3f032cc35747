//! The kernel mount: a FUSE connection attached at MOUNT, and taken off MOUNT
//! only while the mount standing there is still that connection.
//!
//! fuser's own mount handle unmounts MOUNT *by path* when its session ends,
//! even after someone else has unmounted it (it reads the POLLERR of a closed
//! connection as "still mounted"). A new mount made at MOUNT in that moment
//! (`editfs unmount`, then `mount -T` at once) was taken off with the old one:
//! it had said "mounted", and writes then went straight to the directory
//! beneath, past `--edits-only` and every snapshot. So editfs attaches the
//! connection itself, hands fuser only its descriptor, and unmounts only its
//! own mount, named by a descriptor of its root rather than by MOUNT's path.
//!
//! A connection is known by its device's minor number, which the kernel gives
//! back for reuse once the connection ends: the number alone could name a
//! newer mount. While the connection is alive the number is its own, so
//! "the topmost mount at MOUNT has its number, and it is alive" is the test.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

use fuser::{MountOption, SessionACL};
use rustix::event::{PollFd, PollFlags};
use rustix::fs::OFlags;
use rustix::mount::{MountFlags, UnmountFlags};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SocketFlags, SocketType,
};

use super::rescue::{abort_connection, connection_of};

/// The environment variable through which fusermount finds the socket to send
/// the connection's descriptor on.
const COMM_ENV: &str = "_FUSE_COMMFD";

/// The setuid helpers that mount for users who may not call mount(2).
const FUSERMOUNT: [&str; 2] = ["fusermount3", "fusermount"];

/// A connection attached at a mount point.
pub struct Attached {
    mnt: PathBuf,
    connection: u32,
    /// A descriptor of the connection kept to ask whether it is still alive;
    /// fuser owns the one the session reads.
    probe: OwnedFd,
    /// With `auto_unmount`, fusermount waits on this socket and unmounts once
    /// the daemon (and so the socket) is gone.
    _auto_unmount: Option<OwnedFd>,
}

impl Attached {
    /// Mounts a new FUSE connection at `mnt` (canonical, not a mount point)
    /// and gives back the descriptor the session is to serve.
    pub fn new(
        mnt: &Path,
        options: &[MountOption],
        acl: SessionACL,
    ) -> io::Result<(OwnedFd, Attached)> {
        let auto_unmount = options.contains(&MountOption::AutoUnmount);
        let direct = if auto_unmount {
            None
        } else {
            mount_directly(mnt, options, acl)?
        };
        let (fd, socket) = match direct {
            Some(fd) => (fd, None),
            None => by_fusermount(mnt, options, acl, auto_unmount)?,
        };
        // The point was refused when already a mount: the topmost one is ours.
        let connection = connection_of(mnt)
            .ok_or_else(|| io::Error::other("the new mount is not in /proc/self/mountinfo"))?;
        let probe = fd.try_clone()?;
        let attached = Attached {
            mnt: mnt.to_owned(),
            connection,
            probe,
            _auto_unmount: socket.filter(|_| auto_unmount),
        };
        Ok((fd, attached))
    }

    pub fn mount_point(&self) -> &Path {
        &self.mnt
    }

    /// Whether the mount at MOUNT is still this connection: the topmost mount
    /// there, and alive. The table is read first: a connection alive after it
    /// was read still had its number then, which no other mount can have held.
    pub fn ours(&self) -> bool {
        connection_of(&self.mnt) == Some(self.connection) && alive(&self.probe)
    }

    /// Takes this connection's mount off MOUNT if it is still the topmost mount
    /// there; else leaves MOUNT alone, whoever mounted it. The mount is named by
    /// a descriptor of its root, checked to be this connection's, not by the
    /// path, which may hold a new mount by the time umount(2) reads it. A
    /// descriptor makes the mount busy, so it is detached: it leaves at once,
    /// and the connection ends when the last file open in it is closed.
    pub fn detach(&self) {
        let Some(root) = self.own_root() else {
            return log::info!(
                "{} is no longer this daemon's mount: left as it is",
                self.mnt.display()
            );
        };
        let by_root = format!("/proc/self/fd/{}", root.as_raw_fd());
        let done = match rustix::mount::unmount(by_root.as_str(), UnmountFlags::DETACH) {
            // A daemon that may not call umount(2) has fusermount do it, which
            // knows only paths: the check above is the most it can have.
            Err(rustix::io::Errno::PERM) => fusermount_unmount(&self.mnt),
            other => other.map_err(io::Error::from),
        };
        if let Err(e) = done {
            log::error!("cannot unmount {}: {e}", self.mnt.display());
        }
    }

    /// Ends this connection whether or not its mount is still the topmost one
    /// at MOUNT: detached when it is, else (another mount was made on top of
    /// it) aborted, so the session ends rather than serve a mount no one can
    /// reach. A connection already ended is left as it is.
    pub fn end(&self) {
        if !alive(&self.probe) {
            return;
        }
        if self.own_root().is_some() {
            return self.detach();
        }
        match abort_connection(self.connection) {
            Ok(()) => log::info!("aborted this daemon's FUSE connection {}", self.connection),
            Err(e) => log::error!(
                "cannot end this daemon's FUSE connection {} (hidden under another mount at {}): {e}",
                self.connection,
                self.mnt.display()
            ),
        }
    }

    /// A descriptor of the root of the topmost mount at MOUNT, if that mount is
    /// this live connection's: its device is the connection's number, which no
    /// other mount has while the connection lives.
    fn own_root(&self) -> Option<OwnedFd> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let root = rustix::fs::open(&self.mnt, flags, rustix::fs::Mode::empty()).ok()?;
        let dev = rustix::fs::fstat(&root).ok()?.st_dev;
        let own = rustix::fs::major(dev) == 0 && rustix::fs::minor(dev) == self.connection;
        (own && alive(&self.probe)).then_some(root)
    }
}

/// Whether the connection still serves: the kernel flags a connection that
/// was unmounted or aborted with POLLERR.
fn alive(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::empty())];
    loop {
        match rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())) {
            Ok(_) => {
                return !fds[0]
                    .revents()
                    .intersects(PollFlags::ERR | PollFlags::NVAL);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

/// mount(2) of a new connection, as root may. `None` when not permitted, for
/// fusermount to try.
fn mount_directly(
    mnt: &Path,
    options: &[MountOption],
    acl: SessionACL,
) -> io::Result<Option<OwnedFd>> {
    let flags = rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC;
    let dev = match rustix::fs::open("/dev/fuse", flags, rustix::fs::Mode::empty()) {
        Ok(dev) => dev,
        Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) => return Ok(None),
        Err(e) => {
            return Err(io::Error::other(format!(
                "/dev/fuse: {e} (is the fuse module loaded?)"
            )));
        }
    };
    let rootmode = rustix::fs::stat(mnt)?.st_mode & libc::S_IFMT;
    let mut data = format!(
        "fd={},rootmode={rootmode:o},user_id={},group_id={}",
        std::os::fd::AsRawFd::as_raw_fd(&dev),
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let mut flags = MountFlags::NOSUID | MountFlags::NODEV;
    let (mut source, mut subtype) = (String::from("editfs"), String::from("editfs"));
    for o in options {
        match o {
            MountOption::FSName(v) => source.clone_from(v),
            MountOption::Subtype(v) => subtype.clone_from(v),
            MountOption::Dev => flags.remove(MountFlags::NODEV),
            MountOption::Suid => flags.remove(MountFlags::NOSUID),
            MountOption::NoDev => flags |= MountFlags::NODEV,
            MountOption::NoSuid => flags |= MountFlags::NOSUID,
            MountOption::RO => flags |= MountFlags::RDONLY,
            MountOption::NoExec => flags |= MountFlags::NOEXEC,
            MountOption::NoAtime => flags |= MountFlags::NOATIME,
            MountOption::Sync => flags |= MountFlags::SYNCHRONOUS,
            MountOption::DirSync => flags |= MountFlags::DIRSYNC,
            MountOption::DefaultPermissions => data.push_str(",default_permissions"),
            MountOption::CUSTOM(v) => {
                data.push(',');
                data.push_str(v);
            }
            _ => {}
        }
    }
    if acl != SessionACL::Owner {
        data.push_str(",allow_other");
    }
    let fstype = format!("fuse.{subtype}");
    let data_c = std::ffi::CString::new(data.as_str()).map_err(io::Error::other)?;
    match rustix::mount::mount(
        source.as_str(),
        mnt,
        fstype.as_str(),
        flags,
        Some(data_c.as_c_str()),
    ) {
        Ok(()) => Ok(Some(dev)),
        Err(rustix::io::Errno::PERM) => Ok(None),
        Err(e) => Err(io::Error::other(format!(
            "mount(2) of {fstype} with {data}: {e}"
        ))),
    }
}

/// Has the setuid fusermount mount the connection and send its descriptor
/// back over a socket. With `auto_unmount` the socket is kept: fusermount
/// stays to unmount once it closes.
fn by_fusermount(
    mnt: &Path,
    options: &[MountOption],
    acl: SessionACL,
    auto_unmount: bool,
) -> io::Result<(OwnedFd, Option<OwnedFd>)> {
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // fusermount inherits its end by number.
    rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty())?;
    let mut text: Vec<String> = options.iter().map(fusermount_option).collect();
    if acl != SessionACL::Owner {
        text.push("allow_other".into());
    }
    let mut child = spawn_fusermount(|c| {
        c.arg("-o").arg(text.join(",")).arg("--").arg(mnt).env(
            COMM_ENV,
            std::os::fd::AsRawFd::as_raw_fd(&theirs).to_string(),
        )
    })?;
    drop(theirs);
    let fd = receive_fd(&ours);
    if auto_unmount {
        // It lives until the socket closes; reap it then, off every other path.
        std::thread::spawn(move || child.wait());
    } else {
        let status = child.wait()?;
        if !status.success() && fd.is_err() {
            return Err(io::Error::other(format!("fusermount failed ({status})")));
        }
    }
    Ok((fd?, Some(ours)))
}

/// A mount option as fusermount reads it.
fn fusermount_option(o: &MountOption) -> String {
    match o {
        MountOption::FSName(v) => format!("fsname={v}"),
        MountOption::Subtype(v) => format!("subtype={v}"),
        MountOption::CUSTOM(v) => v.clone(),
        MountOption::AutoUnmount => "auto_unmount".into(),
        MountOption::DefaultPermissions => "default_permissions".into(),
        MountOption::Dev => "dev".into(),
        MountOption::NoDev => "nodev".into(),
        MountOption::Suid => "suid".into(),
        MountOption::NoSuid => "nosuid".into(),
        MountOption::RO => "ro".into(),
        MountOption::RW => "rw".into(),
        MountOption::Exec => "exec".into(),
        MountOption::NoExec => "noexec".into(),
        MountOption::Atime => "atime".into(),
        MountOption::NoAtime => "noatime".into(),
        MountOption::DirSync => "dirsync".into(),
        MountOption::Sync => "sync".into(),
        MountOption::Async => "async".into(),
    }
}

/// Runs the first fusermount found, as `args` sets it up.
fn spawn_fusermount(
    args: impl Fn(&mut Command) -> &mut Command,
) -> io::Result<std::process::Child> {
    let mut last = io::Error::other("no fusermount3 or fusermount found");
    for tool in FUSERMOUNT {
        match args(&mut Command::new(tool)).spawn() {
            Ok(child) => return Ok(child),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The one descriptor fusermount sends.
fn receive_fd(socket: &OwnedFd) -> io::Result<OwnedFd> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    rustix::net::recvmsg(
        socket.as_fd(),
        &mut iov,
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    control
        .drain()
        .find_map(|m| match m {
            RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
            _ => None,
        })
        .ok_or_else(|| io::Error::other("fusermount sent no descriptor (see its message above)"))
}

/// `fusermount -u -z MOUNT`, for a daemon that may not call umount(2).
fn fusermount_unmount(mnt: &Path) -> io::Result<()> {
    let status = spawn_fusermount(|c| c.arg("-u").arg("-z").arg(mnt))?.wait()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("fusermount -u failed ({status})")))
    }
}

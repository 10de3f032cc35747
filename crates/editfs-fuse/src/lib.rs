//! `editfs mount`: SOURCE mirrored at MOUNT, with control files next to every file.
//!
//! Start-up follows libfuse's passthrough_hp: check SOURCE and MOUNT, open the
//! state directory, raise the descriptor limit, mount, install the signal
//! handlers, tell the caller the mount is ready, serve until unmounted.

#![forbid(unsafe_code)]

use editfs_engine as engine;
use editfs_store as store;
use editfs_transaction::{self as transaction, history};

mod attach;
mod budget;
mod commit_gate;
mod commits;
mod control;
mod core;
mod dirs;
mod edit_buffer;
mod edit_fs;
mod first_read;
mod fuse;
mod handles;
mod ignored;
#[cfg(test)]
mod in_process;
mod kept_access;
mod kernel_cache;
mod listings;
mod moved;
mod names;
mod nodes;
mod options;
mod owner;
mod passthrough;
mod prefetch;
mod preimage;
mod preimage_rules;
mod processes;
mod ranges;
mod real_files;
mod replaced;
mod reports;
mod requests;
mod rescue;
mod source;
mod stale_retries;
mod state;
mod status_files;
pub mod table;
mod types;
mod watch;
mod watches;
mod xattr;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use fuser::Config;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

pub use self::core::Settings;
pub use budget::BufferCaps;
pub use ignored::GitIgnores;
pub use names::Suffixes;
pub use options::{BadOption, check_options};
pub use preimage_rules::Policy;
pub use rescue::rescue;

/// The payload form an agent's prompt teaches: the one the agent was trained
/// to write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// SEARCH/REPLACE marker blocks to `F.edit`.
    #[default]
    SearchReplace,
    /// `*** Begin Patch` or unified diffs to `.editfs/edit`.
    Patch,
    /// JSON edits to `F.edit`.
    Json,
}

/// The section for an agent's system prompt in `dialect`, naming the mount
/// point `mountpoint`: what `editfs prompt` prints. `MOUNT/.editfs/README`
/// begins with the marker-block one, so an agent that reads it first learns
/// what its operator would say.
pub fn agent_prompt(dialect: Dialect, mountpoint: &str) -> String {
    let text = match dialect {
        Dialect::SearchReplace => include_str!("agent-prompt.md"),
        Dialect::Patch => include_str!("agent-prompt-patch.md"),
        Dialect::Json => include_str!("agent-prompt-json.md"),
    };
    text.replace("MOUNT", mountpoint)
}

use crate::store::{Came, Retention, STATE_DIR, Store, StoreError, hold};

/// Everything `editfs mount` was asked to do.
pub struct MountConfig {
    pub source: PathBuf,
    pub mountpoint: PathBuf,
    pub state_dir: Option<PathBuf>,
    pub settings: Settings,
    /// `-o` options, one per element (already split at commas).
    pub options: Vec<String>,
    pub threads: usize,
    pub retention: Retention,
}

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("SOURCE {}: {reason}", path.display())]
    Source { path: PathBuf, reason: String },
    #[error("mount point {}: {reason}", path.display())]
    MountPoint { path: PathBuf, reason: String },
    #[error("state directory: {0}")]
    Store(#[from] StoreError),
    #[error("state directory {}: {reason}", path.display())]
    StateDir { path: PathBuf, reason: String },
    #[error("state directory {}: {source}", state.display())]
    Owner {
        state: PathBuf,
        source: owner::OwnerError,
    },
    #[error("cannot mount {} on {}: {source}", from.display(), on.display())]
    Mount {
        from: PathBuf,
        on: PathBuf,
        source: io::Error,
    },
    #[error("-o: {0}")]
    Options(options::BadOption),
    #[error("{0}; nothing was announced as mounted")]
    NotReady(NotReady),
    #[error("cannot install signal handlers: {0}")]
    Signals(io::Error),
}

/// Why a mount was not taken off.
#[derive(Debug, thiserror::Error)]
pub enum UnmountError {
    #[error("is not mounted: nothing to unmount")]
    NotMounted,
    #[error("no fusermount3 or fusermount found")]
    NoTool,
    /// What fusermount said.
    #[error("{0}")]
    Refused(String),
}

/// Why a new mount was never announced as ready.
#[derive(Clone, Debug, thiserror::Error)]
pub enum NotReady {
    #[error("the new mount at {} does not answer statfs: {errno}", at.display())]
    Silent {
        at: PathBuf,
        errno: rustix::io::Errno,
    },
    #[error("the new mount at {} was unmounted before it was ready (someone else's unmount or mount there)", at.display())]
    Gone { at: PathBuf },
}

/// A directory, canonical, or why it is not one.
fn directory(path: &Path) -> io::Result<PathBuf> {
    let real = std::fs::canonicalize(path)?;
    if !real.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "not a directory",
        ));
    }
    Ok(real)
}

/// The file system type and source mounted at `path`, if something is (the
/// newest mount there). A dead FUSE mount answers nothing, not even a stat, so
/// its path is then made canonical through its parent.
pub fn mounted_at(path: &Path) -> Option<String> {
    let abs = match std::fs::canonicalize(path) {
        Ok(real) => real,
        Err(_) => {
            let abs = std::path::absolute(path).ok()?;
            match (abs.parent(), abs.file_name()) {
                (Some(dir), Some(name)) => std::fs::canonicalize(dir).ok()?.join(name),
                _ => abs,
            }
        }
    };
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table.lines().rev().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let at = unescape(left.split(' ').nth(4)?);
        // "fuse editfs:/src rw,...": the type, then what is mounted.
        (Path::new(&at) == abs).then(|| right.split(' ').take(2).collect::<Vec<_>>().join(" "))
    })
}

/// A mountinfo path, with its `\040`-style escapes undone.
fn unescape(field: &str) -> String {
    let mut out = Vec::new();
    let b = field.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok());
        match oct.and_then(|d| u8::from_str_radix(d, 8).ok()) {
            Some(c) if b[i] == b'\\' => {
                out.push(c);
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why MOUNT cannot take a new mount because one is already there.
fn in_use(mountpoint: &Path, what: &str) -> String {
    let shown = mountpoint.display();
    let kind = if what.contains("editfs") {
        "editfs"
    } else {
        "FUSE"
    };
    // statfs always reaches the daemon; a stat may be answered from the cache.
    match rustix::fs::statfs(mountpoint) {
        Err(rustix::io::Errno::NOTCONN) => format!(
            "a dead {kind} mount (its daemon is gone, e.g. killed); `editfs unmount {shown}` clears it"
        ),
        _ => format!("already a mount point ({what}); unmount it first"),
    }
}

/// Checks SOURCE and MOUNT; both come back canonical.
pub fn check_paths(source: &Path, mountpoint: &Path) -> Result<(PathBuf, PathBuf), MountError> {
    let src = directory(source).map_err(|e| MountError::Source {
        path: source.to_owned(),
        reason: e.to_string(),
    })?;
    if let Some(fstype) = mounted_at(mountpoint) {
        return Err(MountError::MountPoint {
            path: mountpoint.to_owned(),
            reason: in_use(mountpoint, &fstype),
        });
    }
    let mnt = directory(mountpoint).map_err(|e| MountError::MountPoint {
        path: mountpoint.to_owned(),
        reason: e.to_string(),
    })?;
    if mnt.starts_with(&src) {
        let reason = "must not be SOURCE or inside it: the mirror would contain itself".to_owned();
        return Err(MountError::MountPoint {
            path: mountpoint.to_owned(),
            reason,
        });
    }
    Ok((src, mnt))
}

/// The state directory the mount uses, SOURCE being canonical.
///
/// One inside SOURCE under another name than `.editfs` is refused: the mount would
/// show it as an ordinary directory, so any user of the mount could read every kept
/// version (whatever its file's mode) and write the counter or the log.
///
/// One that exists already is used only as `store::trust` allows: the default
/// one when owned by the daemon's user or root and writable by no one else, and
/// either with no symbolic link inside, so a user who could write SOURCE before
/// the mount cannot have planted one that leads the daemon's writes elsewhere.
pub fn state_dir(source: &Path, explicit: Option<&Path>) -> Result<PathBuf, MountError> {
    let default = source.join(STATE_DIR);
    let (dir, came) = match explicit {
        Some(dir) => (dir, Came::Given),
        None => (default.as_path(), Came::Found),
    };
    match hold(dir, came, true) {
        Err(e) if !e.missing() => {
            let hint = match came {
                Came::Found => "; name it with --state-dir to use it anyway",
                Came::Given => "",
            };
            return Err(MountError::StateDir {
                path: dir.to_owned(),
                reason: format!("not used: {e}{hint}"),
            });
        }
        _ => {}
    }
    let Some(dir) = explicit else {
        return Ok(source.join(STATE_DIR));
    };
    let real = canonical_to_be(dir);
    if real.starts_with(source) && real != source.join(STATE_DIR) {
        return Err(MountError::StateDir {
            path: dir.to_owned(),
            reason: format!(
                "must not be inside SOURCE ({}): the mount would show it to every user of the mount; \
                 keep it outside SOURCE, or leave it out to use SOURCE/{STATE_DIR}, which the mount hides",
                source.display()
            ),
        });
    }
    Ok(dir.to_owned())
}

/// `path` made canonical as far as it exists, the missing rest joined on as given,
/// so a directory yet to be created is placed where it will be.
fn canonical_to_be(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut missing = Vec::new();
    let mut at = abs.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return missing.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                at = parent;
            }
            _ => return abs,
        }
    }
}

/// Lets the daemon hold as many descriptors as the system allows: one per open file.
fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current != lim.maximum {
        lim.current = lim.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, lim) {
            log::warn!("cannot raise the open file limit: {e}");
        }
    }
}

/// Why a mount that started stopped serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// SIGINT, SIGTERM or SIGHUP arrived and the mount was unmounted.
    Signal(i32),
    /// Someone unmounted it: `editfs unmount`, umount(8), fusermount3 -u.
    Unmounted,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Signal(sig) => {
                let name = signal_hook::low_level::signal_name(*sig).unwrap_or("a signal");
                write!(f, "{name} received; unmounted")
            }
            Stopped::Unmounted => f.write_str("unmounted from outside (editfs unmount, umount)"),
        }
    }
}

/// Tells systemd (when it started us with `Type=notify`) how the service is doing;
/// without NOTIFY_SOCKET this does nothing.
fn tell_systemd(state: sd_notify::NotifyState) {
    if let Err(e) = sd_notify::notify(&[state]) {
        log::warn!("cannot notify systemd: {e}");
    }
}

/// Mounts and serves until unmounted (by `editfs unmount`, SIGINT or SIGTERM).
/// `ready` runs once, from another thread: with `Ok` once the mount answers a
/// request (the kernel queues requests until the session loop runs, so only a
/// request that came back proves the mount usable), else with why it never
/// will, `serve` then returning that error once the session has ended.
pub fn serve(
    cfg: MountConfig,
    ready: impl FnOnce(Result<(), NotReady>) + Send + 'static,
) -> Result<Stopped, MountError> {
    let (src, mnt) = check_paths(&cfg.source, &cfg.mountpoint)?;
    let state = state_dir(&src, cfg.state_dir.as_deref())?;
    // Before the store opens: its recovery must never run under a live daemon.
    let _owner = owner::Owner::take(&state, &mnt).map_err(|source| MountError::Owner {
        state: state.clone(),
        source,
    })?;
    let store = Store::open_with(&state, cfg.retention)?;
    if !store.recovered().is_empty() {
        eprintln!("editfs: {}", store.recovered());
    }
    raise_fd_limit();
    let source = source::Source::open(&src, &mnt).map_err(|e| MountError::Source {
        path: src.clone(),
        reason: e.to_string(),
    })?;
    let notifier = Arc::new(OnceLock::new());
    let fs = self::edit_fs::EditFs::new(source, store, cfg.settings, notifier.clone());
    let on_exit = fs.on_exit();
    let (mount_options, acl) =
        options::fuse_options(&src, &cfg.options).map_err(MountError::Options)?;
    let mut config = Config::default();
    config.n_threads = Some(cfg.threads.max(1));
    config.clone_fd = true;
    rescue::watch(&mnt);
    // Before the mount: a signal sent as soon as the mount shows (a test, a
    // service manager) is then kept for the thread below, not the default
    // action that would end the daemon and leave the mount dead.
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(MountError::Signals)?;
    let cannot_mount = |source| MountError::Mount {
        from: src.clone(),
        on: mnt.clone(),
        source,
    };
    let (fd, attached) = attach::Attached::new(&mnt, &mount_options, acl).map_err(cannot_mount)?;
    let attached = Arc::new(attached);
    let session = fuser::Session::from_fd(fuse::Fuse(fs), fd, acl, config).map_err(|e| {
        attached.detach();
        cannot_mount(e)
    });
    let session = session?;
    let _ = notifier.set(Box::new(fuse::Notify(session.notifier())));
    let signalled = Arc::new(OnceLock::new());
    watch_signals(signals, attached.clone(), signalled.clone())?;
    let not_ready = Arc::new(OnceLock::new());
    announce_when_answering(attached.clone(), ready, not_ready.clone())?;
    let served = session.run();
    tell_systemd(sd_notify::NotifyState::Stopping);
    // After an unmount from outside this finds the mount gone and touches
    // nothing: MOUNT may already hold a new mount.
    attached.detach();
    on_exit.run();
    served.map_err(cannot_mount)?;
    // A signal that came while the mount was starting took it off before it
    // was ready: that is the stop asked for, not a failure.
    match (signalled.get(), not_ready.get()) {
        (Some(&sig), _) => Ok(Stopped::Signal(sig)),
        (None, Some(reason)) => Err(MountError::NotReady(reason.clone())),
        (None, None) => Ok(Stopped::Unmounted),
    }
}

/// Unmounts on SIGINT, SIGTERM or SIGHUP, recording which one came.
fn watch_signals(
    mut signals: Signals,
    attached: Arc<attach::Attached>,
    signalled: Arc<OnceLock<i32>>,
) -> Result<(), MountError> {
    std::thread::Builder::new()
        .name("editfs-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                log::info!("signal {sig}: unmounting");
                let _ = signalled.set(sig);
                tell_systemd(sd_notify::NotifyState::Stopping);
                attached.detach();
            }
        })
        .map_err(MountError::Signals)?;
    Ok(())
}

/// Runs `ready` with `Ok` and tells systemd READY=1 once the mount is ready: a
/// statfs of MOUNT has been answered (statfs always reaches the filesystem, so
/// through this session) and the topmost mount there is still this daemon's.
/// A mount that does not get there is never announced: `ready` gets the reason
/// at once, so no caller waits on, the reason is kept in `not_ready` for
/// `serve` to fail with, and the connection is ended so the session stops.
fn announce_when_answering(
    attached: Arc<attach::Attached>,
    ready: impl FnOnce(Result<(), NotReady>) + Send + 'static,
    not_ready: Arc<OnceLock<NotReady>>,
) -> Result<(), MountError> {
    std::thread::Builder::new()
        .name("editfs-ready".into())
        .spawn(move || match readiness(&attached) {
            Ok(()) => {
                log::info!("mounted on {}", attached.mount_point().display());
                ready(Ok(()));
                tell_systemd(sd_notify::NotifyState::Ready);
            }
            Err(why) => {
                log::error!("{why}");
                let _ = not_ready.set(why.clone());
                ready(Err(why));
                attached.end();
            }
        })
        .map_err(MountError::Signals)?;
    Ok(())
}

/// Whether the new mount answers and is in the mount table as this daemon's.
fn readiness(attached: &attach::Attached) -> Result<(), NotReady> {
    let at = || attached.mount_point().to_owned();
    rustix::fs::statfs(attached.mount_point())
        .map_err(|errno| NotReady::Silent { at: at(), errno })?;
    if !attached.ours() {
        return Err(NotReady::Gone { at: at() });
    }
    Ok(())
}

/// Unmounts an editfs mount (a dead one too): directly when allowed, else
/// through fusermount.
pub fn unmount(mountpoint: &Path) -> Result<(), UnmountError> {
    if mounted_at(mountpoint).is_none() {
        return Err(UnmountError::NotMounted);
    }
    if rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::empty()).is_ok() {
        return Ok(());
    }
    let mut last = UnmountError::NoTool;
    for tool in ["fusermount3", "fusermount"] {
        match std::process::Command::new(tool)
            .arg("-u")
            .arg(mountpoint)
            .output()
        {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => {
                last = UnmountError::Refused(String::from_utf8_lossy(&out.stderr).trim().to_owned())
            }
            Err(_) => {}
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_point_inside_source_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("m")).unwrap();
        assert!(matches!(
            check_paths(tmp.path(), &tmp.path().join("m")),
            Err(MountError::MountPoint { .. })
        ));
        assert!(matches!(
            check_paths(&tmp.path().join("nope"), tmp.path()),
            Err(MountError::Source { .. })
        ));
    }

    #[test]
    fn a_state_dir_inside_source_under_another_name_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let src = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(src.join("sub")).unwrap();
        for inside in ["state", "sub/state", "sub/../x", "."] {
            assert!(
                matches!(
                    state_dir(&src, Some(&src.join(inside))),
                    Err(MountError::StateDir { .. })
                ),
                "{inside}"
            );
        }
        let own = src.join(STATE_DIR);
        assert_eq!(state_dir(&src, Some(&own)).unwrap(), own);
        assert_eq!(state_dir(&src, None).unwrap(), own);
        let outside = src.with_extension("state");
        assert_eq!(state_dir(&src, Some(&outside)).unwrap(), outside);
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(unescape("/x\\"), "/x\\");
        assert_eq!(mounted_at(Path::new("/proc")).as_deref(), Some("proc proc"));
    }
}

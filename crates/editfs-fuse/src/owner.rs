//! One daemon per state directory.
//!
//! Two mounts sharing a state directory would each keep their own latest reports
//! and caches of the same store, so each would show only its own transactions.
//! The daemon therefore holds an exclusive `flock` on `STATE/daemon.lock` for as
//! long as it serves, with its pid and mount point written in the file so that a
//! refused mount can name them. A flock belongs to the open file, which the kernel
//! closes when its process dies however it dies: a daemon killed with SIGKILL
//! never blocks the next mount. The lock is on the file, not on its name, so every
//! spelling of the same directory (symlinks, `..`, trailing slashes) meets it.
//! A holder whose mount point is no longer mounted is on its way out: the next
//! daemon waits a moment for it rather than refusing.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lock file's name inside the state directory.
pub const LOCK_FILE: &str = "daemon.lock";

/// The daemon that holds a state directory, as its lock file tells.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: Option<u32>,
    pub mountpoint: Option<PathBuf>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.pid, &self.mountpoint) {
            (Some(pid), Some(m)) => write!(f, "editfs pid {pid}, mounted on {}", m.display()),
            (Some(pid), None) => write!(f, "editfs pid {pid}, still starting"),
            _ => f.write_str("an editfs daemon that is still starting"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    #[error(
        "already served by {holder}: one daemon per project (use that mount, unmount it, or give this one its own --state-dir)"
    )]
    Taken { holder: Holder },
    #[error("cannot lock {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// The lock of a state directory, held until dropped (or the process ends).
#[derive(Debug)]
pub struct Owner {
    file: File,
}

impl Owner {
    /// Takes `state`'s lock for this process serving `mountpoint`, or names the
    /// daemon that has it. Creates `state` when missing.
    pub fn take(state: &Path, mountpoint: &Path) -> Result<Owner, OwnerError> {
        let path = state.join(LOCK_FILE);
        let io_err = |source| OwnerError::Io {
            path: path.clone(),
            source,
        };
        fs::create_dir_all(state).map_err(io_err)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err)?;
        let deadline = Instant::now() + RELEASE_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let holder = read_holder(&mut file);
                    if serving(&holder) || Instant::now() >= deadline {
                        return Err(OwnerError::Taken { holder });
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(TryLockError::Error(e)) => return Err(io_err(e)),
            }
        }
        let record = format!("{}\n{}\n", std::process::id(), mountpoint.display());
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(record.as_bytes()))
            .map_err(io_err)?;
        Ok(Owner { file })
    }
}

impl Drop for Owner {
    /// A stopped daemon leaves no name behind; a killed one leaves a record that
    /// no lock stands behind, which the next daemon overwrites.
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// How long a mount waits for a holder that serves no mount point any more: a
/// daemon lets go of the lock only as it exits, a moment after its unmount, and
/// `editfs unmount` followed at once by `editfs mount` must not be refused.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// Whether the holder is mounted where its record says: a daemon serving there,
/// not one on its way out (its record gone or its mount point unmounted).
fn serving(holder: &Holder) -> bool {
    holder
        .mountpoint
        .as_deref()
        .is_some_and(|m| super::mounted_at(m).is_some())
}

/// What the holder wrote: its pid on the first line, its mount point on the rest.
/// It may be writing it right now, so anything missing is left unknown.
fn read_holder(file: &mut File) -> Holder {
    let mut text = String::new();
    if file
        .rewind()
        .and_then(|()| file.read_to_string(&mut text))
        .is_err()
    {
        return Holder::default();
    }
    let (pid, mountpoint) = text.split_once('\n').unwrap_or((&text, ""));
    let mountpoint = mountpoint.strip_suffix('\n').unwrap_or(mountpoint);
    Holder {
        pid: pid.trim().parse().ok(),
        mountpoint: (!mountpoint.is_empty()).then(|| PathBuf::from(mountpoint)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_owner_is_refused_with_the_first_ones_pid_and_mount_point() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let first = Owner::take(&state, Path::new("/mnt/a b")).unwrap();
        let err = Owner::take(&state, Path::new("/mnt/c")).unwrap_err();
        let OwnerError::Taken { holder } = err else {
            panic!("{err:?}")
        };
        assert_eq!(holder.pid, Some(std::process::id()));
        assert_eq!(holder.mountpoint.as_deref(), Some(Path::new("/mnt/a b")));
        drop(first);
        Owner::take(&state, Path::new("/mnt/c")).unwrap();
    }

    #[test]
    fn a_daemon_that_was_unmounted_and_is_exiting_does_not_refuse_the_next_mount() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let gone = tmp.path().join("unmounted");
        let exiting = Owner::take(&state, &gone).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(exiting);
        });
        Owner::take(&state, Path::new("/mnt/next")).unwrap();
        release.join().unwrap();
    }

    #[test]
    fn a_lock_file_left_unlocked_does_not_block() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join(LOCK_FILE), "1\n/mnt/gone\n").unwrap();
        let owner = Owner::take(tmp.path(), Path::new("/mnt/new")).unwrap();
        assert_eq!(
            fs::read_to_string(tmp.path().join(LOCK_FILE)).unwrap(),
            format!("{}\n/mnt/new\n", std::process::id())
        );
        drop(owner);
        assert_eq!(fs::read_to_string(tmp.path().join(LOCK_FILE)).unwrap(), "");
    }
}

//! The two lower layers of a branch mount, mounted for as long as the
//! returned `Stack` lives: the base view (`base_fuse.rs`) at
//! `branches/NAME/base` and overlayfs at `branches/NAME/merged`, which the
//! ordinary editfs mount then serves as its SOURCE (see
//! docs/branches.md#how-a-branch-mount-is-built).

use std::ffi::CString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{Config, MountOption, SessionACL};
use rustix::mount::{MountFlags, UnmountFlags};

use super::base::{Base, inside};
use super::base_fuse::BaseFs;
use super::{Branch, BranchError, io_err, open};
use crate::store::{Retention, Store, open_dir};

/// Threads serving the base view.
const BASE_THREADS: usize = 4;

/// The base view and the overlay of a branch, mounted; unmounted when dropped.
pub struct Stack {
    branch: Branch,
    session: Option<fuser::BackgroundSession>,
    overlay: bool,
}

impl Stack {
    /// Mounts branch `name` of the project at `source` (its real path),
    /// whose state directory is `state` (its real path).
    pub fn mount(source: &Path, state: &Path, name: &str) -> Result<Stack, BranchError> {
        let branch = open(state, name)?;
        let me = rustix::process::getuid().as_raw();
        if me != 0 && me != branch.meta.uid {
            return Err(BranchError::NotOwner {
                name: branch.name,
                owner: branch.meta.uid,
            });
        }
        if !branch.mounts().is_empty() {
            return Err(BranchError::Mounted {
                at: branch.mounts(),
                name: branch.name,
            });
        }
        let store = Arc::new(Store::open_with(state, Retention::default())?);
        let root = open_dir(source)?;
        let st = rustix::fs::fstat(&root).map_err(|e| io_err("stat", source)(e.into()))?;
        let hidden = inside(source, state).into_iter().collect();
        let base = Base::new(root, hidden, store, branch.meta.base);
        let time = humantime::parse_rfc3339(&branch.meta.created).unwrap_or(SystemTime::now());
        let fs = BaseFs::new(base, (st.st_uid, st.st_gid), time);
        let mut stack = Stack {
            session: None,
            overlay: false,
            branch,
        };
        for dir in [stack.base(), stack.merged()] {
            fs::create_dir_all(&dir).map_err(io_err("make", &dir))?;
        }
        // The overlay's root takes the upper directory's mode and owner:
        // SOURCE's root's, as in the project's mount. Set through a
        // descriptor reached beneath the state directory with no link
        // followed: a branch's maker may write its own state directory, and
        // a link put in place of `upper/` must not hand it the file the
        // link leads to.
        let upper = stack.branch.upper();
        let fd = rustix::fs::openat2(
            open_dir(state)?,
            Path::new(super::BRANCHES).join(name).join("upper"),
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
            rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_SYMLINKS,
        )
        .map_err(|e| io_err("open", &upper)(e.into()))?;
        let mode = rustix::fs::Mode::from_raw_mode(st.st_mode & 0o7777);
        rustix::fs::fchmod(&fd, mode).map_err(|e| io_err("chmod", &upper)(e.into()))?;
        let (uid, gid) = (
            rustix::fs::Uid::from_raw(st.st_uid),
            rustix::fs::Gid::from_raw(st.st_gid),
        );
        rustix::fs::fchown(&fd, Some(uid), Some(gid))
            .map_err(|e| io_err("chown", &upper)(e.into()))?;
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::RO,
            MountOption::FSName(format!("editfs-base:{}", source.display())),
            MountOption::Subtype("editfs-base".into()),
        ];
        config.acl = SessionACL::Owner;
        config.n_threads = Some(BASE_THREADS);
        let session = fuser::spawn_mount(fs, stack.base(), &config)
            .map_err(io_err("mount the base view on", &stack.base()))?;
        stack.session = Some(session);
        stack.mount_overlay()?;
        Ok(stack)
    }

    /// The base view's mount point.
    fn base(&self) -> PathBuf {
        self.branch.dir.join("base")
    }

    /// The overlay's mount point: the SOURCE the branch's editfs mount serves.
    pub fn merged(&self) -> PathBuf {
        self.branch.dir.join("merged")
    }

    pub fn branch(&self) -> &Branch {
        &self.branch
    }

    /// `xino=on`: the base view and the upper directory are two file
    /// systems, whose inode numbers overlayfs would otherwise show as they
    /// are, beside numbers of its own for directories: a directory and a
    /// file could share one, and the mount above tells files apart by them.
    fn mount_overlay(&mut self) -> Result<(), BranchError> {
        let word = |p: PathBuf| -> Result<String, BranchError> {
            let text = p.to_str().unwrap_or(",");
            if text.contains([',', ':', '\\']) {
                return Err(BranchError::Damaged {
                    name: self.branch.name.clone(),
                    why: format!("{text}: overlayfs takes no path with ',', ':' or '\\'"),
                });
            }
            Ok(text.to_owned())
        };
        let data = format!(
            "lowerdir={},upperdir={},workdir={},xino=on",
            word(self.base())?,
            word(self.branch.upper())?,
            word(self.branch.work())?
        );
        let data = CString::new(data).unwrap_or_default();
        let merged = self.merged();
        rustix::mount::mount(
            "editfs-branch",
            &merged,
            "overlay",
            MountFlags::empty(),
            data.as_c_str(),
        )
        .map_err(|e| io_err("mount overlayfs on", &merged)(e.into()))?;
        self.overlay = true;
        Ok(())
    }
}

impl Drop for Stack {
    /// Detaches both: a descriptor the mount above still holds keeps them
    /// alive until it closes, and no mount is left behind in the table.
    fn drop(&mut self) {
        if self.overlay
            && let Err(e) = rustix::mount::unmount(self.merged(), UnmountFlags::DETACH)
        {
            log::error!("unmount {}: {e}", self.merged().display());
        }
        if let Some(session) = self.session.take() {
            if let Err(e) = rustix::mount::unmount(self.base(), UnmountFlags::DETACH) {
                log::error!("unmount {}: {e}", self.base().display());
            }
            drop(session);
        }
    }
}

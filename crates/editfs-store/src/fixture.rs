//! The setup the store's tests share: a project in a temporary directory,
//! with its state directory `.editfs`.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::{Retention, Store, open_dir};

/// A project in a temporary directory, with its state directory `.editfs`.
pub(crate) struct Project {
    tmp: tempfile::TempDir,
}

impl Project {
    /// One whose state directory is not made yet.
    pub(crate) fn new() -> Project {
        Project {
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    /// One whose state directory a store made and closed: what a test then
    /// leaves in it is what the next open finds, as after a crash.
    pub(crate) fn made() -> Project {
        let p = Project::new();
        drop(p.open());
        p
    }

    pub(crate) fn root(&self) -> &Path {
        self.tmp.path()
    }

    pub(crate) fn state(&self) -> PathBuf {
        self.root().join(".editfs")
    }

    pub(crate) fn open(&self) -> Store {
        self.open_with(Retention::default())
    }

    pub(crate) fn open_with(&self, retention: Retention) -> Store {
        Store::open_with(&self.state(), retention).unwrap()
    }

    /// The project's directory, held open as a transaction or a mount holds it.
    pub(crate) fn dir(&self) -> OwnedFd {
        open_dir(self.root()).unwrap()
    }
}

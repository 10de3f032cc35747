//! What decides which writes through the mount keep a pre-image (`Policy`),
//! and the record of a file made through the mount until it is logged as
//! created (`Created`): plain data the mount's core holds, which the code that
//! keeps pre-images (`preimage.rs`) reads and fills.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::ignored::GitIgnores;
use crate::transaction::direct::Pending;

/// A file made through the mount, written and closed, waiting to be recorded.
pub struct Created {
    pub(super) pending: Pending,
    pub(super) at: Instant,
    /// The file's device and inode when it was made: only that file, still at
    /// the name, is recorded, never one another process put there since.
    pub(super) inode: (u64, u64),
    /// A write after the first is recorded (see `written_again`).
    pub(super) written_again: bool,
}

/// Which direct writes and removals get a pre-image.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Paths never snapshotted (build output, ...).
    skip: GlobSet,
    /// Files larger than this are skipped (and the skip logged).
    pub max_size: u64,
    /// The project's ignore rules, when ignored paths are skipped (the default).
    gitignored: Option<Arc<GitIgnores>>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            skip: GlobSet::empty(),
            max_size: 16 << 20,
            gitignored: Some(Arc::default()),
        }
    }
}

impl Policy {
    /// `patterns` without a `/` match a file name anywhere (`*.o`); with one, the
    /// path from SOURCE (`target/**`). Paths the project's git ignores are skipped
    /// too, unless `include_ignored`.
    pub fn new(
        patterns: &[String],
        max_size: u64,
        include_ignored: bool,
    ) -> Result<Policy, globset::Error> {
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let p = if p.contains('/') {
                p.trim_start_matches('/').to_owned()
            } else {
                format!("**/{p}")
            };
            b.add(Glob::new(&p)?);
        }
        Ok(Policy {
            skip: b.build()?,
            max_size,
            gitignored: (!include_ignored).then(Arc::default),
        })
    }

    /// Whether no file beneath the directory `rel` keeps a pre-image whatever
    /// its name: one of git's own, or one the project's git ignores (git
    /// re-includes nothing beneath an ignored directory). A pattern of
    /// `--no-snapshot` is matched against each file instead.
    pub fn skips_all_beneath(&self, root: std::os::fd::BorrowedFd<'_>, rel: &Path) -> bool {
        rel.components().any(|c| c.as_os_str() == ".git")
            || self
                .gitignored
                .as_ref()
                .is_some_and(|g| g.ignores(root, rel))
    }

    /// Whether changes to `rel` (beneath `root`, SOURCE) keep no pre-image: git's
    /// own files never do, those of a repository nested anywhere in SOURCE
    /// included (each `git status` makes and removes its `index.lock`), nor
    /// paths excluded by pattern or ignored by git.
    pub fn skips(&self, root: std::os::fd::BorrowedFd<'_>, rel: &Path) -> bool {
        rel.components().any(|c| c.as_os_str() == ".git")
            || self.skip.is_match(rel)
            || self
                .gitignored
                .as_ref()
                .is_some_and(|g| g.ignores(root, rel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_names_anywhere_or_paths_from_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = crate::store::open_dir(tmp.path()).unwrap();
        let root = std::os::fd::AsFd::as_fd(&root);
        let p = Policy::new(&["*.o".into(), "target/**".into()], 10, false).unwrap();
        assert!(p.skips(root, Path::new("a/b/x.o")));
        assert!(p.skips(root, Path::new("target/debug/foo")));
        assert!(!p.skips(root, Path::new("src/target.rs")));
        assert!(!Policy::default().skips(root, Path::new("x.o")));
        assert!(Policy::default().skips(root, Path::new(".git/config")));
        let all = Policy::new(&[], 10, true).unwrap();
        assert!(
            all.skips(root, Path::new(".git/index")),
            "never git's own files"
        );
        assert!(
            all.skips(root, Path::new("vendor/lib/.git/index.lock")),
            "nor those of a repository nested in SOURCE"
        );
        assert!(!all.skips(root, Path::new("src/.github/ci.yml")));
    }

    #[test]
    fn only_git_s_own_and_ignored_directories_are_skipped_whole_at_a_move() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(".gitignore"), "/target\n").unwrap();
        let root = crate::store::open_dir(tmp.path()).unwrap();
        let root = std::os::fd::AsFd::as_fd(&root);
        let p = Policy::new(&["*.o".into()], 10, false).unwrap();
        assert!(p.skips_all_beneath(root, Path::new("target")));
        assert!(p.skips_all_beneath(root, Path::new("vendor/.git")));
        assert!(!p.skips_all_beneath(root, Path::new("src")));
        assert!(
            !p.skips_all_beneath(root, Path::new("x.o")),
            "a pattern names files, not the files in a directory of that name"
        );
        let all = Policy::new(&[], 10, true).unwrap();
        assert!(!all.skips_all_beneath(root, Path::new("target")));
    }
}

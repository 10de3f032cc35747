//! Which paths the project's git ignores, for the pre-image policy: a build in
//! the mount (`cargo build` writing `target/`) should not fill the store.
//!
//! Rules come from every `.gitignore` between SOURCE and the file, and from
//! `.git/info/exclude`, matched by the `ignore` crate as git matches them (a deeper
//! file's rule wins). Each file is read beneath SOURCE without following a
//! symbolic link, and read again when it changes: whether it changed is asked at
//! most once a second (`RECHECK`), not at every query. A removal or a write
//! deep in a tree queries half a dozen ignore files, and asking each whether it
//! changed walked its path from SOURCE every time: most of the system calls of
//! an `rm -rf` through the mount.

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use parking_lot::Mutex;
use rustix::fs::{Mode, OFlags};

use crate::store::parent_beneath;

/// How long an ignore file is taken as unchanged without asking: as long as the
/// kernel keeps names and attributes of SOURCE, so an edited `.gitignore` applies
/// as soon as an edited file shows.
const RECHECK: Duration = Duration::from_secs(1);

/// The rules of one ignore file, as of its modification time.
struct Rules {
    mtime: Option<SystemTime>,
    matcher: Option<Gitignore>,
    /// When `mtime` was read.
    checked: Instant,
}

/// The project's ignore rules, loaded as needed.
#[derive(Default)]
pub struct GitIgnores {
    /// By ignore file path relative to SOURCE.
    cache: Mutex<HashMap<PathBuf, Rules>>,
}

impl std::fmt::Debug for GitIgnores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GitIgnores")
    }
}

/// Paths are matched as if SOURCE were `/`, so no real path of this machine is
/// needed to match, and every queried path lies under every matcher's root.
fn virtual_path(rel: &Path) -> PathBuf {
    Path::new("/").join(rel)
}

impl GitIgnores {
    /// Whether git ignores `rel` (a file, or anything under an ignored directory).
    pub fn ignores(&self, root: BorrowedFd<'_>, rel: &Path) -> bool {
        self.ignores_at(root, rel, Instant::now())
    }

    fn ignores_at(&self, root: BorrowedFd<'_>, rel: &Path, now: Instant) -> bool {
        let mut files = vec![PathBuf::from(".git/info/exclude")];
        let mut dir = PathBuf::new();
        files.push(dir.join(".gitignore"));
        if let Some(parent) = rel.parent() {
            for c in parent.components() {
                dir.push(c);
                files.push(dir.join(".gitignore"));
            }
        }
        // The deepest file that has a say decides.
        for file in files.iter().rev() {
            match self.check(root, file, rel, now) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    fn check(&self, root: BorrowedFd<'_>, file: &Path, rel: &Path, now: Instant) -> Match<()> {
        let mut cache = self.cache.lock();
        let recent = |r: &Rules| now.saturating_duration_since(r.checked) < RECHECK;
        if !cache.get(file).is_some_and(recent) {
            let mtime = modified(root, file);
            match cache.get_mut(file) {
                Some(r) if r.mtime == mtime => r.checked = now,
                _ => {
                    let matcher = mtime.and_then(|_| load(root, file));
                    let rules = Rules {
                        mtime,
                        matcher,
                        checked: now,
                    };
                    cache.insert(file.to_owned(), rules);
                }
            }
        }
        match cache.get(file).and_then(|r| r.matcher.as_ref()) {
            Some(m) => m
                .matched_path_or_any_parents(virtual_path(rel), false)
                .map(|_| ()),
            None => Match::None,
        }
    }
}

fn open(root: BorrowedFd<'_>, file: &Path) -> Option<std::fs::File> {
    let rel = file.to_str()?;
    let dir = parent_beneath(root, rel).ok()?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rustix::fs::openat(&dir, file.file_name()?, flags, Mode::empty()).ok()?;
    Some(std::fs::File::from(fd))
}

fn modified(root: BorrowedFd<'_>, file: &Path) -> Option<SystemTime> {
    open(root, file)?.metadata().ok()?.modified().ok()
}

fn load(root: BorrowedFd<'_>, file: &Path) -> Option<Gitignore> {
    let mut text = String::new();
    open(root, file)?.read_to_string(&mut text).ok()?;
    // `.git/info/exclude` speaks for the whole project, a `.gitignore` for its directory.
    let base = if file.starts_with(".git") {
        Path::new("")
    } else {
        file.parent().unwrap_or(Path::new(""))
    };
    let mut b = GitignoreBuilder::new(virtual_path(base));
    for line in text.lines() {
        let _ = b.add_line(Some(file.to_owned()), line);
    }
    b.build().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::fd::AsFd;

    #[test]
    fn nested_rules_and_excludes_decide_as_git_does() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        fs::create_dir_all(p.join(".git/info")).unwrap();
        fs::create_dir_all(p.join("sub/keep")).unwrap();
        fs::write(p.join(".gitignore"), "/target\n*.log\n").unwrap();
        fs::write(p.join("sub/.gitignore"), "!important.log\ngen/\n").unwrap();
        fs::write(p.join(".git/info/exclude"), "scratch.txt\n").unwrap();
        let root = crate::store::open_dir(p).unwrap();
        let g = GitIgnores::default();
        let start = Instant::now();
        let ignored_at = |rel: &str, at: Instant| g.ignores_at(root.as_fd(), Path::new(rel), at);
        let ignored = |rel: &str| ignored_at(rel, start);
        assert!(ignored("target/debug/build/x.o"));
        assert!(ignored("a/b.log"));
        assert!(!ignored("sub/important.log"));
        assert!(ignored("sub/gen/x.rs"));
        assert!(ignored("scratch.txt"));
        assert!(!ignored("src/main.rs"));
        assert!(
            !ignored("sub/target/x"),
            "`/target` is anchored at the root"
        );
        fs::write(p.join(".gitignore"), "*.rs\n").unwrap();
        // A rewrite within the same timestamp tick would not be seen; force a new one.
        let later = SystemTime::now() + std::time::Duration::from_secs(2);
        fs::File::options()
            .write(true)
            .open(p.join(".gitignore"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(
            !ignored_at("src/main.rs", start + RECHECK / 2),
            "within a second of the last look, the rules stand unasked"
        );
        assert!(
            ignored_at("src/main.rs", start + RECHECK),
            "a changed .gitignore is read again a second later"
        );
    }
}

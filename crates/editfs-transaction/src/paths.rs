//! Paths as agents write them in payloads, mapped to files beneath the root.
//!
//! An agent names files relative to the project, or absolutely through SOURCE or
//! through the mount (an agent in a sandbox sees only the mount). Both absolute
//! forms are read lexically: nothing here follows a symlink, and the file itself
//! is later opened beneath the root's descriptor, so no name leads out of it.
//! An edit of a symlink edits the file it leads to, found by the kernel beneath
//! the root (`Root::link_target`), whether the edit came by `F.edit` or in a
//! multi-file payload.

use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

use super::{Caller, Root};
use crate::engine::Outcome;
use crate::engine::payload::{Entry, Outside, Tree};
use crate::report::{ErrorKind, ErrorReport, Report};
use crate::store::parent_beneath;

/// Entries a namesake walk (`Root::namesakes`) visits at most.
const NAMESAKE_LOOK: usize = 20_000;

/// Namesakes a hint names at most.
const NAMESAKES_SHOWN: usize = 5;

impl Tree for Root<'_> {
    fn locate(&self, written: &str) -> Result<String, Outside> {
        let path = Path::new(written);
        if !path.is_absolute() {
            // A `..` is kept as written, so the path is refused rather than
            // allowed out of where the payload's paths start.
            return Ok(joined(&self.from.join(lexical(path))));
        }
        let path = lexical(path);
        [Some(self.path), self.mount]
            .into_iter()
            .flatten()
            .find_map(|base| {
                let rest = path.strip_prefix(lexical(&base.join(self.from))).ok()?;
                Some(joined(&self.from.join(rest)))
            })
            .ok_or_else(|| Outside {
                written: written.to_owned(),
            })
    }

    fn entry(&self, rel: &str) -> Option<Entry> {
        let name = Path::new(rel).file_name()?;
        let st = self
            .as_caller(|| {
                let dir = parent_beneath(self.fd, rel)?;
                rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            })
            .ok()?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => Some(Entry::Dir),
            _ => Some(Entry::File),
        }
    }
}

/// Why an edit of a path does not edit: what is there is not a file editfs may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    Directory,
    /// A symlink that leads out of SOURCE.
    Outside,
    /// A symlink that leads nowhere.
    Dangling,
    /// A FIFO, socket, device, or a symlink loop.
    NotAFile,
    /// A symlink whose way the caller may not search (natively `EACCES`,
    /// whatever is or is not there).
    Denied,
}

impl Refused {
    /// A failed report for an edit of `rel`; F is not touched, nor anything else.
    pub fn report(self, rel: &Path) -> Report {
        let name = rel.display();
        let (kind, message, hint) = match self {
            Refused::Directory => (
                ErrorKind::IsDirectory,
                format!("{name} is a directory, not a file"),
                "edit a file inside it: DIR/FILE.edit".to_owned(),
            ),
            Refused::Outside => (
                ErrorKind::OutsideSource,
                format!("{name} is a symlink that leads outside the project's files"),
                "only files inside the mount can be edited; edit the link's target where it lives"
                    .to_owned(),
            ),
            Refused::Dangling => (
                ErrorKind::DanglingLink,
                format!("{name} is a symlink to a file that does not exist"),
                "create the target through its own name, or remove the link first".to_owned(),
            ),
            Refused::Denied => (
                ErrorKind::PermissionDenied,
                format!("{name} is a symlink into a directory you may not search"),
                "edit only files you can reach natively".to_owned(),
            ),
            Refused::NotAFile => (
                ErrorKind::NotAFile,
                format!("{name} is not a regular file (a FIFO, socket, device or symlink loop)"),
                "only regular files can be edited".to_owned(),
            ),
        };
        let mut r = Report::new(Outcome::Failed, crate::engine::sha256_hex(b""));
        r.error = Some(ErrorReport::plain(kind, message, hint));
        super::stamp(r, &rel.to_string_lossy())
    }
}

impl Root<'_> {
    /// Where the symlink `rel` leads, relative to the root; the kernel resolves
    /// it beneath the root, so a link that leaves it is refused, not followed,
    /// and so is one into the state directory (no project file, whatever links
    /// to it).
    pub fn link_target(&self, rel: &Path) -> Result<PathBuf, Refused> {
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let fd = self
            .as_caller(|| {
                let flags = OFlags::PATH | OFlags::CLOEXEC;
                rustix::fs::openat2(self.fd, rel, flags, Mode::empty(), how)
            })
            .map_err(|e| match e {
                rustix::io::Errno::XDEV => Refused::Outside,
                rustix::io::Errno::NOENT => Refused::Dangling,
                rustix::io::Errno::ACCESS => Refused::Denied,
                _ => Refused::NotAFile,
            })?;
        let st = rustix::fs::fstat(&fd).map_err(|_| Refused::NotAFile)?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(Refused::Directory),
            _ => return Err(Refused::NotAFile),
        }
        // Both as the kernel names them now: the root's path as given may
        // itself pass through a symlink.
        let real = |fd: i32| std::fs::read_link(format!("/proc/self/fd/{fd}"));
        let (Ok(target), Ok(root)) = (real(fd.as_raw_fd()), real(self.fd.as_raw_fd())) else {
            return Err(Refused::NotAFile);
        };
        let inside = target.strip_prefix(root).map_err(|_| Refused::Outside)?;
        if inside.starts_with(crate::store::STATE_DIR) {
            return Err(Refused::Outside);
        }
        Ok(inside.to_owned())
    }

    /// Files under the root named as `rel` is, for a payload that named a file
    /// that does not exist: agents drop or misplace a directory (`utils.py` for
    /// `src/utils.py`), and a hint that only says an empty SEARCH creates the
    /// file leads them to make a second one. The walk runs with the caller's
    /// credentials (`None`: the daemon's own, for `editfs apply`), so it lists
    /// only what that user could list natively; it skips hidden directories (the
    /// state directory among them) and what the project's ignore files ignore,
    /// and stops after `NAMESAKE_LOOK` entries, so a huge tree costs a failed
    /// payload no more than that.
    pub fn namesakes(&self, rel: &str, caller: Option<&Caller>) -> Vec<String> {
        let Some(name) = Path::new(rel).file_name() else {
            return Vec::new();
        };
        // Reached by the descriptor's own link, which asks no search right of
        // the directories above the root (the caller may have none there).
        let top = PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()));
        let walk = || {
            let entries = ignore::WalkBuilder::new(&top).require_git(false).build();
            let mut found: Vec<String> = entries
                .take(NAMESAKE_LOOK)
                .flatten()
                .filter(|e| e.file_name() == name && e.file_type().is_some_and(|t| t.is_file()))
                .filter_map(|e| {
                    Some(
                        e.path()
                            .strip_prefix(&top)
                            .ok()?
                            .to_string_lossy()
                            .into_owned(),
                    )
                })
                .filter(|found| found != rel)
                .take(NAMESAKES_SHOWN)
                .collect();
            found.sort();
            found
        };
        match caller {
            Some(c) => c.with(walk).unwrap_or_default(),
            None => walk(),
        }
    }

    /// Whether `rel` is a symlink beneath the root.
    pub fn is_link(&self, rel: &str) -> bool {
        let Some(name) = Path::new(rel).file_name() else {
            return false;
        };
        self.as_caller(|| {
            let dir = parent_beneath(self.fd, rel)?;
            rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
        })
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
    }

    /// Whether the caller may search every directory on `rel`'s way that
    /// exists, its own included: what a native `stat` of `rel` needs before it
    /// tells whether anything is there.
    pub fn reaches(&self, rel: &str) -> bool {
        let Some(name) = Path::new(rel).file_name() else {
            return false;
        };
        let looked = self.as_caller(|| {
            let dir = parent_beneath(self.fd, rel)?;
            rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
        });
        !matches!(looked, Err(rustix::io::Errno::ACCESS))
    }

    /// `look`, made with the caller's credentials (the daemon's own without one).
    fn as_caller<T>(&self, look: impl FnOnce() -> rustix::io::Result<T>) -> rustix::io::Result<T> {
        crate::store::caller::acting(self.caller, look)
    }
}

/// Whether `written`, as a tool call names it, is the file `rel` beneath `root`.
/// An absolute path inside the root or the mount must name exactly it; one
/// outside both (the mount as a sandbox shows it elsewhere) must end with the
/// file's whole path beneath the root. A relative one must be a tail of the
/// file's whole path, as seen from wherever the agent works (in `src/` it
/// writes `a.py`).
pub fn names_file(root: &Root<'_>, written: &str, rel: &str) -> bool {
    if Path::new(written).is_absolute() {
        return match root.locate(written) {
            Ok(r) => r == rel,
            Err(_) => lexical(Path::new(written)).ends_with(lexical(Path::new(rel))),
        };
    }
    let written = lexical(Path::new(written));
    let whole = lexical(&root.path.join(rel));
    !written.as_os_str().is_empty()
        && written
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        && whole.ends_with(&written)
}

/// `path` without `.` components and doubled slashes; `..` is kept, for the
/// caller's checks to refuse.
fn lexical(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

fn joined(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_root<T>(f: impl FnOnce(&Root<'_>) -> T) -> T {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/a b")).unwrap();
        std::fs::write(dir.path().join("src/a b/c.py"), "x").unwrap();
        let fd = std::fs::File::open(dir.path()).unwrap();
        let root = Root {
            fd: std::os::fd::AsFd::as_fd(&fd),
            path: Path::new("/srv/project"),
            mount: Some(Path::new("/mnt/project")),
            from: Path::new(""),
            caller: None,
        };
        f(&root)
    }

    #[test]
    fn absolute_paths_through_source_or_mount_are_located_others_refused() {
        with_root(|root| {
            assert_eq!(root.locate("/srv/project/src/x.rs").unwrap(), "src/x.rs");
            assert_eq!(root.locate("/mnt/project/./src//x.rs").unwrap(), "src/x.rs");
            assert_eq!(root.locate("./src/x.rs").unwrap(), "src/x.rs");
            assert!(root.locate("/srv/projectx/src/x.rs").is_err());
            assert!(root.locate("/etc/passwd").is_err());
            assert_eq!(root.locate("/mnt/project/../x").unwrap(), "../x");
        });
    }

    #[test]
    fn paths_read_from_a_directory_beneath_the_root_become_the_roots() {
        with_root(|root| {
            let sub = Root {
                from: Path::new("src"),
                ..*root
            };
            assert_eq!(sub.locate("a b/c.py").unwrap(), "src/a b/c.py");
            assert_eq!(sub.locate("./x.rs").unwrap(), "src/x.rs");
            assert_eq!(sub.locate("/srv/project/src/x.rs").unwrap(), "src/x.rs");
            assert_eq!(sub.locate("/mnt/project/src/x.rs").unwrap(), "src/x.rs");
            assert!(sub.locate("/srv/project/lib/x.rs").is_err());
            assert_eq!(sub.locate("../lib/x.rs").unwrap(), "src/../lib/x.rs");
            assert_eq!(
                sub.entry(&sub.locate("a b/c.py").unwrap()),
                Some(Entry::File)
            );
        });
    }

    #[test]
    fn entries_are_seen_beneath_the_root_only() {
        with_root(|root| {
            assert_eq!(root.entry("src/a b/c.py"), Some(Entry::File));
            assert_eq!(root.entry("src/a b"), Some(Entry::Dir));
            assert_eq!(root.entry("src/none"), None);
            assert_eq!(root.entry("../etc/passwd"), None);
        });
    }

    #[test]
    fn a_tool_call_names_its_file_by_suffix_or_exact_absolute_path() {
        with_root(|root| {
            assert!(names_file(root, "src/a.py", "src/a.py"));
            assert!(names_file(root, "a.py", "src/a.py"));
            assert!(names_file(root, "./src/a.py", "src/a.py"));
            assert!(names_file(root, "/mnt/project/src/a.py", "src/a.py"));
            assert!(!names_file(root, "b.py", "src/a.py"));
            assert!(!names_file(root, "lib/a.py", "src/a.py"));
            assert!(!names_file(root, "../src/a.py", "src/a.py"));
            assert!(names_file(root, "/workspace/src/a.py", "src/a.py"));
            assert!(!names_file(root, "/workspace/a.py", "src/a.py"));
            assert!(!names_file(root, "/mnt/project/lib/src/a.py", "src/a.py"));
        });
    }
}

//! Paths as agents write them in payloads, mapped to files beneath the root.
//!
//! An agent names files relative to the project, or absolutely through SOURCE or
//! through the mount (an agent in a sandbox sees only the mount). Both absolute
//! forms are read lexically: nothing here follows a symlink, and the file itself
//! is later opened beneath the root's descriptor, so no name leads out of it.

use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType};

use super::Root;
use crate::engine::payload::{Entry, Tree};
use crate::store::journal::parent_beneath;

impl Tree for Root<'_> {
    fn locate(&self, written: &str) -> Result<String, String> {
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
            .ok_or_else(|| {
                format!("{written} is outside the project: give the path relative to its root")
            })
    }

    fn entry(&self, rel: &str) -> Option<Entry> {
        let dir = parent_beneath(self.fd, rel).ok()?;
        let name = Path::new(rel).file_name()?;
        let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => Some(Entry::Dir),
            _ => Some(Entry::File),
        }
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

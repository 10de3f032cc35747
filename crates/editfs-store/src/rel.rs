//! Paths an agent names (in a multi-file payload, in `.editfs/undo`, or read back
//! from the log for an undo), normalised once and checked once, here only.
//!
//! Every entry point goes through `project_path` before it touches the disk, so a
//! spelling the check did not foresee (`./.editfs/txid`, `a/../.editfs/log`,
//! `src//.editfs/x`) cannot reach the state directory by one route and not another.

use std::fmt;

use super::STATE_DIR;
use super::atomic::TMP_PREFIX;

/// Why a path cannot be edited or restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadPath {
    Empty,
    Absolute,
    Parent,
    Nul,
    StateDir,
    Temporary,
}

impl fmt::Display for BadPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BadPath::Empty => "the path names no file",
            BadPath::Absolute => "the path is outside the project: an absolute path must lie inside the root (or the mount); give it relative to the root",
            BadPath::Parent => "`..` is refused: the path must stay inside the root",
            BadPath::Nul => "a path cannot contain a NUL byte",
            BadPath::StateDir => "the state directory (.editfs) cannot be edited or restored",
            BadPath::Temporary => "editfs's temporary files cannot be edited",
        })
    }
}

/// `rel` with `.` and empty parts dropped (`./a//b/` is `a/b`), or why it is refused.
///
/// `..` is refused rather than resolved: what it means depends on symlinks on
/// disk, and a lexical answer could differ from the kernel's. A `.editfs` part is
/// refused wherever it stands, as a project's subdirectory may hold the state of
/// a run there.
pub fn project_path(rel: &str) -> Result<String, BadPath> {
    if rel.contains('\0') {
        return Err(BadPath::Nul);
    }
    if rel.starts_with('/') {
        return Err(BadPath::Absolute);
    }
    let mut parts = Vec::new();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(BadPath::Parent),
            STATE_DIR => return Err(BadPath::StateDir),
            p if p.starts_with(TMP_PREFIX) => return Err(BadPath::Temporary),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(BadPath::Empty);
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_the_state_directory_is_refused() {
        for rel in [
            ".editfs/log",
            "./.editfs/txid",
            ".//.editfs/snapshots/a/1",
            "././.editfs",
            "src/.editfs/log",
            "src/./.editfs/",
        ] {
            assert_eq!(project_path(rel), Err(BadPath::StateDir), "{rel}");
        }
    }

    #[test]
    fn parents_absolutes_and_empty_paths_are_refused() {
        assert_eq!(project_path("a/../.editfs/log"), Err(BadPath::Parent));
        assert_eq!(project_path("../x"), Err(BadPath::Parent));
        assert_eq!(project_path("/etc/passwd"), Err(BadPath::Absolute));
        assert_eq!(project_path("./"), Err(BadPath::Empty));
        assert_eq!(project_path(""), Err(BadPath::Empty));
        assert_eq!(project_path("a\0b"), Err(BadPath::Nul));
        assert_eq!(
            project_path(&format!("src/{TMP_PREFIX}1")),
            Err(BadPath::Temporary)
        );
    }

    #[test]
    fn harmless_spellings_are_normalised_to_one_name() {
        assert_eq!(project_path("./src//a.rs").as_deref(), Ok("src/a.rs"));
        assert_eq!(project_path("src/./a.rs/").as_deref(), Ok("src/a.rs"));
        assert_eq!(project_path(".editfsx/a").as_deref(), Ok(".editfsx/a"));
    }
}

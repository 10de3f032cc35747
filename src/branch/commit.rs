//! Bringing a branch's changes into the project: its net change against its
//! base, written as one payload of unified diffs (a file made is a diff from
//! `/dev/null`, an empty one its header alone, one removed a diff to it), which the project then applies as
//! one multi-file transaction (see docs/branches.md#bringing-a-branch-back).
//!
//! Each hunk is an edit like any other: it is placed on the project as it is
//! now, with the engine's tolerance and its line as a hint, so a file the
//! project changed elsewhere since the base takes the branch's change where
//! its text now is, and one whose changed lines the project changed too fails
//! the whole transaction, naming the file and the hunk. A file the project
//! left alone takes the branch's content exactly.

use std::fmt::Write as _;

use crate::engine::diff::file_diff;
use crate::engine::report::shown_name;
use crate::transaction::rewind::NetChange;

/// The payload a commit applies, and the files it cannot carry.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Planned {
    /// Unified diffs, one per file.
    pub payload: String,
    /// Files whose change a diff cannot carry, each with why: the commit
    /// fails naming them.
    pub refused: Vec<(String, &'static str)>,
}

/// The payload that brings `changes` (a branch's net change against its
/// base) into the project.
pub fn plan(changes: &[NetChange]) -> Planned {
    let mut planned = Planned::default();
    for c in changes {
        let (before, now) = (c.before.as_deref(), c.now.as_deref());
        if before.is_some_and(|b| b.contains(&0)) || now.is_some_and(|n| n.contains(&0)) {
            planned.refused.push((
                c.rel.clone(),
                "a binary file: a commit carries text changes only",
            ));
            continue;
        }
        let diff = file_diff(before.unwrap_or_default(), now.unwrap_or_default(), &c.rel);
        // The hunks, after the `---`/`+++` lines this writes itself.
        let hunks = diff.splitn(3, '\n').nth(2).unwrap_or_default();
        let name = shown_name(&c.rel);
        let out = &mut planned.payload;
        let _ = match (before, now) {
            (None, _) => write!(
                out,
                "diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n"
            ),
            (_, None) => write!(
                out,
                "diff --git a/{name} b/{name}\ndeleted file mode 100644\n--- a/{name}\n+++ /dev/null\n"
            ),
            _ => write!(
                out,
                "diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n"
            ),
        };
        out.push_str(hunks);
    }
    planned
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(rel: &str, before: Option<&str>, now: Option<&str>) -> NetChange {
        NetChange {
            rel: rel.into(),
            before: before.map(|b| b.as_bytes().to_vec()),
            now: now.map(|n| n.as_bytes().to_vec()),
        }
    }

    #[test]
    fn a_change_made_and_removed_each_become_a_diff_and_a_binary_is_refused() {
        let planned = plan(&[
            change("a.txt", Some("one\ntwo\n"), Some("one\n2\n")),
            change("new.txt", None, Some("x\n")),
            change("gone.txt", Some("y\n"), None),
            change("empty", None, Some("")),
            change("bin", Some("a\0"), Some("b\0")),
        ]);
        let p = &planned.payload;
        assert!(p.contains("--- a/a.txt\n+++ b/a.txt\n@@"), "{p}");
        assert!(p.contains("-two\n+2\n"), "{p}");
        assert!(
            p.contains("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n"),
            "{p}"
        );
        assert!(
            p.contains("--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n"),
            "{p}"
        );
        assert!(
            p.ends_with("new file mode 100644\n--- /dev/null\n+++ b/empty\n"),
            "an empty file made: its header alone, {p}"
        );
        assert_eq!(planned.refused.len(), 1);
        assert_eq!(planned.refused[0].0, "bin");
    }
}

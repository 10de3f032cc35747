//! Patches as payloads: unified diffs (as `git diff` and `diff -u` print them) and
//! the `*** Begin Patch` format some agents emit instead of blocks.
//!
//! Each hunk becomes one marker-block operation: its context and removed lines
//! are SEARCH, its context and added lines REPLACE, and its line number the
//! `:start_line:` hint, so a hunk gets the same tolerance, replay and
//! all-or-nothing rules as a block. A file's header path labels its hunks, as
//! the line before a block does: it selects the file in a multi-file payload.

use super::{Find, Operation, Payload, PayloadError, text_lines};

/// Whether the text is a patch: `*** Begin Patch`, or a unified diff's
/// `---`/`+++` header followed by a hunk.
pub fn detect(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    let begin = lines
        .iter()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.trim_end() == "*** Begin Patch");
    let unified = lines.windows(3).any(|w| {
        w[0].starts_with("--- ") && w[1].starts_with("+++ ") && hunk_header(w[2]).is_some()
    });
    begin || unified
}

pub fn parse(text: &str) -> Result<Payload, PayloadError> {
    let lines = text_lines(text);
    let begin = lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .filter(|&i| lines[i].trim_end() == "*** Begin Patch");
    let mut payload = match begin {
        Some(i) => begin_patch(&lines, i + 1)?,
        None => unified(&lines)?,
    };
    let hunks = payload.operations.len();
    let form = if begin.is_some() {
        "a *** Begin Patch patch"
    } else {
        "a unified diff"
    };
    payload.notes.push(format!(
        "read as {form}: {hunks} hunk(s), each one operation"
    ));
    Ok(payload)
}

fn structure(line: usize, found: impl Into<String>, expected: impl Into<String>) -> PayloadError {
    PayloadError::Structure {
        line,
        found: found.into(),
        expected: expected.into(),
    }
}

/// `@@ -a[,b] +c[,d] @@`: the old start and length, and the new length.
fn hunk_header(line: &str) -> Option<(usize, usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let span = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((s, n)) => Some((s.parse().ok()?, n.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (old_start, old_len) = span(old)?;
    let (_, new_len) = span(new)?;
    Some((old_start, old_len, new_len))
}

/// A header's path: `a/` or `b/` dropped (as git writes them), a timestamp after
/// a tab dropped (as `diff -u` writes it).
fn header_path(rest: &str) -> Option<String> {
    let p = rest.split('\t').next().unwrap_or(rest).trim();
    if p == "/dev/null" {
        return None;
    }
    let p = p
        .strip_prefix("a/")
        .or_else(|| p.strip_prefix("b/"))
        .unwrap_or(p);
    Some(p.to_owned())
}

/// The lines of one hunk, split into what it searches and what it puts there.
#[derive(Default)]
struct Hunk {
    search: Vec<String>,
    replace: Vec<String>,
    /// `\ No newline at end of file` after the last added line.
    no_final_newline: bool,
}

impl Hunk {
    fn take(&mut self, line: &str) {
        match line.as_bytes().first() {
            Some(b'-') => self.search.push(line[1..].to_owned()),
            Some(b'+') => self.replace.push(line[1..].to_owned()),
            Some(b'\\') => self.no_final_newline = true,
            // A context line; an empty one lost its leading space on the way.
            Some(b' ') => {
                self.search.push(line[1..].to_owned());
                self.replace.push(line[1..].to_owned());
            }
            _ => {
                self.search.push(line.to_owned());
                self.replace.push(line.to_owned());
            }
        }
    }

    fn operation(self, file: Option<&str>, near: Option<usize>, line: usize) -> Operation {
        let joined = |v: Vec<String>| match v.is_empty() {
            true => String::new(),
            false => v.join("\n") + "\n",
        };
        let creates = self.search.is_empty();
        let mut replace = joined(self.replace);
        if creates && self.no_final_newline {
            replace.pop();
        }
        let mut op = Operation::new(Find::Lines, joined(self.search), replace, line);
        op.near = near;
        op.label = file.map(str::to_owned);
        op
    }
}

fn unified(lines: &[&str]) -> Result<Payload, PayloadError> {
    let mut payload = Payload::default();
    let mut file: Option<String> = None;
    // Lines the hunks before shifted the file by, so each hint is where its
    // hunk starts once the ones before it are applied.
    let mut shift: isize = 0;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let (Some(old), Some(new)) = (
            line.strip_prefix("--- "),
            lines.get(i + 1).and_then(|l| l.strip_prefix("+++ ")),
        ) {
            file = match (header_path(old), header_path(new)) {
                (Some(old), None) => {
                    return Err(structure(
                        i + 2,
                        format!("a diff that deletes {old}"),
                        "edits only (delete a file with rm)",
                    ));
                }
                (_, new) => new,
            };
            shift = 0;
            i += 2;
            continue;
        }
        let Some((start, old_len, new_len)) = hunk_header(line) else {
            i += 1;
            continue;
        };
        let at = i + 1;
        let mut hunk = Hunk::default();
        let (mut old_seen, mut new_seen) = (0, 0);
        i += 1;
        while i < lines.len() && (old_seen < old_len || new_seen < new_len) {
            let l = lines[i];
            match l.as_bytes().first() {
                Some(b'-') => old_seen += 1,
                Some(b'+') => new_seen += 1,
                Some(b'\\') => {}
                _ => {
                    old_seen += 1;
                    new_seen += 1;
                }
            }
            hunk.take(l);
            i += 1;
        }
        if lines.get(i).is_some_and(|l| l.starts_with('\\')) {
            hunk.take(lines[i]);
            i += 1;
        }
        if old_seen < old_len || new_seen < new_len {
            return Err(structure(
                lines.len(),
                format!(
                    "the hunk at line {at} ends early ({old_seen} of {old_len} old and {new_seen} of {new_len} new lines)"
                ),
                "the whole hunk, as many lines as its @@ header counts",
            ));
        }
        if hunk.search.is_empty() && start > 0 {
            return Err(structure(
                at,
                "a hunk with no context lines that only adds (as diff -U0 prints)",
                "a diff with context lines (diff -u, git diff), so each hunk can be found",
            ));
        }
        let near = (start > 0).then(|| start.saturating_add_signed(shift).max(1));
        shift += new_len as isize - old_len as isize;
        payload
            .operations
            .push(hunk.operation(file.as_deref(), near, at));
    }
    Ok(payload)
}

fn begin_patch(lines: &[&str], from: usize) -> Result<Payload, PayloadError> {
    let mut payload = Payload::default();
    let mut file: Option<String> = None;
    let mut hunk: Option<(Hunk, usize)> = None;
    let mut ended = false;
    let flush = |hunk: &mut Option<(Hunk, usize)>, file: &Option<String>, payload: &mut Payload| {
        if let Some((h, at)) = hunk
            .take()
            .filter(|(h, _)| !h.search.is_empty() || !h.replace.is_empty())
        {
            payload
                .operations
                .push(h.operation(file.as_deref(), None, at));
        }
    };
    for (k, line) in lines.iter().enumerate().skip(from) {
        let at = k + 1;
        if line.trim_end() == "*** End Patch" {
            ended = true;
            break;
        }
        if let Some(p) = line.strip_prefix("*** Update File:") {
            flush(&mut hunk, &file, &mut payload);
            file = Some(p.trim().to_owned());
            hunk = Some((Hunk::default(), at));
        } else if let Some(p) = line.strip_prefix("*** Add File:") {
            flush(&mut hunk, &file, &mut payload);
            file = Some(p.trim().to_owned());
            hunk = Some((Hunk::default(), at));
        } else if line.starts_with("*** Delete File:") || line.starts_with("*** Move to:") {
            return Err(structure(
                at,
                format!("`{}`", line.trim_end()),
                "edits only: `*** Update File:` or `*** Add File:` (delete or move a file with rm or mv)",
            ));
        } else if line.starts_with("@@") {
            flush(&mut hunk, &file, &mut payload);
            hunk = Some((Hunk::default(), at));
        } else if line.trim_end() == "*** End of File" {
        } else if let Some((h, _)) = hunk.as_mut() {
            h.take(line);
        } else if !line.trim().is_empty() {
            return Err(structure(
                at,
                format!("`{line}` before any `*** Update File:` or `*** Add File:`"),
                "a file header first",
            ));
        }
    }
    flush(&mut hunk, &file, &mut payload);
    if !ended {
        return Err(structure(
            lines.len(),
            "the patch ends without `*** End Patch`; nothing was applied",
            "`*** End Patch` after the last hunk (send the whole patch again)",
        ));
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(text: &str) -> Vec<(Option<String>, String, String, Option<usize>)> {
        assert!(detect(text), "{text}");
        parse(text)
            .unwrap()
            .operations
            .into_iter()
            .map(|o| (o.label, o.search, o.replace, o.near))
            .collect()
    }

    fn op(
        file: &str,
        s: &str,
        r: &str,
        near: Option<usize>,
    ) -> (Option<String>, String, String, Option<usize>) {
        (Some(file.to_owned()), s.to_owned(), r.to_owned(), near)
    }

    #[test]
    fn git_diff_hunks_become_operations_with_shifted_hints() {
        let text = "diff --git a/src/a.py b/src/a.py\nindex 1..2 100644\n--- a/src/a.py\n+++ b/src/a.py\n@@ -1,3 +1,4 @@\n import os\n+import re\n \n x = 1\n@@ -10,2 +11,2 @@ def f():\n-    return 1\n+    return 2\n     pass\n";
        assert_eq!(
            ops(text),
            [
                op(
                    "src/a.py",
                    "import os\n\nx = 1\n",
                    "import os\nimport re\n\nx = 1\n",
                    Some(1)
                ),
                op(
                    "src/a.py",
                    "    return 1\n    pass\n",
                    "    return 2\n    pass\n",
                    Some(11)
                ),
            ]
        );
    }

    #[test]
    fn diff_u_headers_with_timestamps_and_new_files() {
        let text = "--- old/a.txt\t2024-01-01 10:00:00\n+++ new/a.txt\t2024-01-01 10:01:00\n@@ -2 +2 @@\n-b\n+B\n--- /dev/null\n+++ b/docs/new.md\n@@ -0,0 +1,2 @@\n+# New\n+text\n\\ No newline at end of file\n";
        assert_eq!(
            ops(text),
            [
                op("new/a.txt", "b\n", "B\n", Some(2)),
                op("docs/new.md", "", "# New\ntext", None),
            ]
        );
    }

    #[test]
    fn begin_patch_updates_and_adds() {
        let text = "*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n-    print(\"hi\")\n+    print(\"hello\")\n*** Add File: src/new.py\n+x = 1\n*** End Patch\n";
        assert_eq!(
            ops(text),
            [
                op(
                    "src/app.py",
                    "    print(\"hi\")\n",
                    "    print(\"hello\")\n",
                    None
                ),
                op("src/new.py", "", "x = 1\n", None),
            ]
        );
    }

    #[test]
    fn deletions_moves_cut_hunks_and_unanchored_inserts_are_refused() {
        for text in [
            "--- a/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
            "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n",
            "--- a/x\n+++ b/x\n@@ -3,0 +4 @@\n+new\n",
            "*** Begin Patch\n*** Delete File: x\n*** End Patch\n",
            "*** Begin Patch\n*** Update File: x\n@@\n-a\n+b\n",
        ] {
            assert!(
                matches!(parse(text), Err(PayloadError::Structure { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn marker_blocks_and_prose_are_no_patch() {
        assert!(!detect(
            "<<<<<<< SEARCH\n--- a\n=======\n+++ b\n>>>>>>> REPLACE\n"
        ));
        assert!(!detect("--- a list\n+++ more\nno hunk\n"));
    }
}

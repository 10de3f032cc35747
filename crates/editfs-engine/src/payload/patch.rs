//! Patches as payloads: unified diffs (as `git diff` and `diff -u` print them) and
//! the `*** Begin Patch` format some agents emit instead of blocks.
//!
//! Each hunk becomes one marker-block operation: its context and removed lines
//! are SEARCH, its context and added lines REPLACE, and its line number the
//! `:start_line:` hint, so a hunk gets the same tolerance, replay and
//! all-or-nothing rules as a block. A file's header path labels its hunks, as
//! the line before a block does: it selects the file in a multi-file payload.

use super::{FileAct, Find, Operation, Payload, PayloadError, text_lines};

/// Whether the text is a patch: `*** Begin Patch`, a unified diff's `---`/`+++`
/// header followed by a hunk, or git's `diff --git` header (a rename or a
/// removal of an empty file has nothing more).
pub fn detect(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    let begin = lines.iter().any(|l| is_begin(l));
    let unified = lines.windows(3).any(|w| {
        w[0].starts_with("--- ") && w[1].starts_with("+++ ") && hunk_header(w[2]).is_some()
    });
    let git = lines.iter().any(|l| l.starts_with("diff --git "));
    begin || unified || git
}

/// A `*** Begin Patch` line. Agents often put the patch in a fence, with a
/// sentence before or after it, so it need not be the first line.
fn is_begin(line: &str) -> bool {
    line.trim_end() == "*** Begin Patch"
}

pub fn parse(text: &str) -> Result<Payload, PayloadError> {
    let lines = text_lines(text);
    let begin = lines.iter().position(|l| is_begin(l));
    let mut payload = match begin {
        Some(i) => begin_patch(&lines, i + 1)?,
        None => unified(&lines)?,
    };
    if let Some(i) = begin {
        note_outside(&lines, i, &mut payload);
    }
    let form = if begin.is_some() {
        "a *** Begin Patch patch"
    } else {
        "a unified diff"
    };
    let count =
        |f: fn(&Option<FileAct>) -> bool| payload.operations.iter().filter(|o| f(&o.act)).count();
    let hunks = count(Option::is_none);
    let deletes = count(|a| matches!(a, Some(FileAct::Delete { .. })));
    let moves = count(|a| matches!(a, Some(FileAct::MoveTo(_))));
    let mut note = format!("read as {form}: {hunks} hunk(s), each one operation");
    if deletes + moves > 0 {
        note += &format!(", {deletes} file deletion(s) and {moves} move(s)");
    }
    payload.notes.push(note);
    Ok(payload)
}

/// Notes the text around a `*** Begin Patch` patch that starts at line `begin`
/// (0-based): ignored, like text outside marker blocks; fences say nothing.
fn note_outside(lines: &[&str], begin: usize, payload: &mut Payload) {
    let end = lines
        .iter()
        .skip(begin)
        .position(|l| l.trim_end() == "*** End Patch")
        .map_or(lines.len(), |k| begin + k + 1);
    let prose = |l: &&&str| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with("```")
    };
    let outside =
        lines[..begin].iter().filter(prose).count() + lines[end..].iter().filter(prose).count();
    if outside > 0 {
        payload.notes.push(format!(
            "ignored {outside} line(s) of text outside the patch"
        ));
    }
}

fn structure(line: usize, found: impl Into<String>, expected: impl Into<String>) -> PayloadError {
    PayloadError::Patch {
        line,
        found: found.into(),
        expected: expected.into(),
    }
}

/// A hunk's header line.
#[derive(Clone, Copy)]
enum Header {
    /// `@@ -a[,b] +c[,d] @@`: the old start and length, and the new length.
    Counted(usize, usize, usize),
    /// `@@` or `@@ ... @@` (as Aider writes hunks): no line numbers, no counts.
    Bare,
}

fn hunk_header(line: &str) -> Option<Header> {
    let t = line.trim_end();
    let bare = t == "@@"
        || t.strip_prefix("@@ ")
            .and_then(|r| r.strip_suffix(" @@"))
            .is_some_and(|mid| !mid.trim_start().starts_with('-'));
    if bare {
        return Some(Header::Bare);
    }
    counted(line).map(|(start, old_len, new_len)| Header::Counted(start, old_len, new_len))
}

/// `@@ -a[,b] +c[,d] @@`: the old start and length, and the new length.
fn counted(line: &str) -> Option<(usize, usize, usize)> {
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
    /// The text after each of a `*** Begin Patch` hunk's `@@` lines.
    anchors: Vec<String>,
    search: Vec<String>,
    replace: Vec<String>,
    /// `\ No newline at end of file` after the last removed or context line
    /// (the old side's) and after the last added or context line (the new side's).
    old_unended: bool,
    new_unended: bool,
    /// The first byte of the line taken last.
    last: u8,
    /// `*** End of File` followed the hunk.
    end_of_file: bool,
}

impl Hunk {
    fn take(&mut self, line: &str) {
        let first = line.as_bytes().first().copied().unwrap_or(b' ');
        if first != b'\\' {
            self.last = first;
        }
        match first {
            b'-' => self.search.push(line[1..].to_owned()),
            b'+' => self.replace.push(line[1..].to_owned()),
            b'\\' => {
                self.old_unended |= self.last != b'+';
                self.new_unended |= self.last != b'-';
            }
            // A context line; an empty one lost its leading space on the way.
            b' ' if !line.is_empty() => {
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
        if creates && self.new_unended {
            replace.pop();
        }
        let mut op = Operation::new(Find::Lines, joined(self.search), replace, line);
        op.near = near;
        op.label = file.map(str::to_owned);
        op.patched = op.label.iter().cloned().collect();
        op.anchors = self.anchors;
        op.end_of_file = self.end_of_file;
        op
    }
}

/// The file section of a unified diff being read: its path, and what its header
/// lines said of the file as a whole, done once its hunks are read.
#[derive(Default)]
struct Section {
    file: Option<String>,
    /// A removal or move, and the payload line that asked for it.
    act: Option<(FileAct, usize)>,
    /// git's `new file mode`: a new file, perhaps empty (then it has no hunk).
    new_file: Option<usize>,
    /// Whether its `---`/`+++` header was read (a second one starts a new section).
    headed: bool,
    /// The paths its `+++` and `---` lines name, new side first.
    names: Vec<String>,
    /// Its `---` line is `/dev/null`: the file is new.
    from_nothing: bool,
    hunks: usize,
}

impl Section {
    /// Ends the section: its removal, move or empty new file becomes an operation.
    fn close(self, payload: &mut Payload) {
        let label = |mut op: Operation| {
            op.label = self.file.clone();
            op
        };
        if let Some((act, line)) = self.act {
            let mut op = label(Operation::new(
                Find::Lines,
                String::new(),
                String::new(),
                line,
            ));
            op.act = Some(act);
            payload.operations.push(op);
        } else if let (Some(line), 0) = (self.new_file, self.hunks) {
            let op = Operation::new(Find::Lines, String::new(), String::new(), line);
            payload.operations.push(label(op));
        }
    }

    fn moves(&self) -> bool {
        matches!(self.act, Some((FileAct::MoveTo(_), _)))
    }
}

/// The path of `diff --git a/P b/P` when both sides name one file (a renamed
/// file is named by its `rename from` line instead).
fn git_path(rest: &str) -> Option<String> {
    let half = rest.len().checked_sub(1)? / 2;
    let (a, b) = (rest.get(..half)?, rest.get(half + 1..)?);
    let a = a.strip_prefix("a/").unwrap_or(a);
    let b = b.strip_prefix("b/").unwrap_or(b);
    (rest.as_bytes().get(half) == Some(&b' ') && a == b && !a.is_empty()).then(|| a.to_owned())
}

fn unified(lines: &[&str]) -> Result<Payload, PayloadError> {
    let mut payload = Payload::default();
    let mut section = Section::default();
    // Lines the hunks before shifted the file by, so each hint is where its
    // hunk starts once the ones before it are applied.
    let mut shift: isize = 0;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let at = i + 1;
        if let Some(rest) = line.strip_prefix("diff --git ") {
            std::mem::take(&mut section).close(&mut payload);
            section.file = git_path(rest);
            shift = 0;
            i += 1;
            continue;
        }
        if let Some(from) = line.strip_prefix("rename from ") {
            section.file = Some(from.trim().to_owned());
        } else if let Some(to) = line.strip_prefix("rename to ") {
            section.act = Some((FileAct::MoveTo(to.trim().to_owned()), at));
        } else if line.starts_with("deleted file mode") {
            section.act = Some((FileAct::Delete { listed: true }, at));
        } else if line.starts_with("new file mode") {
            section.new_file = Some(at);
        } else if line.starts_with("GIT binary patch")
            || (line.starts_with("Binary files ") && line.ends_with(" differ"))
        {
            return Err(structure(
                at,
                format!("`{line}`: a change to a binary file"),
                "a text patch (edit binary files another way)",
            ));
        }
        if let (Some(old), Some(new)) = (
            line.strip_prefix("--- "),
            lines.get(i + 1).and_then(|l| l.strip_prefix("+++ ")),
        ) {
            if section.headed {
                std::mem::take(&mut section).close(&mut payload);
                shift = 0;
            }
            section.headed = true;
            section.names = [new, old].into_iter().filter_map(header_path).collect();
            section.from_nothing = header_path(old).is_none();
            section.file = match (header_path(old), header_path(new)) {
                (Some(old), None) => {
                    if section.act.is_none() {
                        section.act = Some((FileAct::Delete { listed: true }, i + 2));
                    }
                    Some(old)
                }
                (Some(old), Some(_)) if section.moves() => Some(old),
                (_, new) => new,
            };
            i += 2;
            continue;
        }
        let (start, body) = match hunk_header(line) {
            Some(Header::Counted(start, old_len, new_len)) => {
                let Some((body, recounted)) = hunk_body(lines, i + 1, old_len, new_len) else {
                    return Err(cut_short(lines, i + 1, old_len, new_len, at));
                };
                if recounted {
                    payload.notes.push(format!(
                        "the hunk at line {at} has other line counts than its header says ({old_len} old, {new_len} new): it was read by its lines"
                    ));
                }
                (Some(start), body)
            }
            Some(Header::Bare) => (None, bare_body(lines, i + 1)),
            None => {
                i += 1;
                continue;
            }
        };
        i += 1 + body.len();
        let mut hunk = Hunk::default();
        for l in &body {
            hunk.take(l);
        }
        if hunk.old_unended != hunk.new_unended && !hunk.search.is_empty() {
            payload.notes.push(format!(
                "the hunk at line {at} also changes whether the file ends with a newline; the file keeps its ending as it is"
            ));
        }
        // `@@ -0,0 …` and a `---` of /dev/null create the file; any other hunk
        // needs lines to find its place by.
        let creates = start.map_or(section.from_nothing, |s| s == 0);
        if hunk.search.is_empty() && !creates {
            return Err(only_adds(at));
        }
        let near = start
            .filter(|&s| s > 0)
            .map(|s| s.saturating_add_signed(shift).max(1));
        shift += hunk.replace.len() as isize - hunk.search.len() as isize;
        section.hunks += 1;
        let mut op = hunk.operation(section.file.as_deref(), near, at);
        op.patched = section.names.clone();
        payload.operations.push(op);
    }
    section.close(&mut payload);
    Ok(payload)
}

/// A hunk whose lines stop, at the payload's end, short of its header's counts:
/// it may have been cut off, so none of it is applied.
fn cut_short(
    lines: &[&str],
    from: usize,
    old_len: usize,
    new_len: usize,
    at: usize,
) -> PayloadError {
    let body = &lines[from..];
    let body = &body[..body
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |p| p + 1)];
    let old = body.iter().filter(|l| !l.starts_with(['+', '\\'])).count();
    let new = body.iter().filter(|l| !l.starts_with(['-', '\\'])).count();
    structure(
        lines.len(),
        format!(
            "the hunk at line {at} ends early: its header counts {old_len} old and {new_len} new lines, the payload ends after {old} and {new}"
        ),
        "the whole hunk: if it was cut off, send the whole diff again; if the header miscounts, correct its counts or write `@@ ... @@`, which counts nothing",
    )
}

/// A hunk that only adds lines to an existing file, with nothing to find them by.
fn only_adds(at: usize) -> PayloadError {
    structure(
        at,
        "a hunk with no context lines that only adds (as diff -U0 prints)",
        "a diff with context lines (diff -u, git diff), so each hunk can be found",
    )
}

/// The lines of a hunk whose header counts none: up to the next hunk or file,
/// or the first line that is no hunk line. An empty line inside is a context
/// line that lost its space; empty lines at its end are not the hunk's.
fn bare_body<'a>(lines: &[&'a str], from: usize) -> Vec<&'a str> {
    let mut end = from;
    while end < lines.len()
        && !hunk_ends(lines, end)
        && (lines[end].is_empty() || lines[end].starts_with([' ', '-', '+', '\\']))
    {
        end += 1;
    }
    while end > from && lines[end - 1].is_empty() {
        end -= 1;
    }
    lines[from..end].to_vec()
}

/// Whether line `i` starts the next hunk or file, or closes a fence: no hunk
/// goes on past it.
fn hunk_ends(lines: &[&str], i: usize) -> bool {
    let l = lines[i];
    let next_file =
        l.starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "));
    hunk_header(l).is_some() || l.starts_with("diff ") || l.starts_with("```") || next_file
}

/// Whether line `i`, past a hunk's count, still reads as one of its lines: a
/// context, removed or added line (not an empty one: that ends a diff as often
/// as it is a context line that lost its space).
fn more_of_the_hunk(lines: &[&str], i: usize) -> bool {
    !hunk_ends(lines, i) && lines[i].starts_with([' ', '-', '+', '\\'])
}

/// The lines of the hunk that starts at `from`, and whether they disagree with
/// the header's counts. Agents often miscount: a hunk whose lines go on past its
/// count, or stop short of it before the next hunk or file or a closing fence,
/// is read as its lines show, since dropping a counted-out
/// line would apply part of the change and report success. `None` when the payload
/// ends short of the count: it was cut off.
fn hunk_body<'a>(
    lines: &[&'a str],
    from: usize,
    old_len: usize,
    new_len: usize,
) -> Option<(Vec<&'a str>, bool)> {
    let (mut old, mut new) = (0, 0);
    let mut end = from;
    while end < lines.len() && (old < old_len || new < new_len) && !hunk_ends(lines, end) {
        match lines[end].as_bytes().first() {
            Some(b'-') => old += 1,
            Some(b'+') => new += 1,
            Some(b'\\') => {}
            _ => {
                old += 1;
                new += 1;
            }
        }
        end += 1;
    }
    let counted = old >= old_len && new >= new_len;
    if !counted && end >= lines.len() {
        return None;
    }
    if lines.get(end).is_some_and(|l| l.starts_with('\\')) {
        end += 1;
    }
    let mut recounted = !counted;
    if counted {
        while end < lines.len() && more_of_the_hunk(lines, end) {
            end += 1;
            recounted = true;
        }
    } else {
        while end > from && lines[end - 1].is_empty() {
            end -= 1;
        }
    }
    Some((lines[from..end].to_vec(), recounted))
}

/// A `*** Begin Patch` file section's operation that acts on the whole file.
fn file_act(file: &str, act: FileAct, line: usize) -> Operation {
    let mut op = Operation::new(Find::Lines, String::new(), String::new(), line);
    op.label = Some(file.to_owned());
    op.act = Some(act);
    op
}

fn begin_patch(lines: &[&str], from: usize) -> Result<Payload, PayloadError> {
    let mut payload = Payload::default();
    let mut file: Option<String> = None;
    let mut hunk: Option<(Hunk, usize)> = None;
    // `*** Move to:` of the file being updated, done after its hunks.
    let mut moving: Option<Operation> = None;
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
        let header = ["*** Update File:", "*** Add File:", "*** Delete File:"]
            .iter()
            .find_map(|h| line.strip_prefix(h).map(|p| (*h, p.trim())));
        if header.is_some() || line.trim_end() == "*** End Patch" {
            flush(&mut hunk, &file, &mut payload);
            payload.operations.extend(moving.take());
        }
        if line.trim_end() == "*** End Patch" {
            ended = true;
            break;
        }
        if let Some((kind, p)) = header {
            file = Some(p.to_owned());
            hunk = match kind {
                "*** Delete File:" => {
                    let delete = FileAct::Delete { listed: false };
                    payload.operations.push(file_act(p, delete, at));
                    None
                }
                _ => Some((Hunk::default(), at)),
            };
        } else if let Some(to) = line.strip_prefix("*** Move to:") {
            match (&file, &hunk) {
                (Some(f), Some((h, _))) if h.search.is_empty() && h.replace.is_empty() => {
                    moving = Some(file_act(f, FileAct::MoveTo(to.trim().to_owned()), at));
                }
                _ => {
                    return Err(structure(
                        at,
                        format!("`{}` not right after `*** Update File:`", line.trim_end()),
                        "`*** Move to: NEW/PATH` on the line after `*** Update File: OLD/PATH`",
                    ));
                }
            }
        } else if let Some(anchor) = line.strip_prefix("@@") {
            let anchor = Some(anchor.trim().to_owned()).filter(|a| !a.is_empty());
            // An `@@` line right after another (no lines between) nests in it.
            let nested = hunk.as_mut().filter(|(h, _)| {
                h.search.is_empty() && h.replace.is_empty() && !h.anchors.is_empty()
            });
            match nested {
                Some((h, _)) => h.anchors.extend(anchor),
                None => {
                    flush(&mut hunk, &file, &mut payload);
                    hunk = Some((
                        Hunk {
                            anchors: anchor.into_iter().collect(),
                            ..Hunk::default()
                        },
                        at,
                    ));
                }
            }
        } else if line.trim_end() == "*** End of File" {
            if let Some((h, _)) = hunk.as_mut() {
                h.end_of_file = true;
            }
        } else if let Some((h, _)) = hunk.as_mut() {
            h.take(line);
        } else if !line.trim().is_empty() {
            return Err(structure(
                at,
                format!("`{line}` outside a file's hunks"),
                "hunks after `*** Update File:` or `*** Add File:` (a deleted file has none)",
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
    fn a_begin_patch_in_prose_and_a_fence_is_read_with_a_note() {
        let text = "Apply this:\n```\n*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n```\nDone.\n";
        assert_eq!(ops(text), [op("a.py", "x = 1\n", "x = 2\n", None)]);
        let notes = parse(text).unwrap().notes;
        assert!(
            notes
                .iter()
                .any(|n| n.contains("ignored 2 line(s) of text outside the patch")),
            "{notes:?}"
        );
    }

    #[test]
    fn hunk_headers_without_line_numbers_are_read_by_their_lines() {
        let text = "--- a/src/a.py\n+++ b/src/a.py\n@@ ... @@\n def f():\n-    return 1\n+    return 2\n\n     pass\n@@\n-x = 1\n+x = 2\n--- /dev/null\n+++ b/new.py\n@@ ... @@\n+y = 1\n\nThat is all.\n";
        assert_eq!(
            ops(text),
            [
                op(
                    "src/a.py",
                    "def f():\n    return 1\n\n    pass\n",
                    "def f():\n    return 2\n\n    pass\n",
                    None
                ),
                op("src/a.py", "x = 1\n", "x = 2\n", None),
                op("new.py", "", "y = 1\n", None),
            ]
        );
        let only_adds = "--- a/x\n+++ b/x\n@@ ... @@\n+new\n";
        assert!(parse(only_adds).is_err());
    }

    #[test]
    fn a_hunk_cut_short_says_what_it_holds_and_how_to_fix_its_header() {
        let err =
            parse("--- src/lib.rs\n+++ src/lib.rs\n@@ -300,3 +300,4 @@\n a\n+b\n c\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("counts 3 old and 4 new lines, the payload ends after 2 and 3"),
            "{err}"
        );
        assert!(err.hint().contains("`@@ ... @@`"), "{}", err.hint());
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
    fn cut_hunks_unanchored_inserts_binary_changes_and_stray_moves_are_refused() {
        for text in [
            "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n",
            "--- a/x\n+++ b/x\n@@ -3,0 +4 @@\n+new\n",
            "*** Begin Patch\n*** Update File: x\n@@\n-a\n+b\n",
            "*** Begin Patch\n*** Delete File: x\n*** Move to: y\n*** End Patch\n",
            "*** Begin Patch\n*** Delete File: x\n-a\n*** End Patch\n",
            "*** Begin Patch\n*** Update File: x\n@@\n-a\n+b\n*** Move to: y\n*** End Patch\n",
            "diff --git a/logo.png b/logo.png\nindex 1..2 100644\nBinary files a/logo.png and b/logo.png differ\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
            "diff --git a/x.bin b/x.bin\nindex 1..2\nGIT binary patch\nliteral 3\n",
        ] {
            assert!(
                matches!(parse(text), Err(PayloadError::Patch { .. })),
                "{text}"
            );
        }
    }

    /// (file, act) of each operation that acts on a whole file, and the file of each hunk.
    fn acts(text: &str) -> Vec<(Option<String>, Option<FileAct>)> {
        assert!(detect(text), "{text}");
        parse(text)
            .unwrap()
            .operations
            .into_iter()
            .map(|o| (o.label, o.act))
            .collect()
    }

    fn named(file: &str, act: Option<FileAct>) -> (Option<String>, Option<FileAct>) {
        (Some(file.to_owned()), act)
    }

    #[test]
    fn begin_patch_deletes_and_moves_after_the_files_hunks() {
        let text = "*** Begin Patch\n*** Delete File: old/legacy.py\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def main():\n-    run()\n+    run(debug=False)\n*** Update File: README.md\n*** Move to: docs/README.md\n*** End Patch\n";
        let to = |p: &str| Some(FileAct::MoveTo(p.to_owned()));
        assert_eq!(
            acts(text),
            [
                named("old/legacy.py", Some(FileAct::Delete { listed: false })),
                named("src/app.py", None),
                named("src/app.py", to("src/main.py")),
                named("README.md", to("docs/README.md")),
            ]
        );
    }

    #[test]
    fn unified_diffs_delete_through_dev_null_and_move_through_git_renames() {
        let delete = Some(FileAct::Delete { listed: true });
        let diff_u = "--- notes.txt\t2024-05-01 09:00:00.000000000 +0200\n+++ /dev/null\t1970-01-01 01:00:00.000000000 +0100\n@@ -1,2 +0,0 @@\n-a\n-b\n";
        assert_eq!(
            acts(diff_u),
            [named("notes.txt", None), named("notes.txt", delete.clone())]
        );
        let git = "diff --git a/src/old.rs b/src/old.rs\ndeleted file mode 100644\nindex 3b18e51..0000000\n--- a/src/old.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-fn old() {}\ndiff --git a/empty.txt b/empty.txt\ndeleted file mode 100644\nindex e69de29..0000000\ndiff --git a/lib/a.py b/lib/b.py\nsimilarity index 88%\nrename from lib/a.py\nrename to lib/b.py\nindex 1..2 100644\n--- a/lib/a.py\n+++ b/lib/b.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\ndiff --git a/same name.md b/same name.md\nsimilarity index 100%\nrename from same name.md\nrename to docs/same name.md\ndiff --git a/new.txt b/new.txt\nnew file mode 100644\nindex 0000000..e69de29\n";
        let ops = parse(git).unwrap().operations;
        let seen: Vec<_> = ops
            .iter()
            .map(|o| (o.label.clone(), o.act.clone()))
            .collect();
        assert_eq!(
            seen,
            [
                named("src/old.rs", None),
                named("src/old.rs", delete.clone()),
                named("empty.txt", delete),
                named("lib/a.py", None),
                named("lib/a.py", Some(FileAct::MoveTo("lib/b.py".into()))),
                named(
                    "same name.md",
                    Some(FileAct::MoveTo("docs/same name.md".into()))
                ),
                named("new.txt", None),
            ]
        );
        let created = ops.last().unwrap();
        assert_eq!(
            (created.search.as_str(), created.replace.as_str()),
            ("", "")
        );
    }

    #[test]
    fn marker_blocks_and_prose_are_no_patch() {
        assert!(!detect(
            "<<<<<<< SEARCH\n--- a\n=======\n+++ b\n>>>>>>> REPLACE\n"
        ));
        assert!(!detect("--- a list\n+++ more\nno hunk\n"));
    }
}

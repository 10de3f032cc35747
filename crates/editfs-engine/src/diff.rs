//! Unified diffs for reports.
//!
//! A transaction on a 50 MiB file must not diff 50 MiB: `doc_diff` diffs only the
//! runs of lines the document knows it changed (plus context), and `file_diff`,
//! for edits made on bytes, skips the common prefix and suffix first.

use std::fmt::Write;

use similar::{ChangeTag, TextDiff};

use super::working_text::Doc;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The `--- a/` / `+++ b/` lines. An absolute name (a file outside any project,
/// as `editfs apply` was given it) loses its leading `/`, as `git diff` writes it,
/// so the header reads `a/tmp/x.py`, not `a//tmp/x.py`.
fn header(name: &str) -> String {
    let name = super::report::shown_name(name.trim_start_matches('/'));
    format!("--- a/{name}\n+++ b/{name}\n")
}

/// A unified diff of `old` into `new`, labelled with `name`; empty when they are equal.
pub fn file_diff(old: &[u8], new: &[u8], name: &str) -> String {
    if old == new {
        return String::new();
    }
    let (start, skipped) = common_prefix_lines(old, new);
    let (old_end, new_end) = common_suffix_start(old, new, start);
    let old_mid = String::from_utf8_lossy(&old[start..old_end]);
    let new_mid = String::from_utf8_lossy(&new[start..new_end]);
    let mut out = header(name);
    out.push_str(&hunks(&old_mid, &new_mid, skipped, skipped));
    out
}

/// A unified diff of the changes recorded in `doc`, made from `old`; `None` if
/// the record does not hold together (the caller then diffs the bytes).
pub fn doc_diff(old: &[u8], doc: &Doc<'_>, name: &str) -> Option<String> {
    let runs = doc.dirty();
    let mut out = header(name);
    let mut shift = 0isize;
    let mut k = 0;
    while k < runs.len() {
        let end = |r: &super::working_text::Dirty| r.start + r.new_len;
        let mut j = k;
        while j + 1 < runs.len() && runs[j + 1].start <= end(&runs[j]) + 2 * CONTEXT {
            j += 1;
        }
        let from = runs[k].start.saturating_sub(CONTEXT);
        let to = (end(&runs[j]) + CONTEXT).min(doc.len());
        // The lines just outside a group are original lines: they locate the old bytes.
        let old_from = if from < runs[k].start {
            doc.original_span(from)?.start
        } else {
            0
        };
        let old_to = if to < doc.len() {
            doc.original_span(to)?.start
        } else {
            old.len()
        };
        let mut new = Vec::new();
        doc.write_lines(from..to, &mut new);
        let old_first = usize::try_from(from as isize - shift).ok()?;
        out.push_str(&hunks(
            &String::from_utf8_lossy(old.get(old_from..old_to)?),
            &String::from_utf8_lossy(&new),
            old_first,
            from,
        ));
        shift += runs[k..=j]
            .iter()
            .map(|r| r.new_len as isize - r.old_len as isize)
            .sum::<isize>();
        k = j + 1;
    }
    Some(if out.contains("\n@@ ") {
        out
    } else {
        String::new()
    })
}

/// A unified diff between two small texts whose first lines are numbered `old_first` and `new_first`.
pub fn text_diff(
    old: &str,
    new: &str,
    labels: (&str, &str),
    old_first: usize,
    new_first: usize,
) -> String {
    let mut out = format!("--- {}\n+++ {}\n", labels.0, labels.1);
    out.push_str(&hunks(old, new, old_first - 1, new_first - 1));
    out
}

/// Start of the line holding the first difference (less some context), and the lines before it.
fn common_prefix_lines(old: &[u8], new: &[u8]) -> (usize, usize) {
    let same = common_prefix(old, new);
    let mut start = memchr::memrchr(b'\n', &old[..same]).map_or(0, |i| i + 1);
    for _ in 0..CONTEXT {
        if start == 0 {
            break;
        }
        start = memchr::memrchr(b'\n', &old[..start - 1]).map_or(0, |i| i + 1);
    }
    (start, memchr::memchr_iter(b'\n', &old[..start]).count())
}

/// Where the common tail starts in `old` and `new`, at a line boundary in both, plus some context.
fn common_suffix_start(old: &[u8], new: &[u8], start: usize) -> (usize, usize) {
    let max = (old.len() - start).min(new.len() - start);
    let mut s = common_suffix(&old[start..], &new[start..]).min(max);
    let line_start = |buf: &[u8], s: usize| s == buf.len() || buf[buf.len() - s - 1] == b'\n';
    let boundary = |s: usize| s == 0 || (line_start(old, s) && line_start(new, s));
    while !boundary(s) {
        s -= 1;
    }
    for _ in 0..CONTEXT {
        let tail = &old[old.len() - s..];
        match memchr::memchr(b'\n', tail) {
            Some(i) => s -= i + 1,
            None => break,
        }
    }
    (old.len() - s, new.len() - s)
}

/// Bytes compared at once before the exact position is sought; slice equality is a memcmp.
const STRIDE: usize = 256;

/// How many bytes `a` and `b` share at their start.
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + STRIDE <= n && a[i..i + STRIDE] == b[i..i + STRIDE] {
        i += STRIDE;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// How many bytes `a` and `b` share at their end.
pub(crate) fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = 0;
    while i + STRIDE <= n && a[n - i - STRIDE..n - i] == b[n - i - STRIDE..n - i] {
        i += STRIDE;
    }
    i + a[..n - i]
        .iter()
        .rev()
        .zip(b[..n - i].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

fn hunks(old: &str, new: &str, old_skip: usize, new_skip: usize) -> String {
    let diff = TextDiff::from_lines(old, new);
    let mut out = String::new();
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (o, n) = (
            first.old_range().start..last.old_range().end,
            first.new_range().start..last.new_range().end,
        );
        let _ = writeln!(
            out,
            "@@ -{} +{} @@",
            range(o.start + old_skip, o.len()),
            range(n.start + new_skip, n.len())
        );
        for op in &group {
            for change in diff.iter_changes(op) {
                let sign = match change.tag() {
                    ChangeTag::Equal => ' ',
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                };
                let line = change.value();
                out.push(sign);
                out.push_str(line);
                if !line.ends_with('\n') {
                    out.push_str("\n\\ No newline at end of file\n");
                }
            }
        }
    }
    out
}

fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        _ => format!("{},{len}", start + 1),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_absolute_name_is_written_without_a_double_slash() {
        let d = file_diff(b"a\n", b"b\n", "/tmp/p/x.py");
        assert!(
            d.starts_with("--- a/tmp/p/x.py\n+++ b/tmp/p/x.py\n@@"),
            "{d}"
        );
    }

    use super::*;

    #[test]
    fn equal_files_have_no_diff() {
        assert_eq!(file_diff(b"a\n", b"a\n", "f"), "");
    }

    #[test]
    fn hunk_numbers_count_skipped_lines() {
        let old: String = (1..=100).map(|i| format!("{i}\n")).collect();
        let new = old.replace("\n50\n", "\nfifty\n");
        let d = file_diff(old.as_bytes(), new.as_bytes(), "f");
        assert_eq!(
            d,
            "--- a/f\n+++ b/f\n@@ -47,7 +47,7 @@\n 47\n 48\n 49\n-50\n+fifty\n 51\n 52\n 53\n"
        );
    }

    #[test]
    fn missing_final_newline_is_marked() {
        let d = file_diff(b"a\nb", b"a\nc", "f");
        assert!(
            d.contains("-b\n\\ No newline at end of file\n+c\n\\ No newline"),
            "{d}"
        );
    }

    #[test]
    fn change_at_the_very_end_and_start() {
        assert!(file_diff(b"a\n", b"a\nb\n", "f").contains("@@ -1 +1,2 @@\n a\n+b\n"));
        assert!(file_diff(b"a\n", b"b\na\n", "f").contains("@@ -1 +1,2 @@\n+b\n a\n"));
    }
}

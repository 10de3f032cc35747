//! Which of the new content's problems the edit made: each is mapped back
//! through the change to the old content's lines, and one the old content
//! already had there is not the edit's doing.
//!
//! Error recovery is not local: an unclosed brace added at line 10 may show as
//! a missing `}` at the end of the file. So when the old content parsed
//! cleanly, every problem of the new one is the edit's; when it was already
//! broken, only problems at the changed lines count, as a parser's reading of
//! the old breakage may move about as the file changes elsewhere.

use std::ops::Range;

use similar::{Algorithm, DiffOp, capture_diff_slices};

use super::problem::Problem;

/// Changed lines between the common head and tail that are diffed line by
/// line; past this (a rewritten file) the middle counts as one change, as
/// a line diff costs the product of the lines and the changes.
const MAX_DIFFED: usize = 4000;

/// A run of changed lines (0-based, end exclusive) in the old and new content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    pub old: Range<usize>,
    pub new: Range<usize>,
}

/// The changes that turn the old content into the new one, in line order.
#[derive(Debug)]
pub struct Changes {
    hunks: Vec<Hunk>,
}

fn lines(text: &[u8]) -> Vec<&[u8]> {
    text.split_inclusive(|&b| b == b'\n').collect()
}

impl Changes {
    pub fn between(old: &[u8], new: &[u8]) -> Changes {
        let (old, new) = (lines(old), lines(new));
        let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
        let tail = old[head..]
            .iter()
            .rev()
            .zip(new[head..].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let (old_mid, new_mid) = (head..old.len() - tail, head..new.len() - tail);
        if old_mid.is_empty() && new_mid.is_empty() {
            return Changes { hunks: Vec::new() };
        }
        let whole = Hunk {
            old: old_mid.clone(),
            new: new_mid.clone(),
        };
        if old_mid.len() + new_mid.len() > MAX_DIFFED {
            return Changes { hunks: vec![whole] };
        }
        let ops = capture_diff_slices(Algorithm::Myers, &old[old_mid], &new[new_mid]);
        let hunks = ops
            .iter()
            .filter(|op| !matches!(op, DiffOp::Equal { .. }))
            .map(|op| Hunk {
                old: shifted(op.old_range(), head),
                new: shifted(op.new_range(), head),
            })
            .collect();
        Changes { hunks }
    }

    /// The old lines (inclusive) that new line `line` stands for: itself where
    /// it was not changed, the whole old run it replaced (and the line above,
    /// where a parser may place an error about the join) where it was.
    pub fn to_old(&self, line: usize) -> (usize, usize) {
        let mut shift = 0isize;
        for h in &self.hunks {
            if line < h.new.start {
                break;
            }
            if line < h.new.end.max(h.new.start + 1) {
                return (h.old.start.saturating_sub(1), h.old.end);
            }
            shift += h.old.len() as isize - h.new.len() as isize;
        }
        let old = (line as isize + shift).max(0) as usize;
        (old, old)
    }

    /// Whether new line `line` is one the edit wrote.
    pub fn changed(&self, line: usize) -> bool {
        self.hunks.iter().any(|h| h.new.contains(&line))
    }

    /// Whether new lines `first..=last` hold a changed line, or border one.
    pub fn near(&self, first: usize, last: usize) -> bool {
        self.hunks
            .iter()
            .any(|h| h.new.start.saturating_sub(1) <= last && first <= h.new.end)
    }

    /// The first changed line of the new content (0-based), if any changed.
    pub fn first(&self) -> Option<usize> {
        self.hunks.first().map(|h| h.new.start)
    }
}

fn shifted(r: Range<usize>, by: usize) -> Range<usize> {
    r.start + by..r.end + by
}

/// The problems of `new` that the edit made: none of `old`'s covers the
/// line they point at, mapped back, and, when `old` had problems of its
/// own, they touch the changed lines. A problem that points at a line the
/// edit changed is the edit's unless an old one pointed there too: an old
/// error node may span the whole file (a bracket never closed reads as one
/// error from the module's start to its end), and its span would excuse
/// every new break.
pub fn fresh<'p>(new: &'p [Problem], old: &[Problem], changes: &Changes) -> Vec<&'p Problem> {
    new.iter()
        .filter(|p| {
            let (lo, hi) = changes.to_old(p.line);
            let changed = changes.changed(p.line);
            let had = old.iter().any(|q| {
                (lo..=hi).contains(&q.line) || (!changed && q.span.0 <= hi && lo <= q.span.1)
            });
            let near = changes.near(p.span.0, p.span.1);
            !had && (old.is_empty() || near)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(line: usize) -> Problem {
        Problem::at(line, 0, "x")
    }

    #[test]
    fn unchanged_lines_map_across_an_insertion() {
        let c = Changes::between(b"a\nb\nc\n", b"a\nnew\nnew\nb\nc\n");
        assert_eq!(
            c.hunks,
            vec![Hunk {
                old: 1..1,
                new: 1..3
            }]
        );
        assert_eq!(c.to_old(0), (0, 0));
        assert_eq!(c.to_old(3), (1, 1));
        assert_eq!(c.to_old(4), (2, 2));
        assert_eq!(c.to_old(1), (0, 1));
        assert!(c.near(2, 2) && !c.near(4, 4));
    }

    #[test]
    fn two_separate_edits_are_two_changes() {
        let old = b"1\n2\n3\n4\n5\n6\n";
        let new = b"1\nX\n3\n4\n5\nY\nZ\n";
        let c = Changes::between(old, new);
        assert_eq!(c.hunks.len(), 2);
        assert_eq!(
            c.to_old(3),
            (3, 3),
            "a line between the edits maps to itself"
        );
        assert_eq!(c.first(), Some(1));
    }

    #[test]
    fn an_old_problem_shifted_by_the_edit_is_not_fresh() {
        let c = Changes::between(b"a\nbroken\n", b"new\na\nbroken\n");
        let old = [problem(1)];
        let new = [problem(2)];
        assert!(fresh(&new, &old, &c).is_empty());
    }

    #[test]
    fn on_a_clean_file_a_problem_anywhere_is_fresh() {
        let c = Changes::between(b"a\nb\nc\n", b"a\n{\nc\n");
        let new = [problem(2)];
        assert_eq!(fresh(&new, &[], &c).len(), 1);
    }

    #[test]
    fn on_a_broken_file_only_problems_at_the_change_count() {
        let old_text = b"a\nb\nc\nd\ne\nf\n";
        let c = Changes::between(old_text, b"a\nB\nc\nd\ne\nf\n");
        let old = [problem(5)];
        let far = [problem(3)];
        assert!(fresh(&far, &old, &c).is_empty());
        let here = [problem(1)];
        assert_eq!(fresh(&here, &old, &c).len(), 1);
    }

    #[test]
    fn a_rewritten_middle_past_the_diff_limit_is_one_change() {
        let old: Vec<u8> = (0..3000)
            .flat_map(|i| format!("o{i}\n").into_bytes())
            .collect();
        let new: Vec<u8> = (0..3000)
            .flat_map(|i| format!("n{i}\n").into_bytes())
            .collect();
        let c = Changes::between(&old, &new);
        assert_eq!(
            c.hunks,
            vec![Hunk {
                old: 0..3000,
                new: 0..3000
            }]
        );
    }
}

//! Replays: an agent re-sends an edit it already made. Recognised only where the
//! evidence is unambiguous, because "already applied" is a success that changes
//! nothing, and a wrong one hides an edit that never happened.
//!
//! (a) SEARCH is gone and REPLACE stands where SEARCH's closest region lies, and
//! REPLACE brings a line SEARCH lacks (a deletion leaves nothing behind that could
//! prove it happened, so a mistyped deletion must fail rather than pass), or
//! REPLACE is SEARCH with lines taken out between context it keeps on both
//! sides: that context standing together proves the deletion, since a mistyped
//! deletion leaves the lines it meant between the two.
//! (b) SEARCH is there and the file around it already reads as REPLACE: an
//! insertion before or after SEARCH was made, and must not be made twice. Only
//! an insertion with some text is evidence: blank lines next to SEARCH are common
//! enough to be there by chance.

use std::ops::Range;

use super::diagnose;
use super::interpret::{Done, Failure, Transaction};
use super::line_match::{self, Found};
use super::payload::Operation;
use super::report::ErrorKind;
use super::tolerant::{self, Tier};
use super::working_text::Doc;

/// Whether REPLACE has a line that SEARCH lacks, so that finding REPLACE can show
/// the edit was made (rule (a)).
pub fn adds_a_line(search: &[&str], replace: &[&str]) -> bool {
    replace
        .iter()
        .filter(|r| !tolerant::is_blank(r))
        .any(|r| !search.iter().any(|s| s.trim_end() == r.trim_end()))
}

/// Whether REPLACE is SEARCH with a run of lines taken out between context kept
/// on both sides, one side holding a line that says something (more than
/// punctuation) and the other a line that is not blank: `}` next to `}` stands
/// together too often by chance, but a statement next to the `}` that closed
/// the block deleted after it does not (the deleted lines often end as the
/// context after them does, `}` before `}`), and a blank side may be set aside
/// by a tolerant match, leaving context on one side only.
pub fn deletes_between_context(search: &[&str], replace: &[&str]) -> bool {
    let same = |s: &&str, r: &&str| s.trim_end() == r.trim_end();
    let n = replace.len();
    if n == 0 || n >= search.len() {
        return false;
    }
    let pre = search
        .iter()
        .zip(replace)
        .take_while(|(s, r)| same(s, r))
        .count();
    let post = search
        .iter()
        .rev()
        .zip(replace.iter().rev())
        .take_while(|(s, r)| same(s, r))
        .count();
    let says = |lines: &[&str]| lines.iter().any(|l| l.chars().any(char::is_alphanumeric));
    let stands = |lines: &[&str]| lines.iter().any(|l| !tolerant::is_blank(l));
    let proves = |a: &[&str], b: &[&str]| (says(a) && stands(b)) || (stands(a) && says(b));
    // Any split `k` of REPLACE into SEARCH's first k lines and its last n - k.
    let (low, high) = (n.saturating_sub(post).max(1), pre.min(n - 1));
    (low..=high).any(|k| proves(&replace[..k], &replace[k..]))
}

/// The same for text that may lie inside a line (JSON `search`): REPLACE must
/// also be more than a piece of SEARCH.
pub fn adds_text(search: &str, replace: &str) -> bool {
    !search.contains(replace)
        && adds_a_line(
            &super::payload::text_lines(search),
            &super::payload::text_lines(replace),
        )
}

/// Rule (a) for text inside a line: whether REPLACE, found at `hit` of `line`
/// (the file line or lines that hold it), stands where SEARCH's closest stretch
/// of that line lies. A line-level region says little when REPLACE is a few
/// characters of a long line: a mistyped SEARCH of one part of a minified line
/// must not pass as made because REPLACE (`x`) occurs once at its other end.
/// The closest stretch is the window of SEARCH's length that shares the most
/// byte pairs with SEARCH; REPLACE must overlap one such window.
pub fn text_near_search(line: &[u8], search: &[u8], hit: Range<usize>) -> bool {
    let n = search.len();
    if n < 2 || line.len() <= n {
        return true;
    }
    let pair = |w: &[u8]| usize::from(w[0]) << 8 | usize::from(w[1]);
    let mut want = vec![0u32; 1 << 16];
    for w in search.windows(2) {
        want[pair(w)] += 1;
    }
    let mut have = vec![0u32; 1 << 16];
    let mut score = 0u32;
    // The window [start, start + n) holds the pairs starting in [start, start + n - 1).
    let pairs: Vec<usize> = line.windows(2).map(pair).collect();
    for &p in &pairs[..n - 1] {
        score += u32::from(have[p] < want[p]);
        have[p] += 1;
    }
    let (mut best, mut near) = (score, hit.start < n);
    for start in 1..=line.len() - n {
        let gone = pairs[start - 1];
        have[gone] -= 1;
        score -= u32::from(have[gone] < want[gone]);
        let come = pairs[start + n - 2];
        score += u32::from(have[come] < want[come]);
        have[come] += 1;
        let overlaps = hit.start < start + n && start < hit.end;
        if score > best {
            (best, near) = (score, overlaps);
        } else if score == best {
            near |= overlaps;
        }
    }
    near
}

/// Where SEARCH's lines sit inside REPLACE (line offsets), for rule (b).
fn offsets(search: &[&str], replace: &[&str], equal: impl Fn(&str, &str) -> bool) -> Vec<usize> {
    if search.is_empty() || replace.len() <= search.len() {
        return Vec::new();
    }
    (0..=replace.len() - search.len())
        .filter(|&k| search.iter().zip(&replace[k..]).all(|(s, r)| equal(r, s)))
        .collect()
}

/// Whether the file around the match at `start` already reads as REPLACE (rule (b)).
pub fn reads_as_replace(doc: &Doc, found: &Found<'_>, start: usize, replace: &[&str]) -> bool {
    replace_around(doc, found, start, replace).next().is_some()
}

/// Rule (b) where SEARCH occurs more than once because the insertion repeats
/// its lines (a function added after SEARCH that ends as SEARCH does, a line
/// doubled): the region of the file that reads as REPLACE, when there is one
/// such region around the matches and it holds every match. Before the edit
/// SEARCH stood once where REPLACE stands now, so the copies are the edit's
/// own; a match outside the region is a copy the edit did not make, and the
/// operation stays ambiguous.
pub fn replace_holding_every_match(
    doc: &Doc,
    found: &Found<'_>,
    replace: &[&str],
) -> Option<Range<usize>> {
    let mut regions: Vec<Range<usize>> = found
        .starts
        .iter()
        .flat_map(|&s| replace_around(doc, found, s, replace).collect::<Vec<_>>())
        .collect();
    regions.sort_unstable_by_key(|r| r.start);
    regions.dedup();
    let [region] = &regions[..] else { return None };
    let m = found.len();
    found
        .starts
        .iter()
        .all(|&s| region.start <= s && s + m <= region.end)
        .then(|| region.clone())
}

/// The regions around the match at `start` that read as REPLACE (without its
/// blank edges, for a tolerant match), SEARCH standing in REPLACE beside some
/// text REPLACE adds.
fn replace_around<'r>(
    doc: &'r Doc,
    found: &'r Found<'_>,
    start: usize,
    replace: &'r [&str],
) -> impl Iterator<Item = Range<usize>> + 'r {
    let tier = found.tier();
    let replace = match tier {
        Tier::LineNumbers => &[][..],
        Tier::Exact => replace,
        _ => {
            let (lead, trail) = tolerant::blank_edges(replace);
            &replace[lead..replace.len() - trail]
        }
    };
    let file = move |i: usize| std::str::from_utf8(doc.line(i)).ok();
    let m = found.pattern.lines.len();
    offsets(&found.pattern.lines, replace, |r, s| r == s)
        .into_iter()
        .filter(move |&k| {
            replace[..k]
                .iter()
                .chain(&replace[k + m..])
                .any(|l| !tolerant::is_blank(l))
        })
        .filter_map(move |k| start.checked_sub(k))
        .filter(move |&first| first + replace.len() <= doc.len())
        .filter(move |&first| {
            replace
                .iter()
                .enumerate()
                .all(|(j, r)| file(first + j).is_some_and(|f| tier.equal(f, r)))
        })
        .map(move |first| first..first + replace.len())
}

/// Rule (b) for a literal that may lie inside a line: the bytes around the hit at
/// `at` already read as REPLACE.
pub fn text_reads_as_replace(bytes: &[u8], at: usize, search: &[u8], replace: &[u8]) -> bool {
    if search.is_empty() || replace.len() <= search.len() {
        return false;
    }
    memchr::memmem::find_iter(replace, search).any(|k| {
        let mut added = replace[..k].iter().chain(&replace[k + search.len()..]);
        added.any(|b| !b.is_ascii_whitespace())
            && at
                .checked_sub(k)
                .and_then(|first| bytes.get(first..first + replace.len()))
                .is_some_and(|there| there == replace)
    })
}

/// Why a tolerant match whose REPLACE reads as the file already does is a no-op.
pub(super) const SET_ASIDE: &str = "SEARCH and REPLACE differ only in what this tolerant match set aside, so they are identical as written into the file: nothing to change";

/// Rule (b)'s warning: SEARCH is there, and so is the text REPLACE adds around it.
pub(super) const INSERTED_BEFORE: &str =
    "the file around SEARCH already reads as REPLACE (the insertion was made before)";

/// A re-sent deletion's replay: the file is gone, and the caller's history
/// shows an edit removed it with nothing at that path since.
pub(super) const DELETED_BEFORE: &str = "the file is gone, and the project's history shows an edit removed it with nothing at that path since (it was deleted before)";

/// A re-sent move's replay: the file is gone from its old path, moved by an
/// edit as the history shows, and where it went already reads as the move's hunks make it.
pub(super) const MOVED_BEFORE: &str = "the file is gone, and the project's history shows an edit moved it to the path this move names, which already reads as its hunks make it (it was moved before)";

/// A no-op success when REPLACE is found where SEARCH is not, once (or at all, with `all`).
pub(super) fn replay(ranges: &[[usize; 2]], op: &Operation) -> Option<Done> {
    let ok = ranges.len() == 1 || (op.all && !ranges.is_empty());
    ok.then(|| {
        Done::replayed(
            [ranges[0][0], ranges[ranges.len() - 1][1]],
            "SEARCH is not in the file but REPLACE is, where SEARCH was",
        )
    })
}

impl Transaction<'_, '_> {
    /// SEARCH is missing: a replay (rule (a) of the `replay` module, an addition
    /// or a deletion between kept context) when REPLACE is there once, where
    /// SEARCH's closest region lies; a `not_found` at that
    /// region when a copy of REPLACE lies elsewhere; `None` when REPLACE is absent.
    pub(super) fn replayed_lines(
        &self,
        op: &Operation,
        search: &[&str],
        replace: &[&str],
        scope: Range<usize>,
    ) -> Option<Result<Done, Failure>> {
        let proves = adds_a_line(search, replace) || deletes_between_context(search, replace);
        if replace.is_empty() || !proves {
            return None;
        }
        let found = line_match::find(&self.doc, replace, scope.clone(), || self.tiers())?;
        let ranges: Vec<[usize; 2]> = found
            .starts
            .iter()
            .map(|s| [s + 1, s + found.len()])
            .collect();
        if let [one] = ranges[..]
            && let Some(d) = diagnose::replay_misplaced(
                &self.doc,
                search,
                (scope.clone(), true),
                (one[0] - 1..one[1], &[]),
            )
        {
            return Some(Err(Failure {
                kind: ErrorKind::NotFound,
                message: "SEARCH text not found in the file".into(),
                hint: Some(d.hint),
                closest: d.closest,
            }));
        }
        replay(&ranges, op).map(Ok)
    }

    /// Rule (b) on a match found only with tolerance (at another indentation,
    /// say): the region around it reads as REPLACE, but when another region
    /// resembles SEARCH as much or nearly (`diagnose::replay_misplaced`), that
    /// one may be SEARCH's own, gone stale, and this a copy: a `not_found`
    /// there, never "already applied".
    pub(super) fn tolerant_replay_elsewhere(
        &self,
        found: &Found<'_>,
        search: &[&str],
        scope: Range<usize>,
    ) -> Option<Failure> {
        let copies: Vec<Range<usize>> = found.starts.iter().map(|&s| s..s + found.len()).collect();
        let d = diagnose::replay_misplaced(
            &self.doc,
            search,
            (scope, false),
            (copies[0].clone(), &copies[1..]),
        )?;
        Some(Failure {
            kind: ErrorKind::NotFound,
            message: "SEARCH text not found in the file".into(),
            hint: Some(d.hint),
            closest: d.closest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deletion_is_proved_only_by_context_that_says_something_on_both_sides() {
        assert!(deletes_between_context(&["a", "x", "b"], &["a", "b"]));
        assert!(deletes_between_context(
            &["a", "x", "y", "b", "c"],
            &["a", "b", "c"]
        ));
        assert!(!deletes_between_context(&["a", "x"], &["a"]));
        assert!(!deletes_between_context(&["x", "a"], &["a"]));
        assert!(!deletes_between_context(&["}", "x", "}"], &["}", "}"]));
        // The deleted block ends as the context after it: `}` closes both.
        let go = ["\tx := 1", "\tif x > 0 {", "\t\tprintln(x)", "\t}", "}"];
        assert!(deletes_between_context(&go, &["\tx := 1", "}"]));
        assert!(deletes_between_context(
            &["{", "x", "return y"],
            &["{", "return y"]
        ));
        assert!(!deletes_between_context(&["a", "x", ""], &["a", ""]));
        assert!(!deletes_between_context(&["a", "x", "b"], &["a", "c"]));
        assert!(!deletes_between_context(&["a", "b"], &["a", "b"]));
    }

    #[test]
    fn a_deletion_adds_no_line() {
        assert!(!adds_a_line(&["a", "bb"], &["a"]));
        assert!(!adds_a_line(&["a", "b"], &["b", "a"]));
        assert!(adds_a_line(&["a", "b"], &["a", "c"]));
        assert!(!adds_text("foo bar", "foo"));
        assert!(adds_text("bar", "qux"));
    }

    #[test]
    fn replace_inside_a_line_must_stand_where_search_resembles_that_line() {
        let line = b"x = [1230, 1231, 1232, 1233, 1234, 1235, 1236, 1237]";
        let at = |s: &str| {
            let i = line
                .windows(s.len())
                .position(|w| w == s.as_bytes())
                .unwrap();
            i..i + s.len()
        };
        assert!(!text_near_search(line, b"1234, 1235, 12378", at("x")));
        assert!(text_near_search(
            line,
            b"1234, 1235, 12378",
            at("1234, 1235")
        ));
        let line = b"DEBUG = False  # set by the deploy script";
        assert!(text_near_search(line, b"DEBUG = True", 0..13));
    }

    #[test]
    fn an_insertion_reads_as_replace_after_or_before() {
        assert!(text_reads_as_replace(b"x y z", 0, b"x", b"x y"));
        assert!(text_reads_as_replace(b"x y z", 2, b"y", b"x y"));
        assert!(!text_reads_as_replace(b"x z", 0, b"x", b"x y"));
        assert!(!text_reads_as_replace(b"x \n", 0, b"x", b"x \n"));
        assert_eq!(offsets(&["x"], &["w", "x", "y"], |a, b| a == b), [1]);
    }
}

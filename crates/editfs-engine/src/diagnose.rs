//! Why a SEARCH text was not found, said so that the next try succeeds.
//!
//! Finds the file region most like SEARCH (votes from lines that agree once
//! whitespace and typography are ignored, then a line-level comparison of a few
//! candidate windows of nearby lengths), and names the differences one by one.

use std::borrow::Cow;
use std::ops::Range;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use similar::{Algorithm, DiffOp, capture_diff_deadline, capture_diff_slices};

use super::diff::text_diff;
use super::placeholder;
use super::report::Closest;
use super::tolerant::{self, Tier, fold};
use super::working_text::Doc;

/// Candidate window starts examined in full.
const CANDIDATES: usize = 5;
/// How many lines longer or shorter than SEARCH a closest region may be.
const SLACK: usize = 3;
/// Time one character diff may take before it settles for an approximate answer.
const DIFF_BUDGET: Duration = Duration::from_millis(5);
/// Differences named one by one before the rest are counted.
const MAX_HINTS: usize = 3;
/// How alike (in characters) SEARCH and the place REPLACE stands must be at
/// least for that place to be SEARCH's own: a SEARCH resembling nothing there
/// (`qqqq` before `pub mod ast;`) is no evidence that the edit was made.
const REPLAY_RESEMBLANCE: f64 = 0.3;
/// How alike (in characters, indentation counted) another region and SEARCH
/// must be for that region to be SEARCH's own as likely as REPLACE's place:
/// a stale SEARCH that close to a copy of it makes "already applied" a guess.
const NEAR_COPY: f64 = 0.8;
/// Bytes of each text a character diff sees past their common head and tail:
/// a diff is quadratic at worst, and a one-line file of minified code would
/// otherwise hold the commit for minutes. What lies past counts as different.
const MAX_DIFFED: usize = 4096;
/// Characters of one line a report shows; a longer line is cut around where
/// SEARCH and the file part, so a miss on a 10 MB line reads in one screen.
const MAX_SHOWN: usize = 240;

/// The hint for a SEARCH sent to an empty or missing file.
pub const EMPTY_FILE: &str =
    "the file is empty (or does not exist yet); an empty SEARCH creates it";

pub struct Diagnosis {
    pub closest: Option<Closest>,
    pub hint: String,
}

fn line<'d>(doc: &'d Doc<'_>, i: usize) -> Cow<'d, str> {
    String::from_utf8_lossy(doc.line(i))
}

fn key(line: &str) -> u64 {
    tolerant::loose_key(line.as_bytes())
}

/// Explains why `search` matched nothing in `scope`.
pub fn not_found(doc: &Doc, search: &[&str], scope: Range<usize>) -> Diagnosis {
    if scope.is_empty() {
        let hint = if doc.is_empty() {
            EMPTY_FILE
        } else {
            "the line range given holds no lines"
        };
        return Diagnosis {
            closest: None,
            hint: hint.into(),
        };
    }
    let Some(window) = closest_window(doc, search, scope, &[]) else {
        return Diagnosis {
            closest: None,
            hint: "no line of SEARCH resembles any line of the file; read the file again and copy the lines to change exactly".into(),
        };
    };
    at_region(doc, search, window.start, window.len)
}

/// The report for SEARCH against the file lines `start..start + len`.
fn at_region(doc: &Doc, search: &[&str], start: usize, len: usize) -> Diagnosis {
    let region: Vec<Cow<'_, str>> = (start..start + len).map(|i| line(doc, i)).collect();
    let region: Vec<&str> = region.iter().map(|c| c.as_ref()).collect();
    let search_text = joined(search);
    let region_text = joined(&region);
    let similarity = char_ratio(&search_text, &region_text);
    let label = format!("file lines {}-{}", start + 1, start + len);
    let col = parting_column(&search_text, &region_text);
    let closest = Closest {
        start_line: start + 1,
        end_line: start + len,
        // Rounded down: a region that differs must never read as fully similar.
        similarity: (similarity * 1000.0 + 1e-9).floor() / 1000.0,
        diff: text_diff(
            &clip_lines(&search_text, col),
            &clip_lines(&region_text, col),
            ("SEARCH", &label),
            1,
            start + 1,
        ),
    };
    let hint = match search.iter().position(|l| placeholder::kind(l).is_some()) {
        Some(j) => elision(doc, search, j),
        None => explain(search, &region, start),
    };
    Diagnosis {
        closest: Some(closest),
        hint,
    }
}

fn joined(lines: &[&str]) -> String {
    lines.iter().flat_map(|l| [*l, "\n"]).collect()
}

/// A window of file lines and how much it resembles SEARCH.
#[derive(Clone, Copy, Debug)]
struct Window {
    start: usize,
    len: usize,
    /// Character similarity (0..1).
    chars: f64,
    /// Characters and lines together, slightly favouring SEARCH's own length.
    score: f64,
}

/// How much the file lines `start..start + len` resemble SEARCH.
fn measure(doc: &Doc, search: &[&str], start: usize, len: usize) -> Window {
    let keys: Vec<u64> = search.iter().map(|l| key(l)).collect();
    // Windows are told apart by their lines' heads: a measure then costs at most
    // MAX_DIFFED bytes a line, however long its lines are.
    let heads = |lines: &mut dyn Iterator<Item = &str>| -> String {
        lines.flat_map(|l| [capped(l), "\n"]).collect()
    };
    let lines: Vec<Cow<'_, str>> = (start..start + len).map(|i| line(doc, i)).collect();
    let text = heads(&mut lines.iter().map(|l| l.as_ref()));
    let file = &doc.keys(tolerant::loose_key)[start..start + len];
    let chars = char_ratio(&heads(&mut search.iter().copied()), &text);
    Window {
        start,
        len,
        chars,
        score: chars + line_ratio(&keys, file) - 0.001 * len.abs_diff(search.len()) as f64,
    }
}

/// Whether a replay found at file lines `at` stands where SEARCH's closest
/// region lies; the report of where it fails when not. It does not when some
/// other region resembles SEARCH at least as much: then REPLACE is only a
/// copy elsewhere, or text that has nothing to do with SEARCH, and the edit
/// was never made at SEARCH's own place; nor when another region resembles
/// SEARCH nearly as much (`NEAR_COPY`), as SEARCH may be that region gone
/// stale and REPLACE a copy beside it. Nor, for lines (`lines`), when
/// SEARCH resembles REPLACE's place too little (`qqqq` before `pub mod ast;`)
/// in a scope that holds other lines: then no region is its closest, and
/// nothing shows the edit was made. In a scope of REPLACE's lines alone,
/// they are SEARCH's closest region, however little alike.
pub fn replay_misplaced(
    doc: &Doc,
    search: &[&str],
    (scope, lines): (Range<usize>, bool),
    (at, copies): (Range<usize>, &[Range<usize>]),
) -> Option<Diagnosis> {
    let here = measure(doc, search, at.start, at.len());
    if lines && scope.len() > at.len() && here.chars < REPLAY_RESEMBLANCE {
        let mut d = at_region(doc, search, at.start, at.len());
        d.hint = format!(
            "REPLACE's text is at file lines {}-{}, but SEARCH does not resemble it, so nothing shows the edit was made there: {}",
            at.start + 1,
            at.end,
            d.hint
        );
        return Some(d);
    }
    // Another place of REPLACE (an operation on `all` places) is no other region.
    let mut avoid = vec![at.clone()];
    avoid.extend(copies.iter().cloned());
    let other = closest_window(doc, search, scope.clone(), &avoid)?;
    if other.score < here.score && other.chars < NEAR_COPY || !says_something(doc, &other) {
        return None;
    }
    if other.score < here.score {
        let mut d = at_region(doc, search, other.start, other.len);
        d.hint = format!(
            "REPLACE's text is at file lines {}-{}, but lines {}-{} resemble SEARCH nearly as much (a copy, or SEARCH's own place gone stale), so nothing shows the edit was made at SEARCH's own place: {}",
            at.start + 1,
            at.end,
            other.start + 1,
            other.start + other.len,
            d.hint
        );
        return Some(d);
    }
    // The report shows SEARCH's closest region itself, which may take in
    // REPLACE's place and more (SEARCH's line that REPLACE drops still there).
    let best = closest_window(doc, search, scope, &[])
        .filter(|w| w.score > other.score)
        .unwrap_or(other);
    let mut d = at_region(doc, search, best.start, best.len);
    let region = best.start..best.start + best.len;
    let (first, last) = (region.start + 1, region.end);
    d.hint = if region.start < at.end && at.start < region.end {
        format!(
            "REPLACE's text is at file lines {}-{}, within SEARCH's closest region (lines {first}-{last}), but that region does not read as REPLACE, so the edit was not made: {}",
            at.start + 1,
            at.end,
            d.hint
        )
    } else {
        format!(
            "REPLACE's text is at file lines {}-{}, but SEARCH's closest region is lines {first}-{last}, so the edit was not made there: {}",
            at.start + 1,
            at.end,
            d.hint
        )
    };
    Some(d)
}

/// Whether a window holds more than punctuation: closing braces resemble the
/// braces SEARCH ends with wherever blocks end, so a window of them alone is
/// no rival place for SEARCH (a `}` turned into statements and its `}`, the
/// file's last braces after it).
fn says_something(doc: &Doc, w: &Window) -> bool {
    (w.start..w.start + w.len).any(|i| doc.line(i).iter().any(u8::is_ascii_alphanumeric))
}

/// The best window of file lines for `search`, leaving out windows that overlap `avoid`.
fn closest_window(
    doc: &Doc,
    search: &[&str],
    scope: Range<usize>,
    avoid: &[Range<usize>],
) -> Option<Window> {
    let keys: Vec<u64> = search.iter().map(|l| key(l)).collect();
    let m = search.len();
    let clear = |s: &usize| avoid.iter().all(|a| s + m <= a.start || *s >= a.end);
    let mut starts = votes(doc, search, &keys, &scope, &clear);
    if starts.is_empty() {
        starts = by_bigrams(doc, search, &scope, &clear);
    }
    let m = search.len();
    let window = |s: usize, len: usize| s..(s + len).min(scope.end);
    // Lines that agree pick the start; lines and characters together pick the
    // length, so a region is neither cut short at a changed line nor padded.
    let mut best: Option<(f64, usize)> = None;
    for s in starts {
        let file = &doc.keys(tolerant::loose_key)[window(s, m)];
        let score = line_ratio(&keys, file);
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, s));
        }
    }
    let (_, start) = best?;
    // Lengths that clamp to the same window are measured once.
    let mut lengths: Vec<usize> = (m.saturating_sub(SLACK).max(1)..=m + SLACK)
        .map(|len| window(start, len).len())
        .collect();
    lengths.dedup();
    // Characters count twice here: a changed line costs a whole line in the line
    // ratio, as a missing one does, but only its changed characters in `chars`,
    // so without the weight a long SEARCH's changed last line fell out of its
    // region and the hint said to remove it.
    let length_score = |w: &Window| w.score + w.chars;
    let best = lengths
        .into_iter()
        .map(|len| measure(doc, search, start, len))
        .fold(None, |b: Option<Window>, c| match b {
            Some(b) if length_score(&b) >= length_score(&c) => Some(b),
            _ => Some(c),
        })?;
    (best.score > 0.0 && best.len > 0).then_some(best)
}

/// Byte length of the longest common head of `a` and `b`, at a character boundary.
fn common_head(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i)
}

/// At most `MAX_DIFFED` bytes of `s`, cut at a character boundary.
fn capped(s: &str) -> &str {
    let mut end = s.len().min(MAX_DIFFED);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// How alike two texts are (0 to 1, as `similar`'s ratio, counted in bytes),
/// in time linear in their length: the common head and tail are counted
/// exactly, and only the first `MAX_DIFFED` bytes between them are diffed,
/// under a deadline.
fn char_ratio(a: &str, b: &str) -> f64 {
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (ra, rb) = (&a[head..], &b[head..]);
    let tail = ra
        .iter()
        .rev()
        .zip(rb.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&ra[..ra.len() - tail], &rb[..rb.len() - tail]);
    let (am, bm) = (
        &am[..am.len().min(MAX_DIFFED)],
        &bm[..bm.len().min(MAX_DIFFED)],
    );
    let ops = capture_diff_deadline(
        Algorithm::Myers,
        am,
        0..am.len(),
        bm,
        0..bm.len(),
        Some(Instant::now() + DIFF_BUDGET),
    );
    let same: usize = ops
        .iter()
        .map(|op| match op {
            DiffOp::Equal { len, .. } => *len,
            _ => 0,
        })
        .sum();
    (2 * (head + tail + same)) as f64 / total as f64
}

fn line_ratio(a: &[u64], b: &[u64]) -> f64 {
    let same: usize = capture_diff_slices(Algorithm::Myers, a, b)
        .iter()
        .map(|op| {
            if let DiffOp::Equal { len, .. } = op {
                *len
            } else {
                0
            }
        })
        .sum();
    if a.is_empty() && b.is_empty() {
        1.0
    } else {
        2.0 * same as f64 / (a.len() + b.len()) as f64
    }
}

/// Window starts where the most SEARCH lines line up with equal file lines. A
/// line's vote is split among the file lines equal to it, so a line the file has
/// once outweighs a `}` that lines up at every closing brace of the file.
fn votes(
    doc: &Doc,
    search: &[&str],
    keys: &[u64],
    scope: &Range<usize>,
    clear: &dyn Fn(&usize) -> bool,
) -> Vec<usize> {
    /// A whole vote, split into parts.
    const VOTE: usize = 1 << 20;
    let mut at: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
    for (j, (k, l)) in keys.iter().zip(search).enumerate() {
        if !tolerant::is_blank(l) {
            at.entry(*k).or_default().push(j);
        }
    }
    let file = &doc.keys(tolerant::loose_key)[scope.clone()];
    let mut seen: FxHashMap<u64, usize> = FxHashMap::default();
    for k in file.iter().filter(|k| at.contains_key(k)) {
        *seen.entry(*k).or_default() += 1;
    }
    // Votes by window start, less `scope.start`: a flat array, since a file of
    // many alike lines casts a vote per line and SEARCH line.
    let mut tally = vec![0usize; scope.len()];
    for (o, k) in file.iter().enumerate() {
        if let Some(js) = at.get(k) {
            let share = (VOTE / seen.get(k).copied().unwrap_or(1)).max(1);
            for &j in js.iter().filter(|&&j| j <= o) {
                tally[o - j] += share;
            }
        }
    }
    let scored = tally
        .into_iter()
        .enumerate()
        .filter(|&(o, n)| n > 0 && clear(&(scope.start + o)))
        .map(|(o, n)| (scope.start + o, n))
        .collect();
    top(scored)
}

fn top(mut scored: Vec<(usize, usize)>) -> Vec<usize> {
    scored.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
        .into_iter()
        .take(CANDIDATES)
        .map(|(s, _)| s)
        .collect()
}

/// Window starts from the file lines sharing the most character pairs with SEARCH's
/// longest line: the fallback when no line agrees outright.
fn by_bigrams(
    doc: &Doc,
    search: &[&str],
    scope: &Range<usize>,
    clear: &dyn Fn(&usize) -> bool,
) -> Vec<usize> {
    let Some((j, probe)) = search
        .iter()
        .enumerate()
        .max_by_key(|(_, l)| l.trim().len())
    else {
        return Vec::new();
    };
    let mut set = [0u64; 64];
    let pairs = |s: &str| -> Vec<usize> {
        let chars: Vec<char> = capped(s).chars().filter(|c| !c.is_whitespace()).collect();
        chars
            .windows(2)
            .map(|w| ((w[0] as usize).wrapping_mul(31) ^ w[1] as usize) % 4096)
            .collect()
    };
    let probe_pairs = pairs(probe);
    for p in &probe_pairs {
        set[p / 64] |= 1 << (p % 64);
    }
    let mut scored = Vec::new();
    for (i, l) in scope.clone().zip(doc.lines_in(scope.clone())) {
        let ps = pairs(&String::from_utf8_lossy(&l[..l.len().min(MAX_DIFFED)]));
        let common = ps
            .iter()
            .filter(|p| set[*p / 64] & (1 << (*p % 64)) != 0)
            .count();
        if common > 0 {
            let dice = 200 * common / (ps.len() + probe_pairs.len());
            let start = i.saturating_sub(j).max(scope.start);
            if clear(&start) {
                scored.push((start, dice));
            }
        }
    }
    top(scored)
}

/// HTML escapes and the characters they stand for.
pub(super) const ENTITIES: &[(&str, &str)] = &[
    ("&lt;", "<"),
    ("&gt;", ">"),
    ("&amp;", "&"),
    ("&quot;", "\""),
    ("&#39;", "'"),
    ("&#x27;", "'"),
    ("&#60;", "<"),
    ("&#62;", ">"),
];

/// A SEARCH escaped for HTML on its way: it holds an entity the file's region
/// does not, where the region has the character it stands for.
fn html_entities(search: &[&str], region: &[&str]) -> Option<String> {
    // Lines' heads only, so a huge line costs no more than a short one.
    let has = |s: &str| region.iter().any(|l| capped(l).contains(s));
    let (j, (entity, ch)) = search
        .iter()
        .map(|l| capped(l))
        .enumerate()
        .filter(|(_, l)| l.contains('&'))
        .find_map(|(j, l)| {
            ENTITIES
                .iter()
                .find(|(e, c)| l.contains(e) && !has(e) && has(c))
                .map(|found| (j, found))
        })?;
    Some(format!(
        "SEARCH line {} holds the HTML entity `{entity}` where the file has `{ch}`: the payload was escaped for HTML on its way; send `<`, `>`, `&` and quotes as they are",
        j + 1
    ))
}

/// The differences between SEARCH and the closest region, most useful first.
/// SEARCH lines copied with a viewer's line numbers that are not the lines the
/// text is at (the file changed since, or the numbers came from another view):
/// such prefixes are stripped only when they agree, so say where the text is.
fn numbers_elsewhere(search: &[&str], region: &[&str], start: usize) -> Option<String> {
    let (stripped, numbering) = tolerant::strip_numbers(search)?;
    let first = numbering.first;
    let same = stripped.len() == region.len()
        && stripped
            .iter()
            .zip(region)
            .all(|(s, r)| Tier::Ragged.equal(r, s));
    (same && first != start + 1).then(|| {
        format!(
            "SEARCH's line-number prefixes say lines {}-{}, but the text is at lines {}-{}: prefixes are stripped only when they agree; drop them (or correct them)",
            first,
            first + stripped.len() - 1,
            start + 1,
            start + region.len()
        )
    })
}

/// The hint for a SEARCH whose line `j` is a placeholder for elided code. A
/// line-by-line diff against one region would blame the lines after the
/// placeholder, which are in the file further on: say instead which file lines
/// the placeholder stands for, when the pieces around it are found in order.
fn elision(doc: &Doc, search: &[&str], j: usize) -> String {
    let span = elided_span(doc, search, j)
        .map(|(first, last)| format!(" (file lines {first}-{last} lie there)"))
        .unwrap_or_default();
    format!(
        "SEARCH line {} (`{}`) stands for elided code{span}; SEARCH must repeat the file's lines exactly, nothing left out (or put the same placeholder line at the same place in REPLACE, so each piece around it is matched on its own)",
        j + 1,
        clip(search[j].trim(), 0)
    )
}

/// The 1-based file lines between the first place SEARCH's lines before `j`
/// match (leading whitespace set aside) and the next place its lines after `j`
/// (up to the next placeholder) match.
fn elided_span(doc: &Doc, search: &[&str], j: usize) -> Option<(usize, usize)> {
    let before = &search[..j];
    let after: Vec<&str> = search[j + 1..]
        .iter()
        .take_while(|l| placeholder::kind(l).is_none())
        .copied()
        .collect();
    if before.is_empty() || after.is_empty() {
        return None;
    }
    let at = |piece: &[&str], from: usize| {
        (from..(doc.len() + 1).saturating_sub(piece.len())).find(|&i| {
            piece
                .iter()
                .enumerate()
                .all(|(k, l)| line(doc, i + k).trim() == l.trim())
        })
    };
    let first = at(before, 0)? + before.len();
    let next = at(&after, first)?;
    (next > first).then_some((first + 1, next))
}

fn explain(search: &[&str], region: &[&str], start: usize) -> String {
    // Keys of the lines' heads: two long lines that part further on pair up as
    // alike, and `same_line` then names the column where they part.
    let sk: Vec<u64> = search.iter().map(|l| key(capped(l))).collect();
    let rk: Vec<u64> = region.iter().map(|l| key(capped(l))).collect();
    let mut hints = Vec::new();
    if let Some(hint) = html_entities(search, region) {
        hints.insert(0, hint);
    }
    if let Some(hint) = numbers_elsewhere(search, region, start) {
        hints.insert(0, hint);
    }
    for op in capture_diff_slices(Algorithm::Myers, &sk, &rk) {
        match op {
            DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for k in 0..len {
                    hints.extend(same_line(
                        search[old_index + k],
                        region[new_index + k],
                        old_index + k,
                        start + new_index + k,
                    ));
                }
            }
            DiffOp::Delete {
                old_index,
                old_len,
                new_index,
            } => {
                for (j, extra) in search.iter().enumerate().skip(old_index).take(old_len) {
                    hints.push(format!(
                        "SEARCH line {} `{}` is not in the file there (before file line {}): remove it or fix it",
                        j + 1,
                        clip(extra.trim(), 0),
                        start + new_index + 1
                    ));
                }
            }
            DiffOp::Insert {
                new_index, new_len, ..
            } => {
                for (i, missing) in region.iter().enumerate().skip(new_index).take(new_len) {
                    hints.push(format!(
                        "the file has line {} `{}` that SEARCH leaves out: add it",
                        start + i + 1,
                        clip(missing.trim(), 0)
                    ));
                }
            }
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                for k in 0..old_len.min(new_len) {
                    hints.push(changed_line(
                        search[old_index + k],
                        region[new_index + k],
                        old_index + k,
                        start + new_index + k,
                    ));
                }
                if old_len != new_len {
                    hints.push(format!(
                        "SEARCH lines {}-{} stand where the file has {} line(s) (file lines {}-{})",
                        old_index + 1,
                        old_index + old_len,
                        new_len,
                        start + new_index + 1,
                        start + new_index + new_len.max(1)
                    ));
                }
            }
        }
    }
    hints.dedup();
    summarize(hints)
}

fn summarize(mut hints: Vec<String>) -> String {
    if hints.is_empty() {
        return "the lines differ only in ways that are not tolerated here (for example with --match exact); copy them from the file exactly".into();
    }
    let more = hints.len().saturating_sub(MAX_HINTS);
    hints.truncate(MAX_HINTS);
    let mut s = hints.join("; ");
    if more > 0 {
        s.push_str(&format!(
            "; and {more} more difference(s): copy these lines from the file exactly"
        ));
    }
    s
}

/// The column (in characters) of the first difference, within its line.
fn parting_column(a: &str, b: &str) -> usize {
    let head = &a[..common_head(a, b)];
    let line_start = head.rfind('\n').map_or(0, |i| i + 1);
    head[line_start..].chars().count()
}

/// `line`, or `MAX_SHOWN` characters of it around column `col`, the cuts marked `…`.
fn clip(line: &str, col: usize) -> Cow<'_, str> {
    let n = line.chars().count();
    if n <= MAX_SHOWN {
        return Cow::Borrowed(line);
    }
    let from = col.saturating_sub(MAX_SHOWN / 2).min(n - MAX_SHOWN);
    let body: String = line.chars().skip(from).take(MAX_SHOWN).collect();
    let before = if from > 0 { "…" } else { "" };
    let after = if from + MAX_SHOWN < n { "…" } else { "" };
    Cow::Owned(format!("{before}{body}{after}"))
}

/// `text` with each line clipped around column `col`.
fn clip_lines(text: &str, col: usize) -> String {
    text.split_inclusive('\n')
        .map(|l| match l.strip_suffix('\n') {
            Some(body) => clip(body, col).into_owned() + "\n",
            None => clip(l, col).into_owned(),
        })
        .collect()
}

/// Differences within a line that agrees once whitespace and typography are ignored.
fn same_line(s: &str, f: &str, j: usize, i: usize) -> Option<String> {
    if s == f {
        return None;
    }
    let (si, fi) = (tolerant::indent_of(s), tolerant::indent_of(f));
    if si != fi {
        return Some(indent_hint(si, fi, j, i));
    }
    if s.trim_end() != f.trim_end() {
        return Some(changed_line(s, f, j, i));
    }
    Some(format!(
        "trailing whitespace differs: file line {} is {:?}, SEARCH line {} is {:?}",
        i + 1,
        clip(f, f.chars().count()),
        j + 1,
        clip(s, s.chars().count())
    ))
}

fn indent_hint(si: &str, fi: &str, j: usize, i: usize) -> String {
    let describe = |ws: &str| match (ws.matches('\t').count(), ws.matches(' ').count()) {
        (0, 0) => "no indentation".to_owned(),
        (t, 0) => format!("{t} tab(s)"),
        (0, n) => format!("{n} space(s)"),
        (t, n) => format!("{t} tab(s) and {n} space(s)"),
    };
    format!(
        "indentation differs: file line {} starts with {}, SEARCH line {} with {}",
        i + 1,
        describe(fi),
        j + 1,
        describe(si)
    )
}

/// Names the first character where SEARCH line `j` and file line `i` part.
fn changed_line(s: &str, f: &str, j: usize, i: usize) -> String {
    let col = s.chars().zip(f.chars()).take_while(|(a, b)| a == b).count();
    let (sc, fc) = (s.chars().nth(col), f.chars().nth(col));
    let what = match (sc, fc) {
        (Some(a), Some(b)) if tolerant::is_typographic(a) && fold(a) == b => {
            format!(
                "SEARCH has {a} (U+{:04X}) where the file has plain {b}",
                a as u32
            )
        }
        (Some(a), Some(b)) if a == '\r' || b == '\r' => {
            "a carriage return (CRLF) differs".to_owned()
        }
        (Some(a), Some(b))
            if s.chars().count() == f.chars().count()
                && s.chars().skip(col + 1).eq(f.chars().skip(col + 1)) =>
        {
            format!("one character differs: the file has {b:?}, SEARCH has {a:?}")
        }
        _ => format!(
            "the file has {:?}, SEARCH has {:?}",
            clip(f, col),
            clip(s, col)
        ),
    };
    format!(
        "file line {} column {} vs SEARCH line {}: {what}",
        i + 1,
        col + 1,
        j + 1
    )
}

/// Why a SEARCH typed as UTF-8 misses a file that is not: the first line that
/// breaks UTF-8, its byte, and the character that byte is in Latin-1 (the usual
/// encoding of such files), with a hint when SEARCH holds that character.
pub fn not_utf8(body: &[u8], search: &[&str]) -> (String, String) {
    let Some((line, byte)) = first_non_utf8(body) else {
        return (
            "the file is not UTF-8 text".into(),
            "copy SEARCH from the file byte for byte, or edit this file another way".into(),
        );
    };
    let latin = (byte >= 0xA0).then(|| char::from(byte));
    let message = match latin {
        Some(c) => format!(
            "the file is not UTF-8 text: line {line} has byte 0x{byte:02X} (`{c}` in Latin-1), so it looks Latin-1 (ISO-8859-1) or Windows-1252"
        ),
        None => format!(
            "the file is not UTF-8 text: line {line} has byte 0x{byte:02X}, so it looks Windows-1252 or another 8-bit encoding"
        ),
    };
    let hint = match latin.filter(|c| search.iter().any(|l| l.contains(*c))) {
        Some(c) => format!(
            "SEARCH has `{c}` as UTF-8 ({} bytes) where the file has the one byte 0x{byte:02X}: send SEARCH and REPLACE in the file's own bytes (0x{byte:02X}), or SEARCH only lines without such characters",
            c.len_utf8()
        ),
        None => "copy SEARCH from the file byte for byte (its non-UTF-8 bytes as they are), or edit this file another way".into(),
    };
    (message, hint)
}

/// The 1-based line of the first byte that is not UTF-8, and that byte.
fn first_non_utf8(body: &[u8]) -> Option<(usize, u8)> {
    let at = std::str::from_utf8(body).err()?.valid_up_to();
    let line = body[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    Some((line, *body.get(at)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnose(file: &str, search: &str) -> Diagnosis {
        let doc = Doc::new(file.as_bytes());
        let s = crate::payload::text_lines(search);
        not_found(&doc, &s, 0..doc.len())
    }

    const FILE: &str = "fn a() {}\n\nfn main() {\n    let x = 1;\n    let y = \"two\";\n    println!(\"{x} {y}\");\n}\n";

    #[test]
    fn closest_region_and_one_character() {
        let d = diagnose(FILE, "    let x = 2;\n    let y = \"two\";\n");
        let c = d.closest.unwrap();
        assert_eq!((c.start_line, c.end_line), (4, 5));
        assert!(c.similarity > 0.9);
        assert!(d.hint.contains("file line 4 column 13"), "{}", d.hint);
        assert!(d.hint.contains("one character differs"), "{}", d.hint);
    }

    #[test]
    fn missing_line_is_named() {
        let d = diagnose(FILE, "fn main() {\n    let y = \"two\";\n");
        assert!(
            d.hint
                .contains("the file has line 4 `let x = 1;` that SEARCH leaves out"),
            "{}",
            d.hint
        );
    }

    #[test]
    fn a_changed_last_line_stays_in_the_region_of_a_long_search() {
        // A stale SEARCH (`width - 2` where argparse now says `width`): its last
        // line is changed, not missing, so the region keeps it and the hint names
        // the column, rather than telling the agent to remove the line.
        let file = "class F:\n    def _split_lines(self, text, width):\n        text = self._whitespace_matcher.sub(' ', text).strip()\n        # The textwrap module is used only for formatting help.\n        # Delay its import for speeding up the common usage of argparse.\n        import textwrap\n        return textwrap.wrap(text, width)\n\n";
        let d = diagnose(
            file,
            "    def _split_lines(self, text, width):\n        text = self._whitespace_matcher.sub(' ', text).strip()\n        # The textwrap module is used only for formatting help.\n        # Delay its import for speeding up the common usage of argparse.\n        import textwrap\n        return textwrap.wrap(text, width - 2)\n",
        );
        let c = d.closest.unwrap();
        assert_eq!((c.start_line, c.end_line), (2, 7), "{}", d.hint);
        assert!(d.hint.contains("file line 7 column"), "{}", d.hint);
    }

    #[test]
    fn extra_line_is_named() {
        let d = diagnose(
            FILE,
            "    let x = 1;\n    let z = 0;\n    let y = \"two\";\n",
        );
        assert!(
            d.hint
                .contains("SEARCH line 2 `let z = 0;` is not in the file"),
            "{}",
            d.hint
        );
    }

    #[test]
    fn indentation_tabs_and_typography() {
        let d = diagnose(FILE, "\tlet x = 1;\n\tlet q = 1;\n");
        assert!(
            d.hint
                .contains("file line 4 starts with 4 space(s), SEARCH line 1 with 1 tab(s)"),
            "{}",
            d.hint
        );
        let d = diagnose(FILE, "    let y = \u{201c}two\u{201d};\n    let w;\n");
        assert!(d.hint.contains("U+201C"), "{}", d.hint);
    }

    #[test]
    fn placeholder_is_called_out() {
        let d = diagnose(FILE, "fn main() {\n    // ... existing code ...\n}\n");
        assert!(d.hint.contains("elided"), "{}", d.hint);
    }

    #[test]
    fn a_distinctive_line_outweighs_closing_braces_in_picking_the_region() {
        let small: String = (0..8)
            .map(|i| format!("fn f{i}() {{\n    g();\n}}\n"))
            .collect();
        let file = format!(
            "{small}pub fn normalized(a: &str, b: &str) -> f64 {{\n    if a.is_empty() {{\n        return 1.0;\n    }}\n}}\n"
        );
        let d = diagnose(
            &file,
            "pub fn normalized(a: &str, b: &str) -> f64 {\n    ...\n}\n",
        );
        assert_eq!(d.closest.unwrap().start_line, 25);
    }

    #[test]
    fn nothing_alike() {
        let d = diagnose("aaaa\n", "zzzz\n");
        assert!(d.closest.is_none());
    }
}

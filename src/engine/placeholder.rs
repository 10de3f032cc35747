//! Placeholders: lines an agent writes to stand for code it did not repeat
//! (`...`, `// ... existing code ...`, `# rest unchanged`).
//!
//! In REPLACE such a line would be written into the file and the code it stands
//! for deleted, a silent loss that every agent edit tool has suffered, so it is
//! refused. The one safe form is Aider's: SEARCH and REPLACE elide the same places
//! with the same placeholder lines; each piece between them is then an edit of
//! its own, which must match uniquely and in order.

use similar::{Algorithm, DiffOp, capture_diff_slices};

use super::tolerant::is_blank;

/// Words that make a short comment a placeholder rather than a remark.
const PHRASES: &[&str] = &[
    "existing code",
    "rest unchanged",
    "rest of the",
    "rest of code",
    "unchanged",
    "remains the same",
    "remain the same",
    "same as before",
    "code omitted",
    "omitted for brevity",
    "previous code",
    "other methods",
];

/// Comment leaders and closers, longest first.
const LEADERS: &[&str] = &["<!--", "//", "/*", "--", "#"];
const CLOSERS: &[&str] = &["-->", "*/"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A line that is only an ellipsis: also Python's `...`, so it counts as a
    /// placeholder only where it would delete several lines.
    Bare,
    /// A comment that says code was left out.
    Comment,
}

fn is_ellipsis(t: &str) -> bool {
    !t.is_empty() && t.chars().all(|c| c == '.' || c == '…') && (t.contains('…') || t.len() >= 3)
}

/// Whether `line` stands for code left out.
pub fn kind(line: &str) -> Option<Kind> {
    let t = line.trim();
    if is_ellipsis(t) {
        return Some(Kind::Bare);
    }
    let leader = LEADERS.iter().find(|l| t.starts_with(*l))?;
    let mut body = t[leader.len()..].trim();
    if let Some(c) = CLOSERS.iter().find(|c| body.ends_with(*c)) {
        body = body[..body.len() - c.len()].trim();
    }
    let words = body.trim_matches(['.', '…', ' ']).to_lowercase();
    let elided = body.starts_with("...") || body.starts_with('…') || body.ends_with("...");
    let said = PHRASES.iter().any(|p| words.contains(p)) && words.split_whitespace().count() <= 8;
    (elided && words.split_whitespace().count() <= 8 || said).then_some(Kind::Comment)
}

/// A REPLACE placeholder that would delete SEARCH lines.
pub struct Loss {
    /// 0-based line of REPLACE.
    pub line: usize,
    /// 0-based SEARCH lines it would delete (with the lines changed beside it).
    pub deleted: std::ops::Range<usize>,
}

/// The first placeholder line of REPLACE (one SEARCH lacks) that stands where
/// SEARCH lines would be deleted.
pub fn loss(search: &[&str], replace: &[&str]) -> Option<Loss> {
    if !replace.iter().any(|l| kind(l).is_some()) {
        return None;
    }
    let key = |l: &&str| l.trim().to_owned();
    let s: Vec<String> = search.iter().map(key).collect();
    let r: Vec<String> = replace.iter().map(key).collect();
    for op in capture_diff_slices(Algorithm::Myers, &s, &r) {
        let DiffOp::Replace {
            old_index,
            old_len,
            new_index,
            new_len,
        } = op
        else {
            continue;
        };
        let new = &replace[new_index..new_index + new_len];
        let marks: Vec<(usize, Kind)> = new
            .iter()
            .enumerate()
            .filter_map(|(k, l)| kind(l).map(|m| (new_index + k, m)))
            .collect();
        let real = |lines: &[&str]| lines.iter().filter(|l| !is_blank(l)).count();
        let kept = real(new) - marks.len();
        let gone = real(&search[old_index..old_index + old_len]).saturating_sub(kept);
        let found = marks.iter().find(|(_, m)| match m {
            Kind::Bare => gone >= 2,
            Kind::Comment => gone >= 1,
        });
        if let Some(&(line, _)) = found {
            return Some(Loss {
                line,
                deleted: old_index..old_index + old_len,
            });
        }
    }
    None
}

/// Aider's safe elision: SEARCH and REPLACE hold the same placeholder lines in the
/// same order; the pieces between them, pairwise. `None` when the payload is not
/// of that form.
pub fn pieces<'a>(
    search: &[&'a str],
    replace: &[&'a str],
) -> Option<Vec<(Vec<&'a str>, Vec<&'a str>)>> {
    let split = |lines: &[&'a str]| {
        let mut marks = Vec::new();
        let mut parts = vec![Vec::new()];
        for l in lines {
            match kind(l) {
                Some(_) => {
                    marks.push(l.trim().to_owned());
                    parts.push(Vec::new());
                }
                None => parts.last_mut().into_iter().for_each(|p| p.push(*l)),
            }
        }
        (marks, parts)
    };
    let (sm, sp) = split(search);
    let (rm, rp) = split(replace);
    if sm.is_empty() || sm != rm {
        return None;
    }
    let pairs: Vec<_> = sp
        .into_iter()
        .zip(rp)
        .filter(|(s, r)| !(s.iter().all(|l| is_blank(l)) && r.iter().all(|l| is_blank(l))))
        .collect();
    Some(pairs)
}

/// The first REPLACE line that an agent mixing formats left a diff's `+` on:
/// a line SEARCH lacks, `+` at column 0 followed by exactly the indentation of
/// the REPLACE line next to it. Written as sent it breaks the code; a file whose
/// lines really start with `+` shows that in SEARCH, which then must lack them.
pub fn diff_prefixed(search: &[&str], replace: &[&str]) -> Option<usize> {
    if search.iter().any(|l| l.starts_with('+')) {
        return None;
    }
    let indent = |l: &str| l.len() - l.trim_start_matches([' ', '\t']).len();
    (0..replace.len()).find(|&i| {
        let Some(rest) = replace[i].strip_prefix('+') else {
            return false;
        };
        let width = indent(rest);
        let beside = |j: usize| {
            replace
                .get(j)
                .is_some_and(|l| !l.starts_with('+') && !l.trim().is_empty() && indent(l) == width)
        };
        width > 0
            && !rest.trim().is_empty()
            && !search.contains(&replace[i])
            && (beside(i + 1) || i.checked_sub(1).is_some_and(beside))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_in_many_languages() {
        for line in [
            "...",
            "    …",
            "// ... existing code ...",
            "# rest unchanged",
            "    /* ... */",
            "<!-- ... rest of the page ... -->",
            "-- ... same as before",
            "    # ... other methods ...",
        ] {
            assert!(kind(line).is_some(), "{line}");
        }
        for line in [
            "x = ...",
            "// TODO: keep this loop short",
            "# the result is unchanged when x is empty, which callers rely on for caching and more",
            "print('...')",
            "..",
        ] {
            assert!(kind(line).is_none(), "{line}");
        }
    }

    #[test]
    fn a_placeholder_that_deletes_lines_is_a_loss() {
        let search = ["def f():", "    a = 1", "    b = 2", "    return a + b"];
        let replace = ["def f():", "    a = 10", "    # ... rest unchanged"];
        let l = loss(&search, &replace).unwrap();
        assert_eq!((l.line, l.deleted), (2, 1..4));
        // An added comment deletes nothing, and `pass` -> `...` is one line.
        assert!(loss(&["def f():"], &["def f():", "    # ... later"]).is_none());
        assert!(loss(&["def f():", "    pass"], &["def f():", "    ..."]).is_none());
    }

    #[test]
    fn the_same_ellipses_split_both_sides_into_pieces() {
        let p = pieces(&["a", "...", "c"], &["A", "...", "C"]).unwrap();
        assert_eq!(p, [(vec!["a"], vec!["A"]), (vec!["c"], vec!["C"])]);
        assert!(pieces(&["a", "...", "c"], &["A", "C"]).is_none());
        assert!(pieces(&["a", "c"], &["A", "C"]).is_none());
    }
}

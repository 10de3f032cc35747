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

/// Comment leaders and closers, longest first.
const LEADERS: &[&str] = &["<!--", "{/*", "//", "/*", "--", "#", ";"];
const CLOSERS: &[&str] = &["*/}", "-->", "*/"];

/// Words that by themselves say code was kept or left out (`// omitted`,
/// `# keep the rest`, `// etc.`).
const KEPT: &[&str] = &[
    "abbreviated",
    "brevity",
    "elided",
    "etc",
    "existing",
    "keep",
    "kept",
    "omit",
    "omitted",
    "remainder",
    "remaining",
    "rest",
    "same",
    "skipped",
    "snip",
    "snipped",
    "truncated",
    "unaltered",
    "unchanged",
    "unmodified",
    "untouched",
];

/// Words that say it only of code in general: `// other code` and `// original
/// code here` are placeholders, `// other cases` and `// Other methods` are a
/// match arm's or a section's heading.
const VAGUE: &[&str] = &[
    "additional",
    "more",
    "old",
    "original",
    "other",
    "previous",
    "prior",
];
const GENERAL: &[&str] = &["code", "functionality", "implementation", "logic", "stuff"];

/// What a placeholder may name as left out (`# rest of method unchanged`).
const THINGS: &[&str] = &[
    "attribute",
    "block",
    "body",
    "change",
    "class",
    "column",
    "component",
    "config",
    "content",
    "definition",
    "element",
    "field",
    "file",
    "function",
    "handler",
    "helper",
    "import",
    "item",
    "line",
    "member",
    "method",
    "module",
    "option",
    "page",
    "part",
    "prop",
    "property",
    "row",
    "rule",
    "section",
    "setting",
    "statement",
    "style",
    "template",
    "test",
];

/// The words that join the others. A word outside all these lists (`buffer`,
/// `aligned`, `loop`) makes the comment a remark.
const GLUE: &[&str] = &[
    "a",
    "above",
    "all",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "before",
    "below",
    "earlier",
    "else",
    "everything",
    "for",
    "go",
    "goes",
    "here",
    "in",
    "is",
    "it",
    "its",
    "no",
    "not",
    "of",
    "previously",
    "remain",
    "remains",
    "shown",
    "stay",
    "stays",
    "that",
    "the",
    "these",
    "this",
    "those",
    "to",
    "was",
    "were",
    "with",
];

/// The most words a placeholder comment has; longer ones say something.
const MAX_WORDS: usize = 8;

/// Words and phrases that say code is kept so plainly that a short comment
/// holding one is a placeholder whatever else it names (`# other steps
/// unchanged`, `// no changes below`, `# methods b and c unchanged`): the
/// nouns an agent puts beside them are endless, and a comment taken for a
/// placeholder costs only a refusal where REPLACE drops code, while a
/// placeholder taken for a comment deletes that code.
const STRONG: &[&[&str]] = &[
    &["unchanged"],
    &["unmodified"],
    &["untouched"],
    &["unaltered"],
    &["remaining"],
    &["omitted"],
    &["elided"],
    &["continues"],
    &["rest", "of"],
    &["as", "before"],
    &["as", "is"],
    &["no", "changes"],
    &["no", "change"],
    &["no", "other", "changes"],
    &["same", "as"],
];

/// The most words a comment holding a strong word has to be a placeholder:
/// longer ones (`keep the rest of the buffer aligned to 8 bytes`) say something.
const MAX_STRONG_WORDS: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A line that is only an ellipsis: also Python's `...`, so it counts as a
    /// placeholder only where it would delete several lines.
    Bare,
    /// A comment that says code was left out.
    Comment,
    /// A comment, a doc comment or a docstring's line that speaks of code
    /// kept or left out in words the lists above lack (`# TODO: keep the
    /// original body here`), or a comment that continues another: a
    /// placeholder only where two or more lines vanish (see `loss`).
    Wide,
}

fn is_ellipsis(t: &str) -> bool {
    !t.is_empty() && t.chars().all(|c| c == '.' || c == '…') && (t.contains('…') || t.len() >= 3)
}

/// Whether `line` stands for code left out. A doc comment (`///`, `//!`,
/// `/**`) documents, and a comment quoting code (`` `Send` ``) speaks of it:
/// neither is one.
pub fn kind(line: &str) -> Option<Kind> {
    let t = line.trim();
    if is_ellipsis(t) {
        return Some(Kind::Bare);
    }
    if ["///", "//!", "/**"].iter().any(|d| t.starts_with(d)) || t.contains('`') {
        return None;
    }
    placeholder_comment(comment_body(t)?).then_some(Kind::Comment)
}

/// A line of code, or an ellipsis, ending in a comment that stands for code
/// left out (`...  # rest unchanged`, `pass  # existing code`, `todo!() //
/// keep the rest`): a placeholder only where two or more lines vanish, as a
/// `Wide` one, for the code before the comment takes no line's place.
fn trailing(line: &str) -> bool {
    let t = line.trim();
    let Some(at) = trailing_comment(t) else {
        return false;
    };
    let (code, comment) = t.split_at(at);
    !code.trim().is_empty() && comment_body(comment.trim()).is_some_and(placeholder_comment)
}

/// Where a comment after code starts in `t`: a `#` or `//` after a space and
/// outside quotes.
fn trailing_comment(t: &str) -> Option<usize> {
    let (mut single, mut double) = (false, false);
    let bytes = t.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' | b'/' if !single && !double && i > 0 && bytes[i - 1] == b' ' => {
                let leads = b == b'#' || bytes.get(i + 1) == Some(&b'/');
                if leads {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The placeholder lines of REPLACE, each line's `kind` read in its context: a
/// line inside a fenced block REPLACE holds is example text (`// ...` in a
/// README's code), a bare `...` after a doctest's `>>>` or `...` line is the
/// doctest's own continuation, and a comment right after a comment line that
/// is none continues its sentence (`// Some wrapped comment text` / `//
/// unchanged in the error case.`), so it is only `Wide`. With `wide`, a line
/// of no other kind that speaks of kept code (`wide_body`) is `Wide`.
fn marks(lines: &[&str], wide: bool) -> Vec<Option<Kind>> {
    let fence = |l: &str| {
        let t = l.trim_start();
        t.starts_with("```") || t.starts_with("~~~")
    };
    let mut fenced = false;
    let mut prose = false;
    let mut doctest = false;
    let mut text = Text::default();
    lines
        .iter()
        .map(|l| {
            let in_text = text.inside();
            text.read(l);
            if fence(l) {
                fenced = !fenced;
                prose = false;
                return None;
            }
            let t = l.trim();
            let continuation = doctest && is_ellipsis(t);
            doctest = t.starts_with(">>>") || (doctest && t.starts_with("..."));
            let mark = kind(l).filter(|_| !fenced && !continuation);
            // An ellipsis is never a sentence's next line: `# compute totals`
            // then `# ... existing code ...` is the placeholder it looks like.
            let elides = l.contains("...") || l.contains('…');
            let continues = prose && mark == Some(Kind::Comment) && !elides;
            prose = comment_body(t).is_some() && (mark.is_none() || continues);
            let wide = wide
                && !fenced
                && (continues
                    || (mark.is_none() && (wide_body(t, in_text) || (!in_text && trailing(t)))));
            match wide {
                true => Some(Kind::Wide),
                false => mark.filter(|_| !continues),
            }
        })
        .collect()
}

/// Where REPLACE's lines stand: inside a docstring (`"""`, `'''`) or a
/// block comment (`/*`), whose lines are text without a comment leader.
#[derive(Default)]
struct Text {
    quotes: Option<&'static str>,
    block: bool,
}

impl Text {
    fn inside(&self) -> bool {
        self.quotes.is_some() || self.block
    }

    /// Reads one line: the docstrings and block comments it opens or closes.
    fn read(&mut self, line: &str) {
        for q in ["\"\"\"", "'''"] {
            if self.quotes.is_none_or(|open| open == q) && line.matches(q).count() % 2 == 1 {
                self.quotes = match self.quotes {
                    Some(_) => None,
                    None => Some(q),
                };
            }
        }
        if let (Some(open), close) = (line.rfind("/*"), line.rfind("*/")) {
            self.block = close.is_none_or(|c| c < open);
        } else if line.contains("*/") {
            self.block = false;
        }
    }
}

/// Which lines are code: neither blank, nor a comment, nor a line inside a
/// docstring or block comment.
fn code_lines(lines: &[&str]) -> Vec<bool> {
    let mut text = Text::default();
    lines
        .iter()
        .map(|l| {
            let inside = text.inside();
            text.read(l);
            !is_blank(l) && !inside && !text.inside() && comment_body(l.trim()).is_none()
        })
        .collect()
}

/// Words that say code was kept or left out, however the rest of the line
/// reads (`# TODO: keep the original body here`): the wide reading of a
/// placeholder, which counts only where two or more lines vanish.
const WIDE: &[&str] = &[
    "abbreviated",
    "brevity",
    "elided",
    "etc",
    "existing",
    "intact",
    "keep",
    "keeping",
    "keeps",
    "kept",
    "omit",
    "omits",
    "omitted",
    "omitting",
    "original",
    "originally",
    "preserved",
    "remain",
    "remainder",
    "remaining",
    "remains",
    "rest",
    "same",
    "snip",
    "snipped",
    "truncated",
    "unaltered",
    "unchanged",
    "unmodified",
    "untouched",
    "verbatim",
];

/// The most words a wide placeholder has; longer lines say something.
const MAX_WIDE_WORDS: usize = 12;

/// Whether the line `t` (trimmed) speaks of code kept or left out in few
/// words: a comment or doc comment holding one of `WIDE` or an ellipsis, or
/// a line of text holding one of `WIDE` (a docstring's or block comment's own
/// line, `in_text`, one that opens with an ellipsis, or one in brackets), in
/// words only. A line quoting code (`` ` ``) or holding code's
/// signs (`=`, `{`, `;`) speaks of something else.
fn wide_body(t: &str, in_text: bool) -> bool {
    let comment = comment_body(t).or_else(|| t.strip_prefix('*').filter(|b| !b.starts_with('/')));
    // A phrase in brackets (`(rest of the docstring unchanged)`) is no code
    // either: it is text even where REPLACE shows no docstring around it. A
    // Lisp form (`(keep-alive conn)`, `(f (g x))`) is no phrase.
    let inner = t.get(1..t.len().saturating_sub(1)).unwrap_or_default();
    let phrase =
        inner.split_whitespace().count() >= 3 && !inner.contains(['(', ')', '[', ']', '-']);
    let bracketed = phrase
        && ((t.starts_with('(') && t.ends_with(')')) || (t.starts_with('[') && t.ends_with(']')));
    let leading = t.starts_with("...") || t.starts_with('…') || bracketed;
    let Some(body) = comment.or_else(|| (in_text || leading).then_some(t)) else {
        return false;
    };
    let body = body.trim_matches(['"', '\'', ' ', '\t', '/', '!', '*', '(', ')', '[', ']']);
    let wordy = |c: char| c.is_alphanumeric() || c.is_whitespace() || ".,:!?'\"()-…".contains(c);
    if body.contains('`') || !body.chars().all(wordy) {
        return false;
    }
    let words: Vec<String> = body
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    // An ellipsis says it only in a comment: a text line may be a doctest's
    // `... print(x)`.
    let elides = comment.is_some() && (body.contains("...") || body.contains('…'));
    !words.is_empty()
        && words.len() <= MAX_WIDE_WORDS
        && (elides || words.iter().any(|w| WIDE.contains(&w.as_str())))
}

/// The text of a line that is only a comment, without its leader and closer.
fn comment_body(t: &str) -> Option<&str> {
    if directive(t) {
        return None;
    }
    let leader = LEADERS.iter().find(|l| t.starts_with(*l))?;
    let body = t[leader.len()..].trim();
    let body = CLOSERS
        .iter()
        .find_map(|c| body.strip_suffix(c))
        .unwrap_or(body);
    Some(body.trim())
}

/// Whether the line is a preprocessor's (`#define KEEP_ALIVE 1`, `#endif`,
/// C#'s `#region`): code, though it opens with `#`.
fn directive(t: &str) -> bool {
    const DIRECTIVES: &[&str] = &[
        "define",
        "elif",
        "else",
        "endif",
        "endregion",
        "error",
        "if",
        "ifdef",
        "ifndef",
        "import",
        "include",
        "line",
        "pragma",
        "region",
        "undef",
        "warning",
    ];
    let Some(rest) = t.strip_prefix('#') else {
        return false;
    };
    let word: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
    DIRECTIVES.contains(&word.as_str())
}

/// A comment body that stands for code: an ellipsis alone (`...`, `[...]`), a
/// short phrase between ellipses (`... validation ...`), or a short phrase made
/// only of words that say code is kept or left out. A remark in a sentence of its
/// own (`keep the rest of the buffer aligned`) is none.
fn placeholder_comment(body: &str) -> bool {
    let words: Vec<String> = body
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if words.len() > MAX_WORDS {
        return false;
    }
    let bare = body.trim_matches(|c: char| !c.is_alphanumeric() && c != '.' && c != '…');
    let elided = |end: &str| end.starts_with("...") || end.starts_with('…');
    let reversed: String = bare.chars().rev().collect();
    if words.is_empty() {
        // Only an ellipsis, maybe bracketed (`[...]`, `{...}`): `"..." -> ...`
        // quotes syntax.
        let only = body.chars().all(|c| "….[]{}() ".contains(c));
        return only && (bare.contains("...") || bare.contains('…'));
    }
    if elided(bare) && elided(&reversed) {
        return bare.contains("...") || bare.contains('…');
    }
    says_kept(&words) || says_kept_plainly(&words)
}

/// A short comment holding a strong word or phrase (see `STRONG`).
fn says_kept_plainly(words: &[String]) -> bool {
    words.len() <= MAX_STRONG_WORDS
        && STRONG.iter().any(|phrase| {
            words
                .windows(phrase.len())
                .any(|w| w.iter().zip(phrase.iter()).all(|(a, b)| a == b))
        })
}

/// Every word is one a placeholder says, and one says that code is kept or left out.
fn says_kept(words: &[String]) -> bool {
    let is = |list: &[&str], w: &str| {
        let singular = [w.strip_suffix("es"), w.strip_suffix('s')];
        list.contains(&w) || singular.iter().flatten().any(|s| list.contains(s))
    };
    let known = |w: &String| {
        w.chars().all(|c| c.is_ascii_digit())
            || [KEPT, VAGUE, GENERAL, THINGS, GLUE]
                .iter()
                .any(|list| is(list, w))
    };
    let vague = words.iter().any(|w| is(VAGUE, w)) && words.iter().any(|w| is(GENERAL, w));
    words.iter().all(known) && (vague || words.iter().any(|w| is(KEPT, w)))
}

/// A REPLACE placeholder that would delete SEARCH lines.
pub struct Loss {
    /// 0-based line of REPLACE.
    pub line: usize,
    /// 0-based SEARCH lines it would delete (with the lines changed beside it).
    pub deleted: std::ops::Range<usize>,
}

/// The first placeholder line of REPLACE (one SEARCH lacks) that stands where
/// SEARCH lines would be deleted: one SEARCH line for a comment of the lists
/// above, two for a bare ellipsis or (with `wide`: not in prose, where `#`
/// opens a heading) a wide placeholder, new code beside these taking the place
/// of as many lines (new comments and docstring lines take none). What is
/// deleted is what tells, not the words: a remark beside new code that takes
/// the place of the lines it replaces deletes nothing.
pub fn loss(search: &[&str], replace: &[&str], wide: bool) -> Option<Loss> {
    let marks = marks(replace, wide);
    if marks.iter().all(Option::is_none) {
        return None;
    }
    let code = code_lines(replace);
    let searched: Vec<Option<Kind>> = search
        .iter()
        .map(|l| kind(l).filter(|_| !is_blank(l)))
        .collect();
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
        let marks: Vec<(usize, Kind)> = (new_index..new_index + new_len)
            .filter_map(|i| marks[i].map(|m| (i, m)))
            .collect();
        let real = |lines: &[&str]| lines.iter().filter(|l| !is_blank(l)).count();
        let kept = real(new) - marks.len();
        // A SEARCH line that reads as a placeholder itself is a comment being
        // edited (`// same as y.` made `// same as z.`), no code to lose.
        let old = &search[old_index..old_index + old_len];
        let like = searched[old_index..old_index + old_len]
            .iter()
            .flatten()
            .count();
        let gone = (real(old) - like).saturating_sub(kept);
        // Only new code takes the vanished lines' place: a comment or a
        // docstring's line beside an ellipsis is no more than it.
        let new_code = (new_index..new_index + new_len)
            .filter(|&i| code[i] && marks.iter().all(|&(m, _)| m != i))
            .count();
        let vanished = (real(old) - like).saturating_sub(new_code);
        let found = marks.iter().find(|(_, m)| match m {
            Kind::Bare | Kind::Wide => vanished >= 2,
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

/// A REPLACE placeholder, one SEARCH lacks, that deletes nothing but stands
/// for code beyond SEARCH's first or last line while new lines lie further out
/// than it: applied, those lines would land next to SEARCH, on the near side of
/// the code they were meant to follow (or precede), and the placeholder would
/// be written into the file.
pub struct Misplaced {
    /// 0-based line of REPLACE.
    pub line: usize,
    /// Whether the misplaced lines follow the placeholder (it stands for code
    /// after SEARCH) rather than precede it (code before SEARCH).
    pub after: bool,
}

/// The first placeholder of REPLACE that misplaces new lines. A placeholder
/// alone, or with the new lines on SEARCH's side of it, moves nothing: it only
/// stays in the file as a comment, as an added comment does.
pub fn misplaced(search: &[&str], replace: &[&str]) -> Option<Misplaced> {
    let marks = marks(replace, false);
    if marks.iter().all(Option::is_none) {
        return None;
    }
    let s: Vec<&str> = search.iter().map(|l| l.trim()).collect();
    let r: Vec<&str> = replace.iter().map(|l| l.trim()).collect();
    // Which REPLACE lines are SEARCH's own, kept where they were.
    let mut kept = vec![false; r.len()];
    for op in capture_diff_slices(Algorithm::Myers, &s, &r) {
        if let DiffOp::Equal { new_index, len, .. } = op {
            kept[new_index..new_index + len].fill(true);
        }
    }
    let new = |i: usize| !kept[i] && !is_blank(replace[i]) && marks[i].is_none();
    (0..r.len()).find_map(|p| {
        let mark = marks[p].filter(|_| !s.contains(&r[p]))?;
        let after = !kept[p + 1..].contains(&true) && (p + 1..r.len()).any(new);
        let before = !kept[..p].contains(&true) && (0..p).any(new);
        let ok = match mark {
            Kind::Comment => after || before,
            Kind::Bare => (after || before) && !stub(replace, p),
            // Not read here: a wide placeholder counts only where lines vanish.
            Kind::Wide => false,
        };
        ok.then_some(Misplaced { line: p, after })
    })
}

/// Whether the bare `...` at `p` is Python's stub body (`def g(): ...` over two
/// lines): the next line of code is indented less. One as deep or deeper is
/// code after it in the same block, which a stub never has.
fn stub(lines: &[&str], p: usize) -> bool {
    let indent = |l: &str| l.len() - l.trim_start_matches([' ', '\t']).len();
    lines[p + 1..]
        .iter()
        .find(|l| !is_blank(l))
        .is_none_or(|l| indent(l) < indent(lines[p]))
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

/// Ways agents write that code is kept, each of which must be refused where it
/// stands for lines REPLACE drops: the engine's tests send each one.
#[cfg(test)]
pub(crate) const PHRASINGS: &[&str] = &[
    "// ...",
    "/* ... */",
    "// rest of the function remains the same",
    "// existing code",
    "// unchanged code",
    "// same as before",
    "// previous code",
    "// code omitted for brevity",
    "# ... rest of the code ...",
    "# rest of method unchanged",
    "# unchanged",
    "// the rest stays the same",
    "// keep the rest",
    "// remaining implementation",
    "// existing logic",
    "// original code here",
    "// other code",
    "// omitted",
    "// snip",
    "// [...]",
    "// {...}",
    "// etc.",
    "# keep the rest",
    "# remaining code",
    "# same as above",
    "# remaining steps unchanged",
    "# other steps unchanged",
    "# (other steps unchanged)",
    "# rest of steps",
    "// no changes below",
    "// no other changes",
    "// as before",
    "// leave as is",
    "// code continues...",
    "# methods b and c unchanged",
];

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
    fn short_comments_that_say_code_is_kept_are_placeholders() {
        let styles = [
            "    // Keep existing implementation",
            "; ... rest unchanged",
            "{/* ... existing code ... */}",
            "<!-- rest of the page -->",
            "-- (remaining columns unchanged)",
            "// ... 40 more lines ...",
            "    // handlers omitted",
        ];
        for line in PHRASINGS.iter().chain(&styles) {
            assert_eq!(kind(line), Some(Kind::Comment), "{line}");
        }
    }

    #[test]
    fn real_comments_are_not_placeholders() {
        for line in [
            "// keep the rest of the buffer aligned to 8 bytes",
            "// other cases",
            "    // Other methods",
            "# ... more to come",
            "// This holds the lock...",
            "// ...until the writer is done.",
            "# same value as the timeout above",
            "// REST API",
            "// the rest of the header is padding for the next record",
            "# same value as the timeout above",
            "// ----",
            "#include <stdio.h>",
            ";(function () {})()",
        ] {
            assert_eq!(kind(line), None, "{line}");
        }
    }

    #[test]
    fn a_placeholder_with_new_lines_beyond_it_misplaces_them() {
        // After SEARCH: the new lines were meant after the kept code.
        let search = ["def f():"];
        let replace = [
            "def f():",
            "    # ... existing code ...",
            "    log(\"end\")",
        ];
        let m = misplaced(&search, &replace).unwrap();
        assert_eq!((m.line, m.after), (1, true));
        // Before SEARCH: the new lines were meant before the kept code.
        let search = ["    return a"];
        let replace = ["    log(a)", "    # ... existing code ...", "    return a"];
        let m = misplaced(&search, &replace).unwrap();
        assert_eq!((m.line, m.after), (1, false));
        // A bare `...` that new lines follow in its own block is no Python stub.
        let search = ["fn fmt(&self) {"];
        let replace = ["fn fmt(&self) {", "    ...", "    trace!();", "}"];
        assert_eq!(misplaced(&search, &replace).map(|m| m.line), Some(1));
    }

    #[test]
    fn placeholders_that_move_no_new_line_are_not_misplaced() {
        // A lone added comment, new code on SEARCH's side of it, or the same
        // line in SEARCH: nothing lands elsewhere than meant.
        let none = [
            (
                vec!["def f():"],
                vec!["def f():", "    # ... existing code ..."],
            ),
            (
                vec!["def f():"],
                vec!["def f():", "    init()", "    # ... existing code ..."],
            ),
            (
                vec!["    return a"],
                vec!["    # ... existing code ...", "    log(a)", "    return a"],
            ),
            (
                vec!["a", "# ... existing code ...", "c"],
                vec!["a", "# ... existing code ...", "c", "d"],
            ),
            (
                vec!["# ... existing code ...", "c"],
                vec!["c", "# ... existing code ...", "d"],
            ),
            // A Python stub: `...` is the body of the new method.
            (
                vec!["class A:"],
                vec![
                    "class A:",
                    "    def g(self):",
                    "        ...",
                    "    def h(self):",
                    "        return 1",
                ],
            ),
        ];
        for (search, replace) in none {
            assert!(misplaced(&search, &replace).is_none(), "{replace:?}");
        }
    }

    #[test]
    fn a_placeholder_that_deletes_lines_is_a_loss() {
        let search = ["def f():", "    a = 1", "    b = 2", "    return a + b"];
        let replace = ["def f():", "    a = 10", "    # ... rest unchanged"];
        let l = loss(&search, &replace, true).unwrap();
        assert_eq!((l.line, l.deleted), (2, 1..4));
        // An added comment deletes nothing, and `pass` -> `...` is one line.
        assert!(loss(&["def f():"], &["def f():", "    # ... later"], true).is_none());
        assert!(loss(&["def f():", "    pass"], &["def f():", "    ..."], true).is_none());
    }

    #[test]
    fn a_remark_on_kept_code_in_any_words_is_a_loss_where_two_lines_vanish() {
        let search = ["def f():", "    a = 1", "    return a"];
        let todo = ["def f(x):", "    # TODO: keep the original body here"];
        assert_eq!(loss(&search, &todo, true).map(|l| l.line), Some(1));
        // In prose the line is a heading, and read only with the lists.
        assert!(loss(&search, &todo, false).is_none());
        // One vanishing line, or new code taking the lines' place: no loss.
        let one = [
            "def f(x):",
            "    # TODO: keep the original body here",
            "    return a",
        ];
        assert!(loss(&search, &one, true).is_none());
        let beside = [
            "def f():",
            "    # the same value, named once",
            "    return 1",
        ];
        assert!(loss(&search, &beside, true).is_none());
        // A docstring's own line, and a comment that continues another.
        let doc = [
            "    \"\"\"Sum.",
            "",
            "    Adds a.",
            "    Adds b.",
            "    \"\"\"",
        ];
        let kept = [
            "    \"\"\"Sum.",
            "",
            "    rest of the docs as they were",
            "    \"\"\"",
        ];
        assert_eq!(loss(&doc, &kept, true).map(|l| l.line), Some(2));
        let header = ["// Loader.", "// Reads JSON.", "use a;", "use b;"];
        let cont = ["// Loader.", "// rest of the code stays the same"];
        assert_eq!(loss(&header, &cont, true).map(|l| l.line), Some(1));
    }

    #[test]
    fn a_bracketed_remark_inside_a_docstring_is_a_loss_without_its_quotes() {
        let search = [
            "    Skips # lines.",
            "    Ends at a blank line.",
            "    Expands tabs.",
        ];
        let replace = [
            "    Skips # lines.",
            "    (rest of the docstring unchanged)",
        ];
        assert_eq!(loss(&search, &replace, true).map(|l| l.line), Some(1));
        // A call in brackets, or a Lisp form, is code.
        for code in ["    (keep_original(x))", "    (keep-alive conn same)"] {
            assert!(
                loss(&search, &["    Skips # lines.", code], true).is_none(),
                "{code}"
            );
        }
    }

    #[test]
    fn a_preprocessor_line_is_code_that_takes_the_place_of_others() {
        let search = ["#ifdef LEGACY", "#define TIMEOUT 5", "#endif"];
        let replace = ["#if defined(KEEP)", "#endif"];
        assert!(loss(&search, &replace, true).is_none());
    }

    #[test]
    fn a_doctest_continuation_is_content() {
        let search = ["    >>> f(1)", "    1"];
        let replace = [
            "    >>> for n in (1, 2):",
            "    ...     f(n)",
            "    ...",
            "    1",
        ];
        assert!(misplaced(&search, &replace).is_none());
        assert!(loss(&search, &replace, true).is_none());
        // Code signs or a quote make a line code, not a remark.
        assert!(!wide_body("... keep = original", true));
        assert!(!wide_body("// keep `rest` here", false));
    }

    #[test]
    fn the_same_ellipses_split_both_sides_into_pieces() {
        let p = pieces(&["a", "...", "c"], &["A", "...", "C"]).unwrap();
        assert_eq!(p, [(vec!["a"], vec!["A"]), (vec!["c"], vec!["C"])]);
        assert!(pieces(&["a", "...", "c"], &["A", "C"]).is_none());
        assert!(pieces(&["a", "c"], &["A", "C"]).is_none());
    }
}

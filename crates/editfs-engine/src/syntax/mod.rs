//! The outcome check: does the file still parse where the edit changed it?
//!
//! A payload can apply exactly as written and still leave a broken file (a
//! body re-indented level with its `if`, a brace lost with the lines it
//! closed). This stage parses the new content with the file's grammar, and
//! for Python its indentation rules too, and keeps only what the edit made:
//! problems the old content did not have at the place they map to, so a file
//! already broken elsewhere still accepts edits. It is pure: bytes in, a
//! verdict out, and the work a parse may do is bounded by the content's size.

mod compare;
mod lang;
mod layout;
mod problem;
mod window;

use std::fmt::Write;
use std::ops::ControlFlow;

use tree_sitter::{ParseOptions, ParseState, Parser, Tree};

use super::report::SyntaxPlace;
use compare::Changes;
use lang::{Lang, Layout};
use problem::Problem;

/// The largest content checked: a parse reads about 10 MB/s, and a file past
/// this is generated (a bundle, a data dump) more often than edited by hand.
pub const MAX_CHECKED: usize = 4 << 20;

/// Progress reports a parse may make per KiB of its content, plus a floor:
/// tree-sitter reports every 100 parse operations, about 3 per byte when
/// the text reads cleanly; error recovery on a hostile text can take far
/// more, and is stopped here instead of running on.
const PROGRESS_PER_KIB: usize = 1000;
const PROGRESS_FLOOR: usize = 100_000;

/// Lines shown before the offending line, at most.
const EXCERPT_BEFORE: usize = 4;

/// What the check says about one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No problem the edit made. `kept` counts the problems the old content
    /// had that the new one still has, which the check let pass; `before` is
    /// the first of them; `scope` is how much of the new content was read.
    Clean {
        parser: &'static str,
        kept: usize,
        before: Option<SyntaxPlace>,
        scope: Scope,
    },
    /// No parser for this file's language.
    Unknown,
    /// The language is known but the content was not checked.
    Unchecked { parser: &'static str, why: String },
    /// The edit made the file fail to parse.
    Broken(Finding),
}

/// How much of the new content the check parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// All of it.
    File,
    /// The items around the change alone, lines `first..=last` (1-based):
    /// the rest is the old content's bytes, unread, so whether it was already
    /// broken is not known.
    Change { first: usize, last: usize },
}

/// A problem the edit made, as a report gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub parser: &'static str,
    /// Line and column (1-based; the column counts characters).
    pub line: usize,
    pub column: usize,
    /// What the parser read there ("expected an indented block after `if` on line 5").
    pub reading: String,
    /// The offending lines with their numbers, the column marked.
    pub excerpt: String,
    pub hint: String,
}

/// Checks the new content of a file named `path` against its old content
/// (`None`: the edit creates the file).
pub fn check(path: &str, old: Option<&[u8]>, new: &[u8]) -> Verdict {
    let Some(lang) = lang::detect(path, new) else {
        return Verdict::Unknown;
    };
    if new.len() > MAX_CHECKED {
        return Verdict::Unchecked {
            parser: lang.parser,
            why: format!(
                "the file is over {} MiB, the largest the check parses",
                MAX_CHECKED >> 20
            ),
        };
    }
    let broke = match old.and_then(|old| in_window(lang, old, new)) {
        Some(Windowed::Settled(verdict)) => return verdict,
        Some(Windowed::Broke(f)) => Some(f),
        None => None,
    };
    match whole(lang, old, new) {
        verdict @ Verdict::Clean { kept: 1.., .. } => {
            match broke.or_else(|| old.and_then(|old| broke_items(lang, old, new))) {
                Some(f) => Verdict::Broken(f),
                None => verdict,
            }
        }
        verdict => verdict,
    }
}

/// Where the old content was broken, the full check may not see a break the
/// edit made (a bracket never closed above reads the rest as inside it): the
/// top-level items around the change, read on their own whatever their size,
/// that parsed cleanly before and do not now, are the edit's break.
fn broke_items(lang: &Lang, old: &[u8], new: &[u8]) -> Option<Finding> {
    let range = window::items_around(old, new)?;
    let offset = memchr::memchr_iter(b'\n', &new[..range.start]).count();
    let padded = |bytes: &[u8]| [&vec![b'\n'; offset][..], bytes].concat();
    let part = padded(&new[range.clone()]);
    let old_part = padded(&old[range.start..range.end + old.len() - new.len()]);
    if !problems(lang, &old_part)?.is_empty() {
        return None;
    }
    let found = problems(lang, &part)?;
    let changes = Changes::between(&old_part, &part);
    let fresh = compare::fresh(&found, &[], &changes);
    first_of(&fresh, &changes).map(|p| finding(lang, p, &part))
}

/// The check of the whole new content, against the whole old content where
/// the new one has problems.
fn whole(lang: &Lang, old: Option<&[u8]>, new: &[u8]) -> Verdict {
    let Some(found) = problems(lang, new) else {
        return gave_up(lang);
    };
    if found.is_empty() {
        return Verdict::Clean {
            parser: lang.parser,
            kept: 0,
            before: None,
            scope: Scope::File,
        };
    }
    let old = old.unwrap_or_default();
    let Some(before) = problems(lang, old) else {
        return gave_up(lang);
    };
    let changes = Changes::between(old, new);
    let fresh = compare::fresh(&found, &before, &changes);
    match first_of(&fresh, &changes) {
        None => Verdict::Clean {
            parser: lang.parser,
            kept: found.len(),
            before: Some(place(lang, &found[0], new)),
            scope: Scope::File,
        },
        Some(p) => Verdict::Broken(finding(lang, p, new)),
    }
}

/// Where `p`, a problem of `src` that the old content had too, stands in the
/// new content (line 1-based; the column counts characters).
fn place(lang: &Lang, p: &Problem, src: &[u8]) -> SyntaxPlace {
    let f = finding(lang, p, src);
    SyntaxPlace {
        line: f.line,
        column: f.column,
        reading: f.reading,
    }
}

/// What the items around the change (window.rs) say on their own.
enum Windowed {
    /// They settle it: they parse cleanly, their indentation too for Python
    /// (an item starts flush left, where no block is open). Then the whole
    /// file need not be parsed. Problems they share with the old content
    /// settle nothing: the window may have cut a string or comment in two.
    Settled(Verdict),
    /// Whole top-level items that parsed cleanly before the edit do not
    /// after it: the edit broke them, whatever the rest of the file holds.
    /// The full check decides, but where the file was already broken
    /// elsewhere it may not see this (a bracket never closed above reads
    /// the rest of the file as inside it), and then this stands.
    Broke(Finding),
}

/// The items around the change read on their own; `None`: the full check
/// decides. A part with problems is read again after as many empty lines as
/// precede it in the file, so its problems, and the lines their readings
/// name, are the file's (a clean part, the common case, is read once).
fn in_window(lang: &Lang, old: &[u8], new: &[u8]) -> Option<Windowed> {
    let window = window::around_change(old, new, lang.nested)?;
    let range = window.range;
    let offset = memchr::memchr_iter(b'\n', &new[..range.start]).count();
    let lines = memchr::memchr_iter(b'\n', &new[range.start..range.end - 1]).count();
    let scope = Scope::Change {
        first: offset + 1,
        last: offset + lines + 1,
    };
    if problems(lang, &new[range.clone()])?.is_empty() {
        return Some(Windowed::Settled(Verdict::Clean {
            parser: lang.parser,
            kept: 0,
            before: None,
            scope,
        }));
    }
    // An indented item read on its own may show what the whole file would
    // not; only whole top-level items are compared with the old ones.
    if !window.flush {
        return None;
    }
    let padded = |bytes: &[u8]| [&vec![b'\n'; offset][..], bytes].concat();
    let part = padded(&new[range.clone()]);
    let found = problems(lang, &part)?;
    // Outside the window the two contents are the same bytes.
    let old_part = padded(&old[range.start..range.end + old.len() - new.len()]);
    let before = problems(lang, &old_part)?;
    let changes = Changes::between(&old_part, &part);
    let fresh = compare::fresh(&found, &before, &changes);
    // Problems the old window had too may be the window's own (a docstring
    // or block comment with a blank line and a flush-left line inside reads
    // as an item's start and is cut in two): whether the file was already
    // broken is for the full parse to say.
    match first_of(&fresh, &changes) {
        Some(p) if before.is_empty() => Some(Windowed::Broke(finding(lang, p, &part))),
        _ => None,
    }
}

fn gave_up(lang: &Lang) -> Verdict {
    Verdict::Unchecked {
        parser: lang.parser,
        why: "the parser's work limit was reached".to_string(),
    }
}

/// The problem to report: the first at or after the first change (the
/// reader looks there), else the first.
fn first_of<'p>(fresh: &[&'p Problem], changes: &Changes) -> Option<&'p Problem> {
    let from = changes.first().unwrap_or(0);
    fresh
        .iter()
        .find(|p| p.line >= from)
        .or(fresh.first())
        .copied()
}

/// The grammar's problems and the layout's, in line order, the layout's
/// first on a line (its reading is the more precise); `None` if the parse
/// ran past its work limit.
fn problems(lang: &Lang, src: &[u8]) -> Option<Vec<Problem>> {
    let tree = parse(lang, src)?;
    let mut found = match lang.layout {
        Layout::Offside => layout::problems(src),
        // A shell's `case` patterns end with a `)` nothing opened.
        Layout::None if lang.name == "Bash" => Vec::new(),
        Layout::None => problem::stray_closer(&tree, src).into_iter().collect(),
    };
    found.extend(problem::of_tree(&tree, src));
    found.sort_by_key(|p| p.line);
    Some(found)
}

fn parse(lang: &Lang, src: &[u8]) -> Option<Tree> {
    let mut parser = Parser::new();
    parser.set_language(&lang.grammar()).ok()?;
    let limit = PROGRESS_FLOOR + PROGRESS_PER_KIB * (src.len() >> 10);
    let mut reports = 0usize;
    let mut progress = |_: &ParseState| {
        reports += 1;
        match reports > limit {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    };
    let options = ParseOptions::new().progress_callback(&mut progress);
    let len = src.len();
    parser.parse_with_options(
        &mut |i, _| if i < len { &src[i..] } else { &[] },
        None,
        Some(options),
    )
}

fn finding(lang: &Lang, p: &Problem, src: &[u8]) -> Finding {
    let lines: Vec<&[u8]> = src.split(|&b| b == b'\n').collect();
    let text = |n: usize| String::from_utf8_lossy(lines.get(n).copied().unwrap_or_default());
    let line = text(p.line);
    let column = line
        .get(..p.column.min(line.len()))
        .map_or(p.column, |s| s.chars().count());
    Finding {
        parser: lang.parser,
        line: p.line + 1,
        column: column + 1,
        reading: p.reading.clone(),
        excerpt: excerpt(p, column, &text),
        hint: hint(lang, p, src),
    }
}

/// The offending lines, numbered, with a caret under the column: the line
/// the reading speaks of (an `if`, an open `{`), the lines up to the
/// problem's, at most a few.
fn excerpt<'s>(
    p: &Problem,
    column: usize,
    text: &dyn Fn(usize) -> std::borrow::Cow<'s, str>,
) -> String {
    let near = p
        .related
        .filter(|&r| r <= p.line && r + EXCERPT_BEFORE >= p.line);
    let from = near.unwrap_or(p.line.saturating_sub(1));
    let mut shown: Vec<usize> = p.related.filter(|&r| r < from).into_iter().collect();
    shown.extend(from..=p.line);
    let width = (p.line + 1).to_string().len();
    let mut out = String::new();
    let mut prev = None;
    for n in shown {
        if prev.is_some_and(|m: usize| m + 1 < n) {
            let _ = writeln!(out, "{:>width$} | …", "");
        }
        let _ = writeln!(
            out,
            "{:>width$} | {}",
            n + 1,
            text(n).trim_end_matches('\r')
        );
        prev = Some(n);
    }
    let pad: String = text(p.line)
        .chars()
        .take(column)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let _ = writeln!(out, "{:>width$} | {pad}^", "");
    out
}

fn hint(lang: &Lang, p: &Problem, src: &[u8]) -> String {
    if p.reading.starts_with("expected an indented block") {
        return format!(
            "indent the body under line {} by {} more columns than that line (the file's step); \
             REPLACE's lines keep the indentation they were sent with, relative to SEARCH",
            p.related.map_or(p.line, |r| r + 1),
            layout::step(src)
        );
    }
    if let Some(rest) = p.reading.strip_prefix("an extra `") {
        let bracket = rest.split('`').next().unwrap_or_default();
        return format!(
            "remove the `{bracket}` at line {} (or add the bracket it was meant to close): \
             REPLACE has one more closing bracket than it opens",
            p.line + 1
        );
    }
    if p.reading.starts_with("expected `:`") {
        return format!(
            "add the `:` at the end of line {}: a line that opens a block (`if`, `else`, `for`, \
             `def`, …) ends with a colon; the indentation below it is right as it is",
            p.line + 1
        );
    }
    if let Some(token) = p.reading.strip_prefix("expected `") {
        let token = token.split('`').next().unwrap_or_default();
        return format!(
            "the parser expected `{token}` at line {}, column {}: REPLACE left it out; add it there",
            p.line + 1,
            p.column + 1
        );
    }
    if p.reading.contains("indent") {
        return "make the changed lines' indentation match a level the surrounding block opened; \
                resend the block with the file's own indentation"
            .to_string();
    }
    format!(
        "the new content does not parse as {} at line {}: check REPLACE for an unclosed or extra \
         bracket, quote or block at that place, and that SEARCH covered every line the change \
         needs",
        lang.name,
        p.line + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broken(path: &str, old: &str, new: &str) -> Finding {
        match check(path, Some(old.as_bytes()), new.as_bytes()) {
            Verdict::Broken(f) => f,
            other => panic!("{path}: expected a finding, got {other:?}\n{new}"),
        }
    }

    fn clean(path: &str, old: &str, new: &str) -> usize {
        match check(path, Some(old.as_bytes()), new.as_bytes()) {
            Verdict::Clean { kept, .. } => kept,
            other => panic!("{path}: expected clean, got {other:?}\n{new}"),
        }
    }

    #[test]
    fn the_issues_reindented_body_level_with_its_if_is_refused() {
        let old = "def greet(name):\n    print(\"Hello, \" + name)\n";
        let new = "def greet(name):\n    if not name:\n    name = \"world\"\n    print(\"Hello, \" + name)\n";
        let f = broken("greet.py", old, new);
        assert_eq!((f.line, f.column), (3, 5));
        assert_eq!(f.reading, "expected an indented block after `if` on line 2");
        assert!(f.parser.starts_with("tree-sitter-python"), "{}", f.parser);
        assert_eq!(
            f.excerpt,
            "2 |     if not name:\n3 |     name = \"world\"\n  |     ^\n"
        );
        assert!(f.hint.contains("by 4 more columns"), "{}", f.hint);
        let fixed = "def greet(name):\n    if not name:\n        name = \"world\"\n    print(\"Hello, \" + name)\n";
        assert_eq!(clean("greet.py", old, fixed), 0);
    }

    #[test]
    fn a_file_already_broken_elsewhere_still_accepts_edits() {
        let old = "def a():\n    return 1\n\n\ndef b(:\n    return (2\n";
        let new = "def a():\n    x = 1\n    return x\n\n\ndef b(:\n    return (2\n";
        assert!(
            clean("m.py", old, new) > 0,
            "the old breakage is kept, and counted"
        );
        let old = "fn a() -> u8 {\n    1\n}\n\nfn b() {\n    let = ;\n}\n";
        let new = "fn a() -> u8 {\n    2\n}\n\nfn b() {\n    let = ;\n}\n";
        assert!(clean("lib.rs", old, new) > 0);
        let old = "x = 1\n      y = 2\nif x:\n    pass\n";
        let new = "x = 3\n      y = 2\nif x:\n    pass\n";
        assert!(
            clean("m.py", old, new) > 0,
            "an old indentation error elsewhere"
        );
    }

    fn before(path: &str, old: &str, new: &str) -> (SyntaxPlace, Scope) {
        match check(path, Some(old.as_bytes()), new.as_bytes()) {
            Verdict::Clean {
                before: Some(b),
                scope,
                ..
            } => (b, scope),
            other => panic!("{path}: expected clean with the old breakage, got {other:?}"),
        }
    }

    #[test]
    fn the_old_breakage_is_told_where_it_stands_in_the_new_content() {
        let old = "x = foo(1,\n\ndef f():\n    return 1\n";
        let new = "import os\nx = foo(1,\n\ndef f():\n    return 2\n";
        let (b, scope) = before("m.py", old, new);
        assert_eq!((b.line, b.column, scope), (2, 8, Scope::File));
        assert_eq!(b.reading, "the `(` on line 2 is never closed");
        // In a long file, an edit to the broken item itself: the items around
        // the change may have cut a string in two, so the whole file is read
        // before it is said to have been broken.
        let old = python_functions(40).replace("    return 3\n", "    return print(3\n");
        let new = old.replace("if x > 3:", "if x > 33:");
        let (b, scope) = before("long.py", &old, &new);
        assert_eq!(scope, Scope::File);
        assert_eq!(b.line, 22);
        assert!(
            b.reading.starts_with("the `(` on line 22 "),
            "{}",
            b.reading
        );
    }

    #[test]
    fn a_clean_check_around_the_change_says_it_read_no_more() {
        let old = python_functions(40).replace("    return 30\n", "    return print(30\n");
        let new = old.replace("return 10\n", "return 11\n");
        let verdict = check("long.py", Some(old.as_bytes()), new.as_bytes());
        assert!(
            matches!(
                verdict,
                Verdict::Clean {
                    kept: 0,
                    before: None,
                    scope: Scope::Change {
                        first: 61,
                        last: 66
                    },
                    ..
                }
            ),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_break_in_a_file_already_broken_elsewhere_is_refused_before_or_after_it() {
        let functions = python_functions(40);
        let early = functions.replace("    return 3\n", "    return print(3\n");
        let late = functions.replace("    return 30\n", "    return print(30\n");
        for old in [early, late] {
            // A bracket never closed reads as one error spanning the whole
            // file, which must not excuse a new one; and a bracket left open
            // above reads the rest as inside it, where the edited function,
            // clean on its own before, is broken on its own now.
            let new = old.replace("    return 10\n", "    return (11\n");
            let f = broken("long.py", &old, &new);
            assert_eq!((f.line, f.column), (64, 12), "{f:?}");
            assert!(f.reading.starts_with("the `(` on line 64 is never closed"));
        }
    }

    #[test]
    fn in_a_short_file_a_break_after_a_bracket_never_closed_is_refused() {
        let old = "x = foo(1,\n\ndef f():\n    return 1\n";
        let f = broken("m.py", old, &old.replace("return 1", "return (2"));
        assert_eq!((f.line, f.column), (4, 12), "{f:?}");
        assert_eq!(clean("m.py", old, &old.replace("return 1", "return 2")), 1);
    }

    #[test]
    fn a_new_error_at_the_change_of_a_broken_file_is_refused() {
        let old = "function a() {\n  return 1;\n}\n\nfunction b() {\n  return (;\n}\n";
        let new = "function a() {\n  return 1 +;\n}\n\nfunction b() {\n  return (;\n}\n";
        let f = broken("m.js", old, new);
        assert_eq!(f.line, 2);
    }

    #[test]
    fn each_grammar_finds_the_break_an_edit_makes() {
        // (file, old, new, line of the finding)
        let cases: &[(&str, &str, &str, usize)] = &[
            (
                "a.js",
                "function f(a) {\n  if (a) {\n    return 1;\n  }\n}\n",
                "function f(a) {\n  if (a) {\n    return 1;\n}\n",
                4,
            ),
            (
                "a.ts",
                "function f(a: number): number {\n  return a;\n}\n",
                "function f(a: number): {\n  return a;\n}\n",
                2,
            ),
            (
                "a.tsx",
                "const A = () => <div>{x}</div>;\n",
                "const A = () => <div>{x</div>;\n",
                1,
            ),
            (
                "a.rs",
                "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n",
                "fn main() {\n    let x = 1\n    println!(\"{x}\");\n}\n",
                3,
            ),
            (
                "a.go",
                "package main\n\nfunc main() {\n\tx := 1\n\tif x > 0 {\n\t\tprintln(x)\n\t}\n}\n",
                "package main\n\nfunc main() {\n\tx := 1\n\tif x > 0 {\n\t\tprintln(x)\n}\n",
                8,
            ),
            (
                "A.java",
                "class A {\n  void f() {\n    int x = 1;\n  }\n}\n",
                "class A {\n  void f() {\n    int x = 1\n  }\n}\n",
                3,
            ),
            (
                "a.c",
                "int main(void) {\n  int x = 1;\n  return x;\n}\n",
                "int main(void) {\n  int x = 1\n  return x;\n}\n",
                2,
            ),
            (
                "a.cpp",
                "int main() {\n  std::vector<int> v{1, 2};\n  return 0;\n}\n",
                "int main() {\n  std::vector<int> v{1, 2;\n  return 0;\n}\n",
                4,
            ),
            (
                "a.json",
                "{\n  \"a\": 1,\n  \"b\": 2\n}\n",
                "{\n  \"a\": 1\n  \"b\": 2\n}\n",
                3,
            ),
            (
                "a.sh",
                "if [ -f x ]; then\n  echo hi\nfi\n",
                "if [ -f x ]; then\n  echo hi\n",
                3,
            ),
            ("a.yaml", "a:\n  b: 1\n  c: 2\n", "a:\n  b: 1\n   c: 2\n", 3),
            ("a.toml", "[a]\nb = 1\nc = 1\n", "[a]\nb = \nc = 1\n", 3),
            (
                "a.css",
                "a { color: red; }\nb { x: y; }\n",
                "a { color: red;\nb { x: y; }\n",
                2,
            ),
            (
                "a.lua",
                "function f()\n  return 1\nend\n",
                "function f()\n  return 1\n",
                2,
            ),
            (
                "a.py",
                "def f(x):\n    return x\n",
                "def f(x:\n    return x\n",
                1,
            ),
        ];
        for (path, old, new, line) in cases {
            clean(path, "", old);
            let f = broken(path, old, new);
            assert_eq!(f.line, *line, "{path}: {f:?}");
            assert!(
                !f.reading.is_empty() && f.excerpt.contains('^'),
                "{path}: {f:?}"
            );
        }
    }

    #[test]
    fn readings_name_what_was_open_and_what_was_expected() {
        let f = broken(
            "a.js",
            "",
            "function f(a) {\n  if (a) {\n    return 1;\n}\n",
        );
        assert_eq!(f.reading, "expected `}` to close the `{` on line 1");
        let f = broken("a.rs", "", "fn main() {\n    if x {\n        y();\n}\n");
        assert_eq!(f.reading, "the `{` on line 1 is never closed");
        let f = broken("a.json", "", "{\n  \"a\": 1,\n}\n");
        assert!(
            f.reading.starts_with("unexpected `}` after `,`"),
            "{}",
            f.reading
        );
        let f = broken("a.sh", "", "if true; then\n  echo hi\n");
        assert_eq!(f.reading, "expected `fi` to close the `if` on line 1");
    }

    #[test]
    fn the_language_comes_from_the_extension_or_the_shebang() {
        let bad = b"#!/usr/bin/env python3\nif x:\npass\n";
        assert!(matches!(check("bin/tool", None, bad), Verdict::Broken(_)));
        let bad = b"#!/bin/sh -e\nif true; then\n";
        assert!(matches!(check("run", None, bad), Verdict::Broken(_)));
        assert_eq!(check("notes.txt", None, b"if x:\npass\n"), Verdict::Unknown);
        assert_eq!(check("Makefile", None, b"all:\n\techo\n"), Verdict::Unknown);
        assert!(matches!(
            check("A.PY", None, b"x = (\n"),
            Verdict::Broken(_)
        ));
    }

    #[test]
    fn a_file_past_the_limit_is_not_checked_and_says_why() {
        let big = vec![b'#'; MAX_CHECKED + 1];
        match check("big.py", None, &big) {
            Verdict::Unchecked { why, .. } => assert!(why.contains("MiB"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_created_file_is_checked_whole() {
        assert!(matches!(
            check("new.go", None, b"package x\nfunc f( {\n"),
            Verdict::Broken(_)
        ));
        assert!(matches!(
            check("new.go", None, b"package x\n\nfunc f() {}\n"),
            Verdict::Clean { kept: 0, .. }
        ));
    }

    #[test]
    fn the_column_counts_characters_and_the_excerpt_marks_it() {
        let f = broken("a.py", "", "s = 'é' + (1\n");
        assert_eq!((f.line, f.column), (1, 11));
        assert!(f.excerpt.ends_with("  |           ^\n"), "{}", f.excerpt);
    }

    #[test]
    fn an_edit_far_from_an_old_indentation_error_maps_past_inserted_lines() {
        let old = "a = 1\nb = 2\nif a:\n  pass\n   c = 3\n";
        let new = "a = 1\nx = 0\ny = 0\nb = 2\nif a:\n  pass\n   c = 3\n";
        assert!(clean("m.py", old, new) > 0);
    }

    fn python_functions(n: usize) -> String {
        (0..n)
            .map(|i| {
                format!("def f{i}(x):\n    if x > {i}:\n        return x\n    return {i}\n\n\n")
            })
            .collect()
    }

    #[test]
    fn in_a_long_file_a_break_the_window_holds_is_still_found_in_full() {
        let old = python_functions(40);
        let new = old.replace(
            "        return x\n    return 7\n",
            "        return (x\n    return 7\n",
        );
        let f = broken("long.py", &old, &new);
        assert!(
            f.reading.starts_with("the `(` on line 45 is never closed"),
            "{}",
            f.reading
        );
        let new = old.replace(
            "    if x > 7:\n        return x\n",
            "    if x > 7:\n    return x\n",
        );
        let f = broken("long.py", &old, &new);
        assert_eq!(
            f.reading,
            "expected an indented block after `if` on line 44"
        );
        let new = old.replace("return 7\n", "return 77\n");
        assert_eq!(clean("long.py", &old, &new), 0);
    }

    #[test]
    fn in_a_long_file_an_item_already_broken_takes_edits_and_another_item_may_not_break() {
        let old = python_functions(40).replace("    return 7\n", "    return 7 +\n");
        let new = old.replace("if x > 7:", "if x > 70:");
        assert!(clean("long.py", &old, &new) > 0);
        let new = old.replace("    return 20\n", "    return [20\n");
        let f = broken("long.py", &old, &new);
        assert_eq!(f.line, 124, "{f:?}");
    }

    #[test]
    fn in_a_class_around_the_file_a_methods_break_is_found_and_a_clean_edit_passes() {
        let methods: String = (0..40)
            .map(|i| format!("  int f{i}(int x) {{\n    if (x > {i}) {{\n      return x;\n    }}\n    return {i};\n  }}\n\n"))
            .collect();
        let old = format!("class A {{\n{methods}}}\n");
        let new = old.replace("return 7;", "return 77;");
        assert_eq!(clean("A.java", &old, &new), 0);
        let new = old.replace(
            "      return x;\n    }\n    return 7;",
            "      return x;\n    return 7;",
        );
        let f = broken("A.java", &old, &new);
        // The parser reads on into the next method, and stops at its header.
        assert_eq!(f.line, 57, "{f:?}");
    }

    /// `body_encode` of the Python standard library's `email/base64mime.py`.
    const BODY_ENCODE: &str = "def body_encode(s, maxlinelen=76, eol=NL):\n    if not s:\n        return \"\"\n\n    encvec = []\n    max_unencoded = maxlinelen * 3 // 4\n    for i in range(0, len(s), max_unencoded):\n        # BAW: should encode() inherit b2a_base64()'s dubious behavior in\n        # adding a newline to the encoded string?\n        enc = b2a_base64(s[i:i + max_unencoded]).decode(\"ascii\")\n        if enc.endswith(NL) and eol != NL:\n            enc = enc[:-1] + eol\n        encvec.append(enc)\n    return EMPTYSTRING.join(encvec)\n";

    #[test]
    fn a_header_that_lost_its_colon_is_read_as_python_reads_it() {
        let header = "        if enc.endswith(NL) and eol != NL:";
        let new = BODY_ENCODE.replace(header, header.trim_end_matches(':'));
        let f = broken("base64mime.py", BODY_ENCODE, &new);
        assert_eq!((f.line, f.column), (11, 42), "{f:?}");
        assert_eq!(
            f.reading,
            "expected `:` at the end of the `if` header on line 11"
        );
        assert!(
            f.hint.starts_with("add the `:` at the end of line 11"),
            "{}",
            f.hint
        );
        assert!(!f.hint.contains("indentation match"), "{}", f.hint);
        let old = "def f(a):\n    if a:\n        x = 1\n    else:\n        x = 2\n    return x\n";
        let f = broken("a.py", old, &old.replace("    else:", "    else"));
        assert_eq!((f.line, f.column), (4, 9), "{f:?}");
        assert_eq!(
            f.reading,
            "expected `:` at the end of the `else` header on line 4"
        );
        // A line indented under no header at all is still an indent problem.
        let f = broken(
            "a.py",
            old,
            &old.replace("    return x", "        return x\n  y = 1"),
        );
        assert!(f.hint.contains("indentation"), "{f:?}");
    }

    /// The head of the Python standard library's `email/base64mime.py`: its
    /// docstring has blank lines followed by lines flush left.
    const BASE64MIME_HEAD: &str = "# Copyright (C) 2002-2007 Python Software Foundation\n# Author: Ben Gertzfield\n# Contact: email-sig@python.org\n\n\"\"\"Base64 content transfer encoding per RFCs 2045-2047.\n\nThis module handles the content transfer encoding method defined in RFC 2045\nto encode arbitrary 8-bit data using the three 8-bit bytes in four 7-bit\ncharacters encoding known as Base64.\n\nIt is used in the MIME standards for email to attach images, audio, and text\nusing some 8-bit character sets to messages.\n\nThis module provides an interface to encode and decode both headers and bodies\nwith Base64 encoding.\n\nRFC 2045 defines a method for including character set information in an\n`encoded-word' in a header.  This method is commonly used for 8-bit real names\nin To:, From:, Cc:, etc. fields, as well as Subject: lines.\n\nThis module does not do the line wrapping or end-of-line character conversion\nnecessary for proper internationalized headers; it only does dumb encoding and\ndecoding.  To deal with the various line wrapping issues, use the email.header\nmodule.\n\"\"\"\n\n__all__ = [\n    'body_decode',\n    'body_encode',\n    'decode',\n    'decodestring',\n    'header_encode',\n    'header_length',\n    ]\n\n\nfrom base64 import b64encode\nfrom binascii import b2a_base64, a2b_base64\n\nCRLF = '\\r\\n'\nNL = '\\n'\nEMPTYSTRING = ''\n\n# See also Charset.py\nMISC_LEN = 7\n\n\n";

    #[test]
    fn an_edit_inside_a_docstring_of_a_sound_file_never_says_it_was_broken() {
        let old = format!("{BASE64MIME_HEAD}{BODY_ENCODE}");
        let line = "This module handles the content transfer encoding method defined in RFC 2045";
        let new = old.replace(line, &format!("{line} (edited)"));
        let verdict = check("base64mime.py", Some(old.as_bytes()), new.as_bytes());
        assert!(
            matches!(
                verdict,
                Verdict::Clean {
                    kept: 0,
                    before: None,
                    ..
                }
            ),
            "{verdict:?}"
        );
    }

    /// `file_name` of the `globset` crate's `src/pathutil.rs`, and the doc
    /// comment after it, which holds backticks.
    const GLOBSET_FILE_NAME: &str = "/// The final component of the path, if it is a normal file.\n///\n/// If the path terminates in `..`, or consists solely of a root of prefix,\n/// file_name will return `None`.\npub(crate) fn file_name<'a>(path: &Cow<'a, [u8]>) -> Option<Cow<'a, [u8]>> {\n    if path.is_empty() {\n        return None;\n    }\n    let last_slash = path.rfind_byte(b'/').map(|i| i + 1).unwrap_or(0);\n    let got = match *path {\n        Cow::Borrowed(path) => Cow::Borrowed(&path[last_slash..]),\n        Cow::Owned(ref path) => Cow::Owned(path[last_slash..].to_vec()),\n    };\n    if got == &b\"..\"[..] {\n        return None;\n    }\n    Some(got)\n}\n\n/// Return a file extension given a path's file name.\n///\n/// Note that this does NOT match the semantics of std::path::Path::extension.\n/// Namely, the extension includes the `.` and matching is otherwise more\n/// liberal. Specifically, the extension is:\n///\n/// * None, if the file name given is empty;\n/// * None, if there is no embedded `.`;\n/// * Otherwise, the portion of the file name starting with the final `.`.\npub(crate) fn file_name_ext<'a>(\n    name: &Cow<'a, [u8]>,\n) -> Option<Cow<'a, [u8]>> {\n    if name.is_empty() {\n        return None;\n    }\n    let last_dot_at = match name.rfind_byte(b'.') {\n        None => return None,\n        Some(i) => i,\n    };\n    Some(match *name {\n        Cow::Borrowed(name) => Cow::Borrowed(&name[last_dot_at..]),\n        Cow::Owned(ref name) => Cow::Owned(name[last_dot_at..].to_vec()),\n    })\n}\n";

    #[test]
    fn an_extra_closing_brace_is_told_at_its_own_line() {
        let old = GLOBSET_FILE_NAME;
        let at = "        return None;\n    }\n    Some(got)";
        let new = old.replace(at, "        return None;\n    }\n    }\n    Some(got)");
        let f = broken("pathutil.rs", old, &new);
        assert_eq!((f.line, f.column), (17, 5), "{f:?}");
        assert!(f.reading.starts_with("an extra `}`"), "{f:?}");
        assert!(
            f.hint.starts_with("remove the `}` at line 17"),
            "{}",
            f.hint
        );
        // One more after the function's own: that one closes nothing.
        let new = old.replace("    Some(got)\n}\n", "    Some(got)\n}\n}\n");
        let f = broken("pathutil.rs", old, &new);
        assert_eq!((f.line, f.column), (19, 1), "{f:?}");
    }

    #[test]
    fn quoted_text_with_backticks_keeps_its_quotes_whole() {
        assert_eq!(problem::code("x = 1"), "`x = 1`");
        assert_eq!(problem::code(".`"), "`` .` ``");
        assert_eq!(problem::code("the `.` and"), "``the `.` and``");
    }
}

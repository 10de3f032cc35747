//! Python's blocks are made by indentation, and its grammar for tree-sitter
//! reads an `if` whose body was left level with it as an `if` with an empty
//! body, without an error. These rules read the layout as Python's own
//! tokenizer does: logical lines (brackets, strings and `\` continue a line),
//! a stack of indentation levels, and each indentation compared with tabs as
//! 8 columns and as 1, so that a mix of tabs and spaces that means two things
//! is an error too.

use super::problem::Problem;

/// Columns of an indentation with tabs to multiples of 8 and of 1: Python
/// refuses indentations whose order differs between the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Indent {
    wide: usize,
    narrow: usize,
}

/// A logical line: where it starts, its indentation, and whether it ends
/// with the `:` that opens a block.
#[derive(Debug)]
struct Logical {
    line: usize,
    indent: Indent,
    /// The header's first words (`if`, `def greet`), when it opens a block.
    opens: Option<String>,
    /// The header's first words when the line starts with a compound
    /// statement's keyword, whether or not it ends with its `:`.
    keyword: Option<String>,
    /// Just past its last byte of code (0-based line, byte column): where a
    /// header's missing `:` belongs.
    end: (usize, usize),
}

/// Where the bytes stand as a tokenizer reads them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum In {
    Code,
    /// A string opened by this quote, three of them when `triple`.
    Str {
        quote: u8,
        triple: bool,
    },
}

/// Splits `src` into logical lines, leaving out blank and comment-only ones.
fn logical_lines(src: &[u8]) -> Vec<Logical> {
    let mut out = Vec::new();
    let mut line = 0;
    let mut i = 0;
    while i < src.len() {
        let (indent, body) = indentation(src, i);
        if matches!(src.get(body), None | Some(b'\n' | b'\r' | b'#')) {
            let end = memchr::memchr(b'\n', &src[i..]).map_or(src.len(), |n| i + n + 1);
            i = end;
            line += 1;
            continue;
        }
        let (end, physical, last) = logical_end(src, body);
        let last_at = last.map_or(body, |(_, at)| at + 1);
        let opens = matches!(last, Some((b':', _))).then(|| header(&src[body..end]));
        let keyword = starts_block(&src[body..end]).then(|| header(&src[body..end]));
        let end_line = line + memchr::memchr_iter(b'\n', &src[body..last_at]).count();
        let end_column = last_at - memchr::memrchr(b'\n', &src[..last_at]).map_or(0, |n| n + 1);
        out.push(Logical {
            line,
            indent,
            opens,
            keyword,
            end: (end_line, end_column),
        });
        line += physical;
        i = end;
    }
    out
}

/// The indentation starting at `start`, and where the line's text begins.
fn indentation(src: &[u8], start: usize) -> (Indent, usize) {
    let mut indent = Indent { wide: 0, narrow: 0 };
    let mut i = start;
    while let Some(&c) = src.get(i) {
        match c {
            b' ' => {
                indent.wide += 1;
                indent.narrow += 1;
            }
            b'\t' => {
                indent.wide = (indent.wide / 8 + 1) * 8;
                indent.narrow += 1;
            }
            b'\x0c' => indent = Indent { wide: 0, narrow: 0 },
            _ => break,
        }
        i += 1;
    }
    (indent, i)
}

/// From `start`, the end of the logical line (after its newline), the
/// physical lines it spans, and its last byte of code outside comments with
/// where it stands.
fn logical_end(src: &[u8], start: usize) -> (usize, usize, Option<(u8, usize)>) {
    let mut state = In::Code;
    let mut depth = 0usize;
    let mut physical = 1;
    let mut last = None;
    let mut i = start;
    while i < src.len() {
        let c = src[i];
        match state {
            In::Str { quote, triple } => {
                if c == b'\\' {
                    if src.get(i + 1) == Some(&b'\n') {
                        physical += 1;
                    }
                    i += 2;
                    continue;
                }
                if c == b'\n' {
                    physical += 1;
                    if !triple {
                        // An unterminated string: the grammar reports it; the
                        // line ends here as Python's tokenizer gives up on it.
                        state = In::Code;
                        if depth == 0 {
                            return (i + 1, physical - 1, last);
                        }
                    }
                } else if c == quote && (!triple || src[i..].starts_with(&[quote; 3])) {
                    state = In::Code;
                    i += if triple { 3 } else { 1 };
                    last = Some((quote, i - 1));
                    continue;
                }
            }
            In::Code => match c {
                b'#' => {
                    i = memchr::memchr(b'\n', &src[i..]).map_or(src.len(), |n| i + n);
                    continue;
                }
                b'\'' | b'"' => {
                    let triple = src[i..].starts_with(&[c; 3]);
                    state = In::Str { quote: c, triple };
                    last = Some((c, i));
                    i += if triple { 3 } else { 1 };
                    continue;
                }
                b'\\' if src.get(i + 1) == Some(&b'\n') => {
                    physical += 1;
                    i += 2;
                    continue;
                }
                b'\\' if src[i + 1..].starts_with(b"\r\n") => {
                    physical += 1;
                    i += 3;
                    continue;
                }
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                b'\n' if depth == 0 => return (i + 1, physical, last),
                b'\n' => physical += 1,
                _ => {}
            },
        }
        if !c.is_ascii_whitespace() {
            last = Some((c, i));
        }
        i += 1;
    }
    (src.len(), physical, last)
}

/// Whether a logical line starts with the keyword of a compound statement,
/// which opens a block and so must end with `:` (`match` and `case` are
/// keywords only there, which is where this is asked).
fn starts_block(text: &[u8]) -> bool {
    let word_end = text
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
        .unwrap_or(text.len());
    matches!(
        &text[..word_end],
        b"if"
            | b"elif"
            | b"else"
            | b"for"
            | b"while"
            | b"def"
            | b"class"
            | b"try"
            | b"except"
            | b"finally"
            | b"with"
            | b"async"
            | b"match"
            | b"case"
    )
}

/// A header's first words as a reading names it: `if`, `def greet`, `async def load`.
fn header(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let mut words = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty());
    let first = words.next().unwrap_or_default();
    let named = |w: &str| matches!(w, "def" | "class");
    match first {
        "async" => {
            let second = words.next().unwrap_or_default();
            match named(second) {
                true => format!("async {second} {}", words.next().unwrap_or_default()),
                false => format!("async {second}"),
            }
        }
        w if named(w) => format!("{w} {}", words.next().unwrap_or_default()),
        w => w.to_string(),
    }
}

/// The indentation problems of `src`, in line order.
pub fn problems(src: &[u8]) -> Vec<Problem> {
    let lines = logical_lines(src);
    let mut out = Vec::new();
    let flush = Indent { wide: 0, narrow: 0 };
    // Each level: its indentation, and the header line that opened it.
    let mut levels: Vec<(Indent, Option<usize>)> = vec![(flush, None)];
    let mut opener: Option<&Logical> = None;
    let mut previous: Option<&Logical> = None;
    for l in &lines {
        let (top, within) = levels.last().copied().unwrap_or((flush, None));
        let column = l.indent.narrow;
        let head = opener.take();
        if l.indent.wide > top.wide {
            if l.indent.narrow <= top.narrow {
                out.push(tabs(l.line, column));
            } else if head.is_none() {
                out.push(match previous.filter(|p| p.keyword.is_some()) {
                    Some(header) => no_colon(header),
                    None => Problem::at(l.line, column, "unexpected indent").related(within),
                });
            }
            levels.push((l.indent, head.map(|h| h.line).or(within)));
        } else {
            if let Some(head) = head {
                out.push(unindented_body(head, l.line, column));
            }
            dedent(&mut levels, l, &mut out);
        }
        opener = l.opens.as_ref().map(|_| l);
        previous = Some(l);
    }
    if let Some(head) = opener {
        let end = src.iter().filter(|&&b| b == b'\n').count();
        let mut p = unindented_body(head, end, 0);
        p.reading.push_str(" (the file ends instead)");
        out.push(p);
    }
    out
}

/// Closes the levels deeper than `l`, which must then stand at an open level.
fn dedent(levels: &mut Vec<(Indent, Option<usize>)>, l: &Logical, out: &mut Vec<Problem>) {
    while levels.len() > 1 && levels.last().is_some_and(|(i, _)| l.indent.wide < i.wide) {
        levels.pop();
    }
    let Some(&(top, _)) = levels.last() else {
        return;
    };
    let column = l.indent.narrow;
    if l.indent.wide != top.wide {
        out.push(Problem::at(
            l.line,
            column,
            "unindent does not match any outer indentation level",
        ));
        levels.push((l.indent, None));
    } else if l.indent.narrow != top.narrow {
        out.push(tabs(l.line, column));
    }
}

fn unindented_body(head: &Logical, line: usize, column: usize) -> Problem {
    let what = head.opens.as_deref().unwrap_or_default();
    Problem::at(
        line,
        column,
        format!(
            "expected an indented block after `{what}` on line {}",
            head.line + 1
        ),
    )
    .related(Some(head.line))
}

/// A compound statement's header without its `:`, followed by an indented
/// body: Python reads "expected ':'" at the header's end, not the indent.
fn no_colon(header: &Logical) -> Problem {
    let what = header.keyword.as_deref().unwrap_or_default();
    let (line, column) = header.end;
    Problem::at(
        line,
        column,
        format!(
            "expected `:` at the end of the `{what}` header on line {}",
            header.line + 1
        ),
    )
    .related(Some(header.line))
}

fn tabs(line: usize, column: usize) -> Problem {
    Problem::at(
        line,
        column,
        "inconsistent use of tabs and spaces in indentation",
    )
}

/// The indentation step the file uses: the smallest step from a block's
/// header to its body, for hints (4 when the file has no block).
pub fn step(src: &[u8]) -> usize {
    let lines = logical_lines(src);
    lines
        .windows(2)
        .filter(|w| w[0].opens.is_some() && w[1].indent.wide > w[0].indent.wide)
        .map(|w| w[1].indent.wide - w[0].indent.wide)
        .min()
        .unwrap_or(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readings(src: &str) -> Vec<(usize, String)> {
        problems(src.as_bytes())
            .into_iter()
            .map(|p| (p.line + 1, p.reading))
            .collect()
    }

    #[test]
    fn a_body_left_level_with_its_if_is_an_error() {
        let src = "def greet(name):\n    if not name:\n    name = \"world\"\n    print(name)\n";
        assert_eq!(
            readings(src),
            vec![(
                3,
                "expected an indented block after `if` on line 2".to_string()
            )]
        );
    }

    #[test]
    fn well_indented_code_has_no_problem() {
        let src = "class A:\n    def f(self, x):  # note:\n        if x:\n            return [\n  1,\n]\n        s = '''\n:\n'''\n        return s\n\n\n# end:\n";
        assert_eq!(readings(src), vec![]);
    }

    #[test]
    fn an_indent_nothing_opened_is_an_error() {
        let src = "x = 1\n    y = 2\n";
        assert_eq!(readings(src), vec![(2, "unexpected indent".to_string())]);
    }

    #[test]
    fn a_dedent_to_a_level_never_opened_is_an_error() {
        let src = "if x:\n        a()\n    b()\n";
        assert_eq!(
            readings(src),
            vec![(
                3,
                "unindent does not match any outer indentation level".to_string()
            )]
        );
    }

    #[test]
    fn a_header_at_the_end_of_the_file_wants_a_body() {
        let src = "for i in range(3):\n    # only a comment\n";
        let r = readings(src);
        assert_eq!(r.len(), 1);
        assert!(
            r[0].1
                .starts_with("expected an indented block after `for` on line 1")
        );
    }

    #[test]
    fn tabs_that_mean_two_levels_are_an_error() {
        // A tab is one level at width 1 and deeper than 4 spaces at width 8.
        let src = "if x:\n    a()\n\tb()\n";
        assert_eq!(
            readings(src),
            vec![(
                3,
                "inconsistent use of tabs and spaces in indentation".to_string()
            )]
        );
        assert_eq!(readings("if x:\n\ta()\n\tb()\n"), vec![]);
    }

    #[test]
    fn continued_lines_and_strings_are_not_logical_lines() {
        let src = "x = (1 +\n2)\ny = 'a:' \\\n  + 'b'\nz = \"\"\"\n  if:\n\"\"\"\n";
        assert_eq!(readings(src), vec![]);
    }

    #[test]
    fn def_and_async_headers_are_named() {
        let r = readings("async def load(x):\nreturn x\n");
        assert_eq!(
            r[0].1,
            "expected an indented block after `async def load` on line 1"
        );
        let r = readings("class Point:\npass\n");
        assert_eq!(
            r[0].1,
            "expected an indented block after `class Point` on line 1"
        );
    }

    #[test]
    fn the_step_is_read_from_the_file() {
        assert_eq!(step(b"if a:\n  b()\n"), 2);
        assert_eq!(step(b"x = 1\n"), 4);
    }
}

//! A place where a parser could not read the content, and what it read
//! there: the error and missing nodes of a tree-sitter tree, each turned into
//! a reading a person can act on (the unexpected text, or the token the
//! parser expected, and the construct that was open).

use tree_sitter::{Node, Tree};

/// Problems kept from one tree: a file broken everywhere still shows its
/// first ones, and the comparison with the old content stays small.
const MAX_PROBLEMS: usize = 64;

/// Characters of unexpected text quoted in a reading.
const QUOTED: usize = 40;

/// One place the content does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where the reading points (0-based line, byte column).
    pub line: usize,
    pub column: usize,
    /// The first and last line of the text involved: an error node may
    /// cover many lines, and the comparison with the old content looks at
    /// all of them.
    pub span: (usize, usize),
    /// The parser's reading, as a sentence without its final stop.
    pub reading: String,
    /// A line the reading speaks of (the `if` whose body is missing, the
    /// `{` left open), shown with the offending lines.
    pub related: Option<usize>,
}

impl Problem {
    pub fn at(line: usize, column: usize, reading: impl Into<String>) -> Problem {
        Problem {
            line,
            column,
            span: (line, line),
            reading: reading.into(),
            related: None,
        }
    }

    pub fn related(mut self, line: Option<usize>) -> Problem {
        self.related = line;
        self
    }
}

/// The error and missing nodes of `tree`, in the order of the text.
pub fn of_tree(tree: &Tree, src: &[u8]) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut cursor = tree.walk();
    let mut descend = true;
    loop {
        let node = cursor.node();
        if descend {
            if node.is_error() {
                out.push(unexpected(node, src));
            } else if node.is_missing() {
                out.push(missing(node));
            } else if node.has_error() && cursor.goto_first_child() {
                continue;
            }
        }
        if out.len() >= MAX_PROBLEMS {
            break;
        }
        if cursor.goto_next_sibling() {
            descend = true;
        } else if cursor.goto_parent() {
            descend = false;
        } else {
            break;
        }
    }
    out
}

/// An error node: text the parser could not fit. Recovery wraps what it
/// had read so far with the tokens it skipped, so the token it stumbled on
/// is, as a rule, the one after the node; an opening bracket inside it that
/// nothing closes is the better reading when there is one.
fn unexpected(node: Node<'_>, src: &[u8]) -> Problem {
    let span = (node.start_position().row, node.end_position().row);
    if let Some(open) = unclosed(node) {
        let at = open.start_position();
        return Problem {
            line: at.row,
            column: at.column,
            span,
            reading: format!(
                "the `{}` on line {} is never closed{}",
                open.kind(),
                at.row + 1,
                open_part(node)
            ),
            related: None,
        };
    }
    let before = last_line(&src[node.byte_range()]);
    let (at, reading) = match next_leaf(node) {
        Some(next) => (
            next.start_position(),
            format!(
                "unexpected {} after {}{}",
                code(&first_word(&src[next.start_byte()..])),
                code(&before),
                open_part(node)
            ),
        ),
        None => (
            node.end_position(),
            format!(
                "unexpected end of the file after {}{}",
                code(&before),
                open_part(node)
            ),
        ),
    };
    Problem {
        line: at.row,
        column: at.column,
        span: (span.0, span.1.max(at.row)),
        reading,
        related: Some(span.0).filter(|&r| r != at.row),
    }
}

/// The first opening bracket among `node`'s tokens that neither they nor
/// the tokens after it in its construct close.
fn unclosed(node: Node<'_>) -> Option<Node<'_>> {
    let mut open: Vec<Node<'_>> = Vec::new();
    let mut leaves = Vec::new();
    collect_leaves(node, &mut leaves);
    let mut later = Vec::new();
    let mut sibling = node.next_sibling();
    while let Some(s) = sibling {
        if s.child_count() == 0 {
            later.push(s);
        }
        sibling = s.next_sibling();
    }
    for leaf in leaves.into_iter().chain(later) {
        match leaf.kind() {
            "(" | "[" | "{" => open.push(leaf),
            k @ (")" | "]" | "}")
                if open
                    .last()
                    .is_some_and(|o| counterpart(k) == Some(o.kind())) =>
            {
                open.pop();
            }
            _ => {}
        }
    }
    open.first().copied()
}

/// The tokens under `node`, in order, at most a bounded number.
fn collect_leaves<'t>(node: Node<'t>, out: &mut Vec<Node<'t>>) {
    const MAX_LEAVES: usize = 4096;
    let mut cursor = node.walk();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if out.len() >= MAX_LEAVES {
            return;
        }
        if n.child_count() == 0 {
            out.push(n);
            continue;
        }
        let children: Vec<Node<'t>> = n.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
}

/// The first token after `node` in the text.
fn next_leaf(node: Node<'_>) -> Option<Node<'_>> {
    let mut at = node;
    let mut next = loop {
        match at.next_sibling() {
            Some(s) => break s,
            None => at = at.parent()?,
        }
    };
    while let Some(c) = next.child(0) {
        next = c;
    }
    Some(next)
}

/// The last non-blank line of `text`, shortened from the left.
fn last_line(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default();
    let count = line.chars().count();
    match count > QUOTED {
        true => format!("…{}", line.chars().skip(count - QUOTED).collect::<String>()),
        false => line.to_string(),
    }
}

/// The text from `rest`'s start to the first blank, shortened.
fn first_word(rest: &[u8]) -> String {
    let end = rest
        .iter()
        .position(u8::is_ascii_whitespace)
        .unwrap_or(rest.len())
        .min(4 * QUOTED);
    quoted(&String::from_utf8_lossy(&rest[..end]))
}

/// A missing node: a token the parser expected and put in to go on.
fn missing(node: Node<'_>) -> Problem {
    let start = node.start_position();
    let kind = node.kind();
    let what = match kind.chars().all(|c| c.is_alphanumeric() || c == '_') && node.is_named() {
        true => article(&words(kind)),
        false => format!("`{kind}`"),
    };
    let closing = node
        .parent()
        .and_then(|p| counterpart(kind).and_then(|open| child_of_kind(p, open)));
    let reading = match closing {
        Some(open) => format!(
            "expected {what} to close the `{}` on line {}",
            open.kind(),
            open.start_position().row + 1
        ),
        None => format!("expected {what}{}", open_part(node)),
    };
    Problem {
        line: start.row,
        column: start.column,
        span: (start.row, start.row),
        reading,
        related: closing
            .map(|o| o.start_position().row)
            .or_else(|| opener(node)),
    }
}

/// ` in the function definition that starts on line 3`, or nothing at the top.
fn open_part(node: Node<'_>) -> String {
    match enclosing(node) {
        Some(p) => format!(
            " in the {} that starts on line {}",
            words(p.kind()),
            p.start_position().row + 1
        ),
        None => String::new(),
    }
}

/// The construct around `node` a reader would name: the nearest named
/// ancestor that is not the whole file.
fn enclosing(node: Node<'_>) -> Option<Node<'_>> {
    let mut at = node.parent()?;
    while !at.is_named() || at.is_error() {
        at = at.parent()?;
    }
    at.parent().map(|_| at)
}

fn opener(node: Node<'_>) -> Option<usize> {
    enclosing(node)
        .map(|p| p.start_position().row)
        .filter(|&r| r != node.start_position().row)
}

fn counterpart(close: &str) -> Option<&'static str> {
    match close {
        ")" => Some("("),
        "]" => Some("["),
        "}" => Some("{"),
        ">" => Some("<"),
        "\"" => Some("\""),
        "'" => Some("'"),
        "`" => Some("`"),
        "*/" => Some("/*"),
        "end" => Some("do"),
        "fi" => Some("if"),
        "done" => Some("do"),
        "esac" => Some("case"),
        _ => None,
    }
}

fn child_of_kind<'t>(parent: Node<'t>, kind: &str) -> Option<Node<'t>> {
    let mut cursor = parent.walk();
    parent
        .children(&mut cursor)
        .filter(|c| c.kind() == kind && !c.is_missing())
        .last()
}

/// A node kind as words: `function_definition` reads "function definition".
fn words(kind: &str) -> String {
    kind.trim_start_matches('_').replace('_', " ")
}

fn article(noun: &str) -> String {
    match noun.starts_with(['a', 'e', 'i', 'o', 'u']) {
        true => format!("an {noun}"),
        false => format!("a {noun}"),
    }
}

/// `text` as code in a reading: between backticks, more of them than any run
/// inside it, and a space inside them where it starts or ends with one (as
/// Markdown reads it), so the backticks of a doc comment do not end it early.
pub fn code(text: &str) -> String {
    let longest = text
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default();
    let fence = "`".repeat(longest + 1);
    match longest > 0 && (text.starts_with('`') || text.ends_with('`')) {
        true => format!("{fence} {text} {fence}"),
        false => format!("{fence}{text}{fence}"),
    }
}

/// A closing bracket that closes nothing, in a tree the parser could not
/// read: the bracket an edit added too many. It is told where the parser
/// would not see it (error recovery may report far below, at the first
/// text it cannot fit): the closing brackets are paired with the opening
/// ones, and when one is left over, the extra one is the last before it
/// that closed a bracket opened at another indentation (a `}` that ends a
/// function early), or else the one left over.
pub fn stray_closer(tree: &Tree, src: &[u8]) -> Option<Problem> {
    let root = tree.root_node();
    if !root.has_error() {
        return None;
    }
    let mut leaves = Vec::new();
    collect_leaves(root, &mut leaves);
    let mut open: Vec<Node<'_>> = Vec::new();
    let mut suspect: Option<(Node<'_>, Node<'_>)> = None;
    for leaf in leaves.into_iter().filter(|l| !l.is_missing()) {
        match leaf.kind() {
            "(" | "[" | "{" => open.push(leaf),
            k @ (")" | "]" | "}") => match open.pop() {
                Some(o) if counterpart(k) == Some(o.kind()) => {
                    if first_on_line(leaf, src) && indent_of(leaf, src) != indent_of(o, src) {
                        suspect = Some((leaf, o));
                    }
                }
                Some(_) => return None,
                None => return Some(extra(leaf, suspect)),
            },
            _ => {}
        }
    }
    None
}

/// The reading of closing bracket `left`, which closes nothing: the extra one
/// is `suspect`'s, where one closed an opener at another indentation.
fn extra(left: Node<'_>, suspect: Option<(Node<'_>, Node<'_>)>) -> Problem {
    let at = |n: Node<'_>| n.start_position().row + 1;
    let (line, reading) = match suspect {
        Some((close, o)) => (
            close.start_position(),
            format!(
                "an extra `{}`: this one closes the `{}` on line {}, which is indented otherwise, so the `{}` on line {} closes nothing",
                close.kind(),
                o.kind(),
                at(o),
                left.kind(),
                at(left)
            ),
        ),
        None => (
            left.start_position(),
            format!("an extra `{}`: it closes nothing", left.kind()),
        ),
    };
    Problem {
        line: line.row,
        column: line.column,
        span: (line.row, left.start_position().row),
        reading,
        related: suspect.map(|(_, o)| o.start_position().row),
    }
}

/// The columns of blanks the line of `node` starts with.
fn indent_of(node: Node<'_>, src: &[u8]) -> usize {
    let start = node.start_byte() - node.start_position().column;
    src[start..]
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count()
}

/// Whether `node` is the first text on its line.
fn first_on_line(node: Node<'_>, src: &[u8]) -> bool {
    indent_of(node, src) == node.start_position().column
}

/// `text` shortened for a reading, on a char boundary.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

//! Marker blocks: `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE` and the
//! `------- SEARCH` / `=======` / `+++++++ REPLACE` family.
//!
//! Markers have 5 or more characters, and the three markers of a block need not
//! agree in length. But a payload is first read with the rule that a block ends
//! only at a divider and closer as long as its opener, and only if that reading
//! fails is any length accepted. So a file that itself holds `=======` lines (a
//! merge conflict) can still be edited: open the block with, say, 9 `<`, and use
//! 9 `=` and 9 `>`; the conflict's 7-character lines are then plain content.

use super::{Find, Operation, Payload, PayloadError};

/// The marker length a block needs for its divider and closer; `ANY` accepts 5 or more.
const ANY: usize = 0;

enum State {
    Outside,
    Search {
        open: usize,
        len: usize,
        lines: Vec<String>,
        near: Option<usize>,
        /// The `-------` rule after the hints was read: every later line is SEARCH
        /// text, even one made of dashes (YAML front matter opens with `---`).
        ruled: bool,
    },
    Replace {
        open: usize,
        len: usize,
        search: Vec<String>,
        lines: Vec<String>,
        near: Option<usize>,
        /// Indices in `lines` of further divider lines: content, or the real divider.
        dividers: Vec<usize>,
    },
}

/// Length of a run of `c` at the start of `line`, when the run is 5 or more.
fn run(line: &str, c: char) -> Option<usize> {
    let n = line.chars().take_while(|&x| x == c).count();
    (n >= 5).then_some(n)
}

/// `<<<<<<< SEARCH` or `------- SEARCH`: the marker length.
/// A stray `>` after `SEARCH` (`<<<<<<< SEARCH>`), which some models write, is tolerated.
fn opener(line: &str) -> Option<usize> {
    let line = line.trim_end();
    let n = run(line, '<').or_else(|| run(line, '-'))?;
    matches!(line[n..].trim(), "SEARCH" | "SEARCH>").then_some(n)
}

/// A content line that starts with `\` followed by a marker or hint stands for
/// that line without the `\`: the escape for files whose own lines look like markers.
fn unescape(line: &str) -> String {
    match line.strip_prefix('\\') {
        Some(rest) if is_marker_like(rest) => rest.to_owned(),
        _ => line.to_owned(),
    }
}

fn is_marker_like(line: &str) -> bool {
    opener(line).is_some() || divider(line, ANY) || closer(line, ANY) || hint_name(line).is_some()
}

fn hint_name(line: &str) -> Option<&'static str> {
    let t = line.trim_start();
    [
        ":start_line:",
        ":end_line:",
        SYNTAX_CHECK,
        PLACEHOLDER_CHECK,
    ]
    .into_iter()
    .find(|h| t.starts_with(h))
}

fn len_fits(n: usize, want: usize) -> bool {
    want == ANY || n == want
}

fn divider(line: &str, open: usize) -> bool {
    let line = line.trim_end();
    run(line, '=').is_some_and(|n| n == line.len() && len_fits(n, open))
}

/// What names a divider sent indented (` =======`), which reads as a SEARCH
/// line: markers count only at the start of their line, as a file's own lines
/// may well be indented `=======` rules.
fn indented_divider(search: &[String], open: usize) -> String {
    search
        .iter()
        .find(|l| l.starts_with(char::is_whitespace) && divider(l.trim_start(), open))
        .map(|l| format!(" (the line `{l}` in SEARCH would be it at the start of its line)"))
        .unwrap_or_default()
}

fn closer(line: &str, open: usize) -> bool {
    let line = line.trim_end();
    run(line, '>')
        .or_else(|| run(line, '+'))
        .is_some_and(|n| line[n..].trim_start() == "REPLACE" && len_fits(n, open))
}

fn fence(line: &str) -> bool {
    info_string(line).is_some()
}

/// The info string of a fence line (```` ```python src/a.py ```` gives
/// `python src/a.py`, `<source>python` gives `python`, empty for a bare
/// ```` ``` ```` or `</source>`); `None` for another line.
fn info_string(line: &str) -> Option<&str> {
    crate::fence::fence(line)
}

/// Whether `line` opens a block.
pub fn opens_block(line: &str) -> bool {
    opener(line).is_some()
}

/// Whether the text holds at least one SEARCH marker.
pub fn has_blocks(text: &str) -> bool {
    text.lines().any(|l| opener(l).is_some())
}

/// The hint that writes a payload's files even if they no longer parse:
/// `:syntax_check: off`, on a line of its own before a block or at the top
/// of a SEARCH section, where `:start_line:` goes.
const SYNTAX_CHECK: &str = ":syntax_check:";

/// The hint that writes a REPLACE line that reads as a placeholder as it is
/// (`:placeholder_check: off`, placed as `:syntax_check:` is): a comment that
/// only sounds like one, such as a note that something is "the same as before".
const PLACEHOLDER_CHECK: &str = ":placeholder_check:";

/// The checks a payload's `:syntax_check: off` and `:placeholder_check: off`
/// lines turned off.
#[derive(Default)]
struct Off {
    syntax: bool,
    placeholders: bool,
}

impl Off {
    /// Whether `line` turns a check off; if so, it is noted.
    fn read(&mut self, line: &str) -> bool {
        let off = |name: &str| {
            line.trim()
                .strip_prefix(name)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("off"))
        };
        let (syntax, placeholders) = (off(SYNTAX_CHECK), off(PLACEHOLDER_CHECK));
        self.syntax |= syntax;
        self.placeholders |= placeholders;
        syntax || placeholders
    }
}

/// Reads a `:start_line:N` or `:end_line:N` hint line.
fn hint(line: &str, name: &str, at: usize) -> Result<Option<usize>, PayloadError> {
    let Some(value) = line.trim().strip_prefix(name) else {
        return Ok(None);
    };
    match value.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(PayloadError::Structure {
            line: at,
            found: format!("`{}` has no line number", line.trim()),
            expected: format!("`{name}N` with N a line number from 1"),
        }),
    }
}

fn structure(line: usize, found: impl Into<String>, expected: impl Into<String>) -> PayloadError {
    PayloadError::Structure {
        line,
        found: found.into(),
        expected: expected.into(),
    }
}

fn joined(lines: Vec<String>) -> String {
    let mut s = lines.join("\n");
    if !lines.is_empty() {
        s.push('\n');
    }
    s
}

/// Reads marker blocks: with markers of matching length if that works, else with any.
pub fn parse(text: &str) -> Result<Payload, PayloadError> {
    parse_with(text, true).or_else(|strict| parse_with(text, false).map_err(|_| strict))
}

fn parse_with(text: &str, same_length: bool) -> Result<Payload, PayloadError> {
    let mut payload = Payload::default();
    let mut ignored: Vec<usize> = Vec::new();
    // The last line of text before a block: in a multi-file payload, its file's path.
    let mut label: Option<String> = None;
    // The info string of the fence the next block stands in, if it has one.
    let mut info: Option<String> = None;
    let mut state = State::Outside;
    let mut off = Off::default();
    for (i, raw) in text.split('\n').enumerate() {
        let at = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        state = match state {
            State::Outside if off.read(line) => State::Outside,
            State::Outside => {
                let next = outside(line, at, same_length, &mut ignored)
                    .map_err(|e| name_miswritten(e, text, at, "SEARCH"))?;
                if ignored.last() == Some(&at) {
                    label = Some(line.trim().to_owned());
                }
                if let Some(tag) = info_string(line) {
                    info = Some(tag.to_owned()).filter(|t| !t.is_empty());
                }
                next
            }
            State::Search {
                open,
                len,
                mut lines,
                mut near,
                ruled,
            } => {
                if divider(line, len) {
                    State::Replace {
                        open,
                        len,
                        search: lines,
                        lines: Vec::new(),
                        near,
                        dividers: Vec::new(),
                    }
                } else if closer(line, len) {
                    return Err(structure(
                        at,
                        format!(
                            "`{}` closes the block opened at line {open} before its divider{}",
                            line.trim(),
                            indented_divider(&lines, len)
                        ),
                        "a `=======` line between the SEARCH and REPLACE text",
                    ));
                } else if opener(line).is_some() {
                    return Err(structure(
                        at,
                        format!(
                            "a new SEARCH marker while the block opened at line {open} has no divider"
                        ),
                        format!(
                            "`=======` and {} to finish that block first",
                            closer_for(text, open)
                        ),
                    ));
                } else if lines.is_empty()
                    && !ruled
                    && (off.read(line) || read_hint(line, at, &mut near)?)
                {
                    State::Search {
                        open,
                        len,
                        lines,
                        near,
                        ruled,
                    }
                } else if lines.is_empty()
                    && !ruled
                    && (near.is_some() || off.syntax || off.placeholders)
                    && is_hint_rule(line)
                {
                    State::Search {
                        open,
                        len,
                        lines,
                        near,
                        ruled: true,
                    }
                } else {
                    lines.push(unescape(line));
                    State::Search {
                        open,
                        len,
                        lines,
                        near,
                        ruled,
                    }
                }
            }
            State::Replace {
                open,
                len,
                search,
                mut lines,
                near,
                mut dividers,
            } => {
                if closer(line, len) {
                    let mut op = block_operation(search, lines, &dividers, open);
                    op.near = near;
                    op.label = label.take();
                    op.fence = info.take();
                    payload.operations.push(op);
                    State::Outside
                } else if divider(line, len) && !same_length {
                    return Err(structure(
                        at,
                        format!("a second `=======` in the block opened at line {open}"),
                        format!(
                            "{} to close the block (to edit a file that has `=======` lines, open the block with 9 `<` and use 9 `=` and 9 `>`)",
                            closer_for(text, open)
                        ),
                    ));
                } else if divider(line, len) {
                    dividers.push(lines.len());
                    lines.push(line.to_owned());
                    State::Replace {
                        open,
                        len,
                        search,
                        lines,
                        near,
                        dividers,
                    }
                } else if opener(line).is_some() {
                    return Err(name_miswritten(
                        structure(
                            at,
                            format!(
                                "a new SEARCH marker while the block opened at line {open} is not closed"
                            ),
                            format!("{} to close that block first", closer_for(text, open)),
                        ),
                        text,
                        at,
                        "REPLACE",
                    ));
                } else if let Some(h) = hint_name(line) {
                    return Err(structure(
                        at,
                        format!(
                            "a `{h}` hint in the REPLACE section of the block opened at line {open}"
                        ),
                        format!(
                            "the hint at the top of SEARCH (to write such a line into the file, escape it as `\\{h}`)"
                        ),
                    ));
                } else {
                    lines.push(unescape(line));
                    State::Replace {
                        open,
                        len,
                        search,
                        lines,
                        near,
                        dividers,
                    }
                }
            }
        };
    }
    let end = text.split('\n').count() + 1;
    finish(state, text, payload.operations.len())
        .map_err(|e| name_miswritten(e, text, end, "REPLACE"))?;
    if let Some(note) = ignored_note(&ignored) {
        payload.notes.push(note);
    }
    for op in &mut payload.operations {
        op.syntax_off |= off.syntax;
        op.placeholders_kept |= off.placeholders;
    }
    Ok(payload)
}

/// A block's operation: split at its first divider, with the splits at any later
/// divider line as other readings.
fn block_operation(
    search: Vec<String>,
    lines: Vec<String>,
    dividers: &[usize],
    open: usize,
) -> Operation {
    let splits = dividers
        .iter()
        .map(|&d| {
            // The first divider, read as content, is a divider line like this one.
            let mut s = search.clone();
            s.push(lines[d].clone());
            s.extend_from_slice(&lines[..d]);
            (joined(s), joined(lines[d + 1..].to_vec()))
        })
        .collect();
    let mut op = Operation::new(Find::Lines, joined(search), joined(lines), open);
    op.splits = splits;
    op
}

fn outside(
    line: &str,
    at: usize,
    same_length: bool,
    ignored: &mut Vec<usize>,
) -> Result<State, PayloadError> {
    if let Some(len) = opener(line) {
        return Ok(State::Search {
            open: at,
            len: if same_length { len } else { ANY },
            lines: Vec::new(),
            near: None,
            ruled: false,
        });
    }
    if divider(line, ANY) {
        return Err(structure(
            at,
            "`=======` outside a block",
            "`<<<<<<< SEARCH` before it",
        ));
    }
    if closer(line, ANY) {
        return Err(structure(
            at,
            format!("`{}` outside a block", line.trim()),
            "`<<<<<<< SEARCH` and `=======` before it",
        ));
    }
    if !line.trim().is_empty() && !fence(line) {
        ignored.push(at);
    }
    Ok(State::Outside)
}

/// Consumes a `:start_line:`/`:end_line:` line at the top of a SEARCH section.
fn read_hint(line: &str, at: usize, near: &mut Option<usize>) -> Result<bool, PayloadError> {
    if let Some(n) = hint(line, ":start_line:", at)? {
        *near = Some(n);
        return Ok(true);
    }
    // The end line only narrows what the start line already pins down.
    Ok(near.is_some() && hint(line, ":end_line:", at)?.is_some())
}

/// The `-------` rule that separates hints from the SEARCH text: 5 or more dashes,
/// like a marker, so that YAML front matter's `---` right after a hint is SEARCH text.
fn is_hint_rule(line: &str) -> bool {
    let t = line.trim_end();
    t.len() >= 5 && t.chars().all(|c| c == '-')
}

/// A payload that ends inside a block: an agent that ran out of output mid-block.
/// The report says which blocks were complete, and that none was applied.
fn finish(state: State, text: &str, complete: usize) -> Result<(), PayloadError> {
    let last = text.split('\n').count();
    let done = match complete {
        0 => "no block before it was complete".to_owned(),
        1 => "block 1 before it was complete".to_owned(),
        n => format!("blocks 1-{n} before it were complete"),
    };
    let block = complete + 1;
    match state {
        State::Outside => Ok(()),
        State::Search { open, .. } => Err(structure(
            last,
            format!(
                "the payload ends inside the SEARCH section of block {block} (opened at line {open}); {done}, but nothing was applied"
            ),
            format!(
                "`=======`, the new text and {} (send the whole payload again)",
                closer_for(text, open)
            ),
        )),
        State::Replace { open, .. } => Err(structure(
            last,
            format!(
                "the payload ends before block {block} (opened at line {open}) is closed; {done}, but nothing was applied"
            ),
            format!(
                "{} after the new text (send the whole payload again)",
                closer_for(text, open)
            ),
        )),
    }
}

/// A line that reads like the `word` marker but is not one, as models miswrite
/// them: `<<<<<<< search`, `<<<<<<< SEARCH src/a.py`, `>>>>>>> REPLACE src/a.py`.
/// Returns the marker it stands for, and whether text follows the word.
fn miswritten(line: &str, word: &str) -> Option<(String, bool)> {
    let line = line.trim_end();
    if opener(line).is_some() || closer(line, ANY) {
        return None;
    }
    let (a, b) = match word {
        "SEARCH" => ('<', '-'),
        _ => ('>', '+'),
    };
    let (c, n) = run(line, a)
        .map(|n| (a, n))
        .or_else(|| run(line, b).map(|n| (b, n)))?;
    let rest = line[n..].trim_start();
    let tail = rest.get(word.len()..)?;
    rest[..word.len()].eq_ignore_ascii_case(word).then(|| {
        (
            format!("{} {word}", c.to_string().repeat(n)),
            !tail.trim().is_empty(),
        )
    })
}

/// A structure error found after a marker that was not recognised (the usual
/// cause) names that line instead, since the error's own line would mislead.
/// The `word` marker is looked for in the lines before payload line `at`, back to
/// the nearest real marker.
fn name_miswritten(err: PayloadError, text: &str, at: usize, word: &str) -> PayloadError {
    let found = text
        .split('\n')
        .take(at.saturating_sub(1))
        .enumerate()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
        .take_while(|(_, l)| !is_marker_like(l))
        .find_map(|(i, l)| Some((i, l.trim(), miswritten(l, word)?)));
    let Some((line, seen, (want, tail))) = found else {
        return err;
    };
    let how = match tail {
        false => format!("`{want}` with the word in capitals"),
        true => format!(
            "`{want}` alone on its line (nothing after the word; a file's path goes alone on the line before the block)"
        ),
    };
    structure(
        line,
        format!("`{seen}` is not a {word} marker, so the block around it was not read"),
        how,
    )
}

/// The closing marker of the family the block at payload line `open` opened with.
fn closer_for(text: &str, open: usize) -> &'static str {
    let opener = text
        .split('\n')
        .nth(open.saturating_sub(1))
        .unwrap_or_default();
    match opener.starts_with('-') {
        true => "`+++++++ REPLACE`",
        false => "`>>>>>>> REPLACE`",
    }
}

/// A note on text outside blocks, naming its payload lines run by run, so prose
/// before and after a block does not read as a range that holds the block.
fn ignored_note(lines: &[usize]) -> Option<String> {
    /// Runs named one by one before the rest are left to "…".
    const SHOWN: usize = 5;
    let n = lines.len();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &l in lines {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == l => *last = l,
            _ => runs.push((l, l)),
        }
    }
    let mut named: Vec<String> = runs
        .iter()
        .take(SHOWN)
        .map(|&(a, b)| match a == b {
            true => a.to_string(),
            false => format!("{a}-{b}"),
        })
        .collect();
    if runs.len() > SHOWN {
        named.push("…".into());
    }
    let place = match n {
        0 => return None,
        1 => "line",
        _ => "lines",
    };
    Some(format!(
        "ignored {n} line(s) of text outside blocks (payload {place} {})",
        named.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .operations
            .into_iter()
            .map(|o| (o.search, o.replace))
            .collect()
    }

    fn pair(s: &str, r: &str) -> (String, String) {
        (s.to_owned(), r.to_owned())
    }

    /// A divider sent indented reads as a SEARCH line; the block then closes
    /// without one, and the error names the line that was meant.
    #[test]
    fn an_indented_divider_is_named_in_the_error() {
        let e = parse("<<<<<<< SEARCH\na\n =======\nz\n>>>>>>> REPLACE\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("the line ` =======` in SEARCH would be it"),
            "{e}"
        );
        let e = parse("<<<<<<< SEARCH\na\nz\n>>>>>>> REPLACE\n").unwrap_err();
        assert!(!e.to_string().contains("would be it"), "{e}");
    }

    #[test]
    fn both_marker_families_and_any_length_from_five() {
        assert_eq!(
            ops("<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n"),
            [pair("a\n", "b\n")]
        );
        assert_eq!(
            ops("------- SEARCH\na\n=======\nb\n+++++++ REPLACE"),
            [pair("a\n", "b\n")]
        );
        assert_eq!(
            ops("<<<<< SEARCH\na\n=====\nb\n>>>>> REPLACE"),
            [pair("a\n", "b\n")]
        );
        assert!(
            parse("<<<< SEARCH\na\n====\nb\n>>>> REPLACE")
                .unwrap()
                .operations
                .is_empty()
        );
    }

    #[test]
    fn trailing_whitespace_and_crlf_after_markers() {
        assert_eq!(
            ops("<<<<<<< SEARCH  \r\na\r\n=======\t\r\nb\r\n>>>>>>> REPLACE \r\n"),
            [pair("a\n", "b\n")]
        );
    }

    #[test]
    fn fences_with_or_without_tag_are_skipped_silently() {
        let p = parse("```python\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```\n").unwrap();
        assert_eq!(p.operations.len(), 1);
        assert!(p.notes.is_empty());
    }

    #[test]
    fn prose_outside_blocks_is_noted_with_its_lines() {
        let p = parse("Here is the fix:\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\nDone.\n")
            .unwrap();
        assert_eq!(
            p.notes,
            ["ignored 2 line(s) of text outside blocks (payload lines 1, 7)"]
        );
        let p = parse("Here\nis the fix:\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\nDone.\n")
            .unwrap();
        assert_eq!(
            p.notes,
            ["ignored 3 line(s) of text outside blocks (payload lines 1-2, 8)"]
        );
    }

    #[test]
    fn start_line_hint_and_rule_are_not_search_text() {
        let p = parse(
            "<<<<<<< SEARCH\n:start_line:12\n:end_line:13\n-------\na\n=======\nb\n>>>>>>> REPLACE",
        )
        .unwrap();
        assert_eq!(p.operations[0].near, Some(12));
        assert_eq!(p.operations[0].search, "a\n");
    }

    #[test]
    fn front_matter_dashes_after_the_hint_rule_are_search_text() {
        let p = parse(
            "<<<<<<< SEARCH\n:start_line:1\n-------\n---\ntitle: x\n---\n=======\n---\ntitle: y\n---\n>>>>>>> REPLACE\n",
        )
        .unwrap();
        assert_eq!(p.operations[0].near, Some(1));
        assert_eq!(p.operations[0].search, "---\ntitle: x\n---\n");
        let no_rule = parse(
            "<<<<<<< SEARCH\n:start_line:1\n---\ntitle: x\n=======\n---\ntitle: y\n>>>>>>> REPLACE\n",
        )
        .unwrap();
        assert_eq!(no_rule.operations[0].search, "---\ntitle: x\n");
    }

    #[test]
    fn empty_sections_are_allowed() {
        assert_eq!(
            ops("<<<<<<< SEARCH\n=======\nnew\n>>>>>>> REPLACE"),
            [pair("", "new\n")]
        );
        assert_eq!(
            ops("<<<<<<< SEARCH\nold\n=======\n>>>>>>> REPLACE"),
            [pair("old\n", "")]
        );
    }

    #[test]
    fn malformed_blocks_name_the_line_and_what_was_expected() {
        let cases = [
            (
                "=======\nb\n>>>>>>> REPLACE",
                1,
                "`<<<<<<< SEARCH` before it",
            ),
            ("<<<<<<< SEARCH\na\n>>>>>>> REPLACE", 3, "a `=======` line"),
            (
                "<<<<<<< SEARCH\na\n=======\nb\n<<<<<<< SEARCH",
                5,
                "`>>>>>>> REPLACE` to close that",
            ),
            (
                "<<<<<<< SEARCH\na\n=======\nb\n",
                5,
                "`>>>>>>> REPLACE` after",
            ),
            ("<<<<<<< SEARCH\na", 2, "`=======`, the new text"),
            (
                "<<<<<<< SEARCH\n:start_line:x\n-------\na\n=======\nb\n>>>>>>> REPLACE",
                2,
                "`:start_line:N`",
            ),
        ];
        for (text, line, expected) in cases {
            match parse(text) {
                Err(PayloadError::Structure {
                    line: l,
                    expected: e,
                    ..
                }) => {
                    assert_eq!(l, line, "{text:?}");
                    assert!(e.starts_with(expected), "{text:?}: {e}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_interrupted_last_block_names_the_complete_ones_and_its_own_family() {
        let cut = "------- SEARCH\na\n=======\nb\n+++++++ REPLACE\n\n------- SEARCH\nc\n=======\nd";
        let Err(PayloadError::Structure {
            found, expected, ..
        }) = parse(cut)
        else {
            panic!("an interrupted block must be rejected");
        };
        assert!(found.contains("block 2 (opened at line 7)"), "{found}");
        assert!(
            found.contains("block 1 before it was complete, but nothing was applied"),
            "{found}"
        );
        assert!(
            expected.starts_with("`+++++++ REPLACE` after the new text"),
            "{expected}"
        );
        let cut = "------- SEARCH\nc";
        let Err(PayloadError::Structure { expected, .. }) = parse(cut) else {
            panic!("an interrupted block must be rejected");
        };
        assert!(expected.contains("`+++++++ REPLACE`"), "{expected}");
    }

    #[test]
    fn markers_of_a_block_may_differ_in_length() {
        assert_eq!(
            ops("----------- SEARCH\na\n=======\nb\n+++++++ REPLACE"),
            [pair("a\n", "b\n")]
        );
        assert_eq!(
            ops("----- SEARCH\na\n========\nb\n+++++++ REPLACE"),
            [pair("a\n", "b\n")]
        );
    }

    #[test]
    fn backslash_escapes_marker_lines_in_content() {
        let text = "<<<<<<< SEARCH\n\\=======\n=======\n\\:start_line:3\n\\>>>>>>> REPLACE\n>>>>>>> REPLACE";
        assert_eq!(
            ops(text),
            [pair("=======\n", ":start_line:3\n>>>>>>> REPLACE\n")]
        );
        assert_eq!(
            ops("<<<<<<< SEARCH\n\\x\n=======\n>>>>>>> REPLACE"),
            [pair("\\x\n", "")]
        );
    }

    #[test]
    fn a_second_divider_gives_the_block_another_reading() {
        let p = parse("<<<<<<< SEARCH\na\n=======\nb\n=======\nc\n>>>>>>> REPLACE").unwrap();
        let op = &p.operations[0];
        assert_eq!(
            (op.search.as_str(), op.replace.as_str()),
            ("a\n", "b\n=======\nc\n")
        );
        assert_eq!(
            op.splits,
            [("a\n=======\nb\n".to_owned(), "c\n".to_owned())]
        );
    }

    #[test]
    fn a_hint_in_replace_is_a_mistake_not_content() {
        assert!(parse("<<<<<<< SEARCH\na\n=======\n:start_line:5\nb\n>>>>>>> REPLACE").is_err());
    }

    #[test]
    fn stray_angle_after_search_is_tolerated() {
        assert_eq!(
            ops("<<<<<<< SEARCH>\na\n=======\nb\n>>>>>>> REPLACE"),
            [pair("a\n", "b\n")]
        );
    }

    #[test]
    fn the_text_line_before_a_block_is_its_label() {
        let p = parse("src/a.py\n```\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n").unwrap();
        let labels: Vec<_> = p.operations.iter().map(|o| o.label.clone()).collect();
        assert_eq!(labels, [Some("src/a.py".to_owned()), None]);
    }

    #[test]
    fn long_markers_let_conflict_markers_be_content() {
        let text = "<<<<<<<<< SEARCH\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> other\n=========\nb\n>>>>>>>>> REPLACE\n";
        assert_eq!(
            ops(text),
            [pair("<<<<<<< HEAD\na\n=======\nb\n>>>>>>> other\n", "b\n")]
        );
    }

    #[test]
    fn a_miswritten_marker_is_named_instead_of_the_divider_or_the_end_after_it() {
        let cases = [
            (
                "<<<<<<< search\na\n=======\nb\n>>>>>>> replace\n",
                1,
                "`<<<<<<< SEARCH` with the word in capitals",
            ),
            (
                "x\n<<<<<<< SEARCH src/a.py\na\n=======\nb\n>>>>>>> REPLACE\n",
                2,
                "`<<<<<<< SEARCH` alone on its line",
            ),
            (
                "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE src/a.py\n",
                5,
                "`>>>>>>> REPLACE` alone on its line",
            ),
            (
                "------- SEARCH\na\n=======\nb\n+++++++ replace\n------- SEARCH\nc\n=======\nd\n+++++++ REPLACE\n",
                5,
                "`+++++++ REPLACE` with the word",
            ),
        ];
        for (text, line, expected) in cases {
            match parse(text) {
                Err(PayloadError::Structure {
                    line: l,
                    found,
                    expected: e,
                }) => {
                    assert_eq!(l, line, "{text:?}: {found}");
                    assert!(found.contains("is not a"), "{text:?}: {found}");
                    assert!(e.starts_with(expected), "{text:?}: {e}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        // A merge-conflict sample in prose is no miswritten marker of the block after it.
        let text = "<<<<<<< HEAD\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        assert_eq!(ops(text), [pair("a\n", "b\n")]);
    }
}

//! Payloads that hold no edit but look like one that went through the wrong
//! hands: escaped as a JSON string, escaped for HTML, a bare diff fragment, JSON after a
//! sentence, or markers indented or too short. The rejection
//! names what the payload looks like, so the agent can send the edit itself;
//! the escaped text is never written into a file.

use super::{PayloadError, markers};

/// What an edit-less payload looks like, when it looks like something.
pub fn diagnose(text: &str) -> Option<PayloadError> {
    escaped(text)
        .or_else(|| json_after_text(text))
        .or_else(|| indented_markers(text))
        .or_else(|| short_markers(text))
        .or_else(|| {
        let looks_like = if headed(text) {
            "a diff whose hunk headers cannot be read (`@@ -START,COUNT +START,COUNT @@` or `@@ ... @@`)"
        } else {
            "a diff fragment (lines starting with `@@`, `+` or `-`) without the `---`/`+++` lines that name its file"
        };
        diff_like(text).then(|| PayloadError::Shape {
            looks_like: looks_like.into(),
            hint: "send the whole diff, as `git diff` or `diff -u` prints it, or each change as a SEARCH/REPLACE block".into(),
        })
    })
}

/// Marker blocks indented as a whole (as in a list item of a reply): markers
/// are read only at the start of their line, so none opened a block.
fn indented_markers(text: &str) -> Option<PayloadError> {
    let at = text
        .lines()
        .position(|l| l.starts_with(char::is_whitespace) && markers::opens_block(l.trim_start()))?;
    Some(PayloadError::Shape {
        looks_like: format!("marker blocks whose markers are indented (payload line {})", at + 1),
        hint: "start each marker line (`<<<<<<< SEARCH`, `=======`, `>>>>>>> REPLACE`) at column 1, with no spaces before it; the lines between keep the file's own indentation".into(),
    })
}

/// Marker lines with too few marker characters (`<<<< SEARCH`, `--- SEARCH`):
/// markers need 5 or more, so none opened a block.
fn short_markers(text: &str) -> Option<PayloadError> {
    let (at, mark, count) = text.lines().enumerate().find_map(|(at, l)| {
        let (marks, word) = l.trim_end().split_once(' ')?;
        let mark = marks.chars().next()?;
        let fits = match word {
            "SEARCH" => matches!(mark, '<' | '-'),
            "REPLACE" => matches!(mark, '>' | '+'),
            _ => false,
        };
        let count = marks.chars().count();
        (fits && (2..5).contains(&count) && marks.chars().all(|c| c == mark))
            .then_some((at, mark, count))
    })?;
    Some(PayloadError::Shape {
        looks_like: format!(
            "marker blocks whose markers are too short (payload line {} has {count} `{mark}`)",
            at + 1
        ),
        hint: "a marker has 5 or more marker characters: `<<<<<<< SEARCH`, `=======`, `>>>>>>> REPLACE` (or `------- SEARCH`, `=======`, `+++++++ REPLACE`), each alone on its line".into(),
    })
}

/// JSON operations after a sentence: JSON is read only from the payload's start.
/// Only the first few lines that open with a bracket are tried, so a long
/// rejected payload costs a few parses, not one per line.
fn json_after_text(text: &str) -> Option<PayloadError> {
    let mut offset = 0;
    let mut tries = 3;
    for (at, line) in text.split_inclusive('\n').enumerate() {
        let rest = &text[offset..];
        offset += line.len();
        let opens = matches!(line.trim_start().chars().next(), Some('{' | '['));
        if at == 0 || !opens {
            continue;
        }
        if tries == 0 {
            return None;
        }
        tries -= 1;
        let json = serde_json::from_str::<serde_json::Value>(rest.trim());
        if json.is_ok_and(|v| v.is_object() || v.is_array()) {
            return Some(PayloadError::Shape {
                looks_like: format!("JSON after {at} line(s) of text"),
                hint: "send the JSON alone: a JSON payload starts with `{` or `[` (or is one ```json fence)".into(),
            });
        }
    }
    None
}

/// Whether the text has a diff's `---`/`+++` file header.
fn headed(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .any(|w| w[0].starts_with("--- ") && w[1].starts_with("+++ "))
}

/// Whether a payload whose blocks do not parse was escaped on its way: then
/// that, not its first broken line, is what the agent needs to hear.
pub fn escaped(text: &str) -> Option<PayloadError> {
    let (looks_like, hint) = if json_escaped(text) {
        (
            "an edit (marker blocks or a patch) escaped as a JSON string (`\\n` written as two characters, not as line breaks)",
            "send the edit itself, with real line breaks: decode the string first, or send it inside a JSON object such as {\"file_path\": ..., \"content\": ...}",
        )
    } else if html_escaped(text) {
        (
            "marker blocks escaped for HTML (`&lt;&lt;&lt;` for `<<<`)",
            "send the blocks as plain text, with `<`, `>` and `&` as they are in the file",
        )
    } else {
        return None;
    };
    Some(PayloadError::Shape {
        looks_like: looks_like.into(),
        hint: hint.into(),
    })
}

/// A literal `\n` next to a marker or a patch's header: the line breaks were escaped.
fn json_escaped(text: &str) -> bool {
    [
        "SEARCH\\n",
        "\\n=======",
        "\\n>>>>>>> REPLACE",
        "\\n+++++++ REPLACE",
        "*** Begin Patch\\n",
        "\\n+++ ",
        "\\n@@ -",
    ]
    .iter()
    .any(|m| text.contains(m))
        || unescaped_has_blocks(text)
}

/// A JSON string literal (`"…"`) whose decoded text holds blocks.
fn unescaped_has_blocks(text: &str) -> bool {
    let t = text.trim();
    t.starts_with('"') && serde_json::from_str::<String>(t).is_ok_and(|s| markers::has_blocks(&s))
}

fn html_escaped(text: &str) -> bool {
    [
        "&lt;&lt;&lt;&lt;&lt;",
        "&gt;&gt;&gt;&gt;&gt;",
        "&#60;&#60;&#60;",
    ]
    .iter()
    .any(|m| text.contains(m))
}

/// Hunk headers, or a run of lines that all start with `+`, `-` or a space.
fn diff_like(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let hunk = lines
        .iter()
        .any(|l| l.starts_with("@@ ") && l[3..].contains(" @@"));
    let changed = lines
        .iter()
        .filter(|l| l.starts_with('+') || l.starts_with('-'))
        .count();
    let marked = lines
        .iter()
        .all(|l| l.starts_with(['+', '-', ' ']) || l.starts_with("@@"));
    hunk || (changed >= 2 && marked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(text: &str) -> String {
        match diagnose(text) {
            Some(PayloadError::Shape { looks_like, .. }) => looks_like,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn indented_markers_are_named() {
        let text = "  <<<<<<< SEARCH\n        i = 0\n  =======\n        i = 1\n  >>>>>>> REPLACE\n";
        assert_eq!(
            named(text),
            "marker blocks whose markers are indented (payload line 1)"
        );
    }

    #[test]
    fn escaped_payloads_and_diffs_are_named() {
        let block = "<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n";
        let one_line = block.replace('\n', "\\n");
        assert!(named(&one_line).contains("JSON string"));
        let quoted = serde_json::to_string(block).unwrap();
        assert!(named(&quoted).contains("JSON string"));
        let html = block.replace('<', "&lt;").replace('>', "&gt;");
        assert!(named(&html).contains("HTML"));
        assert!(named("@@ -1,2 +1,2 @@\n-x = 1\n+x = 2\n").contains("diff"));
        assert!(named("-x = 1\n+x = 2\n").contains("diff"));
        let bad_header = named("--- a/x\n+++ b/x\n@@ -1 @@\n-x = 1\n+x = 2\n");
        assert!(
            bad_header.contains("hunk headers cannot be read"),
            "{bad_header}"
        );
    }

    #[test]
    fn json_after_a_sentence_is_named() {
        let text = "Here is the edit:\n{\"search\": \"a\", \"replace\": \"b\"}\n";
        let message = named(text);
        assert!(
            message.contains("JSON after 1 line(s) of text"),
            "{message}"
        );
        assert!(diagnose("see {the docs}\n").is_none());
    }

    #[test]
    fn plain_prose_is_not_named() {
        assert!(diagnose("please change x to 2").is_none());
        assert!(diagnose("- a list item\nand some text\n").is_none());
    }
}

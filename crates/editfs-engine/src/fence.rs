//! Fence lines around blocks, and the ones that stray inside REPLACE.
//!
//! Agents wrap their blocks in Markdown fences (```` ``` ````, ```` ```python ````).
//! Aider, when the file itself holds triple backticks, fences with the first of
//! `<source>`, `<code>`, `<pre>`, `<codeblock>` and `<sourcecode>` the file lacks,
//! the language right after the tag (`<source>python` … `</source>`). Every
//! payload path reads all of these as fences, never as a file's path or as code.
//!
//! Now and then a fence line lands inside the block: the closing fence before
//! `>>>>>>> REPLACE`, the opening one right after `=======`. Written as sent, it
//! goes into the code. A Markdown edit has fence lines of its own, but those come
//! in pairs or are already in SEARCH, so only a fence line that is neither is taken
//! for a stray.

/// The tags Aider fences a file's text with in place of backticks.
const TAG_FENCES: [&str; 5] = ["source", "code", "pre", "codeblock", "sourcecode"];

/// The info string of a fence line around blocks in a payload: a backtick
/// fence's, or the language of one of Aider's tag fences.
pub fn fence(line: &str) -> Option<&str> {
    backtick_fence(line)
        .map(|(_, info)| info)
        .or_else(|| tag_fence(line.trim()))
}

/// A Markdown fence line's backtick count and info string: three or more
/// backticks, then an info string without backticks (```` ```x``` ```` is inline
/// code). Only these count as strays inside REPLACE: a lone `<pre>` or `</code>`
/// line is ordinary content of an HTML or XML file.
fn backtick_fence(line: &str) -> Option<(usize, &str)> {
    let t = line.trim();
    let ticks = t.len() - t.trim_start_matches('`').len();
    let info = t[ticks..].trim();
    (ticks >= 3 && !info.contains('`')).then_some((ticks, info))
}

/// The language of an Aider tag fence (`<source>python`, `<pre>`), empty for a
/// bare or closing one (`</source>`).
fn tag_fence(t: &str) -> Option<&str> {
    let closing = t.strip_prefix("</").and_then(|r| r.strip_suffix('>'));
    if closing.is_some_and(|tag| TAG_FENCES.contains(&tag)) {
        return Some("");
    }
    let (tag, info) = t.strip_prefix('<')?.split_once('>')?;
    let language = info.trim();
    let word = language
        .chars()
        .all(|c| c.is_alphanumeric() || "+-#._".contains(c));
    (TAG_FENCES.contains(&tag) && word).then_some(language)
}

/// The fence line of `lines` that no later one closes, read as Markdown reads
/// fences: any fence line opens a block, and only a bare one at least as long
/// closes it (a tagged one inside is the block's content).
fn unclosed(lines: &[&str]) -> Option<usize> {
    let mut open: Option<(usize, usize)> = None;
    for (i, line) in lines.iter().enumerate() {
        let Some((ticks, info)) = backtick_fence(line) else {
            continue;
        };
        open = match open {
            None => Some((i, ticks)),
            Some((_, n)) if info.is_empty() && ticks >= n => None,
            still => still,
        };
    }
    open.map(|(i, _)| i)
}

/// The 0-based REPLACE line that is a stray fence: one SEARCH lacks and that no
/// other fence line of REPLACE pairs with, while SEARCH leaves no block open
/// itself (else REPLACE only keeps it open, as re-tagging an opening fence does).
pub fn stray(search: &[&str], replace: &[&str]) -> Option<usize> {
    let line = unclosed(replace)?;
    let own = search.iter().any(|s| s.trim() == replace[line].trim());
    (unclosed(search).is_none() && !own).then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aiders_tag_fences_are_fences_and_html_in_code_is_not() {
        assert_eq!(fence("<source>python"), Some("python"));
        assert_eq!(fence("<source>"), Some(""));
        assert_eq!(fence("</source>"), Some(""));
        assert_eq!(fence("  <sourcecode>c++ "), Some("c++"));
        assert_eq!(fence("</pre>"), Some(""));
        assert_eq!(fence("```rust:src/a.rs"), Some("rust:src/a.rs"));
        assert_eq!(fence("<pre>foo</pre>"), None);
        assert_eq!(fence("<code>x = 1"), None);
        assert_eq!(fence("<div>"), None);
        assert_eq!(fence("</div>"), None);
        // Inside REPLACE a lone tag line is HTML's own content, not a stray.
        let search = ["<div>"];
        assert_eq!(stray(&search, &["<pre>"]), None);
        assert_eq!(stray(&search, &["<div>", "```"]), Some(1));
    }

    #[test]
    fn fence_lines_with_or_without_a_tag() {
        assert_eq!(backtick_fence("```"), Some((3, "")));
        assert_eq!(backtick_fence("  ````python "), Some((4, "python")));
        assert_eq!(backtick_fence("``x``"), None);
        assert_eq!(backtick_fence("```x```"), None);
        assert_eq!(backtick_fence("let s = `a`;"), None);
    }

    #[test]
    fn an_unpaired_fence_line_search_lacks_is_a_stray() {
        assert_eq!(stray(&["a"], &["b", "```"]), Some(1));
        assert_eq!(stray(&["a"], &["```python", "b"]), Some(0));
        // A closing fence with no opening before it opens a block nothing closes.
        assert_eq!(stray(&["a"], &["```", "b", "```py"]), Some(0));
        // A tagged fence inside an open block is content, not a closer.
        assert_eq!(stray(&["a"], &["```", "```py", "b"]), Some(0));
    }

    #[test]
    fn paired_fences_and_search_s_own_are_not_strays() {
        assert_eq!(stray(&["a"], &["a", "```sh", "make", "```"]), None);
        assert_eq!(stray(&["a", "```"], &["b", "```"]), None);
        assert_eq!(stray(&["```sh", "a"], &["```bash", "a"]), None);
        assert_eq!(stray(&["a"], &["````md", "```", "b", "````"]), None);
        assert_eq!(stray(&["a"], &["b"]), None);
    }
}

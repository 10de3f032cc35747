//! Markdown fence lines (```` ``` ````, ```` ```python ````) inside REPLACE.
//!
//! Agents wrap their blocks in fences, and now and then one of those lines
//! lands inside the block: the closing fence before `>>>>>>> REPLACE`, the
//! opening one right after `=======`. Written as sent, it goes into the code.
//! A Markdown edit has fence lines of its own, but those come in pairs or are
//! already in SEARCH, so only a fence line that is neither is taken for a stray.

/// A fence line's backtick count and info string: three or more backticks, then
/// an info string without backticks (```` ```x``` ```` is inline code).
fn fence(line: &str) -> Option<(usize, &str)> {
    let t = line.trim();
    let ticks = t.len() - t.trim_start_matches('`').len();
    let info = t[ticks..].trim();
    (ticks >= 3 && !info.contains('`')).then_some((ticks, info))
}

/// The fence line of `lines` that no later one closes, read as Markdown reads
/// fences: any fence line opens a block, and only a bare one at least as long
/// closes it (a tagged one inside is the block's content).
fn unclosed(lines: &[&str]) -> Option<usize> {
    let mut open: Option<(usize, usize)> = None;
    for (i, line) in lines.iter().enumerate() {
        let Some((ticks, info)) = fence(line) else {
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
    fn fence_lines_with_or_without_a_tag() {
        assert_eq!(fence("```"), Some((3, "")));
        assert_eq!(fence("  ````python "), Some((4, "python")));
        assert_eq!(fence("``x``"), None);
        assert_eq!(fence("```x```"), None);
        assert_eq!(fence("let s = `a`;"), None);
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

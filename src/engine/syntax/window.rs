//! The fast path: most edits change one function of a file, and parsing the
//! whole file to see that costs far more than the edit (a grammar reads about
//! 10 MB/s, so 10 ms for 100 KiB). So the check first parses only the run of
//! whole top-level items around the change: from the item the first changed
//! line belongs to through the item of the last, an item starting at a line
//! flush left after a blank line. If that parses cleanly, the edit broke
//! nothing: an unclosed bracket, string or comment it wrote would show inside
//! the window. Anything else (an error in the window, or a window that is
//! most of the file) goes to the full check, which alone may refuse.

use std::ops::Range;

/// The window of `new` to parse instead of the whole, when it is worth it:
/// less than half the file.
pub fn around_change(old: &[u8], new: &[u8]) -> Option<Range<usize>> {
    let head = common_prefix(old, new);
    let tail = common_suffix(&old[head..], &new[head..]);
    let (first, last) = (head, new.len() - tail);
    let start = item_start(new, first);
    let end = item_end(new, last);
    (end > start && 2 * (end - start) < new.len()).then_some(start..end)
}

/// Bytes compared at once before the exact position is sought: slice
/// equality is a memcmp, many times faster than a loop over bytes.
const STRIDE: usize = 256;

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + STRIDE <= n && a[i..i + STRIDE] == b[i..i + STRIDE] {
        i += STRIDE;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = 0;
    while i + STRIDE <= n && a[n - i - STRIDE..n - i] == b[n - i - STRIDE..n - i] {
        i += STRIDE;
    }
    i + a[..n - i]
        .iter()
        .rev()
        .zip(b[..n - i].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// Where the line holding byte `at` starts.
fn line_start(text: &[u8], at: usize) -> usize {
    memchr::memrchr(b'\n', &text[..at.min(text.len())]).map_or(0, |i| i + 1)
}

/// Whether the line starting at `at` opens a top-level item: flush left,
/// not a closing bracket, and after a blank line (or at the top).
fn opens_item(text: &[u8], at: usize) -> bool {
    let flush = text
        .get(at)
        .is_some_and(|c| !c.is_ascii_whitespace() && !matches!(c, b'}' | b')' | b']'));
    if !flush {
        return false;
    }
    if at == 0 {
        return true;
    }
    let prev = line_start(text, at - 1);
    text[prev..at - 1].iter().all(u8::is_ascii_whitespace)
}

/// The start of the item the byte at `at` belongs to.
fn item_start(text: &[u8], at: usize) -> usize {
    let mut line = line_start(text, at);
    while line > 0 && !opens_item(text, line) {
        line = line_start(text, line - 1);
    }
    line
}

/// The end of the item the byte before `at` belongs to: the start of the
/// next item after it, or the end of the text.
fn item_end(text: &[u8], at: usize) -> usize {
    let mut line = match memchr::memchr(b'\n', &text[at.min(text.len())..]) {
        Some(i) => at + i + 1,
        None => return text.len(),
    };
    while line < text.len() && !opens_item(text, line) {
        line = memchr::memchr(b'\n', &text[line..]).map_or(text.len(), |i| line + i + 1);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn functions(n: usize) -> String {
        (0..n)
            .map(|i| format!("fn f{i}() {{\n    let x = {i};\n}}\n\n"))
            .collect()
    }

    #[test]
    fn the_window_is_the_items_around_the_change() {
        let old = functions(10);
        let new = old.replace("let x = 5;", "let x = 55;");
        let w = around_change(old.as_bytes(), new.as_bytes()).unwrap();
        assert_eq!(&new[w], "fn f5() {\n    let x = 55;\n}\n\n");
    }

    #[test]
    fn a_change_spanning_items_takes_them_all() {
        let old = functions(10);
        let new = old
            .replace("let x = 3;", "let x = 33;")
            .replace("let x = 4;", "");
        let w = around_change(old.as_bytes(), new.as_bytes()).unwrap();
        assert!(new[w.clone()].starts_with("fn f3()") && new[w].ends_with("}\n\n"));
    }

    #[test]
    fn a_window_that_is_most_of_the_file_is_none() {
        let old = "fn a() {\n    1\n}\n";
        let new = "fn a() {\n    2\n}\n";
        assert_eq!(around_change(old.as_bytes(), new.as_bytes()), None);
    }

    #[test]
    fn common_ends_are_found_past_the_stride() {
        let a: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let mut b = a.clone();
        b[700] = 255;
        assert_eq!(common_prefix(&a, &b), 700);
        assert_eq!(common_suffix(&a, &b), 299);
        assert_eq!(common_suffix(&a[..10], &a[..10]), 10);
        assert_eq!(common_prefix(b"abc", b"abd"), 2);
        assert_eq!(common_suffix(b"xbc", b"abc"), 2);
    }

    #[test]
    fn a_closing_bracket_flush_left_does_not_open_an_item() {
        let text = b"fn a() {\n\n}\n\nfn b() {}\n";
        assert!(!opens_item(text, 10));
        assert!(opens_item(text, 13));
    }
}

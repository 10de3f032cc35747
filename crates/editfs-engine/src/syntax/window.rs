//! The fast path: most edits change one function of a file, and parsing the
//! whole file to see that costs far more than the edit (a grammar reads about
//! 10 MB/s, so 10 ms for 100 KiB). So the check first parses only the run of
//! whole top-level items around the change: from the item the first changed
//! line belongs to through the item of the last, an item starting at a line
//! flush left after a blank line. If that parses cleanly, the edit broke
//! nothing: an unclosed bracket, string or comment it wrote would show inside
//! the window. Anything else (an error in the window, or a window that is
//! most of the file) goes to the full check, which alone may refuse.
//!
//! In languages whose grammar reads a nested item on its own (a Java method,
//! a Rust `impl`'s function, a class's method in JavaScript), an item may
//! also start indented, less than the first changed line: a method of a class
//! that wraps the whole file is then a window of its own.

use std::ops::Range;

use crate::diff::{common_prefix, common_suffix};

/// The part of `new` to parse instead of the whole.
#[derive(Debug, PartialEq, Eq)]
pub struct Window {
    pub range: Range<usize>,
    /// Its items start flush left: whole top-level items, which any grammar
    /// reads as it reads them in the file.
    pub flush: bool,
}

/// The window of `new` to parse instead of the whole, when it is worth it
/// (less than half the file); `nested`: the language reads nested items on
/// their own.
pub fn around_change(old: &[u8], new: &[u8], nested: bool) -> Option<Window> {
    let head = common_prefix(old, new);
    let tail = common_suffix(&old[head..], &new[head..]);
    let (first, last) = (head, new.len() - tail);
    let small = |r: &Range<usize>| r.end > r.start && 2 * (r.end - r.start) < new.len();
    let flush = item_start(new, first, 1)..item_end(new, last, 1);
    if small(&flush) {
        return Some(Window {
            range: flush,
            flush: true,
        });
    }
    let below = indentation(new, line_start(new, first));
    let inner = item_start(new, first, below)..item_end(new, last, below);
    (nested && below > 1 && small(&inner)).then_some(Window {
        range: inner,
        flush: false,
    })
}

/// The whole top-level items of `new` around the change, however much of
/// the file they are; `None` when they are all of it (or nothing changed).
pub fn items_around(old: &[u8], new: &[u8]) -> Option<Range<usize>> {
    let head = common_prefix(old, new);
    let tail = common_suffix(&old[head..], &new[head..]);
    let items = item_start(new, head, 1)..item_end(new, new.len() - tail, 1);
    (items.end > items.start && items.end - items.start < new.len()).then_some(items)
}

/// Columns of blanks the line starting at `at` opens with (a tab counts one).
fn indentation(text: &[u8], at: usize) -> usize {
    text[at..]
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count()
}

/// Where the line holding byte `at` starts.
fn line_start(text: &[u8], at: usize) -> usize {
    memchr::memrchr(b'\n', &text[..at.min(text.len())]).map_or(0, |i| i + 1)
}

/// Whether the line starting at `at` opens an item: indented less than
/// `below` columns (1: flush left), not a closing bracket, and after a blank
/// line (or at the top).
fn opens_item(text: &[u8], at: usize, below: usize) -> bool {
    let indent = indentation(text, at);
    let starts = text
        .get(at + indent)
        .is_some_and(|c| !c.is_ascii_whitespace() && !matches!(c, b'}' | b')' | b']'));
    if indent >= below || !starts {
        return false;
    }
    if at == 0 {
        return true;
    }
    let prev = line_start(text, at - 1);
    text[prev..at - 1].iter().all(u8::is_ascii_whitespace)
}

/// The start of the item the byte at `at` belongs to.
fn item_start(text: &[u8], at: usize, below: usize) -> usize {
    let mut line = line_start(text, at);
    while line > 0 && !opens_item(text, line, below) {
        line = line_start(text, line - 1);
    }
    line
}

/// The end of the item the byte before `at` belongs to: the start of the
/// next item after it, or the end of the text.
fn item_end(text: &[u8], at: usize, below: usize) -> usize {
    let mut line = match memchr::memchr(b'\n', &text[at.min(text.len())..]) {
        Some(i) => at + i + 1,
        None => return text.len(),
    };
    while line < text.len() && !opens_item(text, line, below) {
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
        let w = around_change(old.as_bytes(), new.as_bytes(), true).unwrap();
        assert!(w.flush);
        assert_eq!(&new[w.range], "fn f5() {\n    let x = 55;\n}\n\n");
    }

    #[test]
    fn a_change_spanning_items_takes_them_all() {
        let old = functions(10);
        let new = old
            .replace("let x = 3;", "let x = 33;")
            .replace("let x = 4;", "");
        let w = around_change(old.as_bytes(), new.as_bytes(), true)
            .unwrap()
            .range;
        assert!(new[w.clone()].starts_with("fn f3()") && new[w].ends_with("}\n\n"));
    }

    #[test]
    fn a_window_that_is_most_of_the_file_is_none() {
        let old = "fn a() {\n    1\n}\n";
        let new = "fn a() {\n    2\n}\n";
        assert_eq!(around_change(old.as_bytes(), new.as_bytes(), true), None);
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
        assert!(!opens_item(text, 10, 1));
        assert!(opens_item(text, 13, 1));
    }

    #[test]
    fn a_method_of_a_class_around_the_file_is_a_window_where_nested_items_read() {
        let methods: String = (0..10)
            .map(|i| format!("  int f{i}() {{\n    int x = {i};\n\n    return x;\n  }}\n\n"))
            .collect();
        let old = format!("class A {{\n{methods}}}\n");
        let new = old.replace(
            "return x;\n  }\n\n  int f6",
            "return x + 1;\n  }\n\n  int f6",
        );
        let w = around_change(old.as_bytes(), new.as_bytes(), true).unwrap();
        assert!(!w.flush);
        assert_eq!(
            &new[w.range],
            "  int f5() {\n    int x = 5;\n\n    return x + 1;\n  }\n\n"
        );
        assert_eq!(around_change(old.as_bytes(), new.as_bytes(), false), None);
    }
}

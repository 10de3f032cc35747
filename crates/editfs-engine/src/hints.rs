//! Line hints moved by the operations before: an agent counts `:start_line:`
//! (and JSON `start_line`/`end_line`) in the file as it sent the payload,
//! while each operation that ran before adds or removes lines. What each
//! did to line numbers (`Moved`), and the note that says where a hint lies
//! now, for locate.rs and the interpreter alike.

use std::ops::RangeInclusive;

use super::payload::Operation;

/// Lines an applied operation added or removed: `first..=last` (1-based,
/// counted before it ran) became `delta` lines more (or fewer).
#[derive(Clone, Copy)]
pub(super) struct Moved {
    pub(super) first: usize,
    pub(super) last: usize,
    pub(super) delta: isize,
    /// The operation (from 1) that replaced the lines.
    pub(super) by: usize,
}

/// Says where the line numbers of `read`, as the agent counted them in the
/// file before the transaction, lie once the operations before it ran (`now`).
pub(super) fn moved_note(read: &Operation, now: &Operation) -> Option<String> {
    if let (Some(a), Some(b)) = (read.near, now.near)
        && a != b
    {
        return Some(format!(
            "`:start_line:{a}` is line {b} once the lines the operations before it added or removed are counted"
        ));
    }
    // An open end (`start_line` alone) stays the file's end.
    let span = |r: &RangeInclusive<usize>| match *r.end() {
        usize::MAX => format!("lines {} to the end", r.start()),
        end => format!("lines {}-{end}", r.start()),
    };
    match (&read.scope, &now.scope) {
        (Some(a), Some(b)) if a != b => Some(format!(
            "{} are {} once the lines the operations before it added or removed are counted",
            span(a),
            span(b)
        )),
        _ => None,
    }
}

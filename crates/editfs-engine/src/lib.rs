//! The edit engine of editfs: payload text and file bytes in, new bytes and a report out.
//!
//! Pure by design: no file system, no FUSE, and no clock but one timer: the
//! character diff that weighs how like SEARCH a region is (diagnose.rs) settles
//! for an approximate answer after 5 ms, so a missed SEARCH's closest region, and
//! whether a re-sent edit reads as made already, can differ on a machine too busy
//! to finish it in time; nothing else reads the time. In editfs the store commits
//! what the engine decides, and the command line and the mount only carry bytes to
//! and from it; an agent harness can call it the same way on bytes it holds, and
//! write the result (or not) itself. The payload formats, rules and report fields
//! are those of editfs's docs/payloads.md.
//!
//! ```
//! use editfs_engine::{Options, Outcome, apply};
//!
//! let file = b"fn main() {\n    println!(\"hello\");\n}\n";
//! let payload = b"<<<<<<< SEARCH\n    println!(\"hello\");\n=======\n    println!(\"hello, world\");\n>>>>>>> REPLACE\n";
//!
//! let edit = apply("src/main.rs", Some(file), payload, &Options::default());
//! assert_eq!(edit.report.outcome, Outcome::Ok);
//! assert_eq!(edit.report.operations[0].lines, Some([2, 2]));
//! let new = edit.content.expect("an applied edit has new bytes");
//! assert_eq!(new, b"fn main() {\n    println!(\"hello, world\");\n}\n");
//!
//! // A SEARCH that is not in the file changes nothing; the report says why and
//! // shows the closest region, as text (`F.status`) or JSON (`F.status.json`).
//! let stale = b"<<<<<<< SEARCH\n    println!(\"bye\");\n=======\n    println!(\"hi\");\n>>>>>>> REPLACE\n";
//! let edit = apply("src/main.rs", Some(&new), stale, &Options::default());
//! assert_eq!(edit.report.outcome, Outcome::Failed);
//! assert!(edit.content.is_none());
//! assert!(edit.report.to_string().contains("not found"));
//! assert!(edit.report.to_json().contains("\"kind\": \"not_found\""));
//! ```
//!
//! A transaction runs its operations in order on the running result. If any
//! fails, the whole transaction fails and no bytes come out, but the remaining
//! operations are still tried so that one report names every problem at once.
//!
//! The stages a payload goes through, and the file of each:
//!
//! ```text
//!  payload bytes
//!      │  1. read      payload/ (markers, JSON, patch, tool calls; fence.rs),
//!      │               then read.rs against the file (byte order mark, dividers, if_match)
//!      ▼
//!  operations ──▶ for each, on the running result (interpret.rs):
//!      │  4. refuse    refuse.rs: the shapes that would write what was not meant
//!      │  2. locate    locate.rs (line_match.rs, tolerant.rs, text_match.rs match; diagnose.rs
//!      │               says why nothing did)
//!      │  4. refuse    refuse.rs again, for the shapes only the match shows
//!      │  3. rewrite   rewrite.rs, asking replay.rs whether the edit is made already
//!      ▼
//!  new bytes
//!      │  5. check     outcome.rs: the new file as a whole (its size, and its
//!      │               syntax: syntax/), before the report calls it done; a
//!      │               failed check writes nothing
//!      │  6. report    finish.rs gathers the report (report.rs, diff.rs)
//!      ▼
//!  Edit { content, report, act }
//! ```

#![forbid(unsafe_code)]

mod budget;
mod diagnose;
pub mod diff;
mod fence;
mod finish;
mod hints;
mod interpret;
mod line_match;
mod locate;
mod outcome;
pub mod payload;
mod placeholder;
mod read;
mod refuse;
mod replay;
pub mod report;
mod rewrite;
pub mod syntax;
mod text_match;
mod tolerant;
mod working_text;

use sha2::{Digest, Sha256};

use budget::Budget;
pub use diagnose::EMPTY_FILE;
use finish::{finish, note_earlier_changes, over_budget, stale_edit, undiagnosed_note};
use interpret::Transaction;
pub use payload::FileAct;
pub use payload::Received;
use read::{divider_mistake, doubled_divider, drop_copied_bom, stale};
pub use report::{
    Closest, ErrorKind, ErrorReport, OpOutcome, OpReport, Outcome, Report, SyntaxPlace,
    SyntaxReport, SyntaxResult, SyntaxScope,
};
pub use tolerant::Tier;
use working_text::Doc;

/// Default payload limit: 100 KiB.
pub const DEFAULT_MAX_PAYLOAD: usize = 100 * 1024;

/// Default file limit of a transaction (`--max-file-size`): 16 MiB. The
/// largest hand-written and generated sources of real trees (an amalgamated
/// sqlite3.c, a generated parser, a lock file) are a few MiB, and one
/// transaction holds about five copies of its file at its peak (read, result,
/// line index, report diff, kept versions), so 16 MiB bounds it near 80 MiB.
pub const DEFAULT_MAX_FILE: u64 = 16 << 20;

const BOM: &[u8] = b"\xef\xbb\xbf";

/// What to do when SEARCH occurs more than once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Ambiguity {
    /// Replace the first occurrence and warn, listing every line.
    First,
    /// Fail the transaction: re-sending an ambiguous edit must not silently edit
    /// the next occurrence.
    #[default]
    Error,
}

/// What a syntax error the edit made does to the transaction (`--syntax-check`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SyntaxCheck {
    /// Fail the transaction (`syntax`): nothing is written.
    #[default]
    Refuse,
    /// Write the file, and say in the report where it no longer parses.
    Warn,
    /// Do not parse.
    Off,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Climb the tolerance ladder when an exact match fails (`--match exact` turns it off).
    pub tolerant: bool,
    pub ambiguous: Ambiguity,
    pub max_payload: usize,
    /// The largest file a transaction reads, in bytes: the transaction layer
    /// refuses a larger one (`too_large`) before reading a byte of it.
    pub max_file: u64,
    /// Whether the outcome's syntax is checked before the file is written (outcome.rs).
    pub syntax_check: SyntaxCheck,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            tolerant: true,
            ambiguous: Ambiguity::Error,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_file: DEFAULT_MAX_FILE,
            syntax_check: SyntaxCheck::Refuse,
        }
    }
}

/// The engine's decision: the bytes to write (none when nothing is to be written) and the report.
pub struct Edit {
    pub content: Option<Vec<u8>>,
    pub report: Report,
    /// The file is removed, or moved with `content` as its bytes (a patch's act).
    pub act: Option<FileAct>,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(2 * digest.len());
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    out
}

/// Applies `payload` to a file named `name` whose bytes are `original` (`None`: it does not exist).
pub fn apply<'p>(
    name: &str,
    original: Option<&[u8]>,
    payload: impl Into<Received<'p>>,
    opts: &Options,
) -> Edit {
    apply_to(name, original, payload, opts, &|_| true)
}

/// `apply`, refusing a payload whose tool calls name another file than this
/// one; `names` says whether a path written in the payload is this file.
pub fn apply_to<'p>(
    name: &str,
    original: Option<&[u8]>,
    payload: impl Into<Received<'p>>,
    opts: &Options,
    names: &dyn Fn(&str) -> bool,
) -> Edit {
    let mut edit = match payload::parse_single(payload, opts.max_payload, name, names) {
        Ok(parsed) => apply_parsed(name, original, parsed, opts),
        Err(e) => rejected(e, sha256_hex(original.unwrap_or_default())),
    };
    edit.report.file = name.to_owned();
    edit
}

/// Applies operations already read from a payload (one file's share of a multi-file one).
pub fn apply_parsed(
    name: &str,
    original: Option<&[u8]>,
    parsed: payload::Payload,
    opts: &Options,
) -> Edit {
    let mut edit = run_parsed(name, original, parsed, opts);
    edit.report.file = name.to_owned();
    edit
}

/// The edit of a section that only deletes file `name`, where the file is
/// gone and the caller knows from the project's history that an edit removed
/// it, with nothing at that path since: a patch sent again after a timeout.
/// The engine alone cannot tell that from a mistyped path (both are a missing
/// file), so only the caller that keeps the history may ask; the deletion is
/// then `already applied`, as a create of a file that reads as sent is.
/// A unified diff's deletion lists the file's lines in hunks that only remove
/// before its delete (`removals`, which the caller checks against the file as
/// it was). `None` when the section does more than delete.
pub fn deleted_before(name: &str, parsed: &payload::Payload) -> Option<Edit> {
    let ops = &parsed.operations;
    let deletes = |op: &payload::Operation| matches!(op.act, Some(FileAct::Delete { .. }));
    let (last, rest) = ops.split_last()?;
    let fits = deletes(last) && rest.iter().all(|op| deletes(op) || removes_only(op));
    if !fits {
        return None;
    }
    let done = (1..=ops.len()).map(|index| act_replayed(index, replay::DELETED_BEFORE));
    Some(made_before(name, parsed, done.collect()))
}

/// A hunk of a deletion: lines found and nothing put in their place.
fn removes_only(op: &payload::Operation) -> bool {
    op.act.is_none() && op.replace.is_empty() && !op.search.is_empty()
}

/// The hunks of a section that deletes its file after listing its lines (a
/// unified diff's deletion): what `deleted_before`'s caller runs on the file
/// as it was before it was removed, to see that they list all of it.
pub fn removals(parsed: &payload::Payload) -> payload::Payload {
    payload::Payload {
        operations: parsed
            .operations
            .iter()
            .filter(|op| removes_only(op))
            .cloned()
            .collect(),
        notes: Vec::new(),
    }
}

/// The edit of a section that moves file `name` (after its hunks, if any),
/// where the file is gone and the caller knows from the project's history
/// that an edit moved it to the path this move names, and has run the hunks
/// on the file there: `hunks`, their reports, each `already applied` or
/// `unchanged`. Then the move is `already applied`. `None` when the section
/// is not hunks and a move, or a hunk would still change the file.
pub fn moved_before(name: &str, parsed: &payload::Payload, hunks: &[OpReport]) -> Option<Edit> {
    let (last, rest) = parsed.operations.split_last()?;
    let made = |o: &OpReport| matches!(o.outcome, OpOutcome::AlreadyApplied | OpOutcome::Unchanged);
    let fits = matches!(last.act, Some(FileAct::MoveTo(_)))
        && rest.iter().all(|op| op.act.is_none())
        && hunks.len() == rest.len()
        && hunks.iter().all(made);
    if !fits {
        return None;
    }
    let mut done = hunks.to_vec();
    done.push(act_replayed(parsed.operations.len(), replay::MOVED_BEFORE));
    Some(made_before(name, parsed, done))
}

/// A patch's removal or move, made before, as the report of operation `index`.
fn act_replayed(index: usize, why: &str) -> OpReport {
    OpReport {
        index,
        outcome: OpOutcome::AlreadyApplied,
        strategy: Some("replay"),
        lines: None,
        warnings: vec![format!("already applied: {why}; nothing changed")],
        error: None,
    }
}

/// The no-op success of a section whose file is gone, its operations `done`.
fn made_before(name: &str, parsed: &payload::Payload, done: Vec<OpReport>) -> Edit {
    let mut report = Report::new(Outcome::Ok, sha256_hex(b""));
    report.file = name.to_owned();
    report.total = done.len();
    report.notes = parsed.notes.clone();
    report.operations = done;
    Edit {
        content: None,
        report,
        act: None,
    }
}

fn run_parsed(
    name: &str,
    original: Option<&[u8]>,
    mut parsed: payload::Payload,
    opts: &Options,
) -> Edit {
    let before = original.unwrap_or_default();
    if before.starts_with(BOM) {
        drop_copied_bom(&mut parsed);
    }
    // Hashing a large file costs more than editing it: hash only what a report needs.
    let stale = match parsed.operations.iter().any(|op| op.if_match.is_some()) {
        true => {
            let sha = sha256_hex(before);
            stale(&parsed.operations, &sha).map(|e| (e, sha))
        }
        false => None,
    };
    let body = before.strip_prefix(BOM).unwrap_or(before);
    if let Some(op) = doubled_divider(&parsed.operations, body) {
        let (message, hint) = divider_mistake(op);
        let mut report = Report::new(Outcome::Rejected, sha256_hex(before));
        report.total = parsed.operations.len();
        report.error = Some(ErrorReport::plain(ErrorKind::Malformed, message, hint));
        report.notes = parsed.notes;
        return Edit {
            content: None,
            report,
            act: None,
        };
    }
    let doc = match parsed.operations.len() {
        0 | 1 => Doc::new(body),
        _ => Doc::listed(body),
    };
    // A payload may say to write its file even if it no longer parses.
    let unchecked;
    let opts = match parsed.operations.iter().any(|op| op.syntax_off) {
        true if opts.syntax_check != SyntaxCheck::Off => {
            unchecked = Options {
                syntax_check: SyntaxCheck::Off,
                ..opts.clone()
            };
            parsed.notes.push(
                "the payload turned the syntax check off (`syntax_check`): the file was not parsed"
                    .to_owned(),
            );
            &unchecked
        }
        _ => opts,
    };
    if parsed.operations.iter().any(|op| op.placeholders_kept) {
        parsed.notes.push(
            "the payload turned the placeholder rule off (`placeholder_check`): REPLACE lines that read as placeholders were written as sent"
                .to_owned(),
        );
    }
    let budget = Budget::for_file(body.len(), opts.max_file);
    let mut tx = Transaction::new(name, doc, body, original.is_some(), opts, &budget);
    let mut ops: Vec<OpReport> = Vec::with_capacity(parsed.operations.len());
    for (i, op) in parsed.operations.iter().enumerate() {
        let report = tx.run(i + 1, op);
        let spent = report
            .error
            .as_ref()
            .is_some_and(|e| e.kind == ErrorKind::OverBudget);
        ops.push(report);
        if spent {
            let notes = undiagnosed_note(&budget, parsed.notes);
            return over_budget(before, ops, parsed.operations.len(), notes);
        }
    }
    if let Some((error, sha)) = stale {
        return stale_edit(error, sha, ops, parsed.notes);
    }
    note_earlier_changes(&mut ops, &parsed.operations, &tx);
    let notes = undiagnosed_note(&budget, parsed.notes);
    finish(name, original, &tx, ops, notes)
}

pub fn rejected(e: payload::PayloadError, sha: String) -> Edit {
    let mut report = Report::new(Outcome::Rejected, sha);
    report.error = Some(ErrorReport::plain(e.kind(), e.to_string(), e.hint()));
    Edit {
        content: None,
        report,
        act: None,
    }
}

impl Transaction<'_, '_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(original: Option<&str>, patch: &str) -> Edit {
        let parsed = payload::parse(patch.as_bytes(), DEFAULT_MAX_PAYLOAD).unwrap();
        apply_parsed(
            "x.py",
            original.map(str::as_bytes),
            parsed,
            &Options::default(),
        )
    }

    fn kind(e: &Edit) -> &str {
        e.report.error.as_ref().map_or("", |e| e.kind.as_str())
    }

    fn block(search: &str, replace: &str) -> String {
        format!("<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n")
    }

    const COMPUTE: &str = "def compute(items):\n    total = 0\n    for item in items:\n        if item.valid:\n            total += item.price\n        else:\n            log(item)\n    tax = total * 0.2\n    total += tax\n    report(total)\n    return total\n";

    #[test]
    fn every_common_phrasing_of_kept_code_in_replace_is_refused() {
        for placeholder in placeholder::PHRASINGS {
            let replace = format!("def compute(items):\n    {placeholder}\n    return total\n");
            let e = run(Some(COMPUTE), &block(COMPUTE, &replace));
            assert_eq!(kind(&e), "placeholder", "{placeholder}");
            assert!(e.content.is_none(), "{placeholder}");
        }
    }

    #[test]
    fn a_placeholder_that_deletes_nothing_but_misplaces_new_code_is_refused() {
        let file = "def f():\n    a = 1\n    return a\n";
        let payload = block(
            "def f():\n",
            "def f():\n    # ... existing code ...\n    log(\"end\")\n",
        );
        let e = run(Some(file), &payload);
        assert_eq!(kind(&e), "placeholder");
        assert!(e.content.is_none());
        let error = e.report.error.unwrap();
        assert!(
            error
                .message
                .contains("REPLACE line 2 `# ... existing code ...`"),
            "{}",
            error.message
        );
        let hint = error.hint.unwrap_or_default();
        assert!(hint.contains("anchor"), "{hint}");
        let file = "impl fmt::Display for X {\n    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {\n        write!(f, \"x\")\n    }\n}\n";
        let payload = block(
            "    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {\n",
            "    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {\n        // ... existing code ...\n        trace!(\"fmt\");\n    }\n",
        );
        assert_eq!(kind(&run(Some(file), &payload)), "placeholder");
    }

    #[test]
    fn a_placeholder_line_search_also_holds_is_kept_as_is() {
        // The file really has the line: SEARCH holds it verbatim.
        let file = "def f():\n    # ... existing code ...\n    return a\n";
        let payload = block(
            "def f():\n    # ... existing code ...\n",
            "def f():\n    # ... existing code ...\n    log(\"end\")\n",
        );
        let e = run(Some(file), &payload);
        assert_eq!(e.report.outcome, Outcome::Ok, "{:?}", e.report.error);
        assert_eq!(
            e.content.as_deref(),
            Some(&b"def f():\n    # ... existing code ...\n    log(\"end\")\n    return a\n"[..])
        );
        // Aider's form: the same placeholder at the same place on both sides.
        let file = "def f():\n    a = 1\n    b = 2\n    return a\n";
        let payload = block(
            "def f():\n    # ... existing code ...\n    return a\n",
            "def f():\n    # ... existing code ...\n    log(\"end\")\n    return a\n",
        );
        let e = run(Some(file), &payload);
        assert_eq!(e.report.outcome, Outcome::Ok, "{:?}", e.report.error);
        assert_eq!(
            e.content.as_deref(),
            Some(&b"def f():\n    a = 1\n    b = 2\n    log(\"end\")\n    return a\n"[..])
        );
    }

    #[test]
    fn sha256_hex_is_the_lowercase_hex_every_tool_prints() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_delete_removes_an_existing_file_and_nothing_may_edit_it_after() {
        let delete = "*** Begin Patch\n*** Delete File: x.py\n*** End Patch\n";
        let e = run(Some("a\n"), delete);
        assert_eq!(e.act, Some(FileAct::Delete { listed: false }));
        assert_eq!(e.report.outcome, Outcome::Ok);
        assert_eq!(
            e.report.diff.as_deref(),
            Some("--- a/x.py\n+++ b/x.py\n@@ -1 +0,0 @@\n-a\n")
        );
        let e = run(None, delete);
        assert_eq!(kind(&e), "not_found");
        assert_eq!(e.act, None);
        let then_edit = "*** Begin Patch\n*** Delete File: x.py\n*** Update File: x.py\n@@\n-a\n+b\n*** End Patch\n";
        let e = run(Some("a\n"), then_edit);
        assert_eq!(kind(&e), "deleted");
        assert!(e.content.is_none() && e.act.is_none());
    }

    #[test]
    fn a_diff_that_deletes_must_list_every_line_of_the_file() {
        let diff = "--- a/x.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n";
        assert_eq!(run(Some("a\nb\n"), diff).report.outcome, Outcome::Ok);
        let e = run(Some("a\nb\nc\n"), diff);
        assert_eq!(kind(&e), "not_found");
        assert!(
            e.report
                .error
                .unwrap()
                .message
                .contains("1 line(s) it does not list")
        );
    }

    #[test]
    fn a_move_carries_the_edited_content_even_when_unchanged() {
        let rename =
            "diff --git a/x.py b/y.py\nsimilarity index 100%\nrename from x.py\nrename to y.py\n";
        let e = run(Some("a\n"), rename);
        assert_eq!(e.act, Some(FileAct::MoveTo("y.py".into())));
        assert_eq!(e.content.as_deref(), Some(&b"a\n"[..]));
        let twice = "*** Begin Patch\n*** Update File: x.py\n*** Move to: y.py\n*** Update File: x.py\n*** Move to: z.py\n*** End Patch\n";
        assert_eq!(kind(&run(Some("a\n"), twice)), "malformed");
    }
}

//! The edit engine: payload text and file bytes in, new bytes and a report out.
//!
//! Pure by design: no file system, no clock, no FUSE. The store commits what the
//! engine decides; the CLI and the mount only carry bytes to and from it.
//!
//! A transaction runs its operations in order on the running result. If any
//! fails, the whole transaction fails and no bytes come out, but the remaining
//! operations are still tried so that one report names every problem at once.

mod budget;
mod diagnose;
pub mod diff;
mod doc;
mod fence;
mod lines;
pub mod payload;
mod placeholder;
mod replay;
pub mod report;
mod text;
mod tolerant;

use std::borrow::Cow;
use std::cell::OnceCell;
use std::ops::{Range, RangeInclusive};

use regex::bytes::Regex;
use sha2::{Digest, Sha256};

use budget::Budget;
pub use diagnose::EMPTY_FILE;
use doc::{Doc, Eol};
pub use payload::FileAct;
pub use payload::Received;
use payload::{Find, Operation, text_lines};
pub use report::{Closest, ErrorKind, ErrorReport, OpOutcome, OpReport, Outcome, Report};
use text::Hit;
pub use tolerant::Tier;

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

#[derive(Clone, Debug)]
pub struct Options {
    /// Climb the tolerance ladder when an exact match fails (`--match exact` turns it off).
    pub tolerant: bool,
    pub ambiguous: Ambiguity,
    pub max_payload: usize,
    /// The largest file a transaction reads, in bytes: the transaction layer
    /// refuses a larger one (`too_large`) before reading a byte of it.
    pub max_file: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            tolerant: true,
            ambiguous: Ambiguity::Error,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_file: DEFAULT_MAX_FILE,
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
    let budget = Budget::for_file(body.len(), opts.max_file);
    let mut tx = Transaction {
        doc,
        tracked: true,
        body,
        utf8: OnceCell::new(),
        entities: OnceCell::new(),
        indents: OnceCell::new(),
        opts,
        budget: &budget,
        diagnosing: true,
        exists: original.is_some(),
        act: None,
        moved: Vec::new(),
        prose: prose(name),
        markup: markup(name),
    };
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

/// `notes` and, when failing operations went undiagnosed, how many.
fn undiagnosed_note(budget: &Budget, mut notes: Vec<String>) -> Vec<String> {
    if budget.undiagnosed() > 0 {
        notes.push(format!(
            "{} failing operation(s) were not diagnosed: only the first {} are (closest region, differences); fix those and send the payload again to see the rest",
            budget.undiagnosed(),
            budget::MAX_DIAGNOSED
        ));
    }
    notes
}

/// The report of a transaction whose work budget ran out at the last of
/// `ops` (see budget.rs): it fails as `over_budget`, whatever the operations
/// before it did, and the operations after it were not run.
fn over_budget(before: &[u8], ops: Vec<OpReport>, total: usize, mut notes: Vec<String>) -> Edit {
    let error = ops.last().and_then(|o| o.error.clone()).unwrap_or_else(|| {
        ErrorReport::plain(ErrorKind::OverBudget, "over budget", OVER_BUDGET_HINT)
    });
    if total > ops.len() {
        notes.push(format!("operations {}-{total} were not run", ops.len() + 1));
    }
    unwritten(failed(error, sha256_hex(before), total), ops, notes)
}

/// The failure of the operation that found the work budget spent (see budget.rs).
fn over_budget_failure(spent: budget::Spent, index: Option<usize>) -> Failure {
    let at = match index {
        Some(i) => format!(" at operation {i}"),
        None => " while the matches of an operation were gathered".into(),
    };
    Failure::new(
        ErrorKind::OverBudget,
        format!(
            "the transaction's work budget ({} units, about as many bytes read) ran out{at}",
            spent.total
        ),
        OVER_BUDGET_HINT,
    )
}

/// What to do about a transaction past its work budget.
const OVER_BUDGET_HINT: &str = "send fewer operations per payload (split it), narrow each with a line range (`start_line`/`end_line`, `:start_line:`) or more distinctive SEARCH lines, and prefer plain SEARCH to a regex that reads the whole file";

/// The byte order mark is kept apart from the text blocks match, so a SEARCH
/// copied with it (by a reader that shows the file's bytes) would never match its
/// first line: on a file that has one, a SEARCH's (and its REPLACE's) leading
/// mark is dropped, with a note. The file keeps its mark.
fn drop_copied_bom(parsed: &mut payload::Payload) {
    const MARK: char = '\u{feff}';
    let mut dropped = Vec::new();
    for (i, op) in parsed.operations.iter_mut().enumerate() {
        if let Some(search) = op.search.strip_prefix(MARK) {
            op.search = search.to_owned();
            if let Some(replace) = op.replace.strip_prefix(MARK) {
                op.replace = replace.to_owned();
            }
            dropped.push((i + 1).to_string());
        }
    }
    if !dropped.is_empty() {
        parsed.notes.push(format!(
            "the byte order mark at the start of SEARCH (operation {}) was dropped: it is the file's, kept apart from its text, and stays",
            dropped.join(", ")
        ));
    }
}

/// The report of a transaction whose `if_match` did not hold: the operations ran
/// on the file as it is, so each still says whether it would apply, and the one
/// that carried the `if_match` failed as `stale`.
fn stale_edit(error: ErrorReport, sha: String, mut ops: Vec<OpReport>, notes: Vec<String>) -> Edit {
    let at = error.operation.unwrap_or(1).saturating_sub(1);
    for (i, op) in ops.iter_mut().enumerate() {
        if i == at {
            op.outcome = OpOutcome::Failed;
            op.error = Some(error.clone());
        } else if op.outcome != OpOutcome::Failed {
            op.outcome = OpOutcome::Matched;
        }
    }
    let report = failed(error, sha, ops.len());
    unwritten(report, ops, notes)
}

/// Agents often write every block against the file as they read it, so a block
/// whose lines an earlier block of the payload changed fails as `not_found`. The
/// file alone does not show why; say which earlier operation changed those lines.
fn note_earlier_changes(ops: &mut [OpReport], parsed: &[Operation], tx: &Transaction<'_, '_>) {
    for i in 1..ops.len() {
        let Some(error) = ops[i].error.as_ref() else {
            continue;
        };
        // Only an operation applied before can have changed its lines.
        if error.kind != ErrorKind::NotFound
            || !ops[..i].iter().any(|o| o.outcome == OpOutcome::Applied)
        {
            continue;
        }
        let mut alone = Transaction {
            doc: Doc::new(tx.body),
            tracked: true,
            body: tx.body,
            utf8: OnceCell::new(),
            entities: OnceCell::new(),
            indents: OnceCell::new(),
            opts: tx.opts,
            budget: tx.budget,
            diagnosing: false,
            exists: tx.exists,
            act: None,
            moved: Vec::new(),
            prose: tx.prose,
            markup: tx.markup,
        };
        let Some([first, last]) = alone.run(i + 1, &parsed[i]).lines else {
            continue;
        };
        let Some(earlier) = ops[..i].iter().rev().find(|o| {
            o.outcome == OpOutcome::Applied && o.lines.is_some_and(|[a, b]| a <= last && first <= b)
        }) else {
            continue;
        };
        let note = format!(
            "SEARCH matches the file as it was before operation #{} changed it (lines {first}-{last}): operations run in order, each on the result of the one before, so write this SEARCH as the file reads after #{}, or merge the two blocks into one",
            earlier.index, earlier.index
        );
        if let Some(e) = ops[i].error.as_mut() {
            e.hint = Some(match e.hint.take() {
                Some(h) => format!("{note}; {h}"),
                None => note,
            });
        }
    }
}

/// The first block with several dividers when neither the file nor another
/// block's REPLACE has a `=======` line: no reading can make one content, so the
/// block is malformed and the payload is rejected before anything runs.
fn doubled_divider<'o>(ops: &'o [Operation], body: &[u8]) -> Option<&'o Operation> {
    let divider = |line: &[u8]| {
        let line = line.trim_ascii();
        line.len() >= 5 && line.iter().all(|&b| b == b'=')
    };
    let op = ops.iter().find(|op| !op.splits.is_empty())?;
    // A block with several dividers has them in some reading's REPLACE by
    // construction; only a plain block's REPLACE shows one will be written.
    let written = ops
        .iter()
        .filter(|op| op.splits.is_empty())
        .any(|op| op.replace.lines().any(|l| divider(l.as_bytes())));
    (!written && !body.split(|&b| b == b'\n').any(divider)).then_some(op)
}

/// How to write a block for a file whose own lines look like dividers.
const DIVIDER_HINT: &str = "to edit a file whose lines look like `=======`, open the block with 9 `<` and use 9 `=` and 9 `>`, or escape such a content line as `\\=======`";

/// A block with several dividers in a file that has no such line of its own.
fn divider_mistake(op: &Operation) -> (String, &'static str) {
    (
        format!(
            "the block at payload line {} has {} `=======` lines, and the file has none of its own; one divider separates SEARCH from REPLACE",
            op.payload_line,
            op.splits.len() + 1
        ),
        DIVIDER_HINT,
    )
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

/// A transaction that writes nothing: the failed `report`, with every
/// operation's outcome and the payload's notes.
fn unwritten(mut report: Report, ops: Vec<OpReport>, notes: Vec<String>) -> Edit {
    report.operations = ops;
    report.notes = notes;
    Edit {
        content: None,
        report,
        act: None,
    }
}

fn failed(error: ErrorReport, sha: String, total: usize) -> Report {
    let mut report = Report::new(Outcome::Failed, sha);
    report.total = total;
    report.error = Some(error);
    report
}

/// The first `if_match` that does not hold.
fn stale(ops: &[Operation], sha: &str) -> Option<ErrorReport> {
    let (i, want) = ops
        .iter()
        .enumerate()
        .find_map(|(i, op)| op.if_match.as_deref().filter(|w| *w != sha).map(|w| (i, w)))?;
    Some(ErrorReport {
        kind: ErrorKind::Stale,
        operation: Some(i + 1),
        message: format!(
            "the file changed since it was read: if_match is {want}, the file's SHA-256 is now {sha}"
        ),
        hint: Some("read the file again and rebuild the edit against its current content".into()),
        closest: None,
    })
}

fn finish(
    name: &str,
    original: Option<&[u8]>,
    tx: &Transaction<'_, '_>,
    mut ops: Vec<OpReport>,
    notes: Vec<String>,
) -> Edit {
    let total = ops.len();
    let before = original.unwrap_or_default();
    if let Some(first) = ops.iter().find_map(|o| o.error.clone()) {
        for op in ops.iter_mut().filter(|o| o.outcome != OpOutcome::Failed) {
            op.outcome = OpOutcome::Matched;
        }
        return unwritten(failed(first, sha256_hex(before), total), ops, notes);
    }
    let body = before.strip_prefix(BOM).unwrap_or(before);
    let mut new = Vec::with_capacity(body.len() + 64);
    new.extend_from_slice(&before[..before.len() - body.len()]);
    tx.doc.write_lines(0..tx.doc.len(), &mut new);
    if new.len() as u64 > tx.opts.max_file {
        let error = ErrorReport::plain(
            ErrorKind::TooLarge,
            format!(
                "the file would be {} bytes, over the {} a transaction may write (--max-file-size)",
                new.len(),
                tx.opts.max_file
            ),
            "make the file grow less in one transaction (a regex replacement that copies each match, a REPLACE sent for every occurrence), or raise --max-file-size",
        );
        return unwritten(failed(error, sha256_hex(before), total), ops, notes);
    }
    let act = tx.act.clone().map(|(act, _)| act);
    let changed = original.is_none() || new != before || act.is_some();
    let diff = match tx.tracked {
        true => diff::doc_diff(body, &tx.doc, name),
        false => None,
    };
    // A removed or moved file has no bytes at its path after the transaction,
    // so no hash (a moved file's is in the section of its new path).
    let sha = match act {
        Some(_) => String::new(),
        None => sha256_hex(&new),
    };
    let mut report = Report::new(Outcome::Ok, sha);
    report.applied = ops
        .iter()
        .filter(|o| o.outcome == OpOutcome::Applied)
        .count();
    report.total = total;
    report.operations = ops;
    report.notes = notes;
    report.diff = Some(match act {
        Some(FileAct::Delete { .. }) => diff::file_diff(before, b"", name),
        _ => diff.unwrap_or_else(|| diff::file_diff(before, &new, name)),
    });
    Edit {
        content: changed.then_some(new),
        report,
        act,
    }
}

/// Why one operation did not apply.
struct Failure {
    kind: ErrorKind,
    message: String,
    hint: Option<String>,
    closest: Option<Closest>,
}

impl Failure {
    fn new(kind: ErrorKind, message: impl Into<String>, hint: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
            hint: Some(hint.into()),
            closest: None,
        }
    }
}

/// What an operation did, short of failing.
struct Done {
    outcome: OpOutcome,
    strategy: &'static str,
    lines: Option<[usize; 2]>,
    warnings: Vec<String>,
}

impl Done {
    fn applied(strategy: &'static str, lines: Option<[usize; 2]>, warnings: Vec<String>) -> Done {
        Done {
            outcome: OpOutcome::Applied,
            strategy,
            lines,
            warnings,
        }
    }

    /// A replay: nothing to do, and said so.
    fn replayed(lines: [usize; 2], why: &str) -> Done {
        Done {
            outcome: OpOutcome::AlreadyApplied,
            strategy: "replay",
            lines: Some(lines),
            warnings: vec![format!("already applied: {why}; nothing changed")],
        }
    }
}

/// Why a tolerant match whose REPLACE reads as the file already does is a no-op.
const SET_ASIDE: &str = "SEARCH and REPLACE differ only in what this tolerant match set aside, so they are identical as written into the file: nothing to change";

/// A create's replay: the file already reads exactly as the create sends it.
const CREATED_BEFORE: &str =
    "the file already reads exactly as this create sends it (it was created before)";

/// Rule (b)'s warning: SEARCH is there, and so is the text REPLACE adds around it.
const INSERTED_BEFORE: &str =
    "the file around SEARCH already reads as REPLACE (the insertion was made before)";

struct Transaction<'a, 'o> {
    doc: Doc<'a>,
    /// Whether `doc` still records its changes against the original (no byte-level rewrite yet).
    tracked: bool,
    /// The file's bytes before the transaction (without a BOM).
    body: &'a [u8],
    /// Whether `body` is UTF-8, checked only when a rule depends on it: an
    /// exact match does not.
    utf8: OnceCell<bool>,
    /// Whether `body` holds an HTML entity, looked for once: every operation
    /// whose REPLACE holds one asks (`refuse_entity_replace`).
    entities: OnceCell<bool>,
    /// Whether `body`'s lines start with a tab, and with a space (`indented_with`).
    indents: OnceCell<(bool, bool)>,
    opts: &'o Options,
    /// The work the transaction may still do (see budget.rs).
    budget: &'o Budget,
    /// Whether a failing operation is diagnosed (closest region, differences):
    /// not when an operation is run again only to see where it matches.
    diagnosing: bool,
    /// Whether the file existed before the transaction.
    exists: bool,
    /// A removal or move an operation asked for, and that operation's index.
    act: Option<(FileAct, usize)>,
    /// What the operations run so far did to line numbers (see `Moved`).
    moved: Vec<Moved>,
    /// Whether the file is prose (Markdown and the like), whose own fence
    /// lines an edit may add, close or cut across.
    prose: bool,
    /// Whether the file is markup, where an edit may write HTML entities.
    markup: bool,
}

/// Whether a file of this name is prose, where a Markdown fence line is
/// content: a changelog's entry, a block closed by a later edit.
fn prose(name: &str) -> bool {
    let ext = std::path::Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    matches!(
        ext.as_deref(),
        Some("md" | "markdown" | "mdx" | "rst" | "adoc" | "org")
    )
}

/// `line 4`, or `lines 4-6`: 1-based, both ends included.
fn line_span(first: usize, last: usize) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

/// Whether a file of this name is markup (or prose), where an HTML entity is
/// text an edit may mean to write (`Tom &amp; Jerry`), not an escape.
fn markup(name: &str) -> bool {
    let ext = std::path::Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    prose(name)
        || matches!(
            ext.as_deref(),
            Some(
                "html"
                    | "htm"
                    | "xhtml"
                    | "xml"
                    | "svg"
                    | "xsl"
                    | "xslt"
                    | "vue"
                    | "svelte"
                    | "astro"
                    | "jsx"
                    | "tsx"
                    | "php"
                    | "erb"
                    | "ejs"
                    | "hbs"
                    | "j2"
                    | "jinja"
                    | "twig"
            )
        )
}

/// Lines of a repeated run `repeats_beside` looks at for one that stands once
/// in the file: each look reads the whole file.
const DISTINCT_LOOK: usize = 8;

/// What tells whether lines of brackets alone (`}`, `});`) at one end of
/// REPLACE would leave the file's brackets unpaired: they pair now, and REPLACE
/// opens or closes more than SEARCH by just those lines' brackets, so without
/// them they would pair still. Such lines repeat all over a file, so
/// `distinct` never tells them; this tells the one brace SEARCH stopped short
/// of. The file is counted once, at the first run of brackets alone.
struct Pairs<'d, 'a> {
    doc: &'d Doc<'a>,
    /// How far REPLACE opens or closes more than SEARCH.
    grown: [i64; 3],
    file_pairs: OnceCell<bool>,
}

impl<'d, 'a> Pairs<'d, 'a> {
    fn new(doc: &'d Doc<'a>, search: &[&str], replace: &[&str]) -> Self {
        let (r, s) = (
            text::bracket_balance(replace.iter().map(|l| l.as_bytes())),
            text::bracket_balance(search.iter().map(|l| l.as_bytes())),
        );
        Pairs {
            doc,
            grown: std::array::from_fn(|i| r[i] - s[i]),
            file_pairs: OnceCell::new(),
        }
    }

    fn unpaired_by(&self, run: &[&str]) -> bool {
        run.iter().all(|l| text::brackets_only(l))
            && text::bracket_balance(run.iter().map(|l| l.as_bytes())) == self.grown
            && *self.file_pairs.get_or_init(|| {
                let lines = (0..self.doc.len()).map(|i| self.doc.line(i));
                text::bracket_balance(lines) == [0; 3]
            })
    }
}

/// Which end of REPLACE `repeats_beside` looks at.
#[derive(Clone, Copy)]
enum Edge {
    Before,
    After,
}

/// A `:start_line:` that pointed into lines an earlier operation replaced.
struct Replaced {
    hint: usize,
    by: usize,
    /// What that operation made of those lines, where they lie now.
    now: Range<usize>,
    warning: String,
}

/// Lines an applied operation added or removed: `first..=last` (1-based,
/// counted before it ran) became `delta` lines more (or fewer).
#[derive(Clone, Copy)]
struct Moved {
    first: usize,
    last: usize,
    delta: isize,
    /// The operation (from 1) that replaced the lines.
    by: usize,
}

impl Transaction<'_, '_> {
    fn run(&mut self, index: usize, op: &Operation) -> OpReport {
        let lines_before = self.doc.len();
        let read = op;
        let replaced = self.hint_replaced(read);
        let op = self.in_lines_now(op);
        let result = self
            .charge(index, &op)
            .and_then(|()| self.removed())
            .and_then(|()| self.reading(&op))
            .and_then(|op| {
                if let Some(act) = &op.act {
                    self.file_act(index, act)
                } else if let Some(after) = op.insert_after {
                    self.insert(after, &op)
                } else if op.search.is_empty() {
                    self.create(&op)
                } else {
                    self.edit(&op)
                }
            });
        let result = match (result, &replaced) {
            (
                Ok(Done {
                    outcome: OpOutcome::Applied,
                    lines: Some(at),
                    ..
                }),
                Some(r),
            ) if let Some(f) = Self::outside_replaced(r, at) => Err(f),
            (result, _) => result,
        };
        let result = result.map_err(|f| self.charge_miss(index, f));
        if let Ok(Done {
            outcome: OpOutcome::Applied,
            lines: Some([first, last]),
            ..
        }) = &result
        {
            let delta = self.doc.len() as isize - lines_before as isize;
            let (first, last) = (*first, *last);
            self.moved.push(Moved {
                first,
                last,
                delta,
                by: index,
            });
        }
        match result {
            Ok(mut d) => {
                d.warnings.extend(
                    replaced
                        .map(|r| r.warning)
                        .or_else(|| moved_note(read, &op)),
                );
                OpReport {
                    index,
                    outcome: d.outcome,
                    strategy: Some(d.strategy),
                    lines: d.lines,
                    warnings: d.warnings,
                    error: None,
                }
            }
            Err(f) => {
                let f = self.outside_scope(&op, f);
                OpReport {
                    index,
                    outcome: OpOutcome::Failed,
                    strategy: None,
                    lines: None,
                    warnings: Vec::new(),
                    error: Some(ErrorReport {
                        kind: f.kind,
                        operation: Some(index),
                        message: f.message,
                        hint: f.hint,
                        closest: f.closest,
                    }),
                }
            }
        }
    }

    /// A `not_found` failure of an operation with a line scope, said so when
    /// SEARCH is in the file but outside those lines: "not in the file" would
    /// send the agent to fix a SEARCH that is right.
    fn outside_scope(&self, op: &Operation, f: Failure) -> Failure {
        let Some(scope) = op.scope.as_ref() else {
            return f;
        };
        if f.kind != ErrorKind::NotFound || op.search.is_empty() {
            return f;
        }
        if !matches!(op.find, payload::Find::Lines | payload::Find::Text) {
            return f;
        }
        let mut bytes = Vec::new();
        self.doc.write_lines(0..self.doc.len(), &mut bytes);
        let line_of = |at: usize| memchr::memchr_iter(b'\n', &bytes[..at]).count() + 1;
        let found: Vec<String> = memchr::memmem::find_iter(&bytes, op.search.as_bytes())
            .map(|at| line_of(at).to_string())
            .collect();
        if found.is_empty() {
            return f;
        }
        let end = (*scope.end()).min(self.doc.len());
        Failure {
            message: format!(
                "SEARCH text not found in lines {}-{end}, the operation's `start_line`/`end_line`; it is in the file at line(s) {}",
                scope.start(),
                found.join(", ")
            ),
            hint: Some(
                "widen start_line/end_line to take in the line meant, or leave them out".into(),
            ),
            ..f
        }
    }

    /// `op` with its line numbers (a `:start_line:` hint, a JSON scope) moved
    /// by the lines the operations before it added or removed above them: an
    /// agent counts them in the file it read, before the transaction, as a
    /// patch numbers its hunks. A patch's hunks come so moved already.
    fn in_lines_now<'op>(&self, op: &'op Operation) -> Cow<'op, Operation> {
        let numbered = op.near.is_some() || op.scope.is_some();
        if self.moved.is_empty() || !numbered || !op.patched.is_empty() {
            return Cow::Borrowed(op);
        }
        let now = |line: usize| self.line_now(line).0;
        Cow::Owned(Operation {
            near: op.near.map(now),
            scope: op.scope.as_ref().map(|r| match *r.end() {
                usize::MAX => now(*r.start())..=usize::MAX,
                end => now(*r.start())..=now(end),
            }),
            ..op.clone()
        })
    }

    /// Where `line`, counted before the transaction, lies now; and the lines
    /// (counted then) an operation before replaced, if it lay in them: it is
    /// then taken where they began.
    fn line_now(&self, line: usize) -> (usize, Option<Moved>) {
        let mut replaced = None;
        let now = self.moved.iter().fold(line, |l, m| match l {
            l if l > m.last => l.saturating_add_signed(m.delta).max(1),
            l if l >= m.first => {
                replaced.get_or_insert(*m);
                m.first
            }
            l => l,
        });
        (now, replaced)
    }

    /// Warns when a `:start_line:` hint points into lines an earlier operation
    /// of the payload replaced: the line the agent meant is gone, and the
    /// match nearest where they began was taken.
    fn hint_replaced(&self, read: &Operation) -> Option<Replaced> {
        let hint = read.near.filter(|_| read.patched.is_empty())?;
        let (now, m) = match self.line_now(hint) {
            (now, Some(m)) => (now, m),
            (_, None) => return None,
        };
        let (first, last) = (m.first, m.last);
        let warning = format!(
            "`:start_line:{hint}` points into lines operation {} replaced ({first}-{last} as they were then): taken as line {now}, where they begin",
            m.by
        );
        let len = (last - first + 1).saturating_add_signed(m.delta);
        Some(Replaced {
            hint,
            by: m.by,
            now: now..now + len,
            warning,
        })
    }

    /// Fails an operation whose `:start_line:` pointed into lines an earlier
    /// operation replaced (`replaced`) but which matched outside what that
    /// operation made of them (lines `at`): the line it meant is gone, and the
    /// match it found is another copy, not its own.
    fn outside_replaced(replaced: &Replaced, at: [usize; 2]) -> Option<Failure> {
        let r = &replaced.now;
        if at[0] < r.end && at[1] >= r.start {
            return None;
        }
        // The hint comes from `note_earlier_changes`, which names how the
        // block reads against the file before that operation.
        Some(Failure {
            kind: ErrorKind::NotFound,
            message: format!(
                "`:start_line:{}` points into lines operation {} replaced; SEARCH is not in what it made of them (lines {}-{} now) but at line {}, another place",
                replaced.hint,
                replaced.by,
                r.start,
                r.end.saturating_sub(1).max(r.start),
                at[0]
            ),
            hint: None,
            closest: None,
        })
    }

    /// Spends what operation `index` costs before it runs (see budget.rs),
    /// or fails it as `over_budget`: its own text, and for a regex, passes
    /// over the file. A match found at once costs little more (the file's
    /// lines are indexed); what a miss costs is charged once it is known
    /// (`charge_miss`).
    fn charge(&self, index: usize, op: &Operation) -> Result<(), Failure> {
        let passes = match op.find {
            Find::Regex(_) | Find::IgnoreCase(_) => budget::REGEX_WEIGHT,
            Find::Lines | Find::Text => 0,
        };
        let own = (op.search.len() + op.replace.len()) as u64;
        let file = passes.saturating_mul(self.body.len() as u64);
        self.budget
            .charge(own.saturating_add(file))
            .map_err(|spent| over_budget_failure(spent, Some(index)))
    }

    /// Spends what operation `index`'s failure cost: one pass over the file,
    /// as a miss climbs the tolerance ladder and looks for SEARCH as text.
    /// Past the budget, it fails as `over_budget` instead.
    fn charge_miss(&self, index: usize, failed: Failure) -> Failure {
        if failed.kind == ErrorKind::OverBudget {
            return failed;
        }
        match self.budget.charge(self.body.len() as u64) {
            Ok(()) => failed,
            Err(spent) => over_budget_failure(spent, Some(index)),
        }
    }

    /// Fails once an earlier operation removed the file: nothing is left to edit.
    fn removed(&self) -> Result<(), Failure> {
        match &self.act {
            Some((FileAct::Delete { .. }, by)) => Err(Failure::new(
                ErrorKind::Deleted,
                format!("operation {by} deletes the file, so no later operation can edit it"),
                "edit the file before deleting it, or leave out the delete",
            )),
            _ => Ok(()),
        }
    }

    /// A patch's removal or move of the whole file, checked here and done by
    /// the caller, which owns the file system.
    fn file_act(&mut self, index: usize, act: &FileAct) -> Result<Done, Failure> {
        if !self.exists {
            let what = match act {
                FileAct::Delete { .. } => "deletes",
                FileAct::MoveTo(_) => "moves",
            };
            return Err(Failure::new(
                ErrorKind::NotFound,
                format!("the patch {what} this file, but there is no such file"),
                "check the path (a file deleted or moved before has nothing left to do so with)",
            ));
        }
        if let Some((FileAct::MoveTo(to), by)) = &self.act {
            return Err(Failure::new(
                ErrorKind::Malformed,
                format!("operation {by} already moves the file to {to}"),
                "move a file once per patch",
            ));
        }
        let done = match act {
            FileAct::Delete { listed: true } if !self.doc.is_empty() => {
                let left = self.doc.len();
                return Err(Failure::new(
                    ErrorKind::NotFound,
                    format!(
                        "the diff deletes the file, but {left} line(s) it does not list remain once its hunks are applied: the file changed since the diff was made"
                    ),
                    "read the file again and make the diff against its current content",
                ));
            }
            FileAct::Delete { .. } => {
                Done::applied("delete", None, vec!["the file is removed".into()])
            }
            FileAct::MoveTo(to) => {
                Done::applied("move", None, vec![format!("the file moves to {to}")])
            }
        };
        self.act = Some((act.clone(), index));
        Ok(done)
    }

    /// A block with several divider lines (the file's own `=======` lines among
    /// them) read the one way whose SEARCH matches the file.
    fn reading<'op>(&self, op: &'op Operation) -> Result<Cow<'op, Operation>, Failure> {
        if op.splits.is_empty() {
            return Ok(Cow::Borrowed(op));
        }
        let scope = self.line_scope(op);
        let hint = DIVIDER_HINT;
        // Only a file that has such lines of its own makes a second divider content.
        if !scope.clone().any(|i| self.divider_like(i)) {
            let (message, hint) = divider_mistake(op);
            return Err(Failure::new(ErrorKind::Malformed, message, hint));
        }
        let first = (op.search.clone(), op.replace.clone());
        let readings: Vec<&(String, String)> = std::iter::once(&first)
            .chain(&op.splits)
            .filter(|(search, _)| self.reads_here(search, scope.clone()))
            .collect();
        match readings[..] {
            [(search, replace)] => Ok(Cow::Owned(Operation {
                search: search.clone(),
                replace: replace.clone(),
                splits: Vec::new(),
                ..op.clone()
            })),
            _ => Err(Failure::new(
                ErrorKind::Malformed,
                format!(
                    "the block at payload line {} holds {} divider lines, so it reads {} ways, and {} of those SEARCH texts match the file",
                    op.payload_line,
                    op.splits.len() + 1,
                    op.splits.len() + 1,
                    match readings.len() {
                        0 => "none".to_owned(),
                        n => n.to_string(),
                    }
                ),
                hint,
            )),
        }
    }

    /// Whether one reading's SEARCH matches the file somewhere not followed by a
    /// divider-like line: where the file goes on with `=======`, the divider that
    /// ended this SEARCH is the file's own line, so a longer reading is meant.
    fn reads_here(&self, search: &str, scope: Range<usize>) -> bool {
        let Some(found) = lines::find(&self.doc, &text_lines(search), scope, || self.tiers())
        else {
            return false;
        };
        found
            .starts
            .iter()
            .any(|&s| s + found.len() >= self.doc.len() || !self.divider_like(s + found.len()))
    }

    /// Whether file line `i` would read as a block's divider.
    fn divider_like(&self, i: usize) -> bool {
        let line = self.doc.line(i).trim_ascii();
        line.len() >= 5 && line.iter().all(|&b| b == b'=')
    }

    fn utf8(&self) -> bool {
        *self
            .utf8
            .get_or_init(|| std::str::from_utf8(self.body).is_ok())
    }

    fn tiers(&self) -> &'static [Tier] {
        if self.opts.tolerant && self.utf8() {
            &Tier::LADDER
        } else {
            &[]
        }
    }

    /// An empty SEARCH: creates the file, or fills an empty one.
    fn create(&mut self, op: &Operation) -> Result<Done, Failure> {
        if !self.doc.is_empty() {
            // A create sent again (a re-sent patch's `*** Add File`) is a replay:
            // the file reads exactly as sent, so writing it would change nothing,
            // and a failure would send the agent to edit a file that is right.
            if same_text(&self.doc.to_bytes(), op.replace.as_bytes()) {
                let last = self.doc.len().max(1);
                return Ok(Done::replayed([1, last], CREATED_BEFORE));
            }
            let message = "the operation creates a file (an empty SEARCH, `*** Add File`, `create`), but this file already has content";
            return Err(Failure::new(
                ErrorKind::FileExists,
                message,
                "put the lines to change in SEARCH, or to add text, SEARCH for the line next to where it goes and repeat it in REPLACE",
            ));
        }
        self.doc = Doc::new(op.replace.clone().into_bytes());
        self.tracked = false;
        Ok(Done::applied("create", None, Vec::new()))
    }

    /// The text editor tool's `insert`: REPLACE's lines after file line `after`
    /// (0: at the top). Lines that already follow there as REPLACE are a replay,
    /// so a re-sent insertion never inserts twice.
    fn insert(&mut self, after: usize, op: &Operation) -> Result<Done, Failure> {
        if !self.exists {
            return Err(Failure::new(
                ErrorKind::NotFound,
                "`insert` needs an existing file, and this one does not exist",
                "create it with `create` (`file_text`) or an empty SEARCH",
            ));
        }
        let len = self.doc.len();
        if after > len {
            return Err(Failure::new(
                ErrorKind::NotFound,
                format!("`insert_line` is {after}, past the end of the file ({len} lines)"),
                format!("use a line number from 0 (the top) to {len} (after the last line)"),
            ));
        }
        let new: Vec<String> = text_lines(&op.replace)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let lines = [after + 1, after + new.len()];
        let there = after + new.len() <= len
            && new
                .iter()
                .enumerate()
                .all(|(k, l)| self.doc.line(after + k) == l.as_bytes());
        // Blank lines prove nothing: a wanted blank line next to one is inserted.
        if there && new.iter().any(|l| !l.trim().is_empty()) {
            return Ok(Done::replayed(
                lines,
                "the lines after `insert_line` already read as `new_str`",
            ));
        }
        if !self.utf8() {
            return Err(Failure::new(
                ErrorKind::NotText,
                "the file is not UTF-8 text; `insert` needs text",
                "send a SEARCH/REPLACE block with the neighbouring line byte for byte",
            ));
        }
        if len == 0 {
            self.doc = Doc::new(op.replace.clone().into_bytes());
            self.tracked = false;
        } else {
            let (at, kept) = match after {
                0 => (0, new.len()),
                n => (n - 1, 0),
            };
            let mut with = new;
            with.insert(
                kept,
                String::from_utf8_lossy(self.doc.line(at)).into_owned(),
            );
            lines::splice(&mut self.doc, at, 1, &with);
        }
        Ok(Done::applied("insert", Some(lines), Vec::new()))
    }

    fn edit(&mut self, op: &Operation) -> Result<Done, Failure> {
        if matches!(op.find, Find::Lines | Find::Text) {
            refuse_placeholders(op)?;
            refuse_diff_prefixes(op)?;
            refuse_numbered_replace(op)?;
            if !self.prose {
                refuse_stray_fence(op)?;
            }
            self.refuse_escaped_replace(op)?;
            if !self.markup {
                self.refuse_entity_replace(op)?;
            }
        }
        // `*** End of File`: of several matches, the one nearest the last line.
        let at_end;
        let op = match op.end_of_file && op.near.is_none() {
            true => {
                at_end = Operation {
                    near: Some(self.doc.len().max(1)),
                    ..op.clone()
                };
                &at_end
            }
            false => op,
        };
        let mut done = match &op.find {
            Find::Lines => {
                let scope = self.after_anchor(op);
                match self.edit_lines(op, scope.clone()) {
                    Err(f) if f.kind == ErrorKind::Ambiguous => match self.anchored(op) {
                        Some((scope, near)) => {
                            let op = Operation {
                                near: Some(near),
                                ..op.clone()
                            };
                            self.edit_lines(&op, scope)
                        }
                        None => Err(f),
                    },
                    Err(f) => Err(self.before_anchor(op, scope.start, f)),
                    done => done,
                }
            }
            Find::Text => self.edit_text(op),
            Find::Regex(re) => self.edit_pattern(op, re, "regex"),
            Find::IgnoreCase(re) => self.edit_pattern(op, re, "ignore_case"),
        }?;
        if op.search == op.replace && done.outcome == OpOutcome::Applied {
            done.outcome = OpOutcome::Unchanged;
            done.warnings
                .push("SEARCH and REPLACE are identical: nothing to change".into());
        }
        Ok(done)
    }

    /// The lines a hunk with an `@@ impl B {` line lies in: from the file's
    /// first line of that text on, as the patch format defines it, so a copy of
    /// the hunk's lines above it (in `impl A`) is never taken for it, and a
    /// hunk already applied below it reads as a replay. The whole file when
    /// there is no such line in it (the hunk is then placed by its lines alone).
    fn after_anchor(&self, op: &Operation) -> Range<usize> {
        self.anchor_line(op).unwrap_or(0)..self.doc.len()
    }

    /// The file's first line (0-based) of the text of a hunk's last `@@` line,
    /// after the lines of the `@@` lines before it.
    fn anchor_line(&self, op: &Operation) -> Option<usize> {
        let inner = op.anchors.last()?;
        self.line_of(inner, self.anchors_from(op))
    }

    /// The first line (0-based) at or after `from` that reads `text`, trimmed.
    fn line_of(&self, text: &str, from: usize) -> Option<usize> {
        let text = text.trim().as_bytes();
        (from..self.doc.len()).find(|&i| self.doc.line(i).trim_ascii() == text)
    }

    /// Where a hunk's last `@@` line is looked for: after the file's lines of
    /// the `@@` lines that enclose it (`class B:` for `def run(self):`), each
    /// found after the one before; one the file lacks is passed over.
    fn anchors_from(&self, op: &Operation) -> usize {
        let outer = &op.anchors[..op.anchors.len().saturating_sub(1)];
        outer
            .iter()
            .fold(0, |from, a| self.line_of(a, from).unwrap_or(from))
    }

    /// A `not_found` failure of a hunk whose lines are in the file only above
    /// its `@@` line (which starts at line index `from`), said so: "not in the
    /// file" would send the agent to fix lines that are right.
    fn before_anchor(&self, op: &Operation, from: usize, f: Failure) -> Failure {
        if f.kind != ErrorKind::NotFound || from == 0 {
            return f;
        }
        let search = text_lines(&op.search);
        let Some(found) = lines::find(&self.doc, &search, 0..from, || self.tiers()) else {
            return f;
        };
        let at: Vec<String> = found.starts.iter().map(|s| (s + 1).to_string()).collect();
        let anchor = op.anchors.last().map_or("", |a| a.trim());
        Failure {
            message: format!(
                "the hunk's lines are not in the file below its `@@ {anchor}` line (line {}), only above it, at line(s) {}",
                from + 1,
                at.join(", ")
            ),
            hint: Some(format!(
                "a hunk lies below its @@ line: if it is meant for the lines below it, see how they differ (closest match); if for line {}, make the @@ line name the block there, or leave it out",
                at[0]
            )),
            ..f
        }
    }

    /// Where a hunk with an `@@ def f():` line lies, when it matches several
    /// places: from the file's line of that text on, the match nearest it
    /// winning. When the file has that text on several lines, each leads to the
    /// first match at or after it, and the hunk is placed only when they all lead
    /// to the same one (a repeated method name whose other copies are followed by
    /// no match). `None` without such a line, when the file has none, or when its
    /// lines lead to different matches: then several matches still fail.
    fn anchored(&self, op: &Operation) -> Option<(Range<usize>, usize)> {
        let anchor = op.anchors.last()?.trim();
        let at: Vec<usize> = (self.anchors_from(op)..self.doc.len())
            .filter(|&i| self.doc.line(i).trim_ascii() == anchor.as_bytes())
            .collect();
        match at[..] {
            [] => None,
            [line] => Some((line..self.doc.len(), op.near.unwrap_or(line + 1))),
            _ => {
                // A line hint (`*** End of File`) says where among the matches;
                // an anchor repeated beside it is no sign of which one it meant.
                if op.near.is_some() {
                    return None;
                }
                let search = text_lines(&op.search);
                let found = lines::find(&self.doc, &search, 0..self.doc.len(), || self.tiers())?;
                let led: Vec<(usize, usize)> = at
                    .iter()
                    .filter_map(|&a| found.starts.iter().find(|&&s| s >= a).map(|&s| (a, s)))
                    .collect();
                let &(line, start) = led.last()?;
                led.iter()
                    .all(|&(_, s)| s == start)
                    .then_some((line..self.doc.len(), line + 1))
            }
        }
    }

    /// Lines `scope` (1-based, inclusive) as 0-based line indices.
    fn line_scope(&self, op: &Operation) -> Range<usize> {
        match &op.scope {
            Some(s) => (s.start() - 1).min(self.doc.len())..(*s.end()).min(self.doc.len()),
            None => 0..self.doc.len(),
        }
    }

    fn edit_lines(&mut self, op: &Operation, scope: Range<usize>) -> Result<Done, Failure> {
        let search = text_lines(&op.search);
        let replace = text_lines(&op.replace);
        let Some(found) = lines::find(&self.doc, &search, scope.clone(), || self.tiers()) else {
            if let Some(pieces) = placeholder::pieces(&search, &replace) {
                return self.edit_pieces(op, pieces, scope);
            }
            // A misplaced replay may still be a fragment edit made inside a line
            // (`pub mod ast;` made `pub mod ast; // tree`): the fragment's own
            // replay rule tells, and only then the misplaced failure stands.
            let replayed = self.replayed_lines(op, &search, &replace, scope.clone());
            if let Some(Ok(done)) = replayed {
                return Ok(done);
            }
            if let Some(fragment) = self.substring(op, scope.clone()) {
                return fragment;
            }
            if let Some(failed) = replayed {
                return failed;
            }
            return Err(self.not_found(&search, scope));
        };
        let ranges: Vec<[usize; 2]> = found
            .starts
            .iter()
            .map(|s| [s + 1, s + found.len()])
            .collect();
        let exact = found.tier() == Tier::Exact;
        let (chosen, mut warnings) = match choose(&ranges, op, exact, self.opts.ambiguous) {
            Ok(chosen) => chosen,
            // A tie a line hint cannot break, REPLACE standing at that line.
            Err(tied) => {
                let at: Vec<usize> = ranges.iter().map(|r| r[0]).collect();
                let placed = self.replaced_at_hint(op, (&search, &replace), &at, scope.clone());
                return Err(placed.unwrap_or(tied));
            }
        };
        past_end(op, self.doc.len(), &mut warnings);
        let chosen = non_overlapping(&chosen, &found.starts, found.len());
        let lines = [ranges[chosen[0]][0], ranges[chosen[chosen.len() - 1]][1]];
        let todo: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|&k| {
                op.search == op.replace
                    || !replay::reads_as_replace(&self.doc, &found, found.starts[k], &replace)
            })
            .collect();
        if todo.is_empty() {
            return Ok(Done::replayed(lines, INSERTED_BEFORE));
        }
        if let Some(f) = self.replaced_at_hint(op, (&search, &replace), &[lines[0]], scope.clone())
        {
            return Err(f);
        }
        if let [k] = todo[..] {
            let start = found.starts[k];
            if let Some(f) = self
                .repeats_beside(Edge::After, start + found.len(), &search, &replace)
                .or_else(|| self.repeats_beside(Edge::Before, start, &search, &replace))
            {
                return Err(f);
            }
        }
        if !exact
            && todo
                .iter()
                .all(|&k| found.leaves_as_is(&self.doc, found.starts[k], &replace))
        {
            let mut warnings = found.warnings(&self.doc, found.starts[todo[0]]);
            warnings.push(SET_ASIDE.into());
            return Ok(Done {
                outcome: OpOutcome::Unchanged,
                strategy: found.tier().name(),
                lines: Some(lines),
                warnings,
            });
        }
        if !exact && let Some(f) = self.replaced_exactly(&found, (&search, &replace), scope) {
            return Err(f);
        }
        if let Some(f) = self.indentation_guessed(&found, &todo, &replace) {
            return Err(f);
        }
        if todo.len() < chosen.len() {
            warnings.push(format!(
                "{} of the {} matches already read as REPLACE and were left as they are",
                chosen.len() - todo.len(),
                chosen.len()
            ));
        }
        if todo.len() > 1 {
            let at: Vec<usize> = todo.iter().map(|&k| ranges[k][0]).collect();
            warnings.push(format!(
                "{} occurrences replaced (lines {})",
                todo.len(),
                listed(&at)
            ));
        }
        if !exact {
            warnings.splice(0..0, found.warnings(&self.doc, found.starts[todo[0]]));
        } else if let Some(w) = self.mixed_indentation(&search, &replace) {
            warnings.push(w);
        }
        if op.search != op.replace {
            for &k in todo.iter().rev() {
                found.apply(&mut self.doc, found.starts[k], &replace);
            }
        }
        Ok(Done::applied(found.tier().name(), Some(lines), warnings))
    }

    /// A failure when SEARCH's matches (at 1-based lines `at`) lie away from
    /// the operation's line hint while REPLACE already stands nearer it: a hunk
    /// or a `:start_line:` block sent again after it applied, in a file with
    /// other copies of its lines. Taking one edits a place the agent never
    /// meant, and calling it a replay would be a guess too (SEARCH is in the
    /// file), so the agent is told both places.
    fn replaced_at_hint(
        &self,
        op: &Operation,
        (search, replace): (&[&str], &[&str]),
        at: &[usize],
        scope: Range<usize>,
    ) -> Option<Failure> {
        // A hunk's `@@` line says where it lies as a line number would.
        let hint = op
            .near
            .or_else(|| self.anchor_line(op).map(|a| a + 1))
            .filter(|_| !op.all && op.expected.is_none())?;
        let away = at.iter().map(|a| a.abs_diff(hint)).min()?;
        if away == 0 || !replay::adds_a_line(search, replace) {
            return None;
        }
        let placed = lines::find(&self.doc, replace, scope, || &[])?;
        let nearest = placed
            .starts
            .iter()
            .map(|s| s + 1)
            .min_by_key(|s| s.abs_diff(hint))?;
        if nearest.abs_diff(hint) >= away {
            return None;
        }
        let placing = "send it placed there (a line number, or an @@ line naming its block)";
        let (found, change) = match at {
            [one] => (
                format!("SEARCH is at line {one}"),
                format!("line {one} too, {placing}, or without a place"),
            ),
            _ => {
                let listed = at
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                (
                    format!("SEARCH occurs {} times (lines {listed})", at.len()),
                    format!("one of lines {listed}, {placing}"),
                )
            }
        };
        Some(Failure::new(
            ErrorKind::Ambiguous,
            format!(
                "{found}, away from line {hint} where the operation is placed (by its line number, or by its hunk's @@ line), and the file at line {nearest}, nearer it, already reads as REPLACE"
            ),
            format!(
                "if the edit was meant for line {nearest}, it is already made there: nothing is left to do; to change {change}"
            ),
        ))
    }

    /// A failure when a ragged match would have to guess where new REPLACE
    /// lines stand (`Found::guessed_indentation`): SEARCH lost the file's
    /// nesting, so REPLACE, written the same way, cannot say it either, and a
    /// guess may nest a branch into the block above it (Python then runs
    /// another program, and exits 0 doing it).
    fn indentation_guessed(
        &self,
        found: &lines::Found<'_>,
        todo: &[usize],
        replace: &[&str],
    ) -> Option<Failure> {
        let (k, line) = todo.iter().find_map(|&k| {
            let line = found.guessed_indentation(&self.doc, found.starts[k], replace)?;
            Some((k, line))
        })?;
        let at = found.starts[k] + 1;
        Some(Failure::new(
            ErrorKind::NotFound,
            format!(
                "SEARCH matches lines {at}-{} only with each line's indentation set aside: its lines came at one column where the file nests them, so where REPLACE line {line} goes, its indentation would be a guess",
                at + found.len() - 1
            ),
            "send SEARCH with the file's own indentation (copy the lines as the file has them), and REPLACE indented the same way",
        ))
    }

    /// A failure when SEARCH matches only with tolerance while REPLACE stands
    /// in the file exactly: an edit sent again after it applied, whose exact
    /// SEARCH is gone, would take another copy at another indentation (or
    /// SEARCH's lines inside the REPLACE just written) and apply twice.
    fn replaced_exactly(
        &self,
        found: &lines::Found<'_>,
        (search, replace): (&[&str], &[&str]),
        scope: Range<usize>,
    ) -> Option<Failure> {
        if !replay::adds_a_line(search, replace) {
            return None;
        }
        let placed = lines::find(&self.doc, replace, scope, || &[])?;
        let at = found.starts[0] + 1;
        let there = placed.starts[0] + 1;
        Some(Failure::new(
            ErrorKind::Ambiguous,
            format!(
                "SEARCH matches only with tolerance ({}) at line {at}, while REPLACE stands in the file exactly at line {there}: the edit looks made there already",
                found.tier().name()
            ),
            format!(
                "if it was meant for line {there}, nothing is left to do; to change line {at}, send SEARCH exactly as the file has it there"
            ),
        ))
    }

    /// Whether `line` says something (more than punctuation) and stands once
    /// in the file: repeated lines (`0,` rows of a table, `}`) are no sign of
    /// a SEARCH that stopped short, as a table grown by a row repeats them.
    fn distinct(&self, line: &str) -> bool {
        let line = line.trim_end().as_bytes();
        line.iter().any(u8::is_ascii_alphanumeric)
            && (0..self.doc.len())
                .filter(|&i| self.doc.line(i).trim_ascii_end() == line)
                .nth(1)
                .is_none()
    }

    /// A failure when REPLACE ends with the lines that follow SEARCH's match
    /// (`Edge::After`, `at` the line index after it), or starts with those
    /// before it (`Edge::Before`, `at` its first line index): SEARCH stopped
    /// short of (or started late on) what the agent rewrote, and applied, those
    /// lines would stand in the file twice (`b(); c(); }` after the new body,
    /// then the old ones again). Two lines at least, one of them standing once
    /// in the file (`distinct`), or closing or opening brackets that would no
    /// longer pair (`Pairs`); and not lines SEARCH has at that end too
    /// (then REPLACE keeps them, and the file merely repeats them).
    fn repeats_beside(
        &self,
        edge: Edge,
        at: usize,
        search: &[&str],
        replace: &[&str],
    ) -> Option<Failure> {
        /// REPLACE's lines at that end that are looked at: the check stays
        /// linear in the file.
        const REACH: usize = 200;
        let n = replace.len();
        let same = |r: &str, i: usize| {
            i < self.doc.len() && r.trim_end().as_bytes() == self.doc.line(i).trim_ascii_end()
        };
        let equal = |k: usize| match edge {
            Edge::After => replace[n - k..]
                .iter()
                .enumerate()
                .all(|(i, r)| same(r, at + i)),
            Edge::Before => {
                k <= at
                    && replace[..k]
                        .iter()
                        .enumerate()
                        .all(|(i, r)| same(r, at - k + i))
            }
        };
        let run = |k: usize| match edge {
            Edge::After => &replace[n - k..],
            Edge::Before => &replace[..k],
        };
        let kept = |k: usize| match edge {
            Edge::After => search.ends_with(run(k)),
            Edge::Before => search.starts_with(run(k)),
        };
        let mut repeated = (1..=REACH.min(n)).rev().filter(|&k| equal(k) && !kept(k));
        let longest = repeated.next()?;
        // Each look for a distinct line reads the whole file: the longest run only.
        let told = longest >= 2
            && run(longest)
                .iter()
                .take(DISTINCT_LOOK)
                .any(|l| self.distinct(l));
        let k = match told {
            true => longest,
            false => {
                let pairs = Pairs::new(&self.doc, search, replace);
                std::iter::once(longest)
                    .chain(repeated)
                    .find(|&k| pairs.unpaired_by(run(k)))?
            }
        };
        let (message, hint) = match edge {
            Edge::After => (
                format!(
                    "REPLACE ends with the {k} line(s) that follow SEARCH in the file ({})",
                    line_span(at + 1, at + k)
                ),
                format!(
                    "SEARCH seems to stop early: extend it through line {}, so that REPLACE replaces those lines, or leave them out of REPLACE",
                    at + k
                ),
            ),
            Edge::Before => (
                format!(
                    "REPLACE starts with the {k} line(s) that precede SEARCH in the file ({})",
                    line_span(at - k + 1, at)
                ),
                format!(
                    "SEARCH seems to start late: extend it up to line {}, so that REPLACE replaces those lines, or leave them out of REPLACE",
                    at - k + 1
                ),
            ),
        };
        let unpaired = if told {
            ""
        } else {
            ", and the file's brackets would no longer pair"
        };
        Some(Failure::new(
            ErrorKind::Duplicates,
            format!("{message}: applied, they would stand in the file twice{unpaired}"),
            hint,
        ))
    }

    /// A warning when REPLACE adds tab-indented lines to a file indented only
    /// with spaces, or space-indented ones to a file indented only with tabs:
    /// an exact match writes REPLACE as sent, and such a mix breaks Python (and
    /// a Makefile's recipes) and looks wrong elsewhere, so the agent must learn of it.
    fn mixed_indentation(&self, search: &[&str], replace: &[&str]) -> Option<String> {
        let new_lines = |indented: &dyn Fn(&str) -> bool| -> Vec<usize> {
            (0..replace.len())
                .filter(|&i| indented(replace[i]) && !search.contains(&replace[i]))
                .map(|i| i + 1)
                .collect()
        };
        let tabbed = new_lines(&|l| l.starts_with('\t'));
        let (tabs, spaces) = self.indented_with();
        if !tabbed.is_empty() && spaces && !tabs {
            return Some(format!(
                "REPLACE lines {} are indented with tabs, but the file is indented only with spaces: they were written as sent, a mix the file did not have (Python refuses it); send them with spaces unless the tabs are meant",
                listed(&tabbed)
            ));
        }
        // Two spaces at least: one is the ` *` of a block comment's lines.
        let spaced = new_lines(&|l| l.starts_with("  "));
        if !spaced.is_empty() && tabs && !spaces {
            return Some(format!(
                "REPLACE lines {} are indented with spaces, but the file is indented only with tabs: they were written as sent, a mix the file did not have (make refuses a recipe so indented); send them with tabs unless the spaces are meant",
                listed(&spaced)
            ));
        }
        None
    }

    /// Whether lines of the file as it was before the transaction start with a
    /// tab, and with a space: read once, as every operation that adds indented
    /// lines asks (`mixed_indentation`).
    fn indented_with(&self) -> (bool, bool) {
        *self.indents.get_or_init(|| {
            let starts = |b: u8| {
                self.body.first() == Some(&b)
                    || memchr::memmem::find(self.body, &[b'\n', b]).is_some()
            };
            (starts(b'\t'), starts(b' '))
        })
    }

    /// Aider's elided form: each piece between the shared placeholder lines is
    /// matched on its own, uniquely and after the one before, then all are replaced.
    fn edit_pieces(
        &mut self,
        op: &Operation,
        pieces: Vec<(Vec<&str>, Vec<&str>)>,
        scope: Range<usize>,
    ) -> Result<Done, Failure> {
        let mut at = scope.start;
        let mut plan = Vec::with_capacity(pieces.len());
        for (k, (search, replace)) in pieces.iter().enumerate() {
            let piece_failure = |why: String| {
                let mut f = self.not_found(search, scope.clone());
                f.message = format!(
                    "piece {} of the elided SEARCH (between `...` lines) {why}",
                    k + 1
                );
                f
            };
            let found = lines::find(&self.doc, search, scope.clone(), || self.tiers())
                .ok_or_else(|| piece_failure("is not in the file".into()))?;
            // The piece itself is in the file: its own diagnosis would find it
            // alike and blame differences that are not there.
            let piece = |kind, why: String, hint: String| {
                let message = format!(
                    "piece {} of the elided SEARCH (between `...` lines) {why}",
                    k + 1
                );
                Failure::new(kind, message, hint)
            };
            let ranges = |starts: &[usize]| {
                let r: Vec<String> = starts
                    .iter()
                    .map(|s| format!("{}-{}", s + 1, s + found.len()))
                    .collect();
                r.join(", ")
            };
            match found.starts[..] {
                [start] if start >= at => {
                    at = start + found.len();
                    plan.push((found, start, replace));
                }
                [start] => {
                    return Err(piece(
                        ErrorKind::NotFound,
                        format!(
                            "is at lines {}, before the piece ahead of it ends (line {at})",
                            ranges(&[start])
                        ),
                        "the pieces must lie in the file in the order SEARCH gives them: check that SEARCH was copied from this file, or send each part as its own block".into(),
                    ));
                }
                _ => {
                    return Err(piece(
                        ErrorKind::Ambiguous,
                        format!(
                            "occurs {} times (lines {}); each piece must be unique",
                            found.starts.len(),
                            ranges(&found.starts)
                        ),
                        format!(
                            "make piece {} unique: give it more of the file's lines next to its `...` line (in SEARCH and REPLACE alike), or write the lines out instead of eliding them",
                            k + 1
                        ),
                    ));
                }
            }
        }
        let (first, last) = match (plan.first(), plan.last()) {
            (Some(f), Some(l)) => (f.1 + 1, l.1 + l.0.len()),
            _ => return Err(self.not_found(&text_lines(&op.search), scope)),
        };
        let mut warnings = vec![format!(
            "SEARCH and REPLACE elide the same places with placeholder lines; {} pieces matched each on its own, in order",
            plan.len()
        )];
        for (found, start, _) in plan.iter().filter(|p| p.0.tier() != Tier::Exact) {
            warnings.extend(found.warnings(&self.doc, *start));
        }
        for (found, start, replace) in plan.iter().rev() {
            found.apply(&mut self.doc, *start, replace);
        }
        Ok(Done::applied("elided", Some([first, last]), warnings))
    }

    /// The last tier: SEARCH as a fragment of a line (or of several), replaced as
    /// text where it occurs exactly once and cuts no word in two.
    fn substring(&mut self, op: &Operation, scope: Range<usize>) -> Option<Result<Done, Failure>> {
        if !matches!(op.find, Find::Lines) || !self.opts.tolerant || !self.utf8() {
            return None;
        }
        let needle = op.search.strip_suffix('\n').unwrap_or(&op.search);
        let with = op.replace.strip_suffix('\n').unwrap_or(&op.replace);
        if needle.trim().is_empty() {
            return None;
        }
        let crlf = self.doc.dominant_eol() == Eol::CrLf;
        let (needle, with) = match crlf {
            true => (
                text::to_crlf(needle).unwrap_or_else(|| needle.to_owned()),
                text::to_crlf(with).unwrap_or_else(|| with.to_owned()),
            ),
            false => (needle.to_owned(), with.to_owned()),
        };
        let bytes = self.doc.to_bytes();
        let span = self.doc.byte_offset(scope.start)..self.doc.byte_offset(scope.end);
        let found = text::literal(
            &bytes,
            needle.as_bytes(),
            with.as_bytes(),
            span,
            self.budget,
        );
        let found = match found {
            Ok(found) => found,
            Err(spent) => return Some(Err(over_budget_failure(spent, None))),
        };
        let hits: Vec<Hit> = found
            .into_iter()
            .filter(|h| !text::cuts_a_word(&bytes, &h.span))
            .collect();
        let [hit] = &hits[..] else {
            return None;
        };
        let [lines] = text::line_ranges(&bytes, &hits)[..] else {
            return None;
        };
        // The file around the fragment already reads as REPLACE: sent before.
        // Checked first, as such a REPLACE repeats the text beside it.
        if replay::text_reads_as_replace(&bytes, hit.span.start, needle.as_bytes(), with.as_bytes())
        {
            return Some(Ok(Done::replayed(lines, INSERTED_BEFORE)));
        }
        if text::repeats_its_surroundings(&bytes, &hit.span, with.as_bytes())
            || text::completes_a_cut_line(&bytes, &hit.span, needle.as_bytes(), with.as_bytes())
            || text::starts_a_cut_line(&bytes, &hit.span, needle.as_bytes(), with.as_bytes())
        {
            return None;
        }
        let new = text::splice(&bytes, &[hit]);
        self.doc = Doc::new(Cow::Owned(new));
        self.tracked = false;
        let warning = format!(
            "SEARCH is not whole lines of the file but occurs once as text in line(s) {}-{}: replaced as text",
            lines[0], lines[1]
        );
        Some(Ok(Done::applied("substring", Some(lines), vec![warning])))
    }

    /// SEARCH is missing: a replay (rule (a) of the `replay` module, an addition
    /// or a deletion between kept context) when REPLACE is there once, where
    /// SEARCH's closest region lies; a `not_found` at that
    /// region when a copy of REPLACE lies elsewhere; `None` when REPLACE is absent.
    fn replayed_lines(
        &self,
        op: &Operation,
        search: &[&str],
        replace: &[&str],
        scope: Range<usize>,
    ) -> Option<Result<Done, Failure>> {
        let proves = replay::adds_a_line(search, replace)
            || replay::deletes_between_context(search, replace);
        if replace.is_empty() || !proves {
            return None;
        }
        let found = lines::find(&self.doc, replace, scope.clone(), || self.tiers())?;
        let ranges: Vec<[usize; 2]> = found
            .starts
            .iter()
            .map(|s| [s + 1, s + found.len()])
            .collect();
        if let [one] = ranges[..]
            && let Some(d) = diagnose::replay_misplaced(
                &self.doc,
                search,
                (scope.clone(), true),
                (one[0] - 1..one[1], &[]),
            )
        {
            return Some(Err(Failure {
                kind: ErrorKind::NotFound,
                message: "SEARCH text not found in the file".into(),
                hint: Some(d.hint),
                closest: d.closest,
            }));
        }
        replay(&ranges, op).map(Ok)
    }

    fn not_found(&self, search: &[&str], scope: Range<usize>) -> Failure {
        if !self.utf8() {
            let (why, hint) = diagnose::not_utf8(self.body, search);
            return Failure::new(
                ErrorKind::NotText,
                format!(
                    "{why}; only byte-exact edits apply to such a file, and SEARCH is not in it byte for byte"
                ),
                hint,
            );
        }
        if !self.diagnosing || !self.budget.diagnoses(self.body.len()) {
            return Failure::new(
                ErrorKind::NotFound,
                "SEARCH text not found in the file (not diagnosed: see the notes)",
                "read the file again and copy the lines to change exactly",
            );
        }
        let d = diagnose::not_found(&self.doc, search, scope);
        let hint = match self.escaped_twice(search) {
            true => format!(
                "SEARCH holds `\\n` as two characters (a backslash and `n`) where the file has line breaks: its newlines were escaped twice; send them once (`\\n` inside a JSON string). {}",
                d.hint
            ),
            false => d.hint,
        };
        Failure {
            kind: ErrorKind::NotFound,
            message: "SEARCH text not found in the file".into(),
            hint: Some(hint),
            closest: d.closest,
        }
    }

    /// Refuses a REPLACE whose line breaks were escaped twice (`a = 2\\n    return
    /// a`) while SEARCH's were not: written as sent, the new code would be one
    /// line with backslashes in it. Only a `\n` followed by indentation counts,
    /// in a file that has no such text: `"\n".join(...)` stays code.
    fn refuse_escaped_replace(&self, op: &Operation) -> Result<(), Failure> {
        let escaped = |t: &[u8]| {
            t.windows(3)
                .any(|w| w[..2] == *b"\\n" && matches!(w[2], b' ' | b'\t'))
        };
        let search = op.search.trim_end_matches('\n');
        if !escaped(op.replace.as_bytes())
            || search.contains("\\n")
            || !search.contains('\n')
            || escaped(self.body)
        {
            return Ok(());
        }
        Err(Failure::new(
            ErrorKind::Malformed,
            "REPLACE holds `\\n` as two characters (a backslash and `n`) before indentation, where SEARCH has line breaks: its newlines were escaped twice, and written as sent the new lines would be one",
            "send REPLACE's line breaks once, as SEARCH's (`\\n` inside a JSON string, real line breaks in a block)",
        ))
    }

    /// Refuses a REPLACE escaped for HTML on its way (`if a &lt;= b`) while
    /// SEARCH was not (`if a < b`): written as sent, the entities would stand in
    /// the code. Only where the file and SEARCH hold no entity, SEARCH holds a
    /// character one of REPLACE's entities stands for, and REPLACE holds none of
    /// those characters as it is: code that escapes HTML (`replace("<", "&lt;")`)
    /// has both, and markup files (see `markup`) are not checked.
    fn refuse_entity_replace(&self, op: &Operation) -> Result<(), Failure> {
        let has_entity = |t: &[u8]| {
            diagnose::ENTITIES
                .iter()
                .any(|(e, _)| memchr::memmem::find(t, e.as_bytes()).is_some())
        };
        let found: Vec<(&str, &str)> = diagnose::ENTITIES
            .iter()
            .copied()
            .filter(|(e, _)| op.replace.contains(e))
            .collect();
        let Some(&(entity, ch)) = found.first() else {
            return Ok(());
        };
        let bare = found
            .iter()
            .fold(op.replace.clone(), |t, (e, _)| t.replace(e, ""));
        if found.iter().any(|(_, c)| bare.contains(c))
            || !found.iter().any(|(_, c)| op.search.contains(c))
            || has_entity(op.search.as_bytes())
            || *self.entities.get_or_init(|| has_entity(self.body))
        {
            return Ok(());
        }
        Err(Failure::new(
            ErrorKind::Malformed,
            format!(
                "REPLACE holds the HTML entity `{entity}` where SEARCH has `{ch}` as it is, and the file holds no entity: REPLACE was escaped for HTML on its way, and written as sent the entity would stand in the code"
            ),
            "send `<`, `>`, `&` and quotes in REPLACE as they are, as in SEARCH (if the file is to hold the entity itself, send the edit as JSON with \"regex\": true)",
        ))
    }

    /// Whether SEARCH is one line holding a literal `\n` the file never has: JSON
    /// whose newlines were escaped twice.
    fn escaped_twice(&self, search: &[&str]) -> bool {
        let [line] = search else {
            return false;
        };
        line.contains("\\n") && !self.body.windows(2).any(|w| w == b"\\n")
    }

    fn byte_scope(&self, op: &Operation) -> Range<usize> {
        let lines = self.line_scope(op);
        self.doc.byte_offset(lines.start)..self.doc.byte_offset(lines.end)
    }

    fn edit_text(&mut self, op: &Operation) -> Result<Done, Failure> {
        let bytes = self.doc.to_bytes();
        let scope = self.byte_scope(op);
        let crlf = self.doc.dominant_eol() == Eol::CrLf;
        // In a CRLF file, new lines in an LF-only REPLACE get CRLF too; an agent
        // that writes `\r` itself gets exactly what it wrote.
        let verbatim = !crlf || op.search.contains('\r') || op.replace.contains('\r');
        let replace = match verbatim {
            true => op.replace.clone(),
            false => text::to_crlf(&op.replace).unwrap_or_else(|| op.replace.clone()),
        };
        // An LF-only search in a CRLF file means CRLF: try that form first.
        let search = match verbatim {
            true => None,
            false => text::to_crlf(&op.search),
        };
        let mut hits = Vec::new();
        for s in search.iter().chain(std::iter::once(&op.search)) {
            hits = text::literal(
                &bytes,
                s.as_bytes(),
                replace.as_bytes(),
                scope.clone(),
                self.budget,
            )
            .map_err(|spent| over_budget_failure(spent, None))?;
            if !hits.is_empty() {
                break;
            }
        }
        if !hits.is_empty() {
            let needle = hits[0].span.len();
            let already = hits
                .iter()
                .map(|h| {
                    op.search != op.replace
                        && replay::text_reads_as_replace(
                            &bytes,
                            h.span.start,
                            &bytes[h.span.start..h.span.start + needle],
                            replace.as_bytes(),
                        )
                })
                .collect();
            return self.replace_hits(op, &bytes, hits, already, "exact");
        }
        if replay::adds_text(&op.search, &op.replace) {
            let again = text::literal(&bytes, replace.as_bytes(), b"", scope, self.budget)
                .map_err(|spent| over_budget_failure(spent, None))?;
            let ranges = text::line_ranges(&bytes, &again);
            let search = text_lines(&op.search);
            let copies: Vec<Range<usize>> = ranges.iter().map(|r| r[0] - 1..r[1]).collect();
            let elsewhere = |r: &[usize; 2]| {
                let scope = (self.line_scope(op), false);
                let at = (r[0] - 1..r[1], &copies[..]);
                diagnose::replay_misplaced(&self.doc, &search, scope, at).is_some()
            };
            let near = |h: &Hit| {
                let (line, at) = text::lines_around(&bytes, &h.span);
                replay::text_near_search(line, op.search.as_bytes(), at)
            };
            let placed = ranges.iter().all(|r| !elsewhere(r)) && again.iter().all(near);
            if let Some(done) = replay(&ranges, op).filter(|_| placed) {
                return Ok(done);
            }
        }
        self.edit_lines(op, self.line_scope(op))
    }

    fn edit_pattern(
        &mut self,
        op: &Operation,
        re: &Regex,
        strategy: &'static str,
    ) -> Result<Done, Failure> {
        if !self.utf8() {
            return Err(Failure::new(
                ErrorKind::NotText,
                "the file is not UTF-8 text; regex and ignore_case edits need text",
                "use a plain search that matches the file byte for byte",
            ));
        }
        let bytes = self.doc.to_bytes();
        let hits = text::pattern(
            &bytes,
            re,
            op.replace.as_bytes(),
            self.byte_scope(op),
            self.budget,
        )
        .map_err(|spent| over_budget_failure(spent, None))?;
        // A match whose replacement holds it and already stands around it is an
        // insertion made before (`return 1;` made `return 1; // one`): rule (b),
        // so a pattern sent again never inserts twice.
        let already = hits
            .iter()
            .map(|h| {
                replay::text_reads_as_replace(&bytes, h.span.start, &bytes[h.span.clone()], &h.with)
            })
            .collect();
        if hits.is_empty() {
            return Err(Failure::new(
                ErrorKind::NotFound,
                format!("`{}` ({strategy}) matches nothing in the file", op.search),
                "check the pattern against the file's current content; `(?m)` is on, so ^ and $ match at line ends",
            ));
        }
        self.replace_hits(op, &bytes, hits, already, strategy)
    }

    /// Replaces the chosen hits, except those `already` made (rule (b) of replays).
    fn replace_hits(
        &mut self,
        op: &Operation,
        bytes: &[u8],
        hits: Vec<Hit>,
        already: Vec<bool>,
        strategy: &'static str,
    ) -> Result<Done, Failure> {
        let ranges = text::line_ranges(bytes, &hits);
        let (chosen, mut warnings) = choose(&ranges, op, true, self.opts.ambiguous)?;
        past_end(op, self.doc.len(), &mut warnings);
        let lines = [ranges[chosen[0]][0], ranges[chosen[chosen.len() - 1]][1]];
        let chosen_count = chosen.len();
        let fresh: Vec<usize> = chosen.into_iter().filter(|&k| !already[k]).collect();
        let picked: Vec<&Hit> = fresh.iter().map(|&k| &hits[k]).collect();
        if picked.is_empty() {
            return Ok(Done::replayed(lines, INSERTED_BEFORE));
        }
        if fresh.len() < chosen_count {
            warnings.push(format!(
                "{} of the {chosen_count} matches already read as REPLACE and were left as they are",
                chosen_count - fresh.len()
            ));
        }
        if fresh.len() > 1 {
            let at: Vec<usize> = fresh.iter().map(|&k| ranges[k][0]).collect();
            warnings.push(format!(
                "{} occurrences replaced (lines {})",
                fresh.len(),
                listed(&at)
            ));
        }
        let new = text::splice(bytes, &picked);
        if new != bytes {
            self.doc = Doc::new(Cow::Owned(new));
            self.tracked = false;
        }
        Ok(Done::applied(strategy, Some(lines), warnings))
    }
}

/// Whether two texts are the same but for their line endings and a final newline.
fn same_text(a: &[u8], b: &[u8]) -> bool {
    fn lines(t: &[u8]) -> impl Iterator<Item = &[u8]> {
        let t = t.strip_suffix(b"\n").unwrap_or(t);
        t.split(|&c| c == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
    }
    lines(a).eq(lines(b))
}

/// Line numbers for a report: the first few, then how many more.
fn listed(lines: &[usize]) -> String {
    /// Numbers named before the rest are counted.
    const SHOWN: usize = 20;
    let mut named: Vec<String> = lines.iter().take(SHOWN).map(usize::to_string).collect();
    if lines.len() > SHOWN {
        named.push(format!("and {} more", lines.len() - SHOWN));
    }
    named.join(", ")
}

/// A no-op success when REPLACE is found where SEARCH is not, once (or at all, with `all`).
fn replay(ranges: &[[usize; 2]], op: &Operation) -> Option<Done> {
    let ok = ranges.len() == 1 || (op.all && !ranges.is_empty());
    ok.then(|| {
        Done::replayed(
            [ranges[0][0], ranges[ranges.len() - 1][1]],
            "SEARCH is not in the file but REPLACE is, where SEARCH was",
        )
    })
}

/// Refuses a REPLACE whose placeholder line stands for SEARCH lines it would
/// delete, or for code beyond SEARCH that new lines were meant to pass.
fn refuse_placeholders(op: &Operation) -> Result<(), Failure> {
    let search = text_lines(&op.search);
    let replace = text_lines(&op.replace);
    let Some(loss) = placeholder::loss(&search, &replace) else {
        return match placeholder::misplaced(&search, &replace) {
            Some(m) => Err(misplaced(&replace, &m)),
            None => Ok(()),
        };
    };
    let gone = &search[loss.deleted.clone()];
    let quote = |l: &str| format!("`{}`", l.trim());
    let lines = match gone {
        [one] => format!("SEARCH line {} ({}) is", loss.deleted.start + 1, quote(one)),
        [first, .., last] => format!(
            "SEARCH lines {}-{} ({} … {}) are",
            loss.deleted.start + 1,
            loss.deleted.end,
            quote(first),
            quote(last)
        ),
        [] => "SEARCH lines are".to_owned(),
    };
    Err(Failure::new(
        ErrorKind::Placeholder,
        format!(
            "REPLACE line {} {} stands for code that is not repeated: applied, it would be written into the file where {lines}, and the code it stands for would be deleted",
            loss.line + 1,
            quote(replace[loss.line])
        ),
        "write out in REPLACE every line it keeps, or leave the unchanged lines out of both SEARCH and REPLACE; to elide, put the same `...` line in SEARCH and REPLACE at the same place",
    ))
}

/// The failure for a placeholder that would misplace the new lines beyond it.
fn misplaced(replace: &[&str], m: &placeholder::Misplaced) -> Failure {
    let (lines, side, near) = match m.after {
        true => ("after", "right after SEARCH's last line", "before"),
        false => ("before", "right before SEARCH's first line", "after"),
    };
    Failure::new(
        ErrorKind::Placeholder,
        format!(
            "REPLACE line {} `{}` stands for code that SEARCH does not hold: applied, it would be written into the file, and the REPLACE lines {lines} it would land {side}, {near} the code it stands for",
            m.line + 1,
            replace[m.line].trim()
        ),
        "include the code the placeholder stands for in both SEARCH and REPLACE, or drop the placeholder and anchor SEARCH on the lines around the place where the new code goes",
    )
}

/// A REPLACE line still carrying a diff's `+`: refused, since written as sent it
/// would put the `+` into the code.
fn refuse_diff_prefixes(op: &Operation) -> Result<(), Failure> {
    let replace = text_lines(&op.replace);
    let Some(line) = placeholder::diff_prefixed(&text_lines(&op.search), &replace) else {
        return Ok(());
    };
    Err(Failure::new(
        ErrorKind::DiffPrefix,
        format!(
            "REPLACE line {} (`{}`) starts with a diff's `+` that would be written into the file",
            line + 1,
            replace[line].trim_end()
        ),
        "a SEARCH/REPLACE block holds the lines as they are, without `+`/`-` prefixes: drop the `+` (or send the change as a unified diff)",
    ))
}

/// A REPLACE copied from a reader's numbered view (`cat -n`, `12: `, `12 | `)
/// under a SEARCH copied without numbers: every REPLACE line (two or more)
/// carries a consecutive number and at least one of them, unnumbered, is a line of SEARCH.
/// Written as sent, the numbers would go into the file. A file whose lines do
/// start with numbers shows them in SEARCH, and then nothing is refused.
fn refuse_numbered_replace(op: &Operation) -> Result<(), Failure> {
    let search = text_lines(&op.search);
    let replace = text_lines(&op.replace);
    if search
        .iter()
        .any(|l| tolerant::strip_numbers(&[l]).is_some())
    {
        return Ok(());
    }
    // One line proves nothing: `8080: port` may well be what a YAML edit means.
    let Some((stripped, numbering)) =
        tolerant::strip_numbers(&replace).filter(|_| replace.len() > 1)
    else {
        return Ok(());
    };
    let first = numbering.first;
    let copied = stripped
        .iter()
        .any(|l| !l.trim().is_empty() && search.iter().any(|s| s.trim_end() == l.trim_end()));
    if !copied {
        return Ok(());
    }
    Err(Failure::new(
        ErrorKind::NumberPrefix,
        format!(
            "every REPLACE line starts with a line number ({first}-{}), as a file viewer shows them, while SEARCH has none: written as sent, the numbers would go into the file",
            first + replace.len() - 1
        ),
        "copy REPLACE without the line numbers (the prefix such as `12\t`, `12: ` or `12 | ` is not part of the line)",
    ))
}

/// A Markdown fence line left inside REPLACE by the fences around a block
/// (its closing fence before `>>>>>>> REPLACE`, its opening one after
/// `=======`): refused, since written as sent it would go into the file. A
/// Markdown edit's own fences pair up in REPLACE or are SEARCH's, and pass;
/// a prose file's edits are not checked at all (see `prose`).
fn refuse_stray_fence(op: &Operation) -> Result<(), Failure> {
    let replace = text_lines(&op.replace);
    let Some(line) = fence::stray(&text_lines(&op.search), &replace) else {
        return Ok(());
    };
    Err(Failure::new(
        ErrorKind::Malformed,
        format!(
            "REPLACE line {} is a Markdown fence line ({}) that SEARCH lacks and no other fence line of REPLACE pairs with: it belongs to the fences around the block, and written as sent it would go into the file",
            line + 1,
            replace[line].trim()
        ),
        "put the fence lines outside the block, before `<<<<<<< SEARCH` and after `>>>>>>> REPLACE`; to add a fenced code block to the file, give REPLACE both its opening and its closing fence line (to close a block the file left open, take its opening line into SEARCH and REPLACE)",
    ))
}

/// Line ranges as a reader writes them: `3-5, 9, 12-14`.
fn list_ranges(ranges: &[[usize; 2]]) -> String {
    ranges
        .iter()
        .map(|[a, b]| match a == b {
            true => a.to_string(),
            false => format!("{a}-{b}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How to pick one of several matches, in every form the payload may take.
const AMBIGUOUS_HINT: &str = "pick one: put `:start_line:N` and a `-------` line at the top of SEARCH to take the match nearest line N, or add surrounding lines to SEARCH until it is unique; in JSON, give `start_line`/`end_line`, or `all: true` (or `expected_replacements`) to replace every one";

/// Says where the line numbers of `read`, as the agent counted them in the
/// file before the transaction, lie once the operations before it ran (`now`).
fn moved_note(read: &Operation, now: &Operation) -> Option<String> {
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

/// Says so when a `:start_line:` hint past the end of the file picked a match:
/// the nearest match is then simply the last, which a stale or invented line
/// number makes a guess the agent should know about.
fn past_end(op: &Operation, lines: usize, warnings: &mut [String]) {
    let Some(near) = op.near.filter(|&n| n > lines) else {
        return;
    };
    if let Some(w) = warnings
        .iter_mut()
        .find(|w| w.contains(&format!("nearest line {near}")))
    {
        w.push_str(&format!(
            ": line {near} is past the end of the file ({lines} lines), so the last match was taken; check the line numbers you read"
        ));
    }
}

/// Which occurrences (indices into `ranges`, the lines of each) to replace.
fn choose(
    ranges: &[[usize; 2]],
    op: &Operation,
    exact: bool,
    mode: Ambiguity,
) -> Result<(Vec<usize>, Vec<String>), Failure> {
    let n = ranges.len();
    let list = || list_ranges(ranges);
    if let Some(want) = op.expected {
        if want != n {
            return Err(Failure::new(
                ErrorKind::CountMismatch,
                format!(
                    "expected {want} occurrence(s), found {n} (line(s) {})",
                    list()
                ),
                "set expected_replacements to the real count, or make SEARCH match exactly the places to change",
            ));
        }
        return Ok(((0..n).collect(), Vec::new()));
    }
    if op.all || n == 1 {
        return Ok(((0..n).collect(), Vec::new()));
    }
    if let Some(near) = op.near {
        let distance = |k: usize| ranges[k][0].abs_diff(near);
        let best = (0..n).min_by_key(|&k| distance(k)).unwrap_or(0);
        let tied = (0..n).filter(|&k| distance(k) == distance(best)).count();
        // A tolerant match is never picked by position alone: only the hint,
        // nearer to one match than to any other, may pick it.
        if !exact && tied == 1 {
            let w = format!(
                "SEARCH matches {n} places only when differences are tolerated (lines {}); the one nearest line {near} was replaced",
                list()
            );
            return Ok((vec![best], vec![w]));
        }
        if exact && (tied == 1 || mode == Ambiguity::First) {
            let which = if tied == 1 {
                "the one nearest"
            } else {
                "the first of those nearest"
            };
            let w = format!(
                "SEARCH occurs {n} times (lines {}); {which} line {near} was replaced",
                list()
            );
            return Ok((vec![best], vec![w]));
        }
    }
    if !exact {
        return Err(Failure::new(
            ErrorKind::Ambiguous,
            format!(
                "SEARCH matches {n} places only when differences are tolerated (lines {}), so none was chosen",
                list()
            ),
            "copy SEARCH from the file exactly, with enough surrounding lines to make it unique, or put `:start_line:N` at the top of SEARCH to take the match nearest line N",
        ));
    }
    if mode == Ambiguity::Error {
        return Err(Failure::new(
            ErrorKind::Ambiguous,
            format!(
                "SEARCH occurs {n} times (lines {}), so none was changed",
                list()
            ),
            AMBIGUOUS_HINT,
        ));
    }
    let w = format!(
        "SEARCH occurs {n} times (lines {}); the first was replaced",
        list()
    );
    Ok((vec![0], vec![w]))
}

/// `chosen` without matches that overlap an earlier chosen one.
fn non_overlapping(chosen: &[usize], starts: &[usize], len: usize) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::with_capacity(chosen.len());
    for &k in chosen {
        if out.last().is_none_or(|&p| starts[p] + len <= starts[k]) {
            out.push(k);
        }
    }
    out
}

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

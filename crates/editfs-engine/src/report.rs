//! The engine's outcome on one file, for people (`Display`) and programs (`serde`).
//!
//! The engine fills in what it knows; the transaction that commits it reports
//! it in a report of its own, with its id, its time and where the pre-image
//! went, rendered by the same `render` (see `Stamp`).

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// An operation did not apply; nothing was written.
    Failed,
    /// The payload was unusable before any operation ran; nothing was written.
    Rejected,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpOutcome {
    Applied,
    /// SEARCH was missing but REPLACE was already there: a replayed edit.
    AlreadyApplied,
    /// SEARCH and REPLACE are the same text.
    Unchanged,
    /// Would have applied, but another operation failed, so nothing was written.
    Matched,
    Failed,
}

/// The report of one operation; `K` is the kind of its error (see `ErrorReport`).
#[derive(Clone, Debug, Serialize)]
pub struct OpReport<K = ErrorKind> {
    pub index: usize,
    pub outcome: OpOutcome,
    pub strategy: Option<&'static str>,
    /// First and last line (1-based) matched, in the file as it was before this operation.
    pub lines: Option<[usize; 2]>,
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReport<K>>,
}

impl<K> OpReport<K> {
    /// The same report, its error's kind as a layer above names it.
    pub fn with_kinds<L: From<K>>(self) -> OpReport<L> {
        OpReport {
            index: self.index,
            outcome: self.outcome,
            strategy: self.strategy,
            lines: self.lines,
            warnings: self.warnings,
            error: self.error.map(ErrorReport::with_kind),
        }
    }
}

/// The file region most like a SEARCH text that was not found.
#[derive(Clone, Debug, Serialize)]
pub struct Closest {
    pub start_line: usize,
    pub end_line: usize,
    pub similarity: f64,
    /// Unified diff from the SEARCH text to the file's lines.
    pub diff: String,
}

/// What the engine found wrong with a payload, an operation or the outcome,
/// serialised as the name the contract gives `error.kind`. What only a
/// transaction can meet (the file system, permissions, paths) is a kind of
/// the transaction's own, which wraps these. A new kind is one variant here
/// and one arm in each exhaustive match on it (the errno a control file
/// answers, the CLI's exit code): the compiler finds them, so no kind falls
/// through to a default by a misspelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    NotFound,
    Ambiguous,
    Malformed,
    TooLarge,
    Stale,
    NotText,
    CountMismatch,
    FileExists,
    Placeholder,
    DiffPrefix,
    NumberPrefix,
    /// REPLACE ends with the lines that follow SEARCH: they would be written twice.
    Duplicates,
    WrongFile,
    Deleted,
    MultiFile,
    /// The transaction's work budget ran out (see budget.rs).
    OverBudget,
    /// The new content no longer parses where the edit changed it (see syntax/).
    Syntax,
}

impl ErrorKind {
    /// The name in reports, logs and history.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Ambiguous => "ambiguous",
            ErrorKind::Malformed => "malformed",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Stale => "stale",
            ErrorKind::NotText => "not_text",
            ErrorKind::CountMismatch => "count_mismatch",
            ErrorKind::FileExists => "file_exists",
            ErrorKind::Placeholder => "placeholder",
            ErrorKind::DiffPrefix => "diff_prefix",
            ErrorKind::NumberPrefix => "number_prefix",
            ErrorKind::Duplicates => "duplicates",
            ErrorKind::WrongFile => "wrong_file",
            ErrorKind::Deleted => "deleted",
            ErrorKind::MultiFile => "multi_file",
            ErrorKind::OverBudget => "over_budget",
            ErrorKind::Syntax => "syntax",
        }
    }
}

/// Kinds compare with their names, as tests and older callers spell them.
impl PartialEq<&str> for ErrorKind {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error as reports show it; `K` is the kind of error the reporting layer
/// knows (the engine's own, or the transaction's, which wraps it).
#[derive(Clone, Debug, Serialize)]
pub struct ErrorReport<K = ErrorKind> {
    pub kind: K,
    /// Index (from 1) of the operation that failed, when one did.
    pub operation: Option<usize>,
    pub message: String,
    pub hint: Option<String>,
    pub closest: Option<Closest>,
}

impl<K> ErrorReport<K> {
    /// An error of the whole transaction (no operation, no closest region).
    pub fn plain(kind: K, message: impl Into<String>, hint: impl Into<String>) -> ErrorReport<K> {
        ErrorReport {
            kind,
            operation: None,
            message: message.into(),
            hint: Some(hint.into()),
            closest: None,
        }
    }

    /// The same error, its kind as a layer above names it.
    pub fn with_kind<L: From<K>>(self) -> ErrorReport<L> {
        ErrorReport {
            kind: self.kind.into(),
            operation: self.operation,
            message: self.message,
            hint: self.hint,
            closest: self.closest,
        }
    }
}

/// What the outcome's syntax check said about the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyntaxResult {
    /// It parses (or is broken only where it already was).
    Ok,
    /// The edit made it fail to parse: refused, or written under `--syntax-check warn`.
    Error,
    /// Its language is known but it was not parsed (`why` says why).
    Unchecked,
}

/// How much of the new content the syntax check parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyntaxScope {
    File,
    Change,
}

/// A place where the file does not parse (1-based; the column counts characters).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SyntaxPlace {
    pub line: usize,
    pub column: usize,
    /// The parser's reading of that place.
    pub reading: String,
}

/// The syntax check of a file whose language editfs parses.
#[derive(Clone, Debug, Serialize)]
pub struct SyntaxReport {
    pub result: SyntaxResult,
    /// The parser that read the file.
    pub parser: &'static str,
    /// How much of the new content was parsed (none when `unchecked`):
    /// `file`, or `change`, the items around the change alone
    /// (`checked_lines`), the rest unread, so an `ok` there says nothing of
    /// breakage elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked: Option<SyntaxScope>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_lines: Option<[usize; 2]>,
    /// Problems the old content already had that the new one keeps.
    #[serde(skip_serializing_if = "is_zero")]
    pub kept: usize,
    /// Where the file was already broken before the edit (the first of the
    /// problems kept): the edit is not refused for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_before: Option<SyntaxPlace>,
    /// Where the edit broke the file (1-based; the column counts characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// The parser's reading of that place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reading: Option<String>,
    /// The offending lines, numbered, the column marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<String>,
    /// Why a known language was not parsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The engine's report on one file.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub file: String,
    pub outcome: Outcome,
    pub applied: usize,
    pub total: usize,
    pub operations: Vec<OpReport>,
    /// Unified diff of the change; on success only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// SHA-256 of the file after the transaction (as it still is, on failure).
    pub sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReport>,
    pub notes: Vec<String>,
    /// The outcome's syntax check, for a file in a language editfs parses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syntax: Option<Box<SyntaxReport>>,
}

impl Report {
    pub fn new(outcome: Outcome, sha256: String) -> Report {
        Report {
            file: String::new(),
            outcome,
            applied: 0,
            total: 0,
            operations: Vec::new(),
            diff: None,
            sha256,
            error: None,
            notes: Vec::new(),
            syntax: None,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// What `render` reads of it.
    pub fn parts(&self) -> Parts<'_, ErrorKind> {
        Parts {
            file: &self.file,
            outcome: self.outcome,
            applied: self.applied,
            total: self.total,
            operations: &self.operations,
            diff: self.diff.as_deref(),
            sha256: &self.sha256,
            error: self.error.as_ref(),
            notes: &self.notes,
            syntax: self.syntax.as_deref(),
        }
    }
}

/// What the text of a report on one file shows, whoever made the report
/// (the engine, or a transaction, which names errors with kinds `K` of its own).
pub struct Parts<'a, K> {
    pub file: &'a str,
    pub outcome: Outcome,
    pub applied: usize,
    pub total: usize,
    pub operations: &'a [OpReport<K>],
    pub diff: Option<&'a str>,
    pub sha256: &'a str,
    pub error: Option<&'a ErrorReport<K>>,
    pub notes: &'a [String],
    pub syntax: Option<&'a SyntaxReport>,
}

/// What a transaction adds to the text of a report: its id and time, and
/// where the file's pre-image was kept.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stamp<'a> {
    /// The transaction's id and time; `None` (or an empty time): not shown.
    pub tx: Option<(u64, &'a str)>,
    /// Where the pre-image was kept, relative to the state directory.
    pub snapshot: Option<&'a str>,
}

/// A file name as text reports and listings print it, one line each: its
/// control characters (a newline in a name, which a project may hold) are
/// escaped (`\n`), so a reader that takes lines never sees the name split.
/// The JSON report carries the name as it is.
pub fn shown_name(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(name);
    }
    let escape = |c: char| -> String {
        match c.is_control() {
            true => c.escape_default().collect(),
            false => c.to_string(),
        }
    };
    std::borrow::Cow::Owned(name.chars().map(escape).collect())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        render(f, &self.parts(), Stamp::default())
    }
}

/// The text of a report on one file, as `F.status` shows it: the one
/// rendering of it, the engine's and a transaction's alike.
pub fn render<K: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    r: &Parts<'_, K>,
    stamp: Stamp<'_>,
) -> fmt::Result {
    let word = match r.outcome {
        Outcome::Ok => "OK",
        Outcome::Failed => "FAILED",
        Outcome::Rejected => "REJECTED",
    };
    let file = shown_name(r.file);
    match stamp.tx.filter(|(_, time)| !time.is_empty()) {
        None => writeln!(f, "{word} {file}")?,
        Some((tx, time)) => writeln!(f, "{word} {file} (tx {tx}, {time})")?,
    }
    match r.outcome {
        Outcome::Ok => writeln!(f, "{} of {} operation(s) applied", r.applied, r.total)?,
        _ => writeln!(f, "nothing was changed: the file is exactly as it was")?,
    }
    for op in r.operations {
        write_op(f, op)?;
    }
    if let Some(s) = r.syntax {
        write_syntax(f, s, r.outcome)?;
    }
    if let Some(e) = r.error {
        write_error(f, e)?;
    }
    if let Some(lines) = r.syntax.and_then(|s| s.lines.as_ref())
        && r.outcome != Outcome::Ok
    {
        write!(f, "{lines}")?;
    }
    for n in r.notes {
        writeln!(f, "note: {n}")?;
    }
    if !r.sha256.is_empty() {
        writeln!(f, "sha256 {}", r.sha256)?;
    }
    if let Some(s) = stamp.snapshot {
        writeln!(f, "pre-image kept as {}", shown_name(s))?;
    }
    match r.diff {
        Some(d) if !d.is_empty() => write!(f, "\n{d}"),
        Some(_) => writeln!(f, "no change to the file"),
        None => Ok(()),
    }
}

fn write_op<K: fmt::Display>(f: &mut fmt::Formatter<'_>, op: &OpReport<K>) -> fmt::Result {
    let outcome = match op.outcome {
        OpOutcome::Applied => "applied",
        OpOutcome::AlreadyApplied => "already applied",
        OpOutcome::Unchanged => "unchanged",
        OpOutcome::Matched => "matched (not written)",
        OpOutcome::Failed => "FAILED",
    };
    write!(f, "  #{} {outcome}", op.index)?;
    if let Some(s) = op.strategy {
        write!(f, " ({s})")?;
    }
    match op.lines {
        Some([a, b]) if a == b => write!(f, " at line {a}")?,
        Some([a, b]) => write!(f, " at lines {a}-{b}")?,
        None => {}
    }
    writeln!(f)?;
    for w in &op.warnings {
        writeln!(f, "     warning: {w}")?;
    }
    if let (Some(e), OpOutcome::Failed) = (&op.error, op.outcome) {
        writeln!(f, "     {}: {}", e.kind, e.message)?;
    }
    Ok(())
}

/// One line for a file that parses; on a file written broken under
/// `--syntax-check warn`, where and why, with the offending lines (a refused
/// file's are printed after its error).
fn write_syntax(f: &mut fmt::Formatter<'_>, s: &SyntaxReport, outcome: Outcome) -> fmt::Result {
    match s.result {
        SyntaxResult::Ok => match (&s.broken_before, s.checked_lines) {
            (Some(b), _) => writeln!(
                f,
                "syntax: ok where the edit changed the file, checked by {}; the file was already broken before this edit: line {}, column {}: {} ({} problem(s) the file already had left as they were)",
                s.parser, b.line, b.column, b.reading, s.kept
            ),
            (None, Some([first, last])) => writeln!(
                f,
                "syntax: ok, checked by {} around the change (lines {first}-{last}; the rest of the file, unchanged, was not parsed)",
                s.parser
            ),
            (None, None) => writeln!(f, "syntax: ok, checked by {}", s.parser),
        },
        SyntaxResult::Unchecked => writeln!(
            f,
            "syntax: not checked by {}: {}",
            s.parser,
            s.why.as_deref().unwrap_or_default()
        ),
        SyntaxResult::Error if outcome == Outcome::Ok => {
            writeln!(
                f,
                "syntax: WRITTEN BROKEN (--syntax-check warn): line {}, column {}: {} ({})",
                s.line.unwrap_or_default(),
                s.column.unwrap_or_default(),
                s.reading.as_deref().unwrap_or_default(),
                s.parser
            )?;
            write!(f, "{}", s.lines.as_deref().unwrap_or_default())
        }
        SyntaxResult::Error => Ok(()),
    }
}

fn write_error<K: fmt::Display>(f: &mut fmt::Formatter<'_>, e: &ErrorReport<K>) -> fmt::Result {
    writeln!(f)?;
    match e.operation {
        Some(i) => writeln!(f, "error ({}) in operation #{i}: {}", e.kind, e.message)?,
        None => writeln!(f, "error ({}): {}", e.kind, e.message)?,
    }
    if let Some(h) = &e.hint {
        writeln!(f, "hint: {h}")?;
    }
    if let Some(c) = &e.closest {
        writeln!(
            f,
            "closest match: lines {}-{} (similarity {:.2}); what SEARCH would need to change:",
            c.start_line,
            c.end_line,
            (c.similarity * 100.0 + 1e-9).floor() / 100.0
        )?;
        write!(f, "{}", c.diff)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ErrorKind as K;

    #[test]
    fn error_kinds_serialise_to_the_names_the_contract_and_the_log_use() {
        let names = [
            (K::NotFound, "not_found"),
            (K::Ambiguous, "ambiguous"),
            (K::Malformed, "malformed"),
            (K::TooLarge, "too_large"),
            (K::Stale, "stale"),
            (K::NotText, "not_text"),
            (K::CountMismatch, "count_mismatch"),
            (K::FileExists, "file_exists"),
            (K::Placeholder, "placeholder"),
            (K::DiffPrefix, "diff_prefix"),
            (K::NumberPrefix, "number_prefix"),
            (K::Duplicates, "duplicates"),
            (K::WrongFile, "wrong_file"),
            (K::Deleted, "deleted"),
            (K::MultiFile, "multi_file"),
            (K::OverBudget, "over_budget"),
            (K::Syntax, "syntax"),
        ];
        for (kind, name) in names {
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.to_string(), name);
            assert_eq!(kind, name);
            assert_eq!(serde_json::from_value::<K>(name.into()).unwrap(), kind);
        }
    }
}

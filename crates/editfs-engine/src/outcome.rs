//! Stage 5: the outcome checked as a whole. Every operation applied; before
//! the report calls the transaction done, the new file is checked, and a
//! check that fails fails the transaction: nothing is written.
//!
//! `check` is the one place such checks run, called by `finish` once the new
//! bytes are built and before the report is made: the size, then the syntax
//! (syntax/: the new bytes read as their language, against the old bytes').

use super::report::{ErrorKind, ErrorReport, SyntaxReport, SyntaxResult, SyntaxScope};
use super::syntax::{self, Finding, Scope, Verdict};
use super::{Options, SyntaxCheck};

/// Why the new bytes must not be written, and, when their syntax is the
/// reason, the report's section on it (the place and the offending lines).
pub(super) struct Refusal {
    pub error: ErrorReport,
    pub syntax: Option<Box<SyntaxReport>>,
}

impl From<ErrorReport> for Refusal {
    fn from(error: ErrorReport) -> Refusal {
        Refusal {
            error,
            syntax: None,
        }
    }
}

/// Checks the bytes a file named `name` will hold once written (`before`:
/// what it held), or says why they must not be written; on success, what the
/// syntax check found, for a language it parses. A file the transaction
/// removes is not checked: it will hold nothing.
pub(super) fn check(
    name: &str,
    before: Option<&[u8]>,
    after: &[u8],
    opts: &Options,
) -> Result<Option<Box<SyntaxReport>>, Box<Refusal>> {
    within_size(after, opts).map_err(|e| Box::new(Refusal::from(e)))?;
    if opts.syntax_check == SyntaxCheck::Off {
        return Ok(None);
    }
    let report = match syntax::check(name, before, after) {
        Verdict::Unknown => return Ok(None),
        Verdict::Clean {
            parser,
            kept,
            before,
            scope,
        } => {
            let (checked, checked_lines) = match scope {
                Scope::File => (SyntaxScope::File, None),
                Scope::Change { first, last } => (SyntaxScope::Change, Some([first, last])),
            };
            let checked = Some(checked);
            SyntaxReport {
                kept,
                checked,
                checked_lines,
                broken_before: before,
                ..blank(SyntaxResult::Ok, parser)
            }
        }
        Verdict::Unchecked { parser, why } => SyntaxReport {
            why: Some(why),
            ..blank(SyntaxResult::Unchecked, parser)
        },
        Verdict::Broken(f) if opts.syntax_check == SyntaxCheck::Refuse => {
            return Err(Box::new(Refusal {
                error: refusal(&f),
                syntax: Some(Box::new(broken(f))),
            }));
        }
        Verdict::Broken(f) => broken(f),
    };
    Ok(Some(Box::new(report)))
}

fn blank(result: SyntaxResult, parser: &'static str) -> SyntaxReport {
    SyntaxReport {
        result,
        parser,
        checked: None,
        checked_lines: None,
        kept: 0,
        broken_before: None,
        line: None,
        column: None,
        reading: None,
        lines: None,
        why: None,
    }
}

fn broken(f: Finding) -> SyntaxReport {
    SyntaxReport {
        line: Some(f.line),
        column: Some(f.column),
        reading: Some(f.reading),
        lines: Some(f.excerpt),
        checked: Some(SyntaxScope::File),
        ..blank(SyntaxResult::Error, f.parser)
    }
}

/// The error of a transaction refused for the syntax error it would write.
/// The report's `syntax` section carries the same place and the offending lines.
fn refusal(f: &Finding) -> ErrorReport {
    ErrorReport::plain(
        ErrorKind::Syntax,
        format!(
            "the edit would leave the file unparsable: line {}, column {}: {} ({})",
            f.line, f.column, f.reading, f.parser
        ),
        format!(
            "{}; if the file is meant to read so, send the payload again with `\"syntax_check\": \"off\"` (JSON) or a line `:syntax_check: off` above the first block",
            f.hint
        ),
    )
}

/// The new file is no larger than a transaction may write (`--max-file-size`).
fn within_size(after: &[u8], opts: &Options) -> Result<(), ErrorReport> {
    if after.len() as u64 <= opts.max_file {
        return Ok(());
    }
    Err(ErrorReport::plain(
        ErrorKind::TooLarge,
        format!(
            "the file would be {} bytes, over the {} a transaction may write (--max-file-size)",
            after.len(),
            opts.max_file
        ),
        "make the file grow less in one transaction (a regex replacement that copies each match, a REPLACE sent for every occurrence), or raise --max-file-size",
    ))
}

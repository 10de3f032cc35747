//! What a transaction reports: the report of a file (what the engine found,
//! with the transaction's id, time and kept pre-image, its errors named with
//! the transaction's kinds: the engine's and those of the file system, paths
//! and permissions the engine never meets), and the report of a transaction
//! of several files (multi.rs); `Reported` is either, as an undo or a rewind
//! answers.
//!
//! Every place that shows a report (`F.status` and `F.status.json`,
//! `.editfs/status`, the answers of `editfs apply` and `editfs undo`, the
//! report shared with a mount) renders it through `Render`.

mod multi;

use std::fmt;

use serde::Serialize;

use crate::engine::report::{Parts, Stamp};
use crate::engine::{self, Outcome, SyntaxReport};
use crate::store::Shared;

pub use crate::store::ErrorKind;
pub use multi::MultiReport;

/// An error as a transaction reports it.
pub type ErrorReport = engine::ErrorReport<ErrorKind>;

/// An operation as a transaction reports it.
pub type OpReport = engine::OpReport<ErrorKind>;

/// The report of a transaction on one file: the engine's report on it
/// (its fields), with the transaction's id, time and kept pre-image, its
/// errors named with the transaction's kinds. Its fields serialise in the
/// order the contract shows them.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub tx: u64,
    pub file: String,
    pub time: String,
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
    /// Where the pre-image was kept, relative to the state directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The outcome's syntax check, for a file in a language editfs parses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syntax: Option<Box<SyntaxReport>>,
}

impl Report {
    /// A report of no transaction yet (id 0, no time), with no operation.
    pub fn new(outcome: Outcome, sha256: String) -> Report {
        Report::from(engine::Report::new(outcome, sha256))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

impl From<engine::Report> for Report {
    /// The engine's report, of no transaction yet.
    fn from(r: engine::Report) -> Report {
        Report {
            tx: 0,
            file: r.file,
            time: String::new(),
            outcome: r.outcome,
            applied: r.applied,
            total: r.total,
            operations: r
                .operations
                .into_iter()
                .map(engine::OpReport::with_kinds)
                .collect(),
            diff: r.diff,
            sha256: r.sha256,
            error: r.error.map(engine::ErrorReport::with_kind),
            notes: r.notes,
            snapshot: None,
            syntax: r.syntax,
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = Parts {
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
        };
        let stamp = Stamp {
            tx: Some((self.tx, &self.time)),
            snapshot: self.snapshot.as_deref(),
        };
        engine::report::render(f, &parts, stamp)
    }
}

/// What a transaction reports, whatever it was: an edit of one file or of
/// several, an undo, a rewind.
pub enum Reported {
    /// A transaction on one file (an edit, the undo of one file's version).
    File(Report),
    /// A transaction on several files (an edit of several, the undo of a
    /// transaction, a rewind).
    Files(MultiReport),
}

impl Reported {
    /// The reports of the files it changed (or would have).
    pub fn files(&self) -> Vec<&Report> {
        match self {
            Reported::File(r) => vec![r],
            Reported::Files(m) => m.files.iter().collect(),
        }
    }

    /// The outcome and error as one report, for exit codes and errnos.
    pub fn head(&self) -> Report {
        match self {
            Reported::File(r) => r.clone(),
            Reported::Files(m) => m.head(),
        }
    }

    pub fn to_json(&self) -> String {
        match self {
            Reported::File(r) => r.to_json(),
            Reported::Files(m) => m.to_json(),
        }
    }
}

impl fmt::Display for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reported::File(r) => r.fmt(f),
            Reported::Files(m) => m.fmt(f),
        }
    }
}

/// The two forms of a report: the text of `F.status`, or the JSON object of
/// `F.status.json` (pretty-printed, a newline after it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Text,
    Json,
}

/// A report rendered in either form (see `Form`).
pub trait Render: fmt::Display {
    /// The JSON object alone, with no newline after it.
    fn json_object(&self) -> String;

    fn render(&self, form: Form) -> String {
        match form {
            Form::Text => self.to_string(),
            Form::Json => self.json_object() + "\n",
        }
    }
}

impl Render for Report {
    fn json_object(&self) -> String {
        self.to_json()
    }
}

impl Render for MultiReport {
    fn json_object(&self) -> String {
        self.to_json()
    }
}

impl Render for Reported {
    fn json_object(&self) -> String {
        self.to_json()
    }
}

/// `report` as a mount of its project shows it once this process made it
/// (see `Store::share_report`): its JSON kept as the object alone, as
/// reports kept before were.
pub fn shared(report: &Report) -> Shared {
    Shared {
        tx: report.tx,
        sha256: Some(report.sha256.clone()).filter(|s| !s.is_empty()),
        text: report.render(Form::Text),
        json: report.json_object(),
    }
}

/// A report another process shared (see `shared`), as its status files show it.
pub fn render_shared(shared: Shared, form: Form) -> String {
    match form {
        Form::Text => shared.text,
        Form::Json => shared.json + "\n",
    }
}

/// Why `F.status` has no report: it shows the latest edit through `F.edit`, and
/// a rename or removal of F takes that report along, while a write, save or
/// removal without a control file is only logged.
const NO_REPORT: &str = "No edit through the control file has reported on this file under this name \
since the mount started; .editfs/history lists every transaction, writes and removals too";

/// What the status files of `file` show before any report on it, `edit`
/// being the name of its edit file.
pub fn none_yet(file: &str, edit: &str, form: Form) -> String {
    let how = format!("write SEARCH/REPLACE blocks to {edit} and read this file again");
    match form {
        Form::Json => {
            let v = serde_json::json!({ "file": file, "tx": null, "outcome": null,
                "message": format!("{NO_REPORT}; {how}") });
            v.to_string() + "\n"
        }
        Form::Text => format!("NO REPORT YET {file}\n{NO_REPORT};\n{how}.\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_report_shows_its_transaction_with_the_engines_fields_in_the_contracts_order() {
        let mut r = Report::new(Outcome::Ok, "abc".into());
        (r.tx, r.file, r.time) = (7, "a.txt".into(), "2026-11-29T00:00:00Z".into());
        r.snapshot = Some("snapshots/7/a.txt".into());
        r.diff = Some(String::new());
        let json = r.to_json();
        let fields = [
            "tx",
            "file",
            "time",
            "outcome",
            "applied",
            "total",
            "operations",
            "diff",
            "sha256",
            "notes",
            "snapshot",
        ];
        let at: Vec<usize> = fields
            .iter()
            .map(|k| json.find(&format!("\"{k}\":")).expect(k))
            .collect();
        assert!(at.is_sorted(), "{json}");
        let text = r.render(Form::Text);
        assert!(
            text.starts_with("OK a.txt (tx 7, 2026-11-29T00:00:00Z)\n"),
            "{text}"
        );
        assert!(
            text.contains("\npre-image kept as snapshots/7/a.txt\n"),
            "{text}"
        );
        assert!(r.render(Form::Json).ends_with("}\n"));
    }
}

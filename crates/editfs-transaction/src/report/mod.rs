//! What a transaction reports: the engine's report of each file, its error
//! named with the transaction's kinds (the engine's and those of the file
//! system, paths and permissions the engine never meets), and the report of
//! a transaction of several files (multi.rs); `Reported` is either, as an
//! undo or a rewind answers.
//!
//! Every place that shows a report (`F.status` and `F.status.json`,
//! `.editfs/status`, the answers of `editfs apply` and `editfs undo`, the
//! report shared with a mount) renders it through `Render`.

mod multi;

use std::fmt;

use crate::store::Shared;

pub use crate::store::ErrorKind;
pub use multi::MultiReport;

/// The report of a transaction on one file.
pub type Report = crate::engine::Report<ErrorKind>;

/// An error as a transaction reports it.
pub type ErrorReport = crate::engine::ErrorReport<ErrorKind>;

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

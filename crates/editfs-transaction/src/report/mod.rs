//! What a transaction reports: the engine's report of each file, its error
//! named with the transaction's kinds (the engine's and those of the file
//! system, paths and permissions the engine never meets), and the report of
//! a transaction of several files (multi.rs); `Reported` is either, as an
//! undo or a rewind answers.

mod multi;

use std::fmt;

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

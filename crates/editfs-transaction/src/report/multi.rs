//! The report of a transaction of several files: one report per file and
//! the transaction's own outcome, as text and as JSON.

use std::fmt;

use serde::Serialize;

use crate::engine::Outcome;
use crate::now;
use crate::report::{ErrorReport, Report};

/// The report of a multi-file transaction: one section per file.
#[derive(Clone, Debug, Serialize)]
pub struct MultiReport {
    pub tx: u64,
    pub time: String,
    pub outcome: Outcome,
    pub files: Vec<Report>,
    /// The first failure, naming its file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReport>,
    pub notes: Vec<String>,
    /// For a rewind: what it leaves as it is.
    #[serde(rename = "not_undone", skip_serializing_if = "Option::is_none")]
    pub left: Option<crate::rewind::Left>,
}

impl MultiReport {
    pub(crate) fn new(outcome: Outcome) -> MultiReport {
        MultiReport {
            tx: 0,
            time: now(),
            outcome,
            files: Vec::new(),
            error: None,
            notes: Vec::new(),
            left: None,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The transaction as a whole, in the shape of a one-file report (for the log
    /// and the errno).
    pub fn head(&self) -> Report {
        Report {
            tx: self.tx,
            time: self.time.clone(),
            applied: self.files.iter().map(|r| r.applied).sum(),
            total: self.files.iter().map(|r| r.total).sum(),
            error: self.error.clone(),
            ..Report::new(self.outcome, String::new())
        }
    }

    pub(crate) fn fail(&mut self, outcome: Outcome, file: &str, e: &ErrorReport) {
        if self.error.is_none() {
            let mut e = e.clone();
            e.message = format!("{file}: {}", e.message);
            self.error = Some(e);
        }
        self.outcome = outcome;
    }
}

impl fmt::Display for MultiReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = match self.outcome {
            Outcome::Ok => "OK",
            Outcome::Failed => "FAILED",
            Outcome::Rejected => "REJECTED",
        };
        writeln!(
            f,
            "{word} {} file(s) (tx {}, {})",
            self.files.len(),
            self.tx,
            self.time
        )?;
        if self.outcome != Outcome::Ok {
            writeln!(f, "nothing was changed: every file is exactly as it was")?;
        }
        if let Some(e) = &self.error {
            // One line, whatever file name the message holds.
            let message = crate::engine::report::shown_name(&e.message);
            writeln!(f, "error ({}): {message}", e.kind)?;
            if let Some(h) = &e.hint {
                writeln!(f, "hint: {h}")?;
            }
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        if let Some(left) = &self.left {
            write!(f, "{left}")?;
        }
        for r in &self.files {
            writeln!(f, "\n==== {}", crate::engine::report::shown_name(&r.file))?;
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

//! The one edge where a command meets the user on its way out: what it ended
//! with, or why it could not run, with the hints to act on, as one exit code.
//!
//! Every command returns `Result<Ended, CommandError>`; `finish` prints the
//! error (and its hints) and maps both to the exit code the contract gives:
//! 0 done or applied, 1 failed (nothing was written), 2 rejected or bad usage.
//! Each layer's error becomes a command's by one `From` here; a command adds
//! the hint or the kind its own context calls for.

use std::process::ExitCode;

use crate::engine::Outcome;
use crate::history::GivenPath;
use crate::mount::MountError;
use crate::store::{StoreError, Untrusted};
use crate::transaction::rewind::NoPoint;

/// What a command that ran ended with.
pub enum Ended {
    /// It did what it was asked (a listing, a page, a checkpoint taken).
    Done,
    /// It ran a transaction (or said what one would do), which ended so.
    Transaction(Outcome),
    /// What it was asked for did not happen, and it said why itself (a
    /// checkpoint's refusal printed, a daemon's failure in its log): exit 1.
    Failed,
}

/// Why a command could not run.
#[derive(Debug)]
pub struct CommandError {
    kind: Kind,
    message: String,
    hints: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The command line or its input cannot be used: exit 2.
    Usage,
    /// Something it needed failed (the state directory, a file): exit 1.
    Failed,
}

impl CommandError {
    /// The command line or its input cannot be used (exit 2).
    pub fn usage(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Usage,
            message: message.into(),
            hints: Vec::new(),
        }
    }

    /// Something the command needed failed (exit 1).
    pub fn failed(message: impl Into<String>) -> CommandError {
        CommandError {
            kind: Kind::Failed,
            message: message.into(),
            hints: Vec::new(),
        }
    }

    /// Adds a hint the user can act on, printed after the message.
    pub fn hint(mut self, hint: impl Into<String>) -> CommandError {
        self.hints.push(hint.into());
        self
    }

    /// The same error, as one of bad usage (exit 2).
    pub fn into_usage(self) -> CommandError {
        CommandError {
            kind: Kind::Usage,
            ..self
        }
    }
}

impl From<StoreError> for CommandError {
    fn from(e: StoreError) -> CommandError {
        CommandError::failed(e.to_string())
    }
}

impl From<MountError> for CommandError {
    fn from(e: MountError) -> CommandError {
        CommandError::failed(e.to_string())
    }
}

impl From<Untrusted> for CommandError {
    fn from(e: Untrusted) -> CommandError {
        CommandError::failed(e.to_string())
    }
}

impl From<GivenPath> for CommandError {
    fn from(e: GivenPath) -> CommandError {
        CommandError::failed(e.to_string())
    }
}

impl From<NoPoint> for CommandError {
    fn from(e: NoPoint) -> CommandError {
        CommandError::failed(e.to_string())
    }
}

/// Prints what `cmd` ended with when it is an error, and gives its exit code.
pub fn finish(cmd: &str, result: Result<Ended, CommandError>) -> ExitCode {
    match result {
        Ok(Ended::Done) => ExitCode::SUCCESS,
        Ok(Ended::Failed) => ExitCode::FAILURE,
        Ok(Ended::Transaction(outcome)) => ExitCode::from(match outcome {
            Outcome::Ok => 0,
            Outcome::Failed => 1,
            Outcome::Rejected => USAGE,
        }),
        Err(e) => {
            eprintln!("editfs {cmd}: {}", e.message);
            for h in &e.hints {
                eprintln!("hint: {h}");
            }
            ExitCode::from(match e.kind {
                Kind::Usage => USAGE,
                Kind::Failed => 1,
            })
        }
    }
}

/// Exit code for a usage error, as clap uses.
const USAGE: u8 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_has_the_exit_code_the_contract_gives() {
        let code = |r| format!("{:?}", finish("test", r));
        assert_eq!(code(Ok(Ended::Done)), format!("{:?}", ExitCode::from(0)));
        assert_eq!(code(Ok(Ended::Failed)), format!("{:?}", ExitCode::from(1)));
        let tx = |o| code(Ok(Ended::Transaction(o)));
        assert_eq!(tx(Outcome::Ok), format!("{:?}", ExitCode::from(0)));
        assert_eq!(tx(Outcome::Failed), format!("{:?}", ExitCode::from(1)));
        assert_eq!(tx(Outcome::Rejected), format!("{:?}", ExitCode::from(2)));
        let usage = code(Err(CommandError::usage("bad").hint("do this")));
        assert_eq!(usage, format!("{:?}", ExitCode::from(2)));
        let failed = code(Err(CommandError::failed("broken")));
        assert_eq!(failed, format!("{:?}", ExitCode::from(1)));
    }
}

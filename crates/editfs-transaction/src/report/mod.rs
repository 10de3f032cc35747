//! What a transaction reports: the engine's report of each file, its error
//! named with the transaction's kinds (the engine's and those of the file
//! system, paths and permissions the engine never meets), and the report of
//! a transaction of several files (multi.rs).

mod multi;

pub use crate::store::ErrorKind;
pub use multi::MultiReport;

/// The report of a transaction on one file.
pub type Report = crate::engine::Report<ErrorKind>;

/// An error as a transaction reports it.
pub type ErrorReport = crate::engine::ErrorReport<ErrorKind>;

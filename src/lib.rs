//! editfs: SEARCH/REPLACE edits as file-system transactions.
//!
//! Three layers, each knowing only the one below it:
//! - [`engine`]: pure; payload text and file bytes in, new bytes and a report out.
//! - [`store`]: durable; atomic replacement of files, snapshots of pre-images, the log.
//! - the command line (`src/cli/`), which carries bytes between them and the user.

#![forbid(unsafe_code)]

pub mod engine;
pub mod history;
pub mod mount;
pub mod store;
pub mod transaction;

//! editfs: SEARCH/REPLACE edits as file-system transactions.
//!
//! The layers are crates of their own, each importing only those below it
//! (docs/architecture.md#layers), named here as they name each other:
//! - `engine` (`crates/editfs-engine/`): pure; payload text and file bytes in,
//!   new bytes and a report out, usable on its own.
//! - `store` (`crates/editfs-store/`): durable; atomic replacement of files,
//!   snapshots of pre-images, the log.
//! - `transaction` (`crates/editfs-transaction/`): one transaction end to end,
//!   through the engine and the store; its `history` reads the log for people.
//! - `mount` (`crates/editfs-fuse/`): the FUSE file system.
//!
//! This binary holds what is over them: [`branch`], branches of a project, and
//! the command line ([`cli`]), which carries bytes between them and the user.

use editfs_engine as engine;
use editfs_fuse as mount;
use editfs_store as store;
use editfs_transaction::{self as transaction, history};

#[forbid(unsafe_code)]
mod branch;
mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}

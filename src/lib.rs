//! editfs: SEARCH/REPLACE edits as file-system transactions.
//!
//! Layers, each importing only those below it (docs/architecture.md#layers):
//! - [`engine`]: pure; payload text and file bytes in, new bytes and a report out
//!   (the `editfs-engine` crate, `crates/editfs-engine/`, usable on its own).
//! - [`store`]: durable; atomic replacement of files, snapshots of pre-images, the log.
//! - [`transaction`]: one transaction end to end, through the engine and the store;
//!   [`history`] reads the log for people.
//! - [`mount`]: the FUSE file system.
//! - [`branch`]: branches of a project, over the layers above.
//! - the command line (`src/cli/`, in the binary), which carries bytes between
//!   them and the user.

#![forbid(unsafe_code)]

pub use editfs_engine as engine;
pub use editfs_store as store;
pub use editfs_transaction as transaction;
pub mod branch;
pub use editfs_fuse as mount;
pub use editfs_transaction::history;

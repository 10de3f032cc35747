//! editfs as users run it: the real binary on real projects, through the command
//! line and through real mounts driven by shell commands, as root and as another
//! user, with crashes, POSIX suites and the docs checked against the code.
//!
//! One binary for all of them, each former test file a module: the crate is linked
//! once, not once per file. `common` holds the helpers the mount tests share.

#[path = "../common/mod.rs"]
mod common;

mod branch;
mod branch_rights;
mod cli_apply;
mod cli_docs;
mod cli_state_trust;
mod crash;
mod history_undo;
mod mount;
mod mount_as_caller;
mod mount_budget;
mod mount_cli;
mod mount_cold;
mod mount_ecosystem;
mod mount_faults;
mod mount_history;
mod mount_history_rights;
mod mount_limits;
mod mount_native_writes;
mod mount_parallel;
mod mount_passthrough;
mod mount_posix;
mod mount_races;
mod mount_security;
mod mount_source_changes;
mod mount_syntax;
mod posix;
mod readme;
mod sandbox;
mod test_files;
mod tool_calls;

//! The command line: parses arguments, runs one command, maps its result to an exit code.
//!
//! Exit codes are part of the contract: 0 the transaction applied, 1 it failed
//! (nothing was written), 2 the payload was rejected or the command line was
//! wrong; `error.rs` is the one place a command's end becomes one.

mod apply;
mod branch;
mod color;
mod error;
mod fstab;
mod generate;
mod history;
mod logging;
mod memory;
mod mount;
mod options;
mod prompt;
mod rewind;
mod state;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "editfs",
    version,
    propagate_version = true,
    about = "Edit files with SEARCH/REPLACE transactions: through a FUSE mount, or directly",
    long_about = "editfs applies the SEARCH/REPLACE blocks that coding agents write to files, as \
one all-or-nothing transaction per payload, with a report that says exactly what matched, what \
changed, and, when a block does not match, where the closest text is and what differs.\n\n\
`editfs mount SOURCE MOUNT` mirrors a project so that writing blocks to MOUNT/F.edit edits F \
and `cat MOUNT/F.status` shows the report; `editfs apply FILE` does the same without FUSE.",
    after_help = "Exit codes of apply: 0 applied, 1 failed (nothing written), 2 payload rejected or bad \
usage. Of mount: 0 unmounted cleanly, 1 could not mount, 2 bad usage. Of undo and rewind: 0 \
restored (with --dry-run: would restore), 1 refused or failed. Of checkpoint: 0 taken, 1 \
refused (a name taken) or failed. Of history, show, diff and the others: 0 done, 1 failed, \
2 bad usage.\n\
mount(8) and fstab: `editfs SOURCE MOUNT -o OPTIONS` (what `mount -t fuse.editfs` runs) is \
`editfs mount` in the background; see `editfs mount --help`.\n\
Logging: set RUST_LOG (error, warn, info, debug), e.g. RUST_LOG=debug."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Apply(apply::Args),
    Mount(mount::MountArgs),
    Unmount(mount::UnmountArgs),
    History(history::HistoryArgs),
    Show(history::ShowArgs),
    Undo(history::UndoArgs),
    Checkpoint(rewind::CheckpointArgs),
    Diff(rewind::DiffArgs),
    Rewind(rewind::RewindArgs),
    Branch(branch::BranchArgs),
    Prompt(prompt::PromptArgs),
    List(prompt::ListArgs),
    Completions(generate::CompletionsArgs),
    Man(generate::ManArgs),
    #[command(hide = true)]
    Rescue(mount::RescueArgs),
}

pub fn main() -> ExitCode {
    logging::init();
    let cli = Cli::parse_from(args());
    let (name, result) = match cli.command {
        Command::Mount(args) => ("mount", mount::run(args)),
        Command::Unmount(args) => ("unmount", mount::unmount(args)),
        Command::Rescue(args) => ("rescue", mount::rescue(args)),
        Command::Apply(args) => ("apply", apply::run(args)),
        Command::History(args) => ("history", history::history(args)),
        Command::Show(args) => ("show", history::show(args)),
        Command::Undo(args) => ("undo", history::undo(args)),
        Command::Checkpoint(args) => ("checkpoint", rewind::checkpoint(args)),
        Command::Diff(args) => ("diff", rewind::diff(args)),
        Command::Rewind(args) => ("rewind", rewind::rewind(args)),
        Command::Branch(args) => ("branch", branch::run(args)),
        Command::Prompt(args) => ("prompt", prompt::prompt(args)),
        Command::List(args) => ("list", prompt::list(args)),
        Command::Completions(args) => ("completions", generate::completions(args)),
        Command::Man(args) => ("man", generate::man(args)),
    };
    error::finish(name, result)
}

/// This process, as the log names the transactions `command` makes.
fn who(command: &str) -> crate::transaction::Who {
    crate::transaction::Who {
        pid: std::process::id(),
        command: command.into(),
        caller: None,
    }
}

/// The process's arguments, with the form mount(8) uses rewritten into `editfs mount`.
fn args() -> Vec<std::ffi::OsString> {
    let cmd = Cli::command();
    let subcommands: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .chain(["help".to_owned()])
        .collect();
    let mount_flags: Vec<String> = cmd
        .find_subcommand("mount")
        .into_iter()
        .flat_map(|m| m.get_arguments())
        .filter_map(|a| a.get_long().map(str::to_owned))
        .collect();
    fstab::rewrite(std::env::args_os().collect(), &subcommands, &mount_flags)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every argument of every command, as `command path: argument`, that `--help`
    /// would list without a description.
    fn undescribed(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                out.push(format!("{path}: {}", arg.get_id()));
            }
        }
        for sub in cmd.get_subcommands() {
            undescribed(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_argument_in_help_has_a_description() {
        let mut cmd = super::Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        undescribed(&cmd, "editfs", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}

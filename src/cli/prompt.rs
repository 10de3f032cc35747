//! `editfs prompt` and `editfs list`: what to tell an agent, and which mounts run.

use std::path::PathBuf;

use crate::mount::{Dialect, agent_prompt, table};

use super::error::{CommandError, Ended};

#[derive(clap::Args)]
#[command(
    about = "Print the text to give an agent: how to edit files through a mount",
    long_about = "Print a short section for an agent's system prompt (or its instructions \
file) that says how to edit files through an editfs mount: F.edit, F.status, several files, \
history and undo. The full rules are in MOUNT/.editfs/README.",
    after_help = "For example:\n  editfs prompt /mnt/project >> AGENTS.md\n  editfs prompt /mnt/project --format patch"
)]
pub struct PromptArgs {
    /// The mount point the text names (default: the word MOUNT)
    #[arg(value_name = "MOUNT")]
    mountpoint: Option<PathBuf>,
    /// The payload form the text teaches: the one the agent was trained to write
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = Format::SearchReplace)]
    format: Format,
    /// Add what an agent working in a branch mount (`editfs mount --branch`) must know
    #[arg(long)]
    branches: bool,
}

/// What `--branches` adds: a branch's changes are the agent's alone until
/// whoever runs it commits them.
const BRANCH_NOTE: &str = "\
This mount is a branch of the project: what you change here is seen by no one else
(not the project, not other agents) until whoever runs you commits the branch, and
what they change meanwhile does not show here. History and undo cover your changes only.
";

/// `--format`: the dialects an agent may speak.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    /// SEARCH/REPLACE marker blocks written to F.edit (Aider, Cline, Roo Code)
    SearchReplace,
    /// `*** Begin Patch` or unified diffs written to .editfs/edit (Codex, `git diff`)
    Patch,
    /// JSON search/replace edits written to F.edit (str_replace tools)
    Json,
}

impl Format {
    fn dialect(self) -> Dialect {
        match self {
            Format::SearchReplace => Dialect::SearchReplace,
            Format::Patch => Dialect::Patch,
            Format::Json => Dialect::Json,
        }
    }
}

#[derive(clap::Args)]
#[command(
    about = "List the running editfs mounts",
    long_about = "List the editfs mounts of this mount namespace: mount point, SOURCE, \
whether the daemon answers (a killed daemon leaves a dead mount; `editfs unmount MOUNT` \
clears it), and the mount's options."
)]
pub struct ListArgs {
    /// Print one JSON object per mount, one per line
    #[arg(long)]
    json: bool,
}

pub fn prompt(args: PromptArgs) -> Result<Ended, CommandError> {
    let dialect = args.format.dialect();
    let text = match args.mountpoint {
        Some(m) => {
            let shown = std::path::absolute(&m).unwrap_or(m);
            agent_prompt(dialect, &shown.display().to_string())
        }
        None => agent_prompt(dialect, "MOUNT"),
    };
    print!("{text}");
    if args.branches {
        print!("\n{BRANCH_NOTE}");
    }
    Ok(Ended::Done)
}

pub fn list(args: ListArgs) -> Result<Ended, CommandError> {
    let mounts = table::mounts();
    for m in &mounts {
        if args.json {
            let line = serde_json::to_string(m).map_err(|e| CommandError::failed(e.to_string()))?;
            println!("{line}");
        } else {
            let state = if m.serving { "serving" } else { "dead" };
            println!(
                "{}\t{}\t{state}\t{}",
                m.mountpoint.display(),
                m.source,
                m.options.join(",")
            );
        }
    }
    if mounts.is_empty() && !args.json {
        eprintln!("editfs list: no editfs mount here");
    }
    Ok(Ended::Done)
}

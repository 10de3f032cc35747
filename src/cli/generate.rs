//! `editfs completions SHELL` and `editfs man`: generated from the same clap
//! definitions that parse the command line, so they cannot drift from `--help`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;

#[derive(clap::Args)]
#[command(
    about = "Print a shell completion script",
    after_help = "Install, for example:\n  \
editfs completions bash > ~/.local/share/bash-completion/completions/editfs\n  \
editfs completions zsh > \"${fpath[1]}/_editfs\"\n  \
editfs completions fish > ~/.config/fish/completions/editfs.fish"
)]
pub struct CompletionsArgs {
    /// The shell to complete for
    shell: Shell,
}

#[derive(clap::Args)]
#[command(
    about = "Print a manual page (roff), or write them all to a directory",
    after_help = "Read one with `editfs man mount | man -l -`, or install them all:\n  \
editfs man --out-dir /usr/local/share/man/man1"
)]
pub struct ManArgs {
    /// The subcommand whose page to print (default: the top-level page)
    subcommand: Option<String>,
    /// Write editfs.1 and one editfs-SUBCOMMAND.1 per subcommand into this directory
    #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
    out_dir: Option<PathBuf>,
}

pub fn completions(args: CompletionsArgs) -> ExitCode {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "editfs", &mut io::stdout());
    ExitCode::SUCCESS
}

pub fn man(args: ManArgs) -> ExitCode {
    let mut cmd = Cli::command();
    cmd.build();
    if let Some(dir) = args.out_dir {
        return match clap_mangen::generate_to(cmd, &dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("editfs man: cannot write pages to {}: {e}", dir.display());
                ExitCode::FAILURE
            }
        };
    }
    let page = match &args.subcommand {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                eprintln!("editfs man: no subcommand `{name}` (see `editfs --help`)");
                return ExitCode::from(super::USAGE);
            }
        },
    };
    let mut out = Vec::new();
    match clap_mangen::Man::new(page).render(&mut out) {
        Ok(()) => write_out(&out),
        Err(e) => {
            eprintln!("editfs man: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes to standard output; a closed pipe (`editfs man | head`) is not an error.
fn write_out(bytes: &[u8]) -> ExitCode {
    match io::stdout().write_all(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("editfs: cannot write to standard output: {e}");
            ExitCode::FAILURE
        }
    }
}

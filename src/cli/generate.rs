//! `editfs completions SHELL` and `editfs man`: generated from the same clap
//! definitions that parse the command line, so they cannot drift from `--help`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Command, CommandFactory};
use clap_complete::Shell;

use super::Cli;
use super::error::{CommandError, Ended};

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

pub fn completions(args: CompletionsArgs) -> Result<Ended, CommandError> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "editfs", &mut io::stdout());
    Ok(Ended::Done)
}

pub fn man(args: ManArgs) -> Result<Ended, CommandError> {
    let mut cmd = Cli::command();
    cmd.build();
    if let Some(dir) = args.out_dir {
        write_pages(&cmd, &dir).map_err(|e| {
            CommandError::failed(format!("cannot write pages to {}: {e}", dir.display()))
        })?;
        return Ok(Ended::Done);
    }
    let page = match &args.subcommand {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => with_synopsis(sub),
            None => {
                let e = CommandError::usage(format!("no subcommand `{name}`"));
                return Err(e.hint("editfs --help lists them"));
            }
        },
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|e| CommandError::failed(e.to_string()))?;
    write_out(&out)
}

/// The subcommands that get a page of their own: `help` has none (its pages
/// would only repeat the others'), nor have hidden ones.
fn paged(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

/// `editfs.1` and one `editfs-SUBCOMMAND.1` per subcommand in `dir`.
fn write_pages(cmd: &Command, dir: &Path) -> io::Result<()> {
    clap_mangen::Man::new(cmd.clone()).generate_to(dir)?;
    for sub in paged(cmd) {
        clap_mangen::Man::new(with_synopsis(sub)).generate_to(dir)?;
    }
    Ok(())
}

/// `sub` with its synopsis spelt out, unless it has its own: clap_mangen's lists
/// options without the values they take (`[--match]`, `[-o ]`), which leaves the
/// reader to guess where a value goes.
fn with_synopsis(sub: &Command) -> Command {
    if sub.get_overridden_usage().is_some() {
        return sub.clone();
    }
    let name = sub.get_bin_name().unwrap_or(sub.get_name());
    let mut words = vec![name.to_string()];
    let options = sub
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"));
    words.extend(options.filter_map(synopsis_option));
    words.extend(sub.get_positionals().filter(|a| !a.is_hide_set()).map(|a| {
        match a.is_required_set() {
            true => format!("<{}>", value_name(a)),
            false => format!("[{}]", value_name(a)),
        }
    }));
    sub.clone().override_usage(words.join(" "))
}

/// `[--keep <N>]`, `[-o <OPTIONS>]`, `[--json]`, or `[--no-snapshot <GLOB>]...`.
fn synopsis_option(arg: &Arg) -> Option<String> {
    let flag = match (arg.get_long(), arg.get_short()) {
        (Some(long), _) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => return None,
    };
    let value = match arg.get_action().takes_values() {
        true => format!(" <{}>", value_name(arg)),
        false => String::new(),
    };
    let again = match arg.get_action() {
        ArgAction::Append => "...",
        _ => "",
    };
    Some(format!("[{flag}{value}]{again}"))
}

/// What an argument's value is called: its value name, else its id in capitals.
fn value_name(arg: &Arg) -> String {
    match arg.get_value_names() {
        Some(names) => names
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        None => arg.get_id().as_str().to_uppercase(),
    }
}

/// Writes to standard output; a closed pipe (`editfs man | head`) is not an error.
fn write_out(bytes: &[u8]) -> Result<Ended, CommandError> {
    match io::stdout().write_all(bytes) {
        Ok(()) => Ok(Ended::Done),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Ended::Done),
        Err(e) => Err(CommandError::failed(format!(
            "cannot write to standard output: {e}"
        ))),
    }
}

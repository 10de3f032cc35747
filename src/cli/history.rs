//! `editfs history`, `editfs show` and `editfs undo`: what happened, and taking it back.

use std::fs;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use editfs::engine::Outcome;
use editfs::history;
use editfs::store::{STATE_DIR, Store, atomic};
use editfs::transaction::{Root, Who, undo};

#[derive(clap::Args)]
#[command(about = "List the transactions on SOURCE (on PATH only, if given)")]
pub struct HistoryArgs {
    /// The project directory (the one that was mounted)
    source: PathBuf,
    /// A file, relative to SOURCE
    path: Option<String>,
    /// The state directory, when it is not SOURCE/.editfs
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
#[command(about = "Show transaction TXID as a diff of the files it changed")]
pub struct ShowArgs {
    source: PathBuf,
    txid: u64,
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
#[command(
    about = "Restore PATH as it was before its latest transaction (or before --to TXID), as a new transaction",
    after_help = "The undo is itself a transaction, so it can be undone. It refuses to overwrite \
changes made after that transaction (later transactions, or changes made outside editfs) and \
names them, unless --force. Inside a mount, write `PATH [TXID] [--force]` to .editfs/undo and \
read .editfs/status."
)]
pub struct UndoArgs {
    source: PathBuf,
    /// The file, relative to SOURCE
    path: String,
    /// The transaction whose pre-image to restore
    #[arg(long = "to", value_name = "TXID")]
    to: Option<u64>,
    /// Overwrite changes made after that transaction
    #[arg(long)]
    force: bool,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

fn open(source: &Path, state: Option<&Path>) -> Result<Store, String> {
    let dir = state.map_or_else(|| source.join(STATE_DIR), Path::to_owned);
    if !dir.is_dir() {
        return Err(format!(
            "{} has no state directory ({} does not exist)",
            source.display(),
            dir.display()
        ));
    }
    let store = Store::open(&dir).map_err(|e| e.to_string())?;
    if !store.recovered().is_empty() {
        eprintln!("editfs: {}", store.recovered());
    }
    Ok(store)
}

fn fail(cmd: &str, message: String) -> ExitCode {
    eprintln!("editfs {cmd}: {message}");
    ExitCode::FAILURE
}

pub fn history(args: HistoryArgs) -> ExitCode {
    match open(&args.source, args.state_dir.as_deref()) {
        Ok(store) => {
            print!("{}", history::table(&store.entries(), args.path.as_deref()));
            ExitCode::SUCCESS
        }
        Err(e) => fail("history", e),
    }
}

pub fn show(args: ShowArgs) -> ExitCode {
    match open(&args.source, args.state_dir.as_deref()).and_then(|s| history::show(&s, args.txid)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail("show", e),
    }
}

pub fn undo(args: UndoArgs) -> ExitCode {
    let run = || -> Result<(String, Outcome), String> {
        let store = open(&args.source, args.state_dir.as_deref())?;
        let root = fs::canonicalize(&args.source).map_err(|e| e.to_string())?;
        let dir = atomic::open_dir(&root).map_err(|e| e.to_string())?;
        let who = Who {
            pid: std::process::id(),
            command: "editfs undo".into(),
        };
        let req = undo::Request {
            rel: &args.path,
            to: args.to,
            force: args.force,
        };
        let report = undo::run(
            &store,
            Root {
                fd: dir.as_fd(),
                path: &root,
            },
            &req,
            &who,
        );
        let text = if args.json {
            report.to_json() + "\n"
        } else {
            report.to_string()
        };
        Ok((text, report.outcome))
    };
    match run() {
        Ok((text, outcome)) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            ExitCode::from(if outcome == Outcome::Ok { 0 } else { 1 })
        }
        Err(e) => fail("undo", e),
    }
}

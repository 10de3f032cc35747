//! `editfs history`, `editfs show` and `editfs undo`: what happened, and taking it back.

use std::io::Write;

use crate::history;
use crate::store::{Retention, Tail, View};
use crate::transaction::report::{Form, Render, shared};
use crate::transaction::undo;

use super::color::ColorArg;
use super::error::{CommandError, Ended};
use super::state::{ProjectArgs, note_interrupted, open};
use super::who;

#[derive(clap::Args)]
#[command(
    about = "List the transactions on SOURCE (on PATH only, if given)",
    after_help = "Only reads: it works on a read-only state directory, and on a mount point \
(MOUNT/.editfs is the state seen through the mount)."
)]
pub struct HistoryArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// A file: relative to SOURCE (`src/x.rs`, `./src/x.rs`) or an absolute path inside it
    path: Option<String>,
    /// After the table, print each new transaction as it is logged, until interrupted
    #[arg(long, short = 'f')]
    follow: bool,
}

#[derive(clap::Args)]
#[command(
    about = "Show transaction TXID as a diff of the files it changed",
    after_help = "Only reads, as history does: SOURCE may be a mount point."
)]
pub struct ShowArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// The transaction id, as `history` lists it
    txid: u64,
    #[command(flatten)]
    color: ColorArg,
}

#[derive(clap::Args)]
#[command(
    about = "Restore PATH as it was before its latest transaction (or before --to TXID), or every file of --tx TXID, as a new transaction",
    after_help = "The undo is itself a transaction, so it can be undone. Later transactions that \
editfs recorded stay in history and are simply overwritten; only changes made outside editfs \
since its latest recorded transaction on a file are refused (and named) unless --force. Inside a \
mount, write `PATH [TXID] [--force]` or `--tx TXID [--force]` to .editfs/undo and read \
.editfs/status."
)]
#[command(
    group(clap::ArgGroup::new("what").required(true).args(["path", "tx"])),
    override_usage = "editfs undo SOURCE PATH [--to TXID] [--force] [--json] [--dry-run]\n       \
editfs undo SOURCE --tx TXID [--force] [--json] [--dry-run]"
)]
pub struct UndoArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// The file: relative to SOURCE or an absolute path inside it
    path: Option<String>,
    /// Restore PATH as it was before this transaction (default: its latest)
    #[arg(long = "to", value_name = "TXID", requires = "path")]
    to: Option<u64>,
    /// Restore every file of this transaction as it was before it, as one transaction
    #[arg(long, value_name = "TXID", conflicts_with_all = ["path", "to"])]
    tx: Option<u64>,
    #[command(flatten)]
    how: RestoreArgs,
}

/// The options undo and rewind share.
#[derive(clap::Args)]
pub(super) struct RestoreArgs {
    /// Overwrite changes made outside editfs since its latest record of a file (without
    /// it, such a file is named and nothing is restored)
    #[arg(long)]
    force: bool,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
    /// Print what it would change (a diff per file) and change nothing: no file, no
    /// transaction id, no log line; exit 1 if it would be refused
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    color: ColorArg,
}

pub fn history(args: HistoryArgs) -> Result<Ended, CommandError> {
    let held = args.project.read()?;
    let view = View::new(&held.path());
    let path = args
        .path
        .as_deref()
        .map(|p| args.project.path(p))
        .transpose()
        .map_err(|e| CommandError::from(e).into_usage())?;
    note_interrupted(&view);
    let mut log = Tail::default();
    let mut text = history::HEADER.to_owned();
    let mut out = std::io::stdout();
    loop {
        text.extend(
            log.new_entries(&view)
                .iter()
                .map(|e| history::row(e, path.as_deref())),
        );
        // A reader that went away (`| head`) ends the command quietly.
        let written = out.write_all(text.as_bytes()).and_then(|()| out.flush());
        if written.is_err() || !args.follow {
            break;
        }
        text.clear();
        std::thread::sleep(FOLLOW_EVERY);
    }
    Ok(Ended::Done)
}

/// How often `history --follow` looks for new lines in the log.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

pub fn show(args: ShowArgs) -> Result<Ended, CommandError> {
    let held = args.project.read()?;
    let view = View::new(&held.path());
    note_interrupted(&view);
    let text = history::show(&view, args.txid)?;
    let _ = args.color.print(&text);
    Ok(Ended::Done)
}

pub fn undo(args: UndoArgs) -> Result<Ended, CommandError> {
    let rel = args
        .path
        .as_deref()
        .map(|p| args.project.path(p))
        .transpose()?;
    let what = match (rel, args.tx) {
        (_, Some(tx)) => undo::What::Tx(tx),
        (Some(rel), None) => undo::What::File { rel, to: args.to },
        (None, None) => {
            let e = CommandError::failed("nothing to undo was named");
            return Err(e.hint("give PATH or --tx TXID (editfs history lists them)"));
        }
    };
    restore(&args.project, what, &args.how, "editfs undo")
}

/// Runs the undo or rewind of `what` on the project (or, with `--dry-run`,
/// says what it would do, opening no store) for `command`, the command line
/// the log names; prints the report as text or JSON.
pub(super) fn restore(
    project: &ProjectArgs,
    what: undo::What,
    how: &RestoreArgs,
    command: &str,
) -> Result<Ended, CommandError> {
    let held = project.write()?;
    let state = held.path();
    let opened = project.root()?;
    let root = opened.root();
    let req = undo::Request {
        what,
        force: how.force,
    };
    let undone = if how.dry_run {
        let view = View::new(&state);
        undo::preview(view.objects(), view.entries(), (root, None), &req)
    } else {
        let store = open(&state, Retention::default())?;
        let undone = undo::run(&store, root, &req, &who(command));
        for r in undone.files().into_iter().filter(|r| r.tx > 0) {
            store.share_report(&r.file, &shared(r));
        }
        undone
    };
    let text = undone.render(if how.json { Form::Json } else { Form::Text });
    let _ = how.color.print(&text);
    Ok(Ended::Transaction(undone.head().outcome))
}

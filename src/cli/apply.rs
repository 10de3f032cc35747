//! `editfs apply`: the engine, snapshots and reports, without FUSE.

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use editfs::engine::{Options, Outcome, Report};
use editfs::store::{Store, atomic};
use editfs::transaction::{self, Target};

use super::options::EngineArgs;

const PAYLOAD_HELP: &str = "\
Payload formats (detected automatically):

  Marker blocks, any number, each marker alone on its line (5 or more marker characters):
    <<<<<<< SEARCH
    exact lines to find
    =======
    lines to put in their place
    >>>>>>> REPLACE
  The family ------- SEARCH / ======= / +++++++ REPLACE works too, as do ``` fences
  around blocks. An optional `:start_line:N` line and a `-------` line at the top of
  SEARCH pick the occurrence nearest line N. Text outside blocks is ignored (noted).

  JSON, one object or an array: {\"search\": \"old\", \"replace\": \"new\"} with optional
  regex, ignore_case, start_line, end_line, all, expected_replacements, if_match
  (aliases: old_str/old_string, new_str/new_string, replace_all).

Operations run in order; if one fails, the file is not touched at all. A SEARCH that
is not found exactly is tried again ignoring trailing whitespace, then indentation,
then typographic quotes and dashes, then line-number prefixes; such a match is used
only if it is the only one, and is reported as a warning.

Snapshots of each file before it changes go to --state-dir, else to the nearest
ancestor's .editfs/ directory (as git finds .git), else none are kept.";

/// Arguments of `editfs apply`.
#[derive(clap::Args)]
#[command(about = "Apply a payload of edits to FILE, print the report", after_help = PAYLOAD_HELP)]
pub struct Args {
    /// The file to edit (an empty SEARCH creates it)
    file: PathBuf,
    /// File holding the payload; `-` or nothing reads standard input
    payload: Option<PathBuf>,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
    /// Where to keep snapshots and the log (default: the nearest ancestor's .editfs/)
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> ExitCode {
    let opts = args.engine.options();
    match execute(&args, &opts) {
        Ok(report) => print(&report, args.json),
        Err(message) => {
            eprintln!("editfs apply: {message}");
            ExitCode::from(super::USAGE)
        }
    }
}

fn execute(args: &Args, opts: &Options) -> Result<Report, String> {
    let path = resolve(&args.file)?;
    let payload = read_payload(args.payload.as_deref(), opts.max_payload)?;
    let state = match &args.state_dir {
        Some(d) => Some(d.clone()),
        None => Store::find_for(&path),
    };
    let store = state
        .as_deref()
        .map(Store::open)
        .transpose()
        .map_err(|e| e.to_string())?;
    let rel = display_name(&path, &args.file, state.as_deref());
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(format!("{} names no file", args.file.display()));
    };
    let dir = atomic::open_dir(parent).map_err(|e| e.to_string())?;
    let target = Target {
        dir: dir.as_fd(),
        name,
        rel: &rel,
    };
    Ok(transaction::run(store.as_ref(), &target, &payload, opts))
}

/// The real file behind `file`: symlinks are followed, so the link stays a link.
fn resolve(file: &Path) -> Result<PathBuf, String> {
    if let Ok(real) = fs::canonicalize(file) {
        if real.is_dir() {
            return Err(format!("{} is a directory, not a file", file.display()));
        }
        return Ok(real);
    }
    let name = file
        .file_name()
        .ok_or_else(|| format!("{} names no file", file.display()))?;
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = fs::canonicalize(parent).map_err(|e| {
        format!(
            "the directory {} of {} is not usable: {e}",
            parent.display(),
            file.display()
        )
    })?;
    Ok(dir.join(name))
}

/// The file's name in reports and snapshots: relative to the project that holds the state directory.
fn display_name(path: &Path, given: &Path, state: Option<&Path>) -> String {
    let root = state
        .and_then(|s| fs::canonicalize(s).ok())
        .and_then(|s| s.parent().map(Path::to_owned));
    match root.as_deref().and_then(|r| path.strip_prefix(r).ok()) {
        Some(rel) => rel.to_string_lossy().into_owned(),
        None => given.to_string_lossy().into_owned(),
    }
}

/// Reads at most one byte more than the limit, so an oversized payload is refused without being held.
fn read_payload(source: Option<&Path>, limit: usize) -> Result<Vec<u8>, String> {
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let mut buf = Vec::new();
    let reader: Box<dyn Read> = match source {
        None => Box::new(io::stdin().lock()),
        Some(p) if p == Path::new("-") => Box::new(io::stdin().lock()),
        Some(p) => Box::new(
            fs::File::open(p)
                .map_err(|e| format!("cannot open the payload {}: {e}", p.display()))?,
        ),
    };
    reader
        .take(cap)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read the payload: {e}"))?;
    Ok(buf)
}

fn print(report: &Report, json: bool) -> ExitCode {
    let text = if json {
        report.to_json() + "\n"
    } else {
        report.to_string()
    };
    let _ = io::stdout().lock().write_all(text.as_bytes());
    ExitCode::from(match report.outcome {
        Outcome::Ok => 0,
        Outcome::Failed => 1,
        Outcome::Rejected => 2,
    })
}

//! `editfs apply`: the engine, snapshots and reports, without FUSE.

use std::fs;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::engine::{Options, Outcome, Received};
use crate::store::{Held, Retention, Store, open_dir};
use crate::transaction::report::{Form, Render, shared};
use crate::transaction::{self, Root, Target, multi};

use super::error::{CommandError, Ended};
use super::options::EngineArgs;
use super::state::{StateArgs, open};

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
  SEARCH pick the occurrence nearest line N, counted in the file as it was before the
  payload (lines earlier blocks add are counted in). Text outside blocks is ignored (noted).

  JSON, one object or an array: {\"search\": \"old\", \"replace\": \"new\"} with optional
  regex, ignore_case, start_line, end_line, all, expected_replacements, if_match
  (aliases: old_str/old_string, new_str/new_string, replace_all).

  Other tools' calls, as they are: Roo Code's search_and_replace and apply_diff,
  Cline's replace_in_file (XML or JSON arguments), Vibe's {\"file_path\", \"content\"},
  Desktop Commander's edit_block arguments, or a whole tool call carrying them
  ({\"name\", \"input\"} or {\"name\", \"arguments\"}, or as XML: <invoke name=\"...\">
  with <parameter name=\"...\"> elements); a path inside must name FILE.
  Patches: a unified diff (git diff, diff -u; `@@ ... @@` hunks too) or *** Begin
  Patch; each hunk is one operation, and a relative path in its header must name
  FILE. With --multi, a patch may also delete and move files (*** Delete File,
  *** Move to, +++ /dev/null, git's rename from/to), in the same transaction.

Operations run in order; if one fails, the file is not touched at all. A SEARCH that
is not found exactly is tried again ignoring trailing whitespace, then indentation,
then typographic quotes and dashes, then line-number prefixes, then indentation that
differs line by line, then a fragment of a line found once as text; such a match is
used only if it is the only one, and is reported as a warning.

Snapshots of each file before it changes go to --state-dir, else to the nearest
ancestor's .editfs/ directory (as git finds .git) when it is owned by you or root and
writable by no one else (one that is not is named in the report and left unused), else
none are kept.";

/// Arguments of `editfs apply`.
#[derive(clap::Args)]
#[command(
    about = "Apply a payload of edits to FILE (or, with --multi, to files under ROOT); print the report",
    after_help = PAYLOAD_HELP,
    mut_arg("state_dir", |a| a.help("Where versions and the log are kept (default: the nearest ancestor's .editfs/)"))
)]
pub struct Args {
    /// The file to edit (an empty SEARCH creates it); with --multi, the payload
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// File holding the payload; `-` or nothing reads standard input
    payload: Option<PathBuf>,
    /// Edit several files under ROOT in one transaction: each file's path, relative to
    /// ROOT (or absolute inside it), stands alone on a line before its blocks (or in
    /// JSON `path`, or in a tool call)
    #[arg(long, value_name = "ROOT")]
    multi: Option<PathBuf>,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
    /// Print what the payload would do (the report and its diff) and change nothing:
    /// no file, no transaction id, no log line; the exit code is the edit's
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    state: StateArgs,
    /// Versions kept per file, before and after (the oldest go first)
    #[arg(long, value_name = "N", default_value_t = 100)]
    keep: usize,
    #[command(flatten)]
    color: super::color::ColorArg,
}

/// What `apply` prints, and the outcome that picks the exit code.
struct Printed {
    text: String,
    outcome: Outcome,
}

impl Printed {
    fn of(json: bool, report: &impl Render, outcome: Outcome) -> Printed {
        let form = if json { Form::Json } else { Form::Text };
        Printed {
            text: report.render(form),
            outcome,
        }
    }
}

/// Runs `editfs apply`: what it cannot run on (the file, the payload, the
/// state directory) is bad usage, as a rejected payload is.
pub fn run(args: Args) -> Result<Ended, CommandError> {
    let opts = args.engine.options();
    let printed = match &args.multi {
        Some(root) => execute_multi(&args, root, &opts),
        None => execute(&args, &opts),
    };
    Ok(print(
        printed.map_err(CommandError::into_usage)?,
        args.color,
    ))
}

/// The store a run keeps its versions and log in; none without a state
/// directory, or for a dry run, which writes nothing there (not even a recovery).
fn stored(args: &Args, state: Option<&Path>) -> Result<Option<Store>, CommandError> {
    let retention = Retention {
        keep: args.keep,
        ..Retention::default()
    };
    match state {
        Some(dir) if !args.dry_run => open(dir, retention).map(Some),
        _ => Ok(None),
    }
}

fn execute(args: &Args, opts: &Options) -> Result<Printed, CommandError> {
    let given = args
        .file
        .as_deref()
        .ok_or_else(|| CommandError::usage("FILE is missing").hint("see editfs apply --help"))?;
    let path = resolve(given)?;
    let payload = read_payload(args.payload.as_deref(), opts.max_payload)?;
    let (held, passed_over) = args.state.for_file(&path)?;
    let state = held.as_ref().map(Held::path);
    let store = stored(args, state.as_deref())?;
    // Inside the project that holds the state directory, paths (in reports too) are
    // the project's; elsewhere the report names the file as it was given.
    let project = project_of(state.as_deref());
    let (root, rel, label) = match project
        .as_deref()
        .and_then(|r| Some((r, path.strip_prefix(r).ok()?)))
    {
        Some((r, rel)) => {
            let rel = rel.to_string_lossy().into_owned();
            (r.to_owned(), rel.clone(), rel)
        }
        None => {
            let no_file = || CommandError::usage(format!("{} names no file", given.display()));
            let parent = path.parent().ok_or_else(no_file)?;
            let name = path.file_name().ok_or_else(no_file)?;
            let label = given.to_string_lossy().into_owned();
            (
                parent.to_owned(),
                name.to_string_lossy().into_owned(),
                label,
            )
        }
    };
    let dir = open_dir(&root)?;
    let who = super::who("editfs apply");
    let target = Target {
        root: Root {
            fd: dir.as_fd(),
            path: &root,
            mount: None,
            from: Path::new(""),
            caller: None,
        },
        rel: &rel,
        label: &label,
        who: &who,
        dir: None,
        meant: None,
        hold: None,
    };
    let payload = Received::cut(&payload.0, payload.1);
    let mut report = match args.dry_run {
        true => transaction::dry_run(&target, payload, opts),
        false => transaction::run(store.as_ref(), &target, payload, opts),
    };
    report.notes.splice(0..0, passed_over);
    // A mount of the project shows it in F.status: the latest report, by anyone.
    if let Some(s) = store.as_ref().filter(|_| label == rel && report.tx > 0) {
        s.share_report(&rel, &shared(&report));
    }
    Ok(Printed::of(args.json, &report, report.outcome))
}

fn execute_multi(args: &Args, root: &Path, opts: &Options) -> Result<Printed, CommandError> {
    if args.payload.is_some() {
        return Err(CommandError::usage(
            "with --multi, give only the payload (the files are named inside it)",
        ));
    }
    let root = fs::canonicalize(root)
        .map_err(|e| CommandError::usage(format!("ROOT {}: {e}", root.display())))?;
    let payload = read_payload(args.file.as_deref(), opts.max_payload)?;
    let (held, passed_over) = args.state.for_file(&root.join("x"))?;
    let state = held.as_ref().map(Held::path);
    let store = stored(args, state.as_deref())?;
    // ROOT inside the project that holds the state directory: the payload's
    // paths start at ROOT, and are kept as the project's, as a single file's are.
    let (root, from) = match project_of(state.as_deref())
        .and_then(|p| Some((p.clone(), root.strip_prefix(&p).ok()?.to_owned())))
    {
        Some(inside) => inside,
        None => (root, PathBuf::new()),
    };
    let dir = open_dir(&root)?;
    let root = Root {
        fd: dir.as_fd(),
        path: &root,
        mount: None,
        from: &from,
        caller: None,
    };
    let payload = Received::cut(&payload.0, payload.1);
    let mut report = match args.dry_run {
        true => {
            multi::Plan::parse(root, payload, opts).dry_run(root, opts, &super::who("editfs apply"))
        }
        false => multi::run(
            store.as_ref(),
            root,
            payload,
            opts,
            &super::who("editfs apply"),
        ),
    };
    report.notes.splice(0..0, passed_over);
    if let Some(s) = store.as_ref() {
        for r in report.files.iter().filter(|r| r.outcome == Outcome::Ok) {
            s.share_report(&r.file, &shared(r));
        }
    }
    Ok(Printed::of(args.json, &report, report.outcome))
}

/// The project a state directory belongs to: the directory that holds it.
fn project_of(state: Option<&Path>) -> Option<PathBuf> {
    let state = fs::canonicalize(state?).ok()?;
    state.parent().map(Path::to_owned)
}

/// The path of `path` with every symlink on it followed by the kernel, as an
/// `open` follows them: `fs.protected_symlinks` then refuses another user's
/// link in a sticky world-writable directory (`/tmp`) as it refuses `>` through
/// it (`realpath` reads links itself, and would follow it).
fn real_path(path: &Path) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    let how = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, how, rustix::fs::Mode::empty())?;
    fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The real file behind `file`: symlinks are followed, so the link stays a link.
fn resolve(file: &Path) -> Result<PathBuf, CommandError> {
    match real_path(file) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(CommandError::usage(format!(
                "{}: the kernel refuses the path ({e}): a directory on its way you may not search, or another user's symlink in a sticky world-writable directory, which fs.protected_symlinks lets no one else follow",
                file.display()
            )));
        }
        Err(_) => {}
        Ok(real) => {
            if real.is_dir() {
                let message = format!("{} is a directory, not a file", file.display());
                return Err(CommandError::usage(message));
            }
            return Ok(real);
        }
    }
    let name = file
        .file_name()
        .ok_or_else(|| CommandError::usage(format!("{} names no file", file.display())))?;
    let parent = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = real_path(parent).map_err(|e| {
        CommandError::usage(format!(
            "the directory {} of {} is not usable: {e}",
            parent.display(),
            file.display()
        ))
    })?;
    Ok(dir.join(name))
}

/// Reads at most one byte more than the limit, so an oversized payload is refused without being held.
/// The payload, read up to one byte past the limit, and its real size: the rest
/// of an oversized payload is counted, not kept.
fn read_payload(source: Option<&Path>, limit: usize) -> Result<(Vec<u8>, usize), CommandError> {
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let mut buf = Vec::new();
    let mut reader: Box<dyn Read> = match source {
        None => Box::new(io::stdin().lock()),
        Some(p) if p == Path::new("-") => Box::new(io::stdin().lock()),
        Some(p) => Box::new(fs::File::open(p).map_err(|e| {
            CommandError::usage(format!("cannot open the payload {}: {e}", p.display()))
        })?),
    };
    let why = |e: io::Error| CommandError::usage(format!("cannot read the payload: {e}"));
    (&mut reader).take(cap).read_to_end(&mut buf).map_err(why)?;
    let rest = io::copy(&mut reader, &mut io::sink()).map_err(why)?;
    let size = usize::try_from(rest)
        .unwrap_or(usize::MAX)
        .saturating_add(buf.len());
    Ok((buf, size))
}

fn print(p: Printed, color: super::color::ColorArg) -> Ended {
    // JSON has no line a diff could start on (its strings escape newlines), so it
    // goes out as it is.
    let _ = color.print(&p.text);
    Ended::Transaction(p.outcome)
}

//! `editfs branch`: make, list and abort branches of a project (see
//! docs/branches.md).

use std::fs;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::branch::{self, BRANCHES, Branch, BranchError, Stack, Tree};
use crate::mount::MountConfig;
use crate::store::{Held, Retention};

use super::error::{CommandError, Ended};
use super::rewind::{DiffFormat, json as json_changes, pair_renames};
use super::state::{ProjectArgs, open};
use super::who;

#[derive(clap::Args)]
#[command(
    about = "Branches of a project: copy-free forks to run agents side by side, then keep one or drop it",
    long_about = "A branch is a point of SOURCE's history plus a directory of the branch's own \
changes, kept in SOURCE's state directory. Making one copies no file. `editfs mount SOURCE MOUNT \
--branch NAME` serves it: reads see the project as it was at the branch's base and the branch's \
own changes; writes land in the branch only. See docs/branches.md."
)]
pub struct BranchArgs {
    #[command(subcommand)]
    command: BranchCommand,
}

#[derive(clap::Subcommand)]
enum BranchCommand {
    Create(CreateArgs),
    List(ListArgs),
    Diff(DiffArgs),
    Commit(CommitArgs),
    Abort(AbortArgs),
}

#[derive(clap::Args)]
#[command(
    about = "Make a branch of SOURCE: a checkpoint and an empty directory for its changes, no copy",
    after_help = "The branch starts from a checkpoint taken now, or from the point --from names. \
Its name is one word of letters, digits, '-', '_' and '.'. Then: `editfs branch list SOURCE`, \
`editfs branch abort SOURCE NAME`."
)]
struct CreateArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// The branch's name
    name: String,
    /// Start from this point of the history instead of now: a checkpoint's name or a transaction id (0: the start)
    #[arg(long, value_name = "TXID|NAME")]
    from: Option<String>,
}

#[derive(clap::Args)]
#[command(
    about = "List SOURCE's branches: base point, size of their changes, and the mounts serving them",
    after_help = "One line per branch: name, base transaction, files changed (removals \
included) and their bytes, and the mount points serving it, or `not mounted`."
)]
struct ListArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// Print one JSON object per branch, one per line
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(
    about = "Show a branch's net change against its base, or between two branches, as editfs diff prints it",
    after_help = "With one branch: each file as it was at the branch's base against how the branch \
holds it. With two, A and B: each file as A holds it against how B does. Read from the branch's \
directory: no mount needs to run. Files alike on both sides are left out; a removed and a created \
file at least 50% alike show as one rename."
)]
struct DiffArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// The branch (with B: the one compared from)
    name: String,
    /// A second branch, compared against the first
    #[arg(value_name = "B")]
    other: Option<String>,
    #[command(flatten)]
    format: DiffFormat,
}

#[derive(clap::Args)]
#[command(
    about = "Bring a branch's changes into SOURCE as one transaction, then remove the branch",
    after_help = "The branch's net change against its base (what `editfs branch diff SOURCE NAME` \
prints) is applied to SOURCE as it is now, as one multi-file transaction: one id, undone whole by \
`editfs undo SOURCE --tx ID`. A file SOURCE did not change since the base takes the branch's \
content; one it changed elsewhere takes the branch's change where its text now is, as any edit \
re-anchors; one whose changed lines SOURCE changed too fails the whole commit, which then names \
each such file with the report of the hunk that did not apply, and changes nothing. Refused \
while a mount serves the branch. Run by root on another user's branch, it acts as that user: \
it writes, makes and removes only what that user may in SOURCE now. Exit codes as apply's: 0 \
committed, 1 failed (nothing written)."
)]
struct CommitArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// The branch's name
    name: String,
    /// Print what the commit would do, and change nothing
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(
    about = "Discard a branch and its changes",
    after_help = "Refused while a mount serves the branch, unless --force. Only its owner \
(or root) may abort it. The project is not touched; the checkpoint the branch started from \
stays in its history."
)]
struct AbortArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// The branch's name
    name: String,
    /// Unmount what serves the branch first
    #[arg(long)]
    force: bool,
}

pub fn run(args: BranchArgs) -> Result<Ended, CommandError> {
    match args.command {
        BranchCommand::Create(a) => create(a),
        BranchCommand::List(a) => list(a),
        BranchCommand::Diff(a) => diff(a),
        BranchCommand::Commit(a) => commit(a),
        BranchCommand::Abort(a) => abort(a),
    }
}

/// The real path of the state directory held, as the mount table names it.
fn real(held: &Held) -> Result<PathBuf, CommandError> {
    fs::read_link(held.path()).map_err(|e| {
        CommandError::failed(format!("cannot resolve {}: {e}", held.shown().display()))
    })
}

fn create(args: CreateArgs) -> Result<Ended, CommandError> {
    let held = args.project.made()?;
    let store = open(&held.path(), Retention::default())?;
    let made = branch::create(
        &store,
        &real(&held)?,
        &args.name,
        args.from.as_deref(),
        &who("editfs branch create"),
    )
    .map_err(failed)?;
    let source = crate::transaction::rewind::shell_word(&args.project.source);
    println!(
        "OK: branch {} from transaction {}\nthen: editfs mount {source} MOUNT --branch {}",
        made.name, made.meta.base, made.name
    );
    Ok(Ended::Done)
}

fn list(args: ListArgs) -> Result<Ended, CommandError> {
    let held = args.project.read()?;
    for found in branch::all(&real(&held)?) {
        match found {
            Ok(b) if args.json => println!("{}", json(&b)),
            Ok(b) => println!("{}", line(&b)),
            Err(e) => eprintln!("editfs branch list: {e}"),
        }
    }
    Ok(Ended::Done)
}

fn line(b: &Branch) -> String {
    let size = b.size();
    let mounts = b.mounts();
    let served = match mounts.first() {
        Some(_) => format!(
            "mounted at {}",
            mounts
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "not mounted".to_owned(),
    };
    format!(
        "{}\tbase {}\t{} file(s), {} byte(s)\t{served}",
        b.name, b.meta.base, size.entries, size.bytes
    )
}

fn json(b: &Branch) -> serde_json::Value {
    serde_json::json!({
        "name": b.name,
        "base": b.meta.base,
        "from": b.meta.from,
        "created": b.meta.created,
        "uid": b.meta.uid,
        "changes": b.size(),
        "mounts": b.mounts(),
    })
}

fn diff(args: DiffArgs) -> Result<Ended, CommandError> {
    let held = args.project.read()?;
    let state = real(&held)?;
    let source = args.project.root()?.path().to_owned();
    let store = std::sync::Arc::new(open(&held.path(), Retention::default())?);
    let tree = |name: &str| -> Result<Tree, CommandError> {
        let b = branch::open(&state, name).map_err(failed)?;
        Tree::open(&source, &state, b, store.clone()).map_err(failed)
    };
    let first = tree(&args.name)?;
    let changes = match &args.other {
        Some(other) => branch::changes(Some(&first), &tree(other)?),
        None => branch::changes(None, &first),
    }
    .map_err(failed)?;
    let files = pair_renames(changes);
    args.format
        .print(&files, || json_changes(&files, &[], &[], 0), "");
    Ok(Ended::Done)
}

fn commit(args: CommitArgs) -> Result<Ended, CommandError> {
    use crate::engine::{Options, Received, SyntaxCheck};
    use crate::transaction::multi;
    let held = args.project.write()?;
    let state = real(&held)?;
    let opened = args.project.root()?;
    let b = branch::open(&state, &args.name).map_err(failed)?;
    owned(&b)?;
    let at = b.mounts();
    if !at.is_empty() {
        return Err(failed(BranchError::Mounted { name: b.name, at }));
    }
    let store = std::sync::Arc::new(open(&held.path(), Retention::default())?);
    let tree = Tree::open(opened.path(), &state, b.clone(), store.clone()).map_err(failed)?;
    let mut changes = branch::changes(None, &tree).map_err(failed)?;
    // A file the project holds as the branch does needs nothing: so a commit
    // cut short after its transaction, before the branch was removed, runs
    // again as one that changes nothing.
    changes.retain(|c| {
        let now = crate::transaction::open(opened.root(), &c.rel, None).map(|o| o.bytes);
        !matches!(now, Ok(project) if project == c.now)
    });
    // What the project's git ignores (a build's target/) is the branch's
    // output, not its work: left out, and said so.
    let ignores = crate::mount::GitIgnores::default();
    let dir = crate::store::open_dir(opened.path())?;
    let (ignored, changes): (Vec<_>, Vec<_>) = changes.into_iter().partition(|c| {
        c.rel == ".git"
            || c.rel.starts_with(".git/")
            || ignores.ignores(dir.as_fd(), Path::new(&c.rel))
    });
    if !ignored.is_empty() && !args.json {
        eprintln!(
            "editfs branch commit: {} file(s) the project's git ignores left out (first: {})",
            ignored.len(),
            ignored[0].rel
        );
    }
    let linked: Vec<&str> = changes
        .iter()
        .filter(|c| branch::commit::through_link(opened.root().fd, &c.rel))
        .map(|c| c.rel.as_str())
        .collect();
    if !linked.is_empty() {
        let mut e = CommandError::failed(format!(
            "branch {} cannot be committed: nothing was changed",
            b.name
        ));
        for rel in linked {
            e = e.hint(format!(
                "{rel}: the project's path to it passes through a symbolic link, which a commit does not follow"
            ));
        }
        return Err(e);
    }
    let planned = branch::commit::plan(&changes);
    if !planned.refused.is_empty() {
        let mut e = CommandError::failed(format!(
            "branch {} cannot be committed: nothing was changed",
            b.name
        ));
        for (rel, why) in &planned.refused {
            e = e.hint(format!("{rel}: {why}"));
        }
        return Err(e);
    }
    if planned.payload.is_empty() {
        println!("OK: branch {} changes nothing", b.name);
        if !args.dry_run {
            b.remove().map_err(failed)?;
        }
        return Ok(Ended::Done);
    }
    // The branch's content as it is: no limit on the payload's size or
    // refusal of what does not parse (said in the report instead).
    let opts = Options {
        max_payload: planned.payload.len(),
        syntax_check: SyntaxCheck::Warn,
        ..Options::default()
    };
    let mut who = who("editfs branch commit");
    who.caller = b.maker();
    let root = opened.root().seen_by(who.caller.as_ref());
    let payload = Received::cut(planned.payload.as_bytes(), planned.payload.len());
    let report = match args.dry_run {
        true => multi::Plan::parse(root, payload, &opts).dry_run(root, &opts, &who),
        false => multi::run(Some(&store), root, payload, &opts, &who),
    };
    match args.json {
        true => println!("{}", report.to_json()),
        false => print!("{report}"),
    }
    if report.outcome == crate::engine::Outcome::Ok && !args.dry_run {
        let name = b.name.clone();
        b.remove().map_err(failed)?;
        if !args.json {
            println!("branch {name} committed and removed");
        }
    }
    Ok(Ended::Transaction(report.outcome))
}

/// Refuses a branch another user made, unless run as root.
fn owned(b: &Branch) -> Result<(), CommandError> {
    let me = rustix::process::getuid().as_raw();
    if me != 0 && me != b.meta.uid {
        return Err(failed(BranchError::NotOwner {
            name: b.name.clone(),
            owner: b.meta.uid,
        }));
    }
    Ok(())
}

fn abort(args: AbortArgs) -> Result<Ended, CommandError> {
    let held = args.project.write()?;
    let b = branch::open(&real(&held)?, &args.name).map_err(failed)?;
    owned(&b)?;
    if args.force {
        unmount_all(&b)?;
    }
    let name = b.name.clone();
    b.remove().map_err(failed)?;
    println!("OK: branch {name} aborted");
    Ok(Ended::Done)
}

/// Unmounts what serves `b`: the editfs mount above (whose daemon then
/// takes its lower layers off as it stops), then, if that daemon is dead or
/// does not do so within `LAYERS_WAIT`, the layers themselves, detached.
fn unmount_all(b: &Branch) -> Result<(), CommandError> {
    /// How long the daemon of a branch mount may take to stop.
    const LAYERS_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
    let gone = |e: String, at: &Path| CommandError::failed(format!("{}: {e}", at.display()));
    for at in b.mounts().iter().filter(|at| !at.starts_with(&b.dir)) {
        crate::mount::unmount(at).map_err(|e| gone(e.to_string(), at))?;
    }
    let until = std::time::Instant::now() + LAYERS_WAIT;
    // A killed daemon answers nothing (ENOTCONN): none will take them off.
    let dead = || {
        matches!(
            rustix::fs::statfs(b.dir.join("base")),
            Err(rustix::io::Errno::NOTCONN)
        )
    };
    while !b.mounts().is_empty() && std::time::Instant::now() < until && !dead() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for at in b.mounts() {
        rustix::mount::unmount(&at, rustix::mount::UnmountFlags::DETACH)
            .map_err(|e| gone(e.to_string(), &at))?;
    }
    Ok(())
}

/// The state directory of branch `name`'s own mount, where its daemon logs.
pub fn state_of(project_state: &Path, name: &str) -> PathBuf {
    project_state.join(BRANCHES).join(name).join("state")
}

/// Mounts the layers beneath branch `name`'s mount, and points `config`
/// at them: the overlay as its SOURCE, the branch's state directory as its own.
pub fn stack(config: &mut MountConfig, name: &str) -> Result<Stack, CommandError> {
    let failed_to = |e: &dyn std::fmt::Display| CommandError::failed(e.to_string());
    let (source, _) =
        crate::mount::check_paths(&config.source, &config.mountpoint).map_err(|e| failed_to(&e))?;
    let state =
        crate::mount::state_dir(&source, config.state_dir.as_deref()).map_err(|e| failed_to(&e))?;
    let state =
        fs::canonicalize(&state).map_err(|e| failed_to(&format!("{}: {e}", state.display())))?;
    let stack = Stack::mount(&source, &state, name).map_err(failed)?;
    config.source = stack.merged();
    config.state_dir = Some(stack.branch().state());
    Ok(stack)
}

/// A branch error as the command's, with what to do about it.
fn failed(e: BranchError) -> CommandError {
    let hint = match &e {
        BranchError::BadName { .. } => {
            Some("name it with one word of letters, digits, '-', '_' or '.'")
        }
        BranchError::Exists(_) => Some(
            "editfs branch list SOURCE shows the branches; pick another name or abort that one",
        ),
        BranchError::Missing(_) => Some("editfs branch list SOURCE shows the branches"),
        BranchError::Point(_) => Some("editfs history SOURCE lists the points"),
        BranchError::Mounted { .. } => {
            Some("unmount it first (editfs unmount MOUNT), or add --force")
        }
        BranchError::TooLarge { .. } | BranchError::NotUtf8 { .. } => {
            Some("remove it from the branch, or bring it into the project by hand")
        }
        _ => None,
    };
    let err = CommandError::failed(e.to_string());
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

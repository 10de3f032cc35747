//! SOURCE and `--state-dir`, declared once for every command that takes them,
//! and the one place that decides which state directory a command works on and
//! holds it open: SOURCE/.editfs or the one named for the history commands, the
//! nearest ancestor's for `apply`, and the one a checkpoint makes.

use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::history::GivenPath;
use crate::store::{Came, Held, STATE_DIR, Store, View, hold};
use crate::transaction::Root;

use super::error::CommandError;

/// `--state-dir`, for every command that keeps or reads a project's versions and log.
#[derive(clap::Args, Clone)]
pub struct StateArgs {
    /// Where versions and the log are kept (default: SOURCE/.editfs)
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

/// The project a history command works on, and its state directory.
#[derive(clap::Args)]
pub struct ProjectArgs {
    /// The project directory (the one that was mounted)
    pub source: PathBuf,
    #[command(flatten)]
    pub state: StateArgs,
}

impl StateArgs {
    /// The directory `--state-dir` names, if it was given.
    pub fn given(&self) -> Option<&Path> {
        self.state_dir.as_deref()
    }

    /// The state directory an apply of `file` uses, held open: the one named
    /// with `--state-dir` (made if missing; an error if it cannot be used),
    /// else the nearest ancestor's `.editfs/` when it may be trusted (see
    /// trust.rs), else none. A found one passed over comes with a note for the
    /// report saying which and why: the edit goes on without snapshots, as
    /// with no state directory.
    pub fn for_file(&self, file: &Path) -> Result<(Option<Held>, Option<String>), CommandError> {
        if let Some(dir) = self.given() {
            fs::create_dir_all(dir).map_err(|e| {
                CommandError::failed(format!(
                    "cannot make the state directory {}: {e}",
                    dir.display()
                ))
            })?;
            let held = hold(dir, Came::Given, true)?;
            return Ok((Some(held), None));
        }
        let Some(found) = Store::find_for(file) else {
            return Ok((None, None));
        };
        match hold(&found, Came::Found, true) {
            Ok(held) => Ok((Some(held), None)),
            Err(why) => Ok((
                None,
                Some(format!(
                    "state directory not used: {why}; name it with --state-dir to use it anyway"
                )),
            )),
        }
    }
}

/// The project directory opened, for a transaction to act beneath it.
pub struct Opened {
    path: PathBuf,
    dir: OwnedFd,
}

impl Opened {
    pub fn root(&self) -> Root<'_> {
        Root {
            fd: self.dir.as_fd(),
            path: &self.path,
            mount: None,
            from: Path::new(""),
            caller: None,
        }
    }

    /// The project directory's real path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl ProjectArgs {
    /// `given`, a path the user named, as the project's relative path.
    pub fn path(&self, given: &str) -> Result<String, GivenPath> {
        crate::history::project_path(&self.source, given)
    }

    /// The project directory opened.
    pub fn root(&self) -> Result<Opened, CommandError> {
        let path = fs::canonicalize(&self.source)
            .map_err(|e| CommandError::failed(format!("{}: {e}", self.source.display())))?;
        let dir = crate::store::open_dir(&path)?;
        Ok(Opened { path, dir })
    }

    /// The state directory as named: `--state-dir`, else SOURCE/.editfs.
    fn dir(&self) -> PathBuf {
        self.state
            .given()
            .map_or_else(|| self.source.join(STATE_DIR), Path::to_owned)
    }

    /// The state directory, which must exist, held open to be read: the one
    /// named with `--state-dir`, else `SOURCE/.editfs` when it may be trusted
    /// (see trust.rs).
    pub fn read(&self) -> Result<Held, CommandError> {
        self.held(false)
    }

    /// The state directory an undo, rewind or checkpoint writes: never the
    /// mount's read-only view of it, which has the control file `undo` but no
    /// lock; nothing inside may be a symbolic link.
    pub fn write(&self) -> Result<Held, CommandError> {
        let dir = self.dir();
        if dir.join("undo").exists() && !dir.join("lock").exists() {
            let message = format!("{} is an editfs mount point", self.source.display());
            return Err(CommandError::failed(message).hint(format!(
                "give the project directory, or work through the mount: `echo 'PATH [TXID]' | cat > {}`, `echo NAME | cat > {}`, `echo '--to NAME' | cat > {}`",
                dir.join("undo").display(),
                dir.join("checkpoint").display(),
                dir.join("rewind").display()
            )));
        }
        self.held(true)
    }

    /// The state directory a checkpoint goes in, made when it does not exist
    /// yet: a checkpoint is what one takes before the first change, maybe
    /// before any mount. Only its owner may open it, as a mount makes it.
    pub fn made(&self) -> Result<Held, CommandError> {
        use std::os::unix::fs::DirBuilderExt;
        if !self.source.is_dir() {
            let message = format!("{} is not a directory", self.source.display());
            return Err(CommandError::failed(message).hint("give the project's directory"));
        }
        let dir = self.dir();
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(CommandError::failed(format!(
                    "cannot make the state directory {}: {e}",
                    dir.display()
                )));
            }
        }
        self.write()
    }

    /// The state directory held open; with `written`, the store will be
    /// written: nothing inside may be a symbolic link.
    fn held(&self, written: bool) -> Result<Held, CommandError> {
        let dir = self.dir();
        let came = match self.state.given() {
            Some(_) => Came::Given,
            None => Came::Found,
        };
        let held = hold(&dir, came, written).map_err(|e| {
            if e.missing() {
                CommandError::failed(format!(
                    "{} has no state directory ({} does not exist)",
                    self.source.display(),
                    dir.display()
                ))
                .hint("a mount, an apply or a checkpoint of the project makes one")
            } else {
                CommandError::failed(format!("state directory not used: {e}"))
                    .hint("name it with --state-dir to use it anyway")
            }
        })?;
        if !View::new(&held.path()).wait_filed(FILING_WAIT) {
            eprintln!(
                "editfs: removals made through a mount are not in the history yet: the mount, or the next mount, apply or undo, files them"
            );
        }
        Ok(held)
    }
}

/// How long history waits for a mount to file the removals it has just made.
const FILING_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Opens the store in `dir`, saying what it recovered from a crash.
pub fn open(dir: &Path, retention: crate::store::Retention) -> Result<Store, CommandError> {
    let store = Store::open_with(dir, retention)?;
    if !store.recovered().is_empty() {
        eprintln!("editfs: {}", store.recovered());
    }
    Ok(store)
}

/// Says so when a commit was cut short: history only reads, so it leaves the
/// recovery to the next command that writes.
pub fn note_interrupted(view: &View) {
    let pending = view.interrupted();
    if pending > 0 {
        eprintln!(
            "editfs: {pending} interrupted commit(s) in the journal: the next mount, apply or undo completes or discards them"
        );
    }
}

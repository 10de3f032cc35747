//! Which state directory a command works on, held open: SOURCE/.editfs or
//! the one `--state-dir` names for the history commands, the nearest
//! ancestor's for `apply`, and the one a checkpoint makes.

use std::fs;
use std::path::Path;

use editfs::store::trust::{self, Came, Held};
use editfs::store::{STATE_DIR, Store, removals};

use super::error::CommandError;

/// The state directory of `source`, which must exist, held open: the one named
/// with `--state-dir`, else `SOURCE/.editfs` when it may be trusted (see
/// trust.rs). With `written`, the store will be written: nothing inside may be
/// a symbolic link.
pub fn state_dir(source: &Path, state: Option<&Path>, written: bool) -> Result<Held, CommandError> {
    let (dir, came) = match state {
        Some(d) => (d.to_owned(), Came::Given),
        None => (source.join(STATE_DIR), Came::Found),
    };
    let held = trust::hold(&dir, came, written).map_err(|e| {
        if e.missing() {
            CommandError::failed(format!(
                "{} has no state directory ({} does not exist)",
                source.display(),
                dir.display()
            ))
            .hint("a mount, an apply or a checkpoint of the project makes one")
        } else {
            CommandError::failed(format!("state directory not used: {e}"))
                .hint("name it with --state-dir to use it anyway")
        }
    })?;
    if !removals::wait_filed(&held.path(), FILING_WAIT) {
        eprintln!(
            "editfs: removals made through a mount are not in the history yet: the mount, or the next mount, apply or undo, files them"
        );
    }
    Ok(held)
}

/// How long history waits for a mount to file the removals it has just made.
const FILING_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The state directory an undo works on: never the mount's read-only view of
/// it, which has the control file `undo` but no lock.
pub fn undo_state_dir(source: &Path, state: Option<&Path>) -> Result<Held, CommandError> {
    let dir = state.map_or_else(|| source.join(STATE_DIR), Path::to_owned);
    if dir.join("undo").exists() && !dir.join("lock").exists() {
        let message = format!("{} is an editfs mount point", source.display());
        return Err(CommandError::failed(message).hint(format!(
            "give the project directory, or work through the mount: `echo 'PATH [TXID]' | cat > {}`, `echo NAME | cat > {}`, `echo '--to NAME' | cat > {}`",
            dir.join("undo").display(),
            dir.join("checkpoint").display(),
            dir.join("rewind").display()
        )));
    }
    state_dir(source, state, true)
}

pub fn open(dir: &Path) -> Result<Store, CommandError> {
    let store = Store::open(dir)?;
    if !store.recovered().is_empty() {
        eprintln!("editfs: {}", store.recovered());
    }
    Ok(store)
}

/// Says so when a commit was cut short: history only reads, so it leaves the
/// recovery to the next command that writes.
pub fn note_interrupted(dir: &Path) {
    let pending = editfs::store::journal::Journal::new(dir).interrupted();
    if pending > 0 {
        eprintln!(
            "editfs: {pending} interrupted commit(s) in the journal: the next mount, apply or undo completes or discards them"
        );
    }
}

/// The state directory an apply uses, held open: the one named with
/// `--state-dir` (made if missing; an error if it cannot be used), else the
/// nearest ancestor's `.editfs/` when it may be trusted (see trust.rs), else
/// none. A found one passed over comes with a note for the report saying which
/// and why: the edit goes on without snapshots, as with no state directory.
pub fn state_for(
    given: Option<&Path>,
    file: &Path,
) -> Result<(Option<Held>, Option<String>), CommandError> {
    if let Some(dir) = given {
        fs::create_dir_all(dir).map_err(|e| {
            CommandError::failed(format!(
                "cannot make the state directory {}: {e}",
                dir.display()
            ))
        })?;
        let held =
            trust::hold(dir, Came::Given, true).map_err(|e| CommandError::failed(e.to_string()))?;
        return Ok((Some(held), None));
    }
    let Some(found) = Store::find_for(file) else {
        return Ok((None, None));
    };
    match trust::hold(&found, Came::Found, true) {
        Ok(held) => Ok((Some(held), None)),
        Err(why) => Ok((
            None,
            Some(format!(
                "state directory not used: {why}; name it with --state-dir to use it anyway"
            )),
        )),
    }
}

/// Makes the state directory a checkpoint goes in when it does not exist yet:
/// a checkpoint is what one takes before the first change, maybe before any
/// mount. Only its owner may open it, as a mount makes it.
pub fn made_state_dir(source: &Path, given: Option<&Path>) -> Result<(), CommandError> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = given.map_or_else(|| source.join(STATE_DIR), Path::to_owned);
    if !source.is_dir() {
        let message = format!("{} is not a directory", source.display());
        return Err(CommandError::failed(message).hint("give the project's directory"));
    }
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(CommandError::failed(format!(
            "cannot make the state directory {}: {e}",
            dir.display()
        ))),
    }
}

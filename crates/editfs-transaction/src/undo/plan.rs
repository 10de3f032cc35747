//! Planning an undo or a rewind: which kept version each file goes back to,
//! read and checked before anything is written, and what refuses it (a
//! change editfs did not record, a version the caller could not read when it
//! was kept).

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};

use crate::engine::ErrorKind as EditKind;
use crate::engine::sha256_hex;
use crate::report::{ErrorKind, ErrorReport};
use crate::rewind::{self, Point};
use crate::sight::Sight;
use crate::store::{Access, FileEntry, Keys, LogEntry, Objects, Side, StoreError, project_path};
use crate::{Caller, Root, caller, file_name, io_failure, open};

use super::{Refusal, Request, What, refuse};

/// One file to restore, decided before anything is written.
pub(super) struct Plan {
    pub(super) rel: String,
    pub(super) to: u64,
    /// The directory of the file, held open since it was read; `None` when it is
    /// gone (created again for the restore).
    pub(super) dir: Option<OwnedFd>,
    pub(super) file: Option<File>,
    pub(super) current: Option<Vec<u8>>,
    /// `None`: the file did not exist before `to`, so it is removed.
    pub(super) restored: Option<Vec<u8>>,
    /// The directories `to` made for the file, removed with it when empty.
    pub(super) made_dirs: Vec<String>,
    /// The file's mode and owner before `to`, as the log recorded them: a file
    /// removed since gets them back, so a private file stays private.
    pub(super) access: Option<crate::store::Access>,
}

impl Plan {
    /// The store's locks its restore takes: its path, and the file it read.
    pub(super) fn keys(&self) -> Keys {
        Keys::new().path(&self.rel).file(self.file.as_ref())
    }

    /// Whether the file still reads as it was planned: what was planned
    /// without the store's lock still holds under it.
    pub(super) fn current(&self, root: Root<'_>) -> bool {
        match &self.dir {
            Some(dir) => crate::still_reads(
                dir.as_fd(),
                file_name(&self.rel),
                (self.file.as_ref(), self.current.as_deref()),
            ),
            None => matches!(
                rustix::fs::statat(
                    root.fd,
                    self.rel.as_str(),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW
                ),
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR)
            ),
        }
    }
}

/// What a file is restored to.
#[derive(Clone, Copy)]
enum To {
    /// As before its latest recorded change.
    Latest,
    /// As before transaction `n`.
    Before(u64),
    /// Absent, though transaction `n` kept a version from before it: a rewind
    /// to a point at which the file was removed, made again after it
    /// (`rewind::absent_at`).
    Absent(u64),
}

impl From<Option<u64>> for To {
    fn from(to: Option<u64>) -> To {
        to.map_or(To::Latest, To::Before)
    }
}

/// `n`, once the log says transaction `n` changed `rel`.
fn touched_by(entries: &[LogEntry], n: u64, rel: &str) -> Result<u64, Refusal> {
    let f = recorded(entries, n)?.file(rel).ok_or_else(|| {
        refuse(
            ErrorKind::Edit(EditKind::NotFound),
            format!("transaction {n} did not change {rel}"),
            "editfs history PATH lists the transactions on one file",
        )
    })?;
    if !f.touched() {
        return Err(refuse(
            ErrorKind::Edit(EditKind::NotFound),
            format!("transaction {n} left {rel} as it was: there is nothing of it to undo"),
            "editfs history PATH lists the transactions on one file (a change shows lines added or removed)",
        ));
    }
    Ok(n)
}

/// How each file `req` names is restored, or why the undo is refused.
pub(super) fn plan(
    objects: &Objects,
    entries: &[LogEntry],
    at: (Root<'_>, Option<&Caller>),
    req: &Request,
) -> Result<Vec<Plan>, Refusal> {
    match &req.what {
        What::File { rel, to } => plan_file(objects, entries, at, rel, To::from(*to), req.force)
            .and_then(to_do)
            .map(|p| vec![p]),
        What::Tx(n) => plan_tx(objects, entries, at, *n, req.force),
        What::Rewind(point) => plan_rewind(objects, entries, at, point, req.force),
    }
}

/// Every file changed after `point`, each to restore as it was at it: as
/// before the first transaction after it to change the file. A file made and
/// removed again since, or already as it was, needs nothing.
fn plan_rewind(
    objects: &Objects,
    entries: &[LogEntry],
    at: (Root<'_>, Option<&Caller>),
    point: &Point,
    force: bool,
) -> Result<Vec<Plan>, Refusal> {
    let root = at.0;
    let p = point.resolve(entries).map_err(|why| {
        let hint = match root.mount {
            Some(_) => "cat .editfs/history lists the transactions and checkpoints (echo NAME > .editfs/checkpoint makes one)".to_owned(),
            None => format!(
                "editfs history {0} lists the transactions and checkpoints (editfs checkpoint {0} NAME makes one)",
                rewind::shell_word(root.path)
            ),
        };
        refuse(ErrorKind::Edit(EditKind::NotFound), why.to_string(), &hint)
    })?;
    let mut plans = Vec::new();
    let mut outside = Vec::new();
    for (rel, first) in rewind::changed_since(entries, p) {
        let to = match rewind::absent_at(entries, &rel, p) {
            true => To::Absent(first),
            false => To::Before(first),
        };
        match plan_file(objects, entries, at, &rel, to, force) {
            Ok(plan) if plan.current == plan.restored => {}
            Ok(plan) => plans.push(plan),
            Err(e) if e.kind == ErrorKind::OutsideChanges => outside.push(e.message),
            Err(e) => return Err(e),
        }
    }
    if !outside.is_empty() {
        return Err(refuse(
            ErrorKind::OutsideChanges,
            format!(
                "{} file(s) changed in a way editfs did not record, which a rewind would lose: {}",
                outside.len(),
                outside.join("; ")
            ),
            &{
                let point_arg = match point {
                    Point::Tx(tx) => tx.to_string(),
                    Point::Name(n) => n.clone(),
                };
                match root.mount {
                    Some(_) => format!(
                        "`editfs diff` on the project shows them; to overwrite them anyway: echo '--to {point_arg} --force' > .editfs/rewind"
                    ),
                    None => format!(
                        "editfs diff {0} --since {point_arg} shows them; to overwrite them anyway: editfs rewind {0} --to {point_arg} --force",
                        rewind::shell_word(root.path)
                    ),
                }
            },
        ));
    }
    Ok(plans)
}

/// Every file transaction `n` changed, each to restore as before `n`.
fn plan_tx(
    objects: &Objects,
    entries: &[LogEntry],
    at: (Root<'_>, Option<&Caller>),
    n: u64,
    force: bool,
) -> Result<Vec<Plan>, Refusal> {
    let entry = recorded(entries, n)?;
    if entry.files.is_empty() {
        return Err(refuse(
            ErrorKind::Edit(EditKind::NotFound),
            format!("the log names no file of transaction {n}"),
            "editfs show SOURCE TXID shows what it changed",
        ));
    }
    let touched: Vec<_> = entry.files.iter().filter(|f| f.touched()).collect();
    if touched.is_empty() {
        return Err(refuse(
            ErrorKind::Edit(EditKind::NotFound),
            format!("transaction {n} left every file as it was: there is nothing to undo"),
            "editfs history lists the transactions that changed files",
        ));
    }
    touched
        .into_iter()
        .map(|f| plan_file(objects, entries, at, &f.file, To::Before(n), force).and_then(to_do))
        .collect()
}

/// `plan`, unless it would restore the absence of a file that is absent.
fn to_do(plan: Plan) -> Result<Plan, Refusal> {
    if plan.restored.is_none() && plan.current.is_none() {
        return Err(refuse(
            ErrorKind::Edit(EditKind::NotFound),
            format!(
                "{} does not exist, as before transaction {}: nothing to undo",
                plan.rel, plan.to
            ),
            "editfs history PATH lists the transactions on one file",
        ));
    }
    Ok(plan)
}

/// The log entry of transaction `n`, if it changed files.
fn recorded(entries: &[LogEntry], n: u64) -> Result<&LogEntry, Refusal> {
    let hint = "editfs history lists the transactions that changed files";
    match entries.iter().find(|e| e.tx == n) {
        Some(e) if e.changed() => Ok(e),
        Some(e) => Err(refuse(
            ErrorKind::Edit(EditKind::NotFound),
            format!(
                "transaction {n} changed nothing (it {}): there is nothing to undo",
                e.outcome.as_str()
            ),
            hint,
        )),
        None => Err(refuse(
            ErrorKind::Edit(EditKind::NotFound),
            format!("no transaction {n} in the log"),
            hint,
        )),
    }
}

/// Decides how `rel` is restored to what it was before `to` (its latest if `None`).
fn plan_file(
    objects: &Objects,
    entries: &[LogEntry],
    (root, caller): (Root<'_>, Option<&Caller>),
    rel: &str,
    to: To,
    force: bool,
) -> Result<Plan, Refusal> {
    // Names read back from the log are checked as a request's are: a forged log
    // line must not steer a restore into the state directory.
    let rel = &project_path(rel).map_err(|why| {
        refuse(
            ErrorKind::BadPath,
            format!("{rel}: {why}"),
            "undo names a file inside the project, outside .editfs",
        )
    })?;
    // As natively: a file the caller cannot reach or read is refused the same
    // way whether it has a history or not.
    if let Some(c) = caller.filter(|c| !c.is_root())
        && c.sight(&root.fd, rel) == Sight::Hidden
    {
        return Err(refuse(
            ErrorKind::PermissionDenied,
            format!("{rel}: you may not read it, or not search a directory on its way"),
            "an undo restores only files you could read and write yourself",
        ));
    }
    let on_rel: Vec<&LogEntry> = entries
        .iter()
        .filter(|e| e.changed() && e.file(rel).is_some_and(FileEntry::touched))
        .collect();
    let absent = matches!(to, To::Absent(_));
    let to = match to {
        To::Before(n) | To::Absent(n) => touched_by(entries, n, rel)?,
        To::Latest => on_rel.last().map(|e| e.tx).ok_or_else(|| {
            refuse(
                ErrorKind::Edit(EditKind::NotFound),
                format!("no recorded transaction changed {rel}"),
                "editfs history shows what was kept",
            )
        })?,
    };
    let made_by_to = entries
        .iter()
        .find(|e| e.tx == to)
        .and_then(|e| e.file(rel));
    let created = made_by_to.is_some_and(|f| f.created);
    let access = made_by_to.and_then(|f| f.access);
    let restored = match objects.read(Side::Pre, rel, to) {
        _ if absent => None,
        Some(_) if caller.is_some_and(|c| !readable(c, made_by_to)) => {
            return Err(refuse(
                ErrorKind::PermissionDenied,
                format!(
                    "the version of {} kept before transaction {to} was not readable by you then (by the owner and mode the log recorded, or none recorded)",
                    crate::engine::report::shown_name(rel)
                ),
                "the daemon's user may undo it (editfs undo SOURCE PATH --to TXID)",
            ));
        }
        Some(bytes) => Some(bytes),
        None if created => None,
        None => {
            return Err(refuse(
                ErrorKind::Edit(EditKind::NotFound),
                format!(
                    "no pre-image of {} from transaction {to}: it is no longer kept",
                    crate::engine::report::shown_name(rel)
                ),
                "editfs history lists the transactions; older versions are pruned (--keep)",
            ));
        }
    };
    let as_refusal = |e: StoreError| {
        Box::new(
            io_failure(e, String::new())
                .error
                .unwrap_or_else(|| ErrorReport::plain(ErrorKind::Io, String::new(), "")),
        )
    };
    let (dir, file, current) = match open(root, rel, caller) {
        Ok(o) => (Some(o.dir), o.file, o.bytes),
        // The file's directory is gone too (`rm -r`): it is created again.
        Err(StoreError::Io { ref source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            (None, None, None)
        }
        Err(e) => return Err(as_refusal(e)),
    };
    if let (Some(f), Some(_), Some(kept)) = (&file, &restored, access) {
        another_owners(f, kept, rel, to)?;
    }
    if let (Some(d), Some(f), None) = (&dir, &file, &restored) {
        // Removing a file is the kernel's to allow the caller (a sticky
        // directory, its rights on the directory).
        caller::may_remove(d.as_fd(), file_name(rel), Some(f), caller).map_err(|e| {
            as_refusal(match e {
                StoreError::Denied { what, source, .. } => StoreError::Denied {
                    path: rel.into(),
                    what,
                    source,
                },
                e => e,
            })
        })?;
    }
    // A file already put back as it was (`git checkout -- F`) loses nothing.
    let put_back = current == restored;
    if !force
        && !put_back
        && let Some(last) = on_rel.last()
    {
        outside_change(last, rel, current.as_deref())?;
    }
    let made_dirs = match restored {
        None => made_by_to.map(|f| f.dirs.clone()).unwrap_or_default(),
        Some(_) => Vec::new(),
    };
    Ok(Plan {
        rel: rel.to_owned(),
        to,
        dir,
        file,
        current,
        restored,
        made_dirs,
        access,
    })
}

/// Refuses to restore a version kept as `kept` (its owner and mode) into `file`
/// when another user owns the file now (one renamed over the name, or given
/// away since): the content would take that owner and its set-id bits, so
/// root's undo of its own `mv` over an agent's file would make the agent's
/// text root's program. Once the file is out of the way the version comes
/// back as the file it was, its owner's.
fn another_owners(file: &File, kept: Access, rel: &str, to: u64) -> Result<(), Refusal> {
    let Some(now) = rustix::fs::fstat(file).map(|st| st.st_uid).ok() else {
        return Ok(());
    };
    if now == kept.uid {
        return Ok(());
    }
    let name = crate::engine::report::shown_name(rel);
    Err(refuse(
        ErrorKind::PermissionDenied,
        format!(
            "{name} is uid {now}'s file now, and the version kept before transaction {to} was uid {}'s: \
             an undo puts a version back only into a file of the version's owner",
            kept.uid
        ),
        &format!(
            "remove {name}, then undo '{name} {to} --force' to bring the version back as the file it was, its owner's"
        ),
    ))
}

/// Whether `caller` could read the version `kept` records (its file's access
/// and the directories above it) when it was kept. One the log says nothing of
/// (a store from before owners were recorded) is the daemon's alone, as the
/// mount shows it.
fn readable(caller: &Caller, kept: Option<&FileEntry>) -> bool {
    let daemon = rustix::process::geteuid().as_raw();
    caller.is_root()
        || kept
            .and_then(|f| Some((f.access?, &f.above)))
            .map_or(caller.uid == daemon, |(a, above)| {
                caller.could_read(&a, above)
            })
}

/// Fails when `rel` is not as `last`, the latest transaction editfs recorded on
/// it, left it: something outside editfs changed it since, and an undo would lose that.
pub(super) fn outside_change(
    last: &LogEntry,
    rel: &str,
    current: Option<&[u8]>,
) -> Result<(), Refusal> {
    let Some(f) = last.file(rel) else {
        return Ok(());
    };
    // A direct write whose result is not known yet (its writer has the file open).
    let Some(expected) = (if f.removed {
        Some(None)
    } else {
        f.sha256.as_deref().map(Some)
    }) else {
        return Ok(());
    };
    let now = current.map(sha256_hex);
    if expected == now.as_deref() {
        return Ok(());
    }
    let message = match now {
        // `rm` through the mount, then a rename onto the name or a write to SOURCE.
        Some(_) if f.removed => format!(
            "{rel} was created again after transaction {}, which removed it, by a write \
             editfs kept no version of (a rename onto its name, or a write beside the mount)",
            last.tx
        ),
        Some(s) => format!(
            "{rel} changed outside editfs since transaction {}, the latest editfs recorded on it \
             (its SHA-256 is now {s})",
            last.tx
        ),
        None => format!(
            "{rel} changed outside editfs since transaction {}, the latest editfs recorded on it \
             (it no longer exists)",
            last.tx
        ),
    };
    Err(refuse(ErrorKind::OutsideChanges, message, &force_hint(rel)))
}

/// The exact requests that overwrite what editfs did not record.
fn force_hint(rel: &str) -> String {
    format!(
        "to overwrite it anyway, undo `{rel} --force` (`echo '{rel} --force' | cat > .editfs/undo` \
         in the mount), or `{rel} TXID --force` for the version before an earlier transaction \
         (editfs history lists them)"
    )
}

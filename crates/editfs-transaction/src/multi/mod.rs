//! Several files in one transaction: all change or none does.
//!
//! Every file's operations run first; only if all of them apply is anything
//! written, and then through one journal record, so a crash leaves every file
//! wholly old or wholly new, all together.

mod before;
mod moves;

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use super::{
    Opened, Root, Who, caller, failed_commit, file_name, io_failure, log_entry, new_file_dir,
    open_bounded, stamp,
};
use crate::engine::payload::{self, Payload};
use crate::engine::{self, FileAct, OpOutcome, Options, Outcome, Received};
pub use crate::report::MultiReport;
use crate::report::{ErrorKind, ErrorReport, Report};
use crate::store::{
    Change, Keys, LogKind as Kind, Removal, Staged, Store, StoreError, project_path,
};
use before::{deleted_before, moved_before, point_to_namesakes};
use moves::place_moves;

/// One file's decision, before anything is written.
struct Decided {
    rel: String,
    /// The file, open with its directory; `None` when its directory does not
    /// exist yet (the commit makes it).
    opened: Option<Opened>,
    edit: engine::Edit,
    /// Where the file moves, beneath the root, once the move was checked.
    moved_to: Option<String>,
}

/// Runs a multi-file `payload` against the files beneath `root`.
pub fn run<'p>(
    store: Option<&Store>,
    root: Root<'_>,
    payload: impl Into<Received<'p>>,
    opts: &Options,
    who: &Who,
) -> MultiReport {
    Plan::parse(root, payload.into(), opts).run(store, root, (opts, None), who)
}

/// A multi-file payload parsed once: the files it names, for a caller that
/// must hold them (the mount holds them against direct writes)
/// before the transaction runs, and then the run.
pub struct Plan {
    parsed: Result<(payload::Files, Vec<String>), payload::PayloadError>,
}

impl Plan {
    pub fn parse(root: Root<'_>, payload: Received<'_>, opts: &Options) -> Plan {
        let parsed = payload::parse_multi(payload, opts.max_payload, &root)
            .map(|(files, notes)| (followed(root, files), notes));
        Plan { parsed }
    }

    /// The files the payload edits, as paths beneath the root, sorted, each
    /// once; none when it does not parse (it is then rejected, touching none).
    pub fn files(&self) -> Vec<String> {
        let Ok((files, _)) = &self.parsed else {
            return Vec::new();
        };
        let mut rels: Vec<String> = files
            .iter()
            .filter_map(|(given, _)| project_path(given).ok())
            .collect();
        rels.sort();
        rels.dedup();
        rels
    }

    /// Runs the transaction: every file decided, then all committed or none.
    /// `hold` takes what a mount holds of the files (see `super::Hold`).
    pub fn run<'h>(
        self,
        store: Option<&Store>,
        root: Root<'_>,
        (opts, hold): (&Options, Option<&'h super::HoldFn<'h>>),
        who: &Who,
    ) -> MultiReport {
        let rels = self.files();
        let _turn = super::serial::turn(rels.iter().map(|rel| root.path.join(rel)));
        let decided = match store {
            Some(s) => super::decided_under_lock(
                |(_, d, _): &(MultiReport, Vec<Decided>, Staged)| {
                    let keys = d.iter().fold(Keys::new(), |keys, d| keys.and(d.keys()));
                    let held = hold.map(|h| h());
                    s.lock(&keys).map(|l| ((Some(l), held), Vec::new()))
                },
                || {
                    let (report, decided) = self.prepare(store, root, opts, who);
                    let staged = stage(s, root, (&report, &decided), who);
                    (report, decided, staged)
                },
                |(_, d, _)| d.iter().all(Decided::current),
                || s.last_tx(),
            ),
            // With no store, the files' directories serialize runs, as for
            // one file, and the files are read once they are locked: those
            // locks hold up no transaction on a file of another directory.
            None => {
                let dirs = super::lock_dirs(root, &rels);
                let (report, decided) = self.prepare(None, root, opts, who);
                Ok((
                    ((None, None), dirs),
                    Some((report, decided, Staged::default())),
                ))
            }
        };
        let mut report = match decided {
            Ok(((lock, dirs), None)) => {
                drop((lock, dirs));
                let e = StoreError::Changing {
                    path: rels.join(", ").into(),
                    times: super::DECISIONS,
                };
                let mut r = MultiReport::new(Outcome::Failed);
                r.error = io_failure(e, String::new()).error;
                r
            }
            Ok((((lock, held), dirs), Some(decided))) => {
                let report = numbered(store, lock.as_ref(), root, decided, who);
                drop((lock, held, dirs));
                report
            }
            Err(e) => {
                let mut r = MultiReport::new(Outcome::Failed);
                r.error = io_failure(e, String::new()).error;
                r
            }
        };
        if let Some(s) = store {
            s.catch_up(report.files.len());
        }
        point_to_namesakes((store, root), who, &mut report);
        report
    }

    /// What `run` would do, decided the same way, with each file's report and
    /// diff, but written nowhere: no file changes, no id is taken (tx 0),
    /// nothing is logged. It takes no lock: it only reads the files.
    pub fn dry_run(self, root: Root<'_>, opts: &Options, who: &Who) -> MultiReport {
        let (mut report, decided) = self.prepare(None, root, opts, who);
        if report.outcome != Outcome::Ok {
            not_written(&mut report, &decided);
        }
        point_to_namesakes((None, root), who, &mut report);
        report.notes.push(super::DRY_RUN.into());
        report
    }

    /// Decides every file's edit: the report so far (not yet numbered) and the decisions.
    /// `store`: the history a re-sent deletion is judged by (`deleted_before`).
    fn prepare(
        &self,
        store: Option<&Store>,
        root: Root<'_>,
        opts: &Options,
        who: &Who,
    ) -> (MultiReport, Vec<Decided>) {
        let mut report = MultiReport::new(Outcome::Ok);
        let decided = match &self.parsed {
            Ok((files, notes)) => {
                report.notes = notes.clone();
                let files = files
                    .iter()
                    .map(|(rel, p)| {
                        let ops = Payload {
                            operations: p.operations.clone(),
                            notes: p.notes.clone(),
                        };
                        (rel.clone(), ops)
                    })
                    .collect();
                let mut decided = decide((store, root), files, (opts, who), &mut report);
                place_moves(root, &mut decided, &mut report);
                decided
            }
            Err(e) => {
                report.outcome = Outcome::Rejected;
                report.error = Some(ErrorReport::plain(e.kind().into(), e.to_string(), e.hint()));
                Vec::new()
            }
        };
        (report, decided)
    }
}

/// The files sections name, each symlink among those the payload only edits
/// replaced by the file it leads to, as `F.edit` of a symlink edits its target
/// (so two sections naming one file by the link and by its own path are one
/// file's). A section that removes or moves its file acts on the link itself,
/// and a link that may not be followed stays, for `decide` to refuse.
fn followed(root: Root<'_>, files: payload::Files) -> payload::Files {
    files
        .into_iter()
        .map(|(given, ops)| {
            let edits_only = ops.operations.iter().all(|o| o.act.is_none());
            let target = project_path(&given)
                .ok()
                .filter(|rel| edits_only && root.is_link(rel))
                .and_then(|rel| root.link_target(Path::new(&rel)).ok());
            match target {
                Some(t) => (t.to_string_lossy().into_owned(), ops),
                None => (given, ops),
            }
        })
        .collect()
}

/// Numbers the decided transaction, commits it if every file's edit applied,
/// and logs it, whatever its outcome.
fn numbered(
    store: Option<&Store>,
    lock: Option<&crate::store::Lock>,
    root: Root<'_>,
    (mut report, decided, staged): (MultiReport, Vec<Decided>, Staged),
    who: &Who,
) -> MultiReport {
    // A rejected payload is numbered and logged like a single-file one.
    if let (Some(s), Some(_)) = (store, lock) {
        match s.next_tx() {
            Ok(tx) => report.tx = tx,
            Err(e) => {
                let mut r = MultiReport::new(Outcome::Failed);
                r.error = io_failure(e, String::new()).error;
                return r;
            }
        }
    }
    for r in &mut report.files {
        r.tx = report.tx;
    }
    if report.outcome != Outcome::Ok {
        not_written(&mut report, &decided);
    }
    let entry = |report: &MultiReport| {
        let rels: Vec<(&str, &Report)> =
            report.files.iter().map(|r| (r.file.as_str(), r)).collect();
        log_entry(Kind::Edit, &report.head(), &rels, who)
    };
    if report.outcome != Outcome::Ok {
        if let Some(s) = store {
            let _ = s.log(&entry(&report));
        }
        return report;
    }
    let line = entry(&report);
    commit(
        store,
        (lock, root),
        (decided, staged),
        (line, who),
        &mut report,
    );
    if report.outcome != Outcome::Ok
        && let Some(s) = store
    {
        let _ = s.log(&entry(&report));
    }
    if store.is_none() {
        report.notes.push("no state directory: no snapshot or log was kept, and a crash mid-commit could leave some files changed".into());
    }
    report
}

/// Checks each section's path and joins the sections that name one file, in
/// payload order. An agent that writes `./a.txt` for one block and `a.txt` for the
/// next means one file: its operations run together on one reading of it.
fn by_file(files: Vec<(String, Payload)>, report: &mut MultiReport) -> Vec<(String, Payload)> {
    let mut grouped: Vec<(String, Payload)> = Vec::new();
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (given, ops) in files {
        match project_path(&given) {
            Err(why) => reject_path(report, &given, &why.to_string()),
            Ok(rel) => match at.get(&rel) {
                Some(&i) => {
                    let same: &mut Payload = &mut grouped[i].1;
                    same.operations.extend(ops.operations);
                    same.notes.extend(ops.notes);
                }
                None => {
                    at.insert(rel.clone(), grouped.len());
                    grouped.push((rel, ops));
                }
            },
        }
    }
    grouped
}

/// Runs every file's operations; records each file's report and the first failure.
fn decide(
    (store, root): (Option<&Store>, Root<'_>),
    files: Vec<(String, Payload)>,
    (opts, who): (&Options, &Who),
    report: &mut MultiReport,
) -> Vec<Decided> {
    let mut decided = Vec::new();
    for (rel, ops) in by_file(files, report) {
        let opened = open_bounded(root, &rel, who.caller.as_ref(), opts.max_file).map(Some);
        match opened.or_else(in_new_directory) {
            Ok(opened) => {
                let original = opened.as_ref().and_then(|o| o.bytes.as_deref());
                let edit = original
                    .is_none()
                    .then(|| {
                        deleted_before((store, root), (opts, who), &rel, &ops)
                            .or_else(|| moved_before((store, root), (opts, who), &rel, &ops))
                    })
                    .flatten()
                    .unwrap_or_else(|| engine::apply_parsed(&rel, original, ops, opts));
                let r = stamp(edit.report.clone().into(), &rel);
                if let Some(e) = &r.error {
                    report.fail(r.outcome, &rel, e);
                }
                report.files.push(r);
                decided.push(Decided {
                    rel,
                    opened,
                    edit,
                    moved_to: None,
                });
            }
            Err(e) => {
                let r = match e {
                    StoreError::Symlink { .. } => match root.link_target(Path::new(&rel)) {
                        Err(refused) => refused.report(Path::new(&rel)),
                        Ok(_) => stamp(io_failure(e, String::new()), &rel),
                    },
                    e => stamp(io_failure(e, String::new()), &rel),
                };
                if let Some(e) = &r.error {
                    report.fail(Outcome::Failed, &rel, e);
                }
                report.files.push(r);
            }
        }
    }
    decided
}

/// A file whose directory does not exist yet is absent, as a missing file in
/// an existing directory is: a first operation that creates it makes the
/// directory at the commit (as `*** Add File:` into a new package needs), and
/// any other fails as on a missing file (`not_found`, pointing at files of that
/// name), not as an error of the file system that sending again would not mend.
fn in_new_directory(
    e: crate::store::StoreError,
) -> Result<Option<Opened>, crate::store::StoreError> {
    match &e {
        crate::store::StoreError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        _ => Err(e),
    }
}

impl Decided {
    fn file(&self) -> Option<&File> {
        self.opened.as_ref().and_then(|o| o.file.as_ref())
    }

    fn original(&self) -> Option<&[u8]> {
        self.opened.as_ref().and_then(|o| o.bytes.as_deref())
    }

    /// Whether what was decided still holds (see `Opened::current`); a file
    /// whose directory was missing is checked again when the commit makes it.
    fn current(&self) -> bool {
        self.opened.as_ref().is_none_or(|o| o.current(&self.rel))
    }

    /// The store's locks its commit takes: its path, where it moves to,
    /// and the file it read.
    fn keys(&self) -> Keys {
        let file = self.opened.as_ref().and_then(|o| o.file.as_ref());
        let keys = Keys::new().path(&self.rel).file(file);
        match &self.moved_to {
            Some(to) => keys.path(to),
            None => keys,
        }
    }
}

/// Records that `given` was refused before anything was read.
fn reject_path(report: &mut MultiReport, given: &str, why: &str) {
    let e = ErrorReport::plain(
        ErrorKind::BadPath,
        why.to_owned(),
        "use a path relative to the root, inside it, outside .editfs",
    );
    let mut r = stamp(Report::new(Outcome::Rejected, String::new()), given);
    r.error = Some(e.clone());
    report.fail(Outcome::Rejected, given, &e);
    report.files.push(r);
}

fn commit(
    store: Option<&Store>,
    (lock, root): (Option<&crate::store::Lock>, Root<'_>),
    (decided, staged): (Vec<Decided>, Staged),
    (entry, who): (crate::store::LogEntry, &Who),
    report: &mut MultiReport,
) {
    // New files, moved ones among them, may go into directories that do not
    // exist yet (made now, by the caller; they stay, empty, if the commit then
    // fails); every other file is written where it was read.
    let placed = places(root, &decided, who);
    let result = placed.and_then(|dirs| {
        let mut entry = entry;
        for (rel, made) in &dirs.made {
            if let Some(f) = entry.files.iter_mut().find(|f| f.file == *rel) {
                f.dirs.clone_from(made);
            }
        }
        let made: Vec<Option<BorrowedFd<'_>>> = dirs
            .fresh
            .iter()
            .map(|f| f.as_ref().map(AsFd::as_fd))
            .collect();
        let (changes, removals) = writes(&decided, &made, who);
        let result = match (store, lock) {
            (Some(s), Some(l)) => s.commit_with(
                l,
                report.tx,
                (root.fd, root.path),
                (&changes, &removals),
                entry,
                staged,
            ),
            _ => install_unjournaled(&changes, &removals)
                .map(|()| vec![None; changes.len() + removals.len()]),
        };
        // Each pre-image belongs to the file that was there before: a moved
        // file's to its old path.
        let before: Vec<String> = changes
            .iter()
            .map(|c| c.rel.to_owned())
            .chain(removals.iter().map(|r| r.rel.to_owned()))
            .collect();
        result.map(|kept| (before, kept))
    });
    match result {
        Ok((before, kept)) => {
            for (rel, k) in before.into_iter().zip(kept).filter(|(_, k)| k.is_some()) {
                if let Some(r) = report.files.iter_mut().find(|r| r.file == rel) {
                    r.snapshot = k;
                }
            }
            if let Some(store) = store {
                let replaced = decided.into_iter().filter_map(|d| d.opened?.file);
                replaced.for_each(|file| store.release(file));
            }
        }
        Err(e) => {
            let failed = failed_commit(e, Report::new(Outcome::Failed, String::new()), None);
            report.error = failed.error;
            report.outcome = Outcome::Failed;
            not_written(report, &decided);
        }
    }
}

/// The directories a commit writes in, each decision's: the one held since its
/// file was read, and for a file that goes where nothing was read (a new file
/// in a new directory, a moved file's new path) the one made for it now. A
/// file removed (deleted, or moved away) needs the caller's right to write its
/// directory.
struct Places {
    /// By decision: the directory of a new path (moved to, or in a new directory).
    fresh: Vec<Option<OwnedFd>>,
    /// The directories made for new paths, by the path, for the log.
    made: Vec<(String, Vec<String>)>,
}

fn places(root: Root<'_>, decided: &[Decided], who: &Who) -> Result<Places, StoreError> {
    let caller = who.caller.as_ref();
    let mut fresh = Vec::with_capacity(decided.len());
    let mut made = Vec::new();
    for d in decided {
        let removes = matches!(d.edit.act, Some(FileAct::Delete { .. }))
            || (matches!(d.edit.act, Some(FileAct::MoveTo(_))) && d.moved_to.is_some());
        if let (true, Some(o)) = (removes, &d.opened) {
            let name = file_name(&d.rel);
            caller::may_remove(o.dir.as_fd(), name, o.file.as_ref(), caller)
                .map_err(|e| named(e, &d.rel))?;
        }
        if let Some(Opened {
            file: Some(file),
            dir,
            ..
        }) = &d.opened
            && crate::creates(&d.edit.report.operations)
        {
            let name = file_name(&d.rel);
            caller::may_create_over(dir.as_fd(), name, file, caller)
                .map_err(|e| named(e, &d.rel))?;
        }
        let new_path = match (&d.edit.act, &d.moved_to, &d.opened) {
            (Some(FileAct::MoveTo(_)), Some(to), _) => Some(to.as_str()),
            (_, _, None) if d.edit.content.is_some() => Some(d.rel.as_str()),
            _ => None,
        };
        let placed = match new_path {
            Some(rel) => {
                let (dir, dirs) = new_file_dir(root, rel, caller)?;
                made.push((rel.to_owned(), dirs));
                Some(dir)
            }
            None => None,
        };
        fresh.push(placed);
    }
    Ok(Places { fresh, made })
}

/// A refusal of the caller's as the payload names the file: the store's
/// checks name it by its last component.
fn named(e: StoreError, rel: &str) -> StoreError {
    match e {
        StoreError::Denied { what, source, .. } => StoreError::Denied {
            path: rel.into(),
            what,
            source,
        },
        e => e,
    }
}

/// The new contents of a decided transaction, written before the lock is
/// taken (see `Store::stage`). A file whose directory the commit makes, or
/// moved to a new path, is staged as if it went in the root: it is taken if
/// the directory it gets makes the same file (no set-group-ID in the way).
fn stage(
    store: &Store,
    root: Root<'_>,
    (report, decided): (&MultiReport, &[Decided]),
    who: &Who,
) -> Staged {
    if report.outcome != Outcome::Ok {
        return Staged::default();
    }
    let new_place: Vec<Option<BorrowedFd<'_>>> = decided
        .iter()
        .map(|d| {
            let moved = matches!(d.edit.act, Some(FileAct::MoveTo(_))) && d.moved_to.is_some();
            (moved || d.opened.is_none()).then_some(root.fd)
        })
        .collect();
    let (changes, _) = writes(decided, &new_place, who);
    store.stage(&changes)
}

/// What the decisions write: new contents (a moved file's at its new path) and
/// removals (deleted files, and moved files at their old paths). `new_place`
/// is, by decision, the directory of a file that goes where nothing was read
/// (see `Places::fresh`).
fn writes<'a>(
    decided: &'a [Decided],
    new_place: &[Option<BorrowedFd<'a>>],
    who: &'a Who,
) -> (Vec<Change<'a>>, Vec<Removal<'a>>) {
    let mut changes = Vec::new();
    let mut removals = Vec::new();
    for (d, fresh) in decided.iter().zip(new_place) {
        let held: Option<BorrowedFd<'a>> = d.opened.as_ref().map(|o| o.dir.as_fd());
        let Some(dir) = fresh.or(held) else {
            continue;
        };
        let removal = held.map(|at| Removal {
            rel: &d.rel,
            dir: at,
            pre: d.original().unwrap_or_default(),
            file: d.file(),
            by: who.caller.as_ref(),
        });
        match (&d.edit.act, &d.moved_to, d.edit.content.as_deref()) {
            (Some(FileAct::Delete { .. }), _, _) => removals.extend(removal),
            (Some(FileAct::MoveTo(_)), Some(to), Some(new)) => {
                changes.push(Change {
                    rel: to,
                    dir,
                    old: d.file(),
                    pre: None,
                    new,
                    new_sha: None,
                    by: who.caller.as_ref(),
                    fresh: who.fresh(dir),
                });
                removals.extend(removal);
            }
            (_, _, Some(new)) => changes.push(Change {
                rel: &d.rel,
                dir,
                old: d.file(),
                pre: d.original(),
                new,
                new_sha: Some(d.edit.report.sha256.as_str()).filter(|s| !s.is_empty()),
                by: who.caller.as_ref(),
                fresh: who.fresh(dir),
            }),
            _ => {}
        }
    }
    (changes, removals)
}

/// In a failed transaction, the sections of files whose own operations matched
/// say that those files were not written, and why: never `OK … applied`.
fn not_written(report: &mut MultiReport, decided: &[Decided]) {
    let why = match report.files.iter().find(|r| r.outcome != Outcome::Ok) {
        Some(r) => format!("the transaction failed in {}", r.file),
        None => "the transaction failed while committing".into(),
    };
    for r in report.files.iter_mut().filter(|r| r.outcome == Outcome::Ok) {
        let original = decided.iter().find(|d| d.rel == r.file);
        r.sha256 = engine::sha256_hex(original.and_then(|d| d.original()).unwrap_or_default());
        r.outcome = Outcome::Failed;
        r.applied = 0;
        r.diff = None;
        for op in r
            .operations
            .iter_mut()
            .filter(|o| o.outcome == OpOutcome::Applied)
        {
            op.outcome = OpOutcome::Matched;
        }
        r.error = Some(ErrorReport::plain(
            ErrorKind::NotWritten,
            format!(
                "its own operations matched, but {why}, and a transaction writes all its files or none"
            ),
            "fix the edit that failed and send the whole payload again",
        ));
    }
}

/// Without a state directory there is no journal: each file is replaced
/// atomically, in turn, then the removed ones go.
fn install_unjournaled(changes: &[Change<'_>], removals: &[Removal<'_>]) -> Result<(), StoreError> {
    for r in removals {
        caller::may_remove(r.dir, file_name(r.rel), r.file, r.by)?;
    }
    for c in changes {
        // A file moved here keeps its mode; its other links, if any, stay
        // where they are rather than being written in place.
        let moved = c.pre.is_none();
        let at = (c.dir, file_name(c.rel));
        crate::store::replace(at, c.new, (c.old, moved), (None, c.by))?;
    }
    removals.iter().try_for_each(|r| {
        caller::remove(r.dir, file_name(r.rel), r.file, r.by)?;
        rustix::fs::fsync(r.dir).map_err(|e| {
            crate::store::io_err("sync the directory of", std::path::Path::new(r.rel))(e.into())
        })
    })
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn a_plan_names_each_file_once_beneath_the_root_and_runs_what_it_parsed() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("a.txt"), "one\n").unwrap();
        std::fs::write(tmp.path().join("sub/b.txt"), "two\n").unwrap();
        let fd = crate::store::open_dir(tmp.path()).unwrap();
        let root = Root {
            fd: fd.as_fd(),
            path: tmp.path(),
            mount: None,
            from: std::path::Path::new(""),
            caller: None,
        };
        let block = |from: &str, to: &str| {
            format!("<<<<<<< SEARCH\n{from}\n=======\n{to}\n>>>>>>> REPLACE\n")
        };
        let payload = format!(
            "sub/b.txt\n{}./a.txt\n{}a.txt\n{}",
            block("two", "2"),
            block("one", "1"),
            block("1", "first")
        );
        let opts = Options::default();
        let plan = Plan::parse(root, payload.as_bytes().into(), &opts);
        assert_eq!(plan.files(), ["a.txt", "sub/b.txt"]);
        let report = plan.run(None, root, (&opts, None), &Who::default());
        assert_eq!(report.outcome, Outcome::Ok, "{report}");
        assert_eq!(std::fs::read(tmp.path().join("a.txt")).unwrap(), b"first\n");
        assert_eq!(std::fs::read(tmp.path().join("sub/b.txt")).unwrap(), b"2\n");
        let unusable = Plan::parse(root, b"no blocks here".into(), &opts);
        assert!(
            unusable.files().is_empty(),
            "a payload that does not parse names none"
        );
    }

    /// A multi-file payload edits what a symlink leads to, as `F.edit` does, and
    /// says why when it may not.
    #[test]
    fn a_symlink_named_in_a_payload_edits_the_file_it_leads_to() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root_path = tmp.path().join("p");
        std::fs::create_dir_all(root_path.join("sub")).unwrap();
        std::fs::write(root_path.join("sub/real.txt"), "alpha\n").unwrap();
        std::fs::write(outside.path().join("secret.txt"), "alpha\n").unwrap();
        std::os::unix::fs::symlink("sub/real.txt", root_path.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), root_path.join("out.txt"))
            .unwrap();
        std::os::unix::fs::symlink("sub/none.txt", root_path.join("dangling.txt")).unwrap();
        let fd = crate::store::open_dir(&root_path).unwrap();
        let root = Root {
            fd: fd.as_fd(),
            path: &root_path,
            mount: None,
            from: Path::new(""),
            caller: None,
        };
        let run = |payload: &str| {
            let opts = Options::default();
            Plan::parse(root, payload.as_bytes().into(), &opts).run(
                None,
                root,
                (&opts, None),
                &Who::default(),
            )
        };
        let report = run("link.txt\n<<<<<<< SEARCH\nalpha\n=======\nALPHA\n>>>>>>> REPLACE\n");
        assert_eq!(report.outcome, Outcome::Ok, "{report}");
        assert_eq!(report.files[0].file, "sub/real.txt");
        assert_eq!(
            std::fs::read_to_string(root_path.join("sub/real.txt")).unwrap(),
            "ALPHA\n"
        );
        assert!(
            root_path.join("link.txt").is_symlink(),
            "the link stays a link"
        );
        for (name, kind) in [
            ("out.txt", ErrorKind::OutsideSource),
            ("dangling.txt", ErrorKind::DanglingLink),
        ] {
            let report = run(&format!(
                "{name}\n<<<<<<< SEARCH\nalpha\n=======\nbeta\n>>>>>>> REPLACE\n"
            ));
            assert_eq!(report.outcome, Outcome::Failed, "{report}");
            let error = report.error.as_ref().unwrap();
            assert_eq!(error.kind, kind, "{report}");
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
            "alpha\n"
        );
        assert!(!root_path.join("sub/none.txt").exists());
    }
}

//! Undo: kept pre-images restored as a new transaction, so an undo can be undone.
//!
//! `PATH --to N` restores PATH as it was before transaction N, over any later
//! transactions editfs recorded on it: they stay in history, and the undo is one
//! more. What it refuses without `force` is only what editfs did not record: PATH
//! differs from the version its latest recorded transaction left, so an outside
//! change would be lost. `--tx N` restores every file of transaction N at once, as
//! one transaction. A file the undone transaction created is removed (its
//! content kept, so that undo can be undone too). `--to POINT` (a rewind)
//! restores every file changed after a point of the history as it was at that
//! point, as one transaction: each file is planned as `PATH --to N` is, N
//! being the first transaction after the point to change it (see rewind.rs).

mod plan;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use super::multi::MultiReport;
use super::rewind::{self, Point};
use super::{
    Caller, Root, Who, failed_commit, io_failure, log_entry, new_file_dir, now, remove_made_dirs,
    stamp,
};
use crate::engine::ErrorKind as EditKind;
use crate::engine::diff::file_diff;
use crate::engine::{OpOutcome, OpReport, Outcome, sha256_hex};
use crate::report::{ErrorKind, ErrorReport, Report, Reported};
use crate::store::{
    BadPath, Change, Keys, Lock, LogEntry, LogKind as Kind, Objects, Removal, Staged, Store,
    StoreError, io_err, project_path,
};
use plan::{Plan, plan};

/// What to restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// One file, as it was before transaction `to` (its latest if `None`).
    File { rel: String, to: Option<u64> },
    /// Every file of one transaction, as it was before it.
    Tx(u64),
    /// Every file changed after a point, as it was at that point.
    Rewind(Point),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub what: What,
    /// Overwrite changes made outside editfs.
    pub force: bool,
}

/// The syntax `.editfs/undo` takes, for its error messages.
pub const SYNTAX: &str = "`PATH [TXID] [--force]` or `--tx TXID [--force]`";

/// The syntax `.editfs/rewind` takes, for its error messages.
pub const REWIND_SYNTAX: &str = "`--to TXID|NAME [--dry-run] [--force]`";

impl Request {
    /// Reads what `.editfs/undo` was sent: `PATH [TXID] [--force]` or `--tx TXID [--force]`.
    pub fn parse(text: &str) -> Result<Request, BadRequest> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let force = words.contains(&"--force");
        let args: Vec<&str> = words.into_iter().filter(|w| *w != "--force").collect();
        let txid = |t: &str| {
            t.parse::<u64>()
                .map_err(|_| BadRequest::NotTx(t.to_owned()))
        };
        let what = match args.as_slice() {
            ["--tx", tx] => What::Tx(txid(tx)?),
            [rel] if !rel.starts_with('-') => What::File {
                rel: checked(rel)?,
                to: None,
            },
            [rel, tx] if !rel.starts_with('-') => What::File {
                rel: checked(rel)?,
                to: Some(txid(tx)?),
            },
            _ => return Err(BadRequest::Undo(text.trim().to_owned())),
        };
        Ok(Request { what, force })
    }

    /// Reads what `.editfs/rewind` was sent: `--to TXID|NAME [--dry-run]
    /// [--force]`; says whether it is a dry run.
    pub fn parse_rewind(text: &str) -> Result<(Request, bool), BadRequest> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let force = words.contains(&"--force");
        let dry_run = words.contains(&"--dry-run");
        let args: Vec<&str> = words
            .into_iter()
            .filter(|w| !matches!(*w, "--force" | "--dry-run"))
            .collect();
        match args.as_slice() {
            ["--to", point] if !point.starts_with('-') => Ok((
                Request {
                    what: What::Rewind(Point::parse(point)),
                    force,
                },
                dry_run,
            )),
            _ => Err(BadRequest::Rewind(text.trim().to_owned())),
        }
    }

    /// What a report names when the undo fails before it reaches a file.
    /// The kind its log line says: a rewind, or an undo.
    fn kind(&self) -> Kind {
        match self.what {
            What::Rewind(_) => Kind::Rewind,
            _ => Kind::Undo,
        }
    }

    fn label(&self) -> String {
        match &self.what {
            What::File { rel, .. } => rel.clone(),
            What::Tx(tx) => format!("transaction {tx}"),
            What::Rewind(point) => format!("rewind to {point}"),
        }
    }
}

/// `rel` as the log names it, or why no undo can name it.
fn checked(rel: &str) -> Result<String, BadRequest> {
    project_path(rel).map_err(|why| BadRequest::Path {
        rel: rel.to_owned(),
        why,
    })
}

/// Why what `.editfs/undo` or `.editfs/rewind` was sent is no request.
#[derive(Debug, thiserror::Error)]
pub enum BadRequest {
    #[error("{0:?} is not a transaction id")]
    NotTx(String),
    #[error("{rel}: {why}")]
    Path { rel: String, why: BadPath },
    #[error("expected {SYNTAX}, got {0:?}")]
    Undo(String),
    #[error("expected {REWIND_SYNTAX}, got {0:?}")]
    Rewind(String),
}

/// The files `req` names, as the log knows them (for locking them first).
pub fn files(store: &Store, req: &Request) -> Vec<String> {
    match &req.what {
        What::File { rel, .. } => vec![rel.clone()],
        What::Tx(tx) => store
            .entries()
            .into_iter()
            .find(|e| e.tx == *tx)
            .map(|e| e.files.into_iter().map(|f| f.file).collect())
            .unwrap_or_default(),
        What::Rewind(point) => {
            let entries = store.entries();
            point
                .resolve(&entries)
                .map(|p| {
                    rewind::changed_since(&entries, p)
                        .into_iter()
                        .map(|(rel, _)| rel)
                        .collect()
                })
                .unwrap_or_default()
        }
    }
}

/// Why an undo cannot be done; boxed, as it travels far and rarely.
type Refusal = Box<ErrorReport>;

fn refuse(kind: ErrorKind, message: String, hint: &str) -> Refusal {
    Box::new(ErrorReport::plain(kind, message, hint))
}

/// Runs `req` as one transaction, numbered and logged whatever its outcome.
///
/// It is planned, and its new contents staged, before the store's lock is
/// taken, as an edit is decided: an undo or rewind of many files holds up no
/// other caller while it reads its files and the kept versions. Under the
/// lock each planned file must still read as it was planned; if one was
/// changed meanwhile, it is planned again, and it fails as `stale` when a
/// writer outside transactions changed one each time.
pub fn run(store: &Store, root: Root<'_>, req: &Request, who: &Who) -> Reported {
    // Planned from the whole history: removals not filed yet are filed first.
    store.settle_removals();
    let label = req.label();
    let fail = |e: StoreError| wrap(req, vec![stamp(io_failure(e, String::new()), &label)]);
    let at = (root, who.caller.as_ref());
    let planned = || {
        let entries = visible(store.entries(), root, who.caller.as_ref());
        let plans = plan(store.objects(), &entries, at, req);
        let staged = match &plans {
            Ok(plans) => stage(store, root, plans, who),
            Err(_) => Staged::default(),
        };
        (entries, plans, staged)
    };
    let decided = super::decided_under_lock(
        |(_, plans, _)| {
            let plans = plans.as_deref().unwrap_or_default();
            store.lock(&plans.iter().fold(Keys::new(), |keys, p| keys.and(p.keys())))
        },
        planned,
        |(_, plans, _)| {
            plans
                .as_ref()
                .map_or(true, |p| p.iter().all(|p| p.current(root)))
        },
        || store.last_tx(),
    );
    // Files a writer outside transactions kept changing at every planning
    // fail it, as they fail an edit: planning again under the lock would
    // hold every other caller for as long as it reads them all.
    let (lock, (entries, plans, staged)) = match decided {
        Ok((lock, Some(decided))) => (lock, decided),
        Ok((_, None)) => {
            return fail(StoreError::Changing {
                path: label.clone().into(),
                times: super::DECISIONS,
            });
        }
        Err(e) => return fail(e),
    };
    let tx = match store.next_tx() {
        Ok(tx) => tx,
        Err(e) => return fail(e),
    };
    let reports = match plans {
        Ok(plans) if plans.is_empty() => {
            let undone = nothing_to_rewind(tx, req);
            let _ = store.log(&log_entry(req.kind(), &undone.head(), &[], who));
            drop(lock);
            return left_as_is(undone, store.objects().state(), &entries, at, req);
        }
        Ok(plans) => commit(store, (&lock, tx), root, (&plans, staged), req, who),
        Err(e) => {
            let mut r = stamp(Report::new(Outcome::Failed, String::new()), &label);
            r.error = Some(*e);
            r.tx = tx;
            let undone = wrap(req, vec![r]);
            log_failure(store, &undone, req, who);
            return undone;
        }
    };
    let undone = wrap(req, reports);
    if undone.head().outcome != Outcome::Ok {
        log_failure(store, &undone, req, who);
        return undone;
    }
    // The walk of the project for what is left takes no lock a transaction waits for.
    drop(lock);
    store.catch_up(undone.files().len());
    left_as_is(undone, store.objects().state(), &entries, at, req)
}

/// A successful rewind's report with what it leaves as it is (see
/// `rewind::left`); any other report as it is.
fn left_as_is(
    mut undone: Reported,
    state: &Path,
    entries: &[LogEntry],
    at: (Root<'_>, Option<&Caller>),
    req: &Request,
) -> Reported {
    if let (What::Rewind(point), Reported::Files(m)) = (&req.what, &mut undone)
        && m.outcome == Outcome::Ok
        && let Ok(p) = point.resolve(entries)
    {
        m.left = Some(rewind::left(state, entries, at, p));
    }
    undone
}

/// The restored contents of `plans`, written before the lock (see
/// `Store::stage`); a file whose directory is gone is staged as if it went
/// in the root, and taken if the directory made for it makes the same file.
fn stage(store: &Store, root: Root<'_>, plans: &[Plan], who: &Who) -> Staged {
    let changes: Vec<Change<'_>> = plans
        .iter()
        .filter_map(|p| restore_of(p, p.dir.as_ref().map_or(root.fd, AsFd::as_fd), who))
        .collect();
    store.stage(&changes)
}

/// The change that restores plan `p` in `dir`; `None` for a file it removes.
fn restore_of<'a>(p: &'a Plan, dir: BorrowedFd<'a>, who: &'a Who) -> Option<Change<'a>> {
    Some(Change {
        rel: &p.rel,
        dir,
        old: p.file.as_ref(),
        pre: p.current.as_deref(),
        new: p.restored.as_deref()?,
        new_sha: None,
        by: who.caller.as_ref(),
        fresh: recreated_as(p.access, who).or_else(|| who.fresh(dir)),
    })
}

/// The report of a rewind to a point after which nothing changed (or all
/// came back as it was): it succeeds, and writes nothing.
fn nothing_to_rewind(tx: u64, req: &Request) -> Reported {
    let mut m = MultiReport::new(Outcome::Ok);
    m.tx = tx;
    m.notes.push(format!(
        "nothing to rewind: every file editfs recorded a change to since {} reads as it did then",
        match &req.what {
            What::Rewind(point) => point.to_string(),
            _ => req.label(),
        }
    ));
    Reported::Files(m)
}

/// The transactions `caller` may see (see `sight.rs`): an undo plans from these
/// alone, so one of a transaction or a file whose history is hidden from the
/// caller fails exactly as one that never happened, and never restores a
/// version the caller could not read when it was kept.
///
/// In the order of their ids: a file made through a mount is recorded once it
/// stays, a moment after its id was taken, so its line may follow later ones.
fn visible(mut entries: Vec<LogEntry>, root: Root<'_>, caller: Option<&Caller>) -> Vec<LogEntry> {
    entries.sort_by_key(|e| e.tx);
    if let Some(c) = caller.filter(|c| !c.is_root()) {
        let mut now = crate::sight::Now::new();
        entries.retain(|e| c.sees(&root.fd, e, &mut now));
    }
    entries
}

/// What `run` would do, decided the same way but written nowhere: no file
/// changes, no id is taken, nothing is logged. The reports carry tx 0 and a note
/// saying so; their diffs are what `run` would apply now. Decided for `caller`
/// (`None`: the daemon's own rights), from the history it may see.
/// It reads the state directory without opening the store, so it works on a
/// read-only one and never runs a recovery.
pub fn preview(
    objects: &Objects,
    entries: Vec<LogEntry>,
    (root, caller): (Root<'_>, Option<&Caller>),
    req: &Request,
) -> Reported {
    let entries = visible(entries, root, caller);
    let plans = plan(objects, &entries, (root, caller), req);
    let note = "dry run: nothing was changed or logged".to_owned();
    let reports = match plans {
        Ok(plans) => plans.iter().map(|p| restored_report(None, p)).collect(),
        Err(e) => {
            let mut r = stamp(Report::new(Outcome::Failed, String::new()), &req.label());
            r.error = Some(*e);
            vec![r]
        }
    };
    let mut undone = wrap(req, reports);
    match &mut undone {
        Reported::File(r) => r.notes.push(note),
        Reported::Files(m) => m.notes.push(note),
    }
    left_as_is(undone, objects.state(), &entries, (root, caller), req)
}

/// An undo (`kind` `Undo`) or rewind (`Rewind`) request that could not be
/// read: numbered and logged like any other, as what it was sent as.
pub fn rejected(store: &Store, kind: Kind, message: String, hint: &str, who: &Who) -> Report {
    let sent_to = match kind {
        Kind::Rewind => ".editfs/rewind",
        _ => ".editfs/undo",
    };
    let mut r = stamp(Report::new(Outcome::Rejected, String::new()), sent_to);
    r.error = Some(ErrorReport::plain(
        ErrorKind::Edit(EditKind::Malformed),
        message,
        hint,
    ));
    let logged = store.next_tx().and_then(|tx| {
        r.tx = tx;
        store.log(&log_entry(kind, &r, &[], who))
    });
    if let Err(e) = logged {
        r.notes.push(format!("not logged: {e}"));
    }
    r
}

/// The reports as `req` wants them: one file's, or a transaction's.
fn wrap(req: &Request, mut reports: Vec<Report>) -> Reported {
    match req.what {
        What::File { .. } => Reported::File(reports.remove(0)),
        What::Tx(_) | What::Rewind(_) => {
            let failed = reports.iter().find(|r| r.outcome != Outcome::Ok).cloned();
            let mut m = MultiReport::new(failed.as_ref().map_or(Outcome::Ok, |r| r.outcome));
            m.tx = reports.first().map_or(0, |r| r.tx);
            m.error = failed.and_then(|r| r.error);
            m.files = reports;
            Reported::Files(m)
        }
    }
}

fn log_failure(store: &Store, undone: &Reported, req: &Request, who: &Who) {
    let files: Vec<(&str, &Report)> = undone
        .files()
        .into_iter()
        .map(|r| (r.file.as_str(), r))
        .collect();
    let _ = store.log(&log_entry(req.kind(), &undone.head(), &files, who));
}

/// Writes every plan as transaction `tx`; returns one report per file.
fn commit(
    store: &Store,
    (lock, tx): (&Lock, u64),
    root: Root<'_>,
    (plans, staged): (&[Plan], Staged),
    req: &Request,
    who: &Who,
) -> Vec<Report> {
    // Restored files first, then removed ones: the order the store keeps them in.
    let (restores, removes): (Vec<&Plan>, Vec<&Plan>) =
        plans.iter().partition(|p| p.restored.is_some());
    let plans: Vec<&Plan> = restores.iter().chain(&removes).copied().collect();
    let mut reports: Vec<Report> = plans.iter().map(|p| restored_report(Some(tx), p)).collect();
    let dirs: Result<Vec<(OwnedFd, Vec<String>)>, StoreError> = plans
        .iter()
        .map(|p| dir_for(root, p, who.caller.as_ref()))
        .collect();
    let (dirs, made): (Vec<OwnedFd>, Vec<Vec<String>>) = match dirs {
        Ok(d) => d.into_iter().unzip(),
        Err(e) => {
            let first = reports.remove(0);
            return vec![failed_commit(e, first, plans[0].current.as_deref())];
        }
    };
    let changes: Vec<Change<'_>> = restores
        .iter()
        .zip(&dirs)
        .filter_map(|(p, dir)| restore_of(p, dir.as_fd(), who))
        .collect();
    let removals: Vec<Removal<'_>> = removes
        .iter()
        .zip(&dirs[restores.len()..])
        .filter_map(|(p, dir)| {
            Some(Removal {
                rel: &p.rel,
                dir: dir.as_fd(),
                pre: p.current.as_deref()?,
                file: p.file.as_ref(),
                by: who.caller.as_ref(),
            })
        })
        .collect();
    let files: Vec<(&str, &Report)> = reports.iter().map(|r| (r.file.as_str(), r)).collect();
    let head = match wrap(req, reports.clone()) {
        Reported::File(r) => r,
        Reported::Files(m) => m.head(),
    };
    let mut entry = log_entry(req.kind(), &head, &files, who);
    // A file recreated in directories made again for it: an undo of this undo
    // removes those directories with it.
    for (p, made) in plans.iter().zip(made) {
        if let Some(f) = entry.files.iter_mut().find(|f| f.file == p.rel) {
            f.dirs = made;
        }
    }
    let root_at = (root.fd, root.path);
    match store.commit_with(lock, tx, root_at, (&changes, &removals), entry, staged) {
        Ok(kept) => {
            for (r, k) in reports.iter_mut().zip(kept) {
                r.snapshot = k;
            }
            for p in &removes {
                remove_made_dirs(root, &p.made_dirs, who.caller.as_ref());
            }
            reports
        }
        Err(e) => {
            let first = reports.remove(0);
            vec![failed_commit(e, first, plans[0].current.as_deref())]
        }
    }
}

/// The owner and mode a file recreated for `who` gets: those the log recorded
/// when they are `who`'s own (or `who` may give any, as root); else none, and
/// it is made as `who` makes a file natively: no user makes a file owned by
/// another (an undo or rewind of another user's removal would).
fn recreated_as(recorded: Option<crate::store::Access>, who: &Who) -> Option<crate::store::Access> {
    recorded.filter(|a| {
        who.caller
            .as_ref()
            .is_none_or(|c| c.is_root() || c.uid == a.uid)
    })
}

/// The report of restoring one plan as transaction `tx`, before it is written;
/// `None` for a dry run, which says what it would do.
fn restored_report(tx: Option<u64>, p: &Plan) -> Report {
    let current = p.current.as_deref().unwrap_or_default();
    let after = p.restored.as_deref();
    let mut r = Report::new(Outcome::Ok, after.map(sha256_hex).unwrap_or_default());
    r.tx = tx.unwrap_or(0);
    r.file = p.rel.clone();
    r.time = now();
    r.total = 1;
    r.applied = 1;
    r.diff = Some(file_diff(current, after.unwrap_or_default(), &p.rel));
    let (rel, to) = (&p.rel, p.to);
    let [removed, recreated, restored] = match tx {
        Some(_) => ["removed", "recreated", "restored"],
        None => ["would remove", "would recreate", "would restore"],
    };
    let what = match (&p.current, after) {
        (_, None) => format!("{removed} {rel}: transaction {to} created it"),
        (None, Some(_)) => format!("{recreated} {rel} as it was before transaction {to}"),
        (Some(_), Some(_)) => format!("{restored} {rel} as it was before transaction {to}"),
    };
    r.operations = vec![OpReport {
        index: 1,
        outcome: OpOutcome::Applied,
        strategy: Some("undo"),
        lines: None,
        warnings: Vec::new(),
        error: None,
    }];
    // What was restored is the news of a successful undo, not a warning about it.
    r.notes.insert(0, what);
    r
}

/// The directory of plan `p`: the one held since it was read, or, when it was
/// gone, the one made again for it, with the directories that took.
fn dir_for(
    root: Root<'_>,
    p: &Plan,
    caller: Option<&Caller>,
) -> Result<(OwnedFd, Vec<String>), StoreError> {
    match &p.dir {
        Some(dir) => rustix::io::dup(dir)
            .map(|d| (d, Vec::new()))
            .map_err(|e| io_err("open the directory of", Path::new(&p.rel))(e.into())),
        None => new_file_dir(root, &p.rel, caller),
    }
}

#[cfg(test)]
mod tests {
    use super::plan::outside_change;
    use super::*;
    use crate::store::{FileEntry, LogOutcome as Logged};

    fn entry(tx: u64, sha: Option<&str>, removed: bool) -> LogEntry {
        LogEntry {
            tx,
            outcome: Logged::Ok,
            files: vec![FileEntry {
                file: "f".into(),
                sha256: sha.map(str::to_owned),
                removed,
                ..FileEntry::default()
            }],
            ..LogEntry::default()
        }
    }

    #[test]
    fn only_changes_editfs_did_not_record_need_force() {
        let sha = sha256_hex(b"x");
        assert!(outside_change(&entry(5, Some(&sha), false), "f", Some(b"x")).is_ok());
        let e = outside_change(&entry(5, Some(&sha), false), "f", Some(b"y")).unwrap_err();
        assert!(
            e.message.contains("outside editfs since transaction 5"),
            "{}",
            e.message
        );
        assert!(!e.hint.unwrap().contains("undo those first"));
        assert!(outside_change(&entry(6, None, false), "f", Some(b"y")).is_ok());
        assert!(outside_change(&entry(7, None, true), "f", None).is_ok());
        assert!(outside_change(&entry(7, None, true), "f", Some(b"x")).is_err());
        assert!(outside_change(&entry(8, Some(&sha), false), "f", None).is_err());
    }

    #[test]
    fn the_undo_file_takes_a_path_a_transaction_or_a_whole_transaction() {
        let r = Request::parse("src/a.py 12 --force\n").unwrap();
        assert_eq!(
            r.what,
            What::File {
                rel: "src/a.py".into(),
                to: Some(12)
            }
        );
        assert!(r.force);
        assert_eq!(Request::parse("--tx 7").unwrap().what, What::Tx(7));
        assert_eq!(
            Request::parse("./src/a.py").unwrap().what,
            What::File {
                rel: "src/a.py".into(),
                to: None
            }
        );
        for bad in [
            "",
            "a b c",
            "--tx",
            "--tx x",
            "a b",
            "--to 3",
            ".editfs/log --force",
            "./.editfs/txid",
            "a/../.editfs/log 3",
        ] {
            assert!(Request::parse(bad).is_err(), "{bad:?}");
        }
    }
}

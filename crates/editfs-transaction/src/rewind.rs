//! Points of the history, and the whole project's change since one.
//!
//! A checkpoint is one more numbered line of the log (`Kind::Checkpoint`),
//! optionally named; it changes no file. Every point can be named by its id,
//! a checkpoint also by its name. From a point, the log alone says which files
//! changed after it and which transaction changed each first: that
//! transaction's pre-image is the file as it was at the point (or its absence,
//! for a file it created). So the net change since a point (`net`) and a
//! rewind to it (`undo::What::Rewind`, planned file by file with undo's own
//! rules) each read one kept version per file, never every step between.
//!
//! What the log cannot vouch for is listed, never skipped: a file that changed
//! after the point with no line of the log (a write beside the mount, a path
//! editfs keeps no version of) is `uncovered`.

use std::collections::{BTreeMap, HashSet};
use std::os::fd::AsFd;
use std::path::Path;
use std::time::SystemTime;

use rustix::fs::{Mode, OFlags};

use super::{Root, Who};
use crate::store::{
    FileEntry, Keys, LogEntry, LogKind as Kind, LogOutcome as Outcome, Objects, Side, Store,
    StoreError,
};

/// A point of the history: a transaction id, or a checkpoint's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Point {
    Tx(u64),
    Name(String),
}

impl Point {
    /// Digits are an id; anything else is a checkpoint's name.
    pub fn parse(text: &str) -> Point {
        match text.parse() {
            Ok(tx) => Point::Tx(tx),
            Err(_) => Point::Name(text.to_owned()),
        }
    }

    /// The id of the point in `entries`, or why it names none. Transaction 0
    /// is the start of the history, before the first transaction.
    pub fn resolve(&self, entries: &[LogEntry]) -> Result<u64, NoPoint> {
        match self {
            Point::Tx(0) => Ok(0),
            Point::Tx(tx) if entries.iter().any(|e| e.tx == *tx) => Ok(*tx),
            Point::Tx(tx) => Err(NoPoint::Tx(*tx)),
            Point::Name(name) => entries
                .iter()
                .find(|e| e.kind == Kind::Checkpoint && e.name.as_deref() == Some(name))
                .map(|e| e.tx)
                .ok_or_else(|| NoPoint::Name(name.clone())),
        }
    }
}

/// Why a point (or the transaction `editfs show` is asked for) names nothing
/// in the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoPoint {
    #[error("no transaction {0} in the log")]
    Tx(u64),
    #[error("no checkpoint named {0:?} in the log")]
    Name(String),
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::Tx(0) => write!(f, "the start of the history"),
            Point::Tx(tx) => write!(f, "transaction {tx}"),
            Point::Name(name) => write!(f, "checkpoint {name}"),
        }
    }
}

/// Why a checkpoint was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum MarkError {
    #[error("{0}")]
    BadName(String),
    #[error("a checkpoint named {name:?} exists already (transaction {tx})")]
    Taken { name: String, tx: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The longest checkpoint name, in bytes.
const NAME_MAX: usize = 100;

/// Whether `name` can name a checkpoint: one word a shell and a log line
/// carry unchanged, and not digits alone, which name an id.
pub fn valid_name(name: &str) -> Result<(), MarkError> {
    let bad = |why: &str| {
        Err(MarkError::BadName(format!(
            "checkpoint name {name:?}: {why}"
        )))
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > NAME_MAX {
        return bad("it is longer than 100 bytes");
    }
    if name.parse::<u64>().is_ok() {
        return bad("it reads as a transaction id; add a letter");
    }
    if name.starts_with('-') {
        return bad("it starts with '-', as an option does");
    }
    if !name
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return bad("only letters, digits, '-', '_' and '.' may name a checkpoint");
    }
    Ok(())
}

/// Records a checkpoint named `name` (if given) at the current point of the
/// history: a new id and a log line. Removals still being filed are filed
/// first, so each lands on its own side of the point.
pub fn mark(store: &Store, name: Option<&str>, who: &Who) -> Result<LogEntry, MarkError> {
    if let Some(n) = name {
        valid_name(n)?;
    }
    store.settle_removals();
    // The names are read under their own lock, which no edit waits for:
    // the log may be long, and two checkpoints given one name at once must
    // not both be recorded.
    let _names = store.lock(&Keys::new().checkpoint_names())?;
    if let Some(n) = name
        && let Some(e) = store
            .entries()
            .into_iter()
            .find(|e| e.kind == Kind::Checkpoint && e.name.as_deref() == Some(n))
    {
        return Err(MarkError::Taken {
            name: n.to_owned(),
            tx: e.tx,
        });
    }
    let entry = LogEntry {
        tx: store.next_tx()?,
        // To the microsecond: what changed since is told by file times, and a
        // write in the same second before the point is no change since.
        time: humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
        kind: Kind::Checkpoint,
        outcome: Outcome::Ok,
        pid: who.pid,
        command: who.command.clone(),
        name: name.map(str::to_owned),
        ..LogEntry::default()
    };
    store.log(&entry)?;
    Ok(entry)
}

/// `path` as one word of a shell command line, quoted when it needs to be,
/// for hints that give a command to run.
pub fn shell_word(path: &Path) -> String {
    let text = path.to_string_lossy();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// What a checkpoint request answers, as text and as JSON: its id and name,
/// or why it was not recorded, with a hint.
/// `source` is the project's path for a command line's answer; `None` in a
/// mount, whose answer names its control file instead.
pub fn marked(result: &Result<LogEntry, MarkError>, source: Option<&str>) -> (String, String) {
    match result {
        Ok(e) => {
            let named = e
                .name
                .as_deref()
                .map_or(String::new(), |n| format!(", named {n}"));
            let point = e.name.clone().unwrap_or_else(|| e.tx.to_string());
            let later = match source {
                Some(s) => format!(
                    "editfs diff {s} --since {point} shows what changed since, \
                     editfs rewind {s} --to {point} puts it back"
                ),
                None => format!(
                    "echo '--to {point} --dry-run' > .editfs/rewind shows what a rewind would \
                     do, echo '--to {point}' > .editfs/rewind puts it back"
                ),
            };
            let text = format!("OK: checkpoint {}{named}\nlater: {later}\n", e.tx);
            let json = serde_json::json!({
                "outcome": "ok", "kind": "checkpoint", "tx": e.tx, "name": e.name, "time": e.time,
            });
            (text, json.to_string())
        }
        Err(e) => {
            let (outcome, hint) = match e {
                MarkError::BadName(_) | MarkError::Taken { .. } => (
                    "rejected",
                    "name it with one word of letters, digits, '-', '_' or '.', not used before (editfs history lists the checkpoints)",
                ),
                MarkError::Store(_) => (
                    "failed",
                    "the state directory could not be written; see the daemon's log",
                ),
            };
            let text = format!(
                "{}: checkpoint not recorded: {e}\nhint: {hint}\n",
                outcome.to_uppercase()
            );
            let json = serde_json::json!({
                "outcome": outcome, "kind": "checkpoint", "tx": null,
                "error": {"message": e.to_string(), "hint": hint},
            });
            (text, json.to_string())
        }
    }
}

/// Each file a transaction after `point` changed, with the first of them to
/// change it, in the order they were first changed.
pub fn changed_since(entries: &[LogEntry], point: u64) -> Vec<(String, u64)> {
    first_since(entries, point, FileEntry::touched)
}

/// Every file a transaction after `point` wrote, a write that left it as it
/// was (`sed -i` of a file it did not match) included, with the first such
/// transaction: the log vouches for what each holds, so none of them is a
/// change "with no record".
pub fn written_since(entries: &[LogEntry], point: u64) -> Vec<(String, u64)> {
    first_since(entries, point, |_| true)
}

/// The files of transactions after `point` that `counts`, each with the
/// first transaction to name it, in that order.
fn first_since(
    entries: &[LogEntry],
    point: u64,
    counts: impl Fn(&FileEntry) -> bool,
) -> Vec<(String, u64)> {
    let mut first: BTreeMap<&str, u64> = BTreeMap::new();
    let mut order = Vec::new();
    // By id: a file made through a mount is logged a moment after its id.
    let mut after: Vec<&LogEntry> = entries
        .iter()
        .filter(|e| e.tx > point && e.changed())
        .collect();
    after.sort_by_key(|e| e.tx);
    for e in after {
        for f in e.files.iter().filter(|f| counts(f)) {
            if !first.contains_key(f.file.as_str()) {
                first.insert(&f.file, e.tx);
                order.push((f.file.clone(), e.tx));
            }
        }
    }
    order
}

/// Whether the log says `rel` was absent at `point`: the last transaction at
/// or before it to change the file removed it. A file made again through a
/// mount after its removal (`git stash pop`) is logged as a write over the
/// removed content, so that its history goes on; the first change after such
/// a point then has a pre-image, though there was no file at the point.
pub fn absent_at(entries: &[LogEntry], rel: &str, point: u64) -> bool {
    entries
        .iter()
        .filter(|e| e.tx <= point && e.changed())
        .filter_map(|e| Some((e.tx, e.file(rel).filter(|f| f.touched())?)))
        .max_by_key(|(tx, _)| *tx)
        .is_some_and(|(_, f)| f.removed)
}

/// One file's net change since a point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetChange {
    pub rel: String,
    /// The file at the point: `None` when it did not exist.
    pub before: Option<Vec<u8>>,
    /// The file now: `None` when it does not exist.
    pub now: Option<Vec<u8>>,
}

/// The net change since `point` of every file the log says changed after
/// it, read as `caller` would (`None`: the daemon's own rights); files whose
/// content at the point is no longer kept are returned apart, by name.
pub fn net(
    objects: &Objects,
    entries: &[LogEntry],
    root: Root<'_>,
    point: u64,
) -> (Vec<NetChange>, Vec<String>) {
    let mut changes = Vec::new();
    let mut pruned = Vec::new();
    for (rel, first) in changed_since(entries, point) {
        let created = entries
            .iter()
            .find(|e| e.tx == first)
            .and_then(|e| e.file(&rel))
            .is_some_and(|f| f.created);
        let before = match objects.read(Side::Pre, &rel, first) {
            _ if absent_at(entries, &rel, point) => None,
            Some(bytes) => Some(bytes),
            None if created => None,
            None => {
                pruned.push(rel);
                continue;
            }
        };
        let now = super::open(root, &rel, None).ok().and_then(|o| o.bytes);
        if before != now {
            changes.push(NetChange { rel, before, now });
        }
    }
    (changes, pruned)
}

/// What a walk of the project finds changed since a point with no line of
/// the log to say how it was then.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unrecorded {
    /// Files changed since (content, mode or owner) the log has no record of.
    pub files: Vec<String>,
    /// How many more such files there are than `files` names.
    pub more: usize,
    /// Directories made since (by their birth time), outermost only.
    pub dirs: Vec<String>,
}

/// Files and directories under `root` (the state directory `state` aside)
/// changed after `since` that the log cannot vouch for: files not in
/// `covered` (writes the log has no line of, whose content at the point
/// editfs cannot tell), and directories made since, none of `existed` beneath
/// them (files that were there at the point). Only names `shown` passes are
/// named or counted; at most `most` files are named.
pub fn unrecorded(
    (root, state): (&Path, &Path),
    since: SystemTime,
    (covered, existed): (&HashSet<&str>, &[&str]),
    shown: &dyn Fn(&str) -> bool,
    most: usize,
) -> Unrecorded {
    let state = state.to_owned();
    let walk = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .hidden(false)
        .follow_links(false)
        .filter_entry(move |e| e.path() != state)
        .build();
    let mut found = Unrecorded::default();
    for entry in walk.flatten() {
        let Some(rel) = entry.path().strip_prefix(root).ok().and_then(Path::to_str) else {
            continue;
        };
        let (Some(kind), Ok(meta)) = (entry.file_type(), entry.metadata()) else {
            continue;
        };
        if kind.is_dir() {
            if !rel.is_empty()
                && meta.created().is_ok_and(|t| t > since)
                && !found.dirs.iter().any(|d| beneath(rel, d))
                && !existed.iter().any(|f| beneath(f, rel))
                && shown(rel)
            {
                found.dirs.push(rel.to_owned());
            }
            continue;
        }
        if !kind.is_file() || covered.contains(rel) || !changed_after(&meta, since) || !shown(rel) {
            continue;
        }
        if found.files.len() < most {
            found.files.push(rel.to_owned());
        } else {
            found.more += 1;
        }
    }
    found.files.sort();
    found.dirs.sort();
    found
}

/// Whether `rel` is `dir` or lies beneath it.
fn beneath(rel: &str, dir: &str) -> bool {
    rel.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Whether a file's content or status changed after `since`: the status
/// change time too, as a rename or chmod keeps the mtime.
fn changed_after(meta: &std::fs::Metadata, since: SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
    let changed = std::time::UNIX_EPOCH
        + std::time::Duration::new(meta.ctime().max(0) as u64, meta.ctime_nsec() as u32);
    meta.modified().is_ok_and(|t| t > since) || changed > since
}

/// What a rewind to a point leaves as it is, so that its report never reads
/// as if the whole tree were as it was then: a rewind puts back what the log
/// recorded (each file's content, files made, removed and moved), and no more.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Left {
    /// Files changed since the point with no record in the log.
    pub unrecorded: Vec<String>,
    /// How many more such files there are than `unrecorded` names.
    pub unrecorded_more: usize,
    /// Files the rewind covers whose mode or owner differs from what the log
    /// recorded at the point (a chmod is no write): each with both.
    pub modes: Vec<String>,
    /// Directories made since the point, kept even when the rewind empties them.
    pub directories: Vec<String>,
}

/// Files of not-covered lists named at most: past it, they are counted.
pub const UNRECORDED_MOST: usize = 200;

/// What a rewind to `point` leaves as it is, as `caller` may see it (`None`:
/// the daemon's own rights), `entries` being the history it sees and `state`
/// the state directory, which is not the project's.
pub fn left(
    state: &Path,
    entries: &[LogEntry],
    (root, caller): (Root<'_>, Option<&super::Caller>),
    point: u64,
) -> Left {
    let changed = changed_since(entries, point);
    let written = written_since(entries, point);
    let covered: HashSet<&str> = written.iter().map(|(rel, _)| rel.as_str()).collect();
    let first = |rel: &str, tx: u64| {
        entries
            .iter()
            .find(|e| e.tx == tx)
            .and_then(|e| e.file(rel))
    };
    let existed: Vec<&str> = changed
        .iter()
        .filter(|(rel, tx)| first(rel, *tx).is_some_and(|f| !f.created))
        .map(|(rel, _)| rel.as_str())
        .collect();
    let shown =
        |rel: &str| caller.is_none_or(|c| c.sight(&root.fd, rel) != super::sight::Sight::Hidden);
    let since = time_of(entries, point).unwrap_or(std::time::UNIX_EPOCH);
    // Both as the file system names them, or the walk would enter the state
    // directory and list each kept version.
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let (state, project) = (real(state), real(root.path));
    let found = unrecorded(
        (&project, &state),
        since,
        (&covered, &existed),
        &shown,
        UNRECORDED_MOST,
    );
    let modes = written
        .iter()
        .filter_map(|(rel, tx)| {
            let then = first(rel, *tx).filter(|f| !f.created)?.access?;
            let how = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(root.fd, rel.as_str(), how, Mode::empty()).ok()?;
            rustix::fs::fstat(&fd)
                .ok()
                .filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)?;
            let now = crate::store::Access::of_fd(fd.as_fd())?;
            (now != then && shown(rel)).then(|| access_change(rel, now, then))
        })
        .collect();
    let mut directories = found.dirs;
    directories.extend(still_made(entries, (root, &shown), point));
    directories.sort();
    directories.dedup();
    let outer: Vec<String> = directories.clone();
    directories.retain(|d| !outer.iter().any(|o| o != d && beneath(d, o)));
    Left {
        unrecorded: found.files,
        unrecorded_more: found.more,
        modes,
        directories: directories.into_iter().map(|d| d + "/").collect(),
    }
}

/// The directories transactions after `point` made for the files they
/// created (a patch's new file, a directory moved whole) that are still
/// there: a rewind removes them only once it emptied them, and something it
/// does not remove (an empty directory moved with them, a file made beside
/// the mount) keeps them.
fn still_made(
    entries: &[LogEntry],
    (root, shown): (Root<'_>, &dyn Fn(&str) -> bool),
    point: u64,
) -> Vec<String> {
    let made: std::collections::BTreeSet<&str> = entries
        .iter()
        .filter(|e| e.tx > point && e.changed())
        .flat_map(|e| e.files.iter().filter(|f| f.created))
        .flat_map(|f| f.dirs.iter().map(String::as_str))
        .collect();
    made.into_iter()
        .filter(|d| {
            rustix::fs::statat(root.fd, *d, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
                && shown(d)
        })
        .map(str::to_owned)
        .collect()
}

/// `rel`'s mode or owner now and at the point, for a report.
fn access_change(rel: &str, now: crate::store::Access, then: crate::store::Access) -> String {
    let mut parts = Vec::new();
    if now.mode != then.mode {
        parts.push(format!(
            "mode {:o} now, {:o} at the point",
            now.mode, then.mode
        ));
    }
    if (now.uid, now.gid) != (then.uid, then.gid) {
        parts.push(format!(
            "owner {}:{} now, {}:{} at the point",
            now.uid, now.gid, then.uid, then.gid
        ));
    }
    match (now.acl, then.acl) {
        (true, false) => parts.push("an ACL now, none at the point".to_owned()),
        (false, true) => parts.push("no ACL now, one at the point".to_owned()),
        _ => {}
    }
    format!("{rel}: {}", parts.join(", "))
}

impl std::fmt::Display for Left {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "not undone: a rewind puts back what editfs recorded (each file's content, files made, removed and moved); it leaves as they are:"
        )?;
        let mut list = |title: &str, names: &[String], more: usize| {
            if names.is_empty() {
                return Ok(());
            }
            writeln!(f, "  {title}:")?;
            for n in names {
                writeln!(f, "    {}", crate::engine::report::shown_name(n))?;
            }
            if more > 0 {
                writeln!(f, "    … and {more} more")?;
            }
            Ok(())
        };
        list(
            "changed since with no record (a write beside the mount, .git/, ignored or --no-snapshot paths, files over --max-file-size, a chmod or chown)",
            &self.unrecorded,
            self.unrecorded_more,
        )?;
        list("mode or owner changed since (chmod, chown)", &self.modes, 0)?;
        list(
            "directories made since (mkdir), kept even when empty",
            &self.directories,
            0,
        )?;
        writeln!(
            f,
            "  and what editfs never records: directories removed while empty, symlinks, special files"
        )
    }
}

/// The time of the point's log line, for `unrecorded`.
pub fn time_of(entries: &[LogEntry], point: u64) -> Option<SystemTime> {
    let e = entries.iter().find(|e| e.tx == point)?;
    humantime::parse_rfc3339(&e.time).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_0_is_the_start_of_the_history_and_other_ids_must_be_logged() {
        assert_eq!(Point::Tx(0).resolve(&[]), Ok(0));
        assert!(Point::Tx(7).resolve(&[]).is_err());
        assert_eq!(Point::Tx(0).to_string(), "the start of the history");
    }

    #[test]
    fn a_path_in_a_hint_is_one_shell_word() {
        assert_eq!(shell_word(Path::new("/srv/app-1/src")), "/srv/app-1/src");
        assert_eq!(shell_word(Path::new("/srv/my app")), "'/srv/my app'");
        assert_eq!(shell_word(Path::new("it's")), r"'it'\''s'");
    }
    use crate::store::FileEntry;

    fn line(tx: u64, kind: Kind, files: &[(&str, bool)]) -> LogEntry {
        LogEntry {
            tx,
            kind,
            outcome: Outcome::Ok,
            files: files
                .iter()
                .map(|(f, created)| FileEntry {
                    file: (*f).into(),
                    created: *created,
                    lines_added: 1,
                    ..FileEntry::default()
                })
                .collect(),
            ..LogEntry::default()
        }
    }

    #[test]
    fn a_point_is_an_id_in_the_log_or_a_checkpoints_name() {
        let mut cp = line(3, Kind::Checkpoint, &[]);
        cp.name = Some("before-task".into());
        let entries = [line(1, Kind::Edit, &[("a", false)]), cp];
        assert_eq!(Point::parse("3"), Point::Tx(3));
        assert_eq!(Point::parse("before-task").resolve(&entries), Ok(3));
        assert_eq!(Point::Tx(1).resolve(&entries), Ok(1));
        assert!(Point::Tx(2).resolve(&entries).is_err());
        assert!(Point::parse("other").resolve(&entries).is_err());
    }

    #[test]
    fn a_checkpoint_name_is_one_word_and_never_an_id() {
        for good in ["before-task", "t1", "v2.0_rc", "é", "1.5"] {
            assert!(valid_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "42",
            "+5",
            "-x",
            "a b",
            "a\nb",
            "ab\u{202e}txt",
            "a/b",
            &"x".repeat(101),
        ] {
            assert!(valid_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn each_file_changed_after_a_point_comes_with_the_first_change_to_it() {
        let mut failed = line(6, Kind::Edit, &[("c", false)]);
        failed.outcome = Outcome::Failed;
        let entries = [
            line(1, Kind::Edit, &[("a", false)]),
            line(2, Kind::Checkpoint, &[]),
            line(3, Kind::Edit, &[("b", true)]),
            line(4, Kind::Direct, &[("a", false), ("b", false)]),
            line(5, Kind::Edit, &[("a", false)]),
            failed,
        ];
        assert_eq!(
            changed_since(&entries, 2),
            vec![("b".to_owned(), 3), ("a".to_owned(), 4)]
        );
        assert!(
            changed_since(&entries, 5).is_empty(),
            "a failure changed nothing"
        );
    }

    #[test]
    fn a_file_is_absent_at_a_point_when_its_last_change_before_it_removed_it() {
        let mut removal = line(2, Kind::Delete, &[("a", false)]);
        removal.files[0].removed = true;
        let entries = [
            line(1, Kind::Edit, &[("a", true)]),
            removal,
            line(3, Kind::Checkpoint, &[]),
            line(4, Kind::Direct, &[("a", false)]),
        ];
        assert!(!absent_at(&entries, "a", 1), "made before");
        assert!(absent_at(&entries, "a", 2));
        assert!(absent_at(&entries, "a", 3), "made again only after");
        assert!(!absent_at(&entries, "a", 4));
        assert!(!absent_at(&entries, "b", 3), "no record: not said absent");
    }
}

//! `editfs checkpoint`, `editfs diff` and `editfs rewind`: a point of the
//! history, what changed since, and putting the project back to it.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;

use crate::engine::diff::file_diff;
use crate::engine::report::shown_name;
use crate::store::{Retention, View, count_changes};
use crate::transaction::rewind::{self, NetChange, Point};
use crate::transaction::undo;

use super::color::ColorArg;
use super::error::{CommandError, Ended};
use super::history::{RestoreArgs, restore};
use super::state::{ProjectArgs, open};
use super::who;

#[derive(clap::Args)]
#[command(
    about = "Record a checkpoint: a point of SOURCE's history to diff or rewind to later",
    after_help = "Prints its transaction id and name. Inside a mount, write the name to \
.editfs/checkpoint (`echo before-task > MOUNT/.editfs/checkpoint`) and read the answer back from \
the same handle or .editfs/status. Later: `editfs diff SOURCE --since NAME` shows what changed \
since, `editfs rewind SOURCE --to NAME` puts it back."
)]
pub struct CheckpointArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// A name for it: one word, not digits alone, unique in the history
    name: Option<String>,
    /// Print the answer as JSON
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(
    about = "Show what changed in SOURCE since a checkpoint or transaction: the net change per file, as git diff prints it",
    after_help = "Each file is compared as it was at the point with how it is now, not step \
by step. A removed file and a created one at least 50% alike show as one rename (R and their \
similarity, with the changes between them). Files the history has no record of changing but that changed since (a write beside \
the mount, .git/, paths editfs keeps no version of) are listed as not covered. Only reads."
)]
pub struct DiffArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// The point: a checkpoint's name or a transaction id (0: the start of the history)
    #[arg(long, value_name = "TXID|NAME")]
    since: String,
    /// Only these files (relative to SOURCE, or absolute paths inside it)
    paths: Vec<String>,
    #[command(flatten)]
    format: DiffFormat,
}

/// How `diff` and `branch diff` print a net change.
#[derive(clap::Args)]
pub(super) struct DiffFormat {
    /// Print a line per file with lines added and removed
    #[arg(long, conflicts_with_all = ["name_status", "json"])]
    stat: bool,
    /// Print a status letter (M, A, D, or R and the similarity) and the name per file
    #[arg(long, conflicts_with = "json")]
    name_status: bool,
    /// Print the changes as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    color: ColorArg,
}

impl DiffFormat {
    /// Prints `files` as asked: JSON (`as_json`, which says what is not
    /// covered itself), or a stat, name-status lines or a patch, each
    /// followed by `tail`.
    pub(super) fn print(&self, files: &[Changed], as_json: impl FnOnce() -> String, tail: &str) {
        let text = if self.json {
            as_json() + "\n"
        } else if self.stat {
            stat(files) + tail
        } else if self.name_status {
            name_status(files) + tail
        } else {
            patch(files) + tail
        };
        let _ = self.color.print(&text);
    }
}

#[derive(clap::Args)]
#[command(
    about = "Put every file changed since a checkpoint or transaction back as it was then, as one transaction",
    after_help = "Covers every write editfs recorded: edits, multi-file transactions, direct \
writes (sed -i, an editor's save), files created (removed again, their content kept), removed \
(restored with their mode and owner) and renamed (a directory moved whole too), undos and \
earlier rewinds. The report ends with what it leaves as it is: files changed with no record, \
modes changed by chmod, directories made since (`not_undone` in --json). The rewind is one \
transaction: `editfs undo SOURCE --tx ID` takes it back. A file changed since in a way editfs did \
not record is named and the rewind refused, unless --force. Inside a mount, write \
`--to TXID|NAME [--dry-run] [--force]` to .editfs/rewind."
)]
pub struct RewindArgs {
    #[command(flatten)]
    project: ProjectArgs,
    /// The point: a checkpoint's name or a transaction id (0: the start of the history)
    #[arg(long, value_name = "TXID|NAME")]
    to: String,
    #[command(flatten)]
    how: RestoreArgs,
}

pub fn checkpoint(args: CheckpointArgs) -> Result<Ended, CommandError> {
    let held = args.project.made()?;
    let store = open(&held.path(), Retention::default())?;
    let result = rewind::mark(&store, args.name.as_deref(), &who("editfs checkpoint"));
    let source = rewind::shell_word(&args.project.source);
    let (text, json) = rewind::marked(&result, Some(&source));
    print!("{}", if args.json { json + "\n" } else { text });
    Ok(if result.is_ok() {
        Ended::Done
    } else {
        Ended::Failed
    })
}

pub fn rewind(args: RewindArgs) -> Result<Ended, CommandError> {
    let what = undo::What::Rewind(Point::parse(&args.to));
    restore(&args.project, what, &args.how, "editfs rewind")
}

pub fn diff(args: DiffArgs) -> Result<Ended, CommandError> {
    let run = || -> Result<(), CommandError> {
        let held = args.project.read()?;
        let state = held.path();
        let view = View::new(&state);
        let entries = view.entries();
        let point = Point::parse(&args.since)
            .resolve(&entries)
            .map_err(|e| CommandError::from(e).hint("editfs history lists the points"))?;
        let opened = args.project.root()?;
        let only: Vec<String> = args
            .paths
            .iter()
            .map(|p| args.project.path(p))
            .collect::<Result<_, _>>()?;
        let wanted = |rel: &str| {
            only.is_empty()
                || only
                    .iter()
                    .any(|p| rel == p || rel.starts_with(&format!("{p}/")))
        };
        let (mut changes, mut pruned) = rewind::net(view.objects(), &entries, opened.root(), point);
        changes.retain(|c| wanted(&c.rel));
        pruned.retain(|r| wanted(r));
        let since_point = rewind::written_since(&entries, point);
        let recorded: HashSet<&str> = since_point.iter().map(|(rel, _)| rel.as_str()).collect();
        let since = rewind::time_of(&entries, point).unwrap_or(std::time::UNIX_EPOCH);
        let state_real = fs::canonicalize(&state).unwrap_or(state.clone());
        let found = rewind::unrecorded(
            (opened.path(), &state_real),
            since,
            (&recorded, &[]),
            &wanted,
            rewind::UNRECORDED_MOST,
        );
        let (uncovered, more) = (found.files, found.more);
        let files = pair_renames(changes);
        let as_json = || json(&files, &pruned, &uncovered, more);
        args.format
            .print(&files, as_json, &not_covered(&pruned, &uncovered, more));
        Ok(())
    };
    run()?;
    Ok(Ended::Done)
}

/// One file's net change, a removed and a created file of like content
/// paired as a rename.
pub(super) enum Changed {
    Modified(NetChange),
    Added(NetChange),
    Deleted(NetChange),
    /// `from` removed, `to` created, `similarity` percent of their content alike.
    Renamed {
        from: NetChange,
        to: NetChange,
        similarity: u8,
    },
}

impl Changed {
    fn letter(&self) -> char {
        match self {
            Changed::Modified(_) => 'M',
            Changed::Added(_) => 'A',
            Changed::Deleted(_) => 'D',
            Changed::Renamed { .. } => 'R',
        }
    }

    fn change(&self) -> &NetChange {
        match self {
            Changed::Modified(c) | Changed::Added(c) | Changed::Deleted(c) => c,
            Changed::Renamed { to, .. } => to,
        }
    }

    fn name(&self) -> String {
        match self {
            Changed::Renamed { from, to, .. } => format!("{} => {}", from.rel, to.rel),
            other => other.change().rel.clone(),
        }
    }

    /// The unified diff of its content, `/dev/null` for a side that does not
    /// exist; a rename's, from the old name's content to the new one's.
    fn diff(&self) -> String {
        let (before, now, old_name) = match self {
            Changed::Renamed { from, to, .. } => {
                (from.before.as_deref(), to.now.as_deref(), &from.rel)
            }
            Changed::Modified(c) | Changed::Added(c) | Changed::Deleted(c) => {
                (c.before.as_deref(), c.now.as_deref(), &c.rel)
            }
        };
        let new_name = &self.change().rel;
        let (b, n) = (before.unwrap_or_default(), now.unwrap_or_default());
        if b == n {
            return String::new();
        }
        if b.contains(&0) || n.contains(&0) {
            return format!("Binary files differ ({} -> {} bytes)\n", b.len(), n.len());
        }
        let text = file_diff(b, n, new_name);
        let rest = text.splitn(3, '\n').nth(2).unwrap_or_default();
        let old = match before {
            Some(_) => format!("--- a/{}", shown_name(old_name)),
            None => "--- /dev/null".to_owned(),
        };
        let new = match now {
            Some(_) => format!("+++ b/{}", shown_name(new_name)),
            None => "+++ /dev/null".to_owned(),
        };
        format!("{old}\n{new}\n{rest}")
    }
}

/// How alike two contents must be, in percent, for a removed and a created
/// file to show as one renamed: git's default (`-M50%`).
const RENAME_SIMILARITY: u8 = 50;

/// Pairs of a removed and a created file compared for likeness at most (as
/// git's `diff.renameLimit`): past it, only renames with the content
/// unchanged are found, as comparing each pair would take long.
const RENAME_PAIRS_MOST: usize = 1000 * 1000;

/// A content's lines as a sorted list of (hash, length): what two contents
/// share is counted by merging two such lists, once per pair, without a diff.
struct Lines {
    len: usize,
    binary: bool,
    lines: Vec<(u64, usize)>,
}

impl Lines {
    fn of(bytes: &[u8]) -> Lines {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hasher = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
        let mut lines: Vec<(u64, usize)> = bytes
            .split_inclusive(|b| *b == b'\n')
            .map(|l| (hasher.hash_one(l), l.len()))
            .collect();
        lines.sort_unstable();
        Lines {
            len: bytes.len(),
            binary: bytes.contains(&0),
            lines,
        }
    }

    /// How much of `self` stays in `other`, in percent of the larger: the
    /// bytes of the lines they share, as git scores a rename. Binary contents
    /// are alike only when equal (paired before: see `pair_renames`).
    fn similarity(&self, other: &Lines) -> u8 {
        let larger = self.len.max(other.len);
        // Too different in size to reach the threshold: not worth comparing.
        if self.binary
            || other.binary
            || self.len.min(other.len) * 100 < larger * usize::from(RENAME_SIMILARITY)
        {
            return 0;
        }
        let (mut i, mut j, mut same) = (0, 0, 0);
        while let (Some(a), Some(b)) = (self.lines.get(i), other.lines.get(j)) {
            match a.cmp(b) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    same += a.1;
                    i += 1;
                    j += 1;
                }
            }
        }
        // Never 100 for contents that differ.
        (same * 100 / larger.max(1)).min(99) as u8
    }
}

/// Sorts the changes by name, pairing each removed file with a created one of
/// the same content (found by its bytes, whatever the number of files), then
/// with the created one most like it, at least `RENAME_SIMILARITY` percent
/// alike (git's renames).
pub(super) fn pair_renames(changes: Vec<NetChange>) -> Vec<Changed> {
    let (added, rest): (Vec<_>, Vec<_>) = changes
        .into_iter()
        .partition(|c| c.before.is_none() && c.now.is_some());
    let (deleted, modified): (Vec<_>, Vec<_>) = rest.into_iter().partition(|c| c.now.is_none());
    let mut out: Vec<Changed> = modified.into_iter().map(Changed::Modified).collect();
    let mut slots: Vec<Option<NetChange>> = added.into_iter().map(Some).collect();
    let mut by_content: std::collections::HashMap<Vec<u8>, Vec<usize>> =
        std::collections::HashMap::new();
    for (i, a) in slots.iter().enumerate().rev() {
        let now = a.as_ref().and_then(|a| a.now.clone()).unwrap_or_default();
        by_content.entry(now).or_default().push(i);
    }
    let mut left = Vec::new();
    for d in deleted {
        let before = d.before.as_deref().unwrap_or_default();
        match by_content.get_mut(before).and_then(Vec::pop) {
            Some(i) => out.extend(slots[i].take().map(|to| Changed::Renamed {
                from: d,
                to,
                similarity: 100,
            })),
            None => left.push(d),
        }
    }
    let free = slots.iter().filter(|s| s.is_some()).count();
    if left.len() * free <= RENAME_PAIRS_MOST {
        let lines: Vec<Option<Lines>> = slots
            .iter()
            .map(|s| {
                s.as_ref()
                    .map(|a| Lines::of(a.now.as_deref().unwrap_or_default()))
            })
            .collect();
        let mut unpaired = Vec::new();
        for d in left {
            let gone = Lines::of(d.before.as_deref().unwrap_or_default());
            let best = lines
                .iter()
                .enumerate()
                .filter(|(i, l)| l.is_some() && slots[*i].is_some())
                .filter_map(|(i, l)| Some((gone.similarity(l.as_ref()?), i)))
                .filter(|(s, _)| *s >= RENAME_SIMILARITY)
                .max_by_key(|(s, i)| (*s, std::cmp::Reverse(*i)));
            match best.and_then(|(s, i)| Some((s, slots[i].take()?))) {
                Some((similarity, to)) => out.push(Changed::Renamed {
                    from: d,
                    to,
                    similarity,
                }),
                None => unpaired.push(d),
            }
        }
        left = unpaired;
    }
    out.extend(left.into_iter().map(Changed::Deleted));
    out.extend(slots.into_iter().flatten().map(Changed::Added));
    out.sort_by(|a, b| a.change().rel.cmp(&b.change().rel));
    out
}

pub(super) fn patch(files: &[Changed]) -> String {
    let mut out = String::new();
    for f in files {
        let rel = &f.change().rel;
        let _ = match f {
            Changed::Renamed {
                from, similarity, ..
            } => writeln!(
                out,
                "diff --git a/{from} b/{rel}\nsimilarity index {similarity}%\nrename from {from}\nrename to {rel}",
                from = from.rel
            ),
            Changed::Added(_) => writeln!(out, "diff --git a/{rel} b/{rel}\nnew file"),
            Changed::Deleted(_) => writeln!(out, "diff --git a/{rel} b/{rel}\ndeleted file"),
            Changed::Modified(_) => writeln!(out, "diff --git a/{rel} b/{rel}"),
        };
        out.push_str(&f.diff());
    }
    out
}

pub(super) fn stat(files: &[Changed]) -> String {
    let mut out = String::new();
    let (mut added, mut removed) = (0, 0);
    for f in files {
        let (a, r) = count_changes(&f.diff());
        added += a;
        removed += r;
        let _ = writeln!(out, " {} | +{a} -{r}", f.name());
    }
    let _ = writeln!(
        out,
        " {} file(s) changed, {added} insertion(s)(+), {removed} deletion(s)(-)",
        files.len()
    );
    out
}

pub(super) fn name_status(files: &[Changed]) -> String {
    let mut out = String::new();
    for f in files {
        let _ = match f {
            Changed::Renamed {
                from,
                to,
                similarity,
            } => writeln!(out, "R{similarity:03}\t{}\t{}", from.rel, to.rel),
            other => writeln!(out, "{}\t{}", other.letter(), other.change().rel),
        };
    }
    out
}

/// The files whose change since the point the history cannot show.
fn not_covered(pruned: &[String], uncovered: &[String], more: usize) -> String {
    let mut out = String::new();
    if !pruned.is_empty() {
        let _ = writeln!(
            out,
            "\nnot covered: their version at the point is no longer kept (--keep, --keep-bytes):"
        );
        for p in pruned {
            let _ = writeln!(out, "  {p}");
        }
    }
    if !uncovered.is_empty() {
        let _ = writeln!(
            out,
            "\nnot covered: changed since with no record in the history (a write beside the mount, .git/, ignored or --no-snapshot paths, files over --max-file-size):"
        );
        for p in uncovered {
            let _ = writeln!(out, "  {p}");
        }
        if more > 0 {
            let _ = writeln!(out, "  … and {more} more");
        }
    }
    out
}

pub(super) fn json(
    files: &[Changed],
    pruned: &[String],
    uncovered: &[String],
    more: usize,
) -> String {
    let files: Vec<_> = files
        .iter()
        .map(|f| {
            let diff = f.diff();
            let (added, removed) = count_changes(&diff);
            serde_json::json!({
                "status": f.letter().to_string(),
                "path": f.change().rel,
                "from": match f { Changed::Renamed { from, .. } => Some(&from.rel), _ => None },
                "similarity": match f { Changed::Renamed { similarity, .. } => Some(similarity), _ => None },
                "lines_added": added,
                "lines_removed": removed,
                "diff": diff,
            })
        })
        .collect();
    serde_json::json!({
        "files": files,
        "not_covered": {"no_longer_kept": pruned, "unrecorded": uncovered, "unrecorded_more": more},
    })
    .to_string()
}

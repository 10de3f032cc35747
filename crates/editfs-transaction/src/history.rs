//! What the log says, for people: `editfs history`, `editfs show`, and
//! `.editfs/history` in the mount.
//!
//! Everything here only reads, so it works on a read-only state directory and
//! through the mount's read-only `.editfs/` view.

use std::fmt::Write;
use std::path::{Component, Path, PathBuf};

use crate::engine::diff::file_diff;
use crate::rewind::NoPoint;
use crate::store::{LogEntry, LogKind as Kind, LogOutcome as Outcome, Side, View};

/// The first line of `table`.
pub const HEADER: &str =
    "TX     TIME                  OUTCOME   KIND    LINES       FILES  (WHO)\n";

/// One line per transaction (on `path` only, if given), by id: a line is
/// logged when its transaction ends, which may be after a later one's.
pub fn table(entries: &[LogEntry], path: Option<&str>) -> String {
    let mut by_id: Vec<&LogEntry> = entries.iter().collect();
    by_id.sort_by_key(|e| e.tx);
    let mut out = String::from(HEADER);
    for e in by_id {
        out.push_str(&row(e, path));
    }
    out
}

/// `e`'s line of the table, or nothing when `path` is given and `e` did not touch it.
pub fn row(e: &LogEntry, path: Option<&str>) -> String {
    if path.is_some_and(|p| e.file(p).is_none()) {
        return String::new();
    }
    if e.kind == Kind::Checkpoint {
        return checkpoint_row(e);
    }
    let added: usize = e.files.iter().map(|f| f.lines_added).sum();
    let removed: usize = e.files.iter().map(|f| f.lines_removed).sum();
    let names: Vec<_> = e
        .files
        .iter()
        .map(|f| crate::engine::report::shown_name(&f.file))
        .collect();
    let who = who(e);
    format!(
        "{:<6} {:<21} {:<9} {:<7} {:<11} {}{who}\n",
        e.tx,
        e.time,
        e.outcome.as_str(),
        e.kind.as_str(),
        format!("+{added} -{removed}"),
        names.join(" "),
    )
}

/// A checkpoint's line: it changed no file, so it shows its name instead.
fn checkpoint_row(e: &LogEntry) -> String {
    let name = e.name.as_deref().map_or(String::new(), one_line);
    format!(
        "{:<6} {:<21} {:<9} {:<7} {:<11} {name}{}\n",
        e.tx,
        seconds(&e.time),
        e.outcome.as_str(),
        "mark",
        "-",
        who(e),
    )
}

/// A time of the log to the second, as every row shows it (a checkpoint's is
/// kept finer: see `transaction::rewind::mark`).
fn seconds(time: &str) -> String {
    match time.split_once('.') {
        Some((whole, _)) => format!("{whole}Z"),
        None => time.to_owned(),
    }
}

/// The writer of `e`, as the table's last column shows it.
fn who(e: &LogEntry) -> String {
    match (e.pid, e.command.as_str()) {
        (pid, cmd) if !cmd.is_empty() => format!("  (pid {pid}: {})", one_line(cmd)),
        (pid, _) if pid > 0 => format!("  (pid {pid})"),
        _ => String::new(),
    }
}

/// The longest command line a row shows, in characters.
const WHO_WIDTH: usize = 80;

/// A writer's command line on one line of the table: an agent's `sh -c` or
/// `python3 -c` program holds line breaks, which would start rows of their own, so
/// control characters are shown escaped, and a long command is cut with `…`.
fn one_line(command: &str) -> String {
    let mut out = String::new();
    let mut width = 0;
    for c in command.chars() {
        let shown = match c {
            '\n' => "\\n".to_string(),
            '\t' => "\\t".to_string(),
            '\r' => "\\r".to_string(),
            c if c.is_control() => c.escape_unicode().to_string(),
            c => c.to_string(),
        };
        width += shown.chars().count();
        if width > WHO_WIDTH {
            out.push('…');
            break;
        }
        out.push_str(&shown);
    }
    out
}

/// Transaction `tx` as a diff of each file it changed, from the log and kept
/// versions of a state directory.
pub fn show(view: &View, tx: u64) -> Result<String, NoPoint> {
    let entries = view.entries();
    let e = entries.iter().find(|e| e.tx == tx).ok_or(NoPoint::Tx(tx))?;
    let mut out = table(std::slice::from_ref(e), None);
    if e.outcome == Outcome::Skipped {
        let why = e.files.iter().find_map(|f| f.reason.as_deref());
        let _ = writeln!(
            out,
            "a {} outside the control files; no pre-image was kept ({})",
            if e.kind == Kind::Delete {
                "removal"
            } else {
                "write"
            },
            why.unwrap_or("excluded")
        );
        return Ok(out);
    }
    if !e.changed() {
        out.push_str("it changed nothing");
        if let Some(kind) = &e.error {
            let _ = write!(out, " (error: {kind})");
        }
        out.push('\n');
        return Ok(out);
    }
    for f in &e.files {
        let rel = f.file.as_str();
        let before = view.read(Side::Pre, rel, tx);
        let after = view.read(Side::Post, rel, tx);
        match (before, after) {
            (Some(b), None) if f.removed => {
                let _ = writeln!(
                    out,
                    "\n{rel}: removed; its pre-image is kept as snapshots/{rel}/{tx}"
                );
                out.push_str(&file_diff(&b, b"", rel));
            }
            (b, Some(a)) => {
                out.push('\n');
                out.push_str(&file_diff(b.as_deref().unwrap_or_default(), &a, rel));
            }
            (Some(_), None) if e.kind == Kind::Direct => {
                let _ = writeln!(
                    out,
                    "\n{rel}: a write outside the control files, still open or cut short; its pre-image is kept as snapshots/{rel}/{tx}"
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "\n{rel}: the versions of this transaction are no longer kept"
                );
            }
        }
    }
    Ok(out)
}

/// `path` as the log names it: relative to `source`, without `.` or a leading
/// `./`. An absolute path must lie inside `source` (as given or with its symbolic
/// links resolved).
pub fn project_path(source: &Path, path: &str) -> Result<String, GivenPath> {
    let given = Path::new(path);
    let inside = if given.is_absolute() {
        let canonical = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_owned());
        let dir_resolved = given
            .parent()
            .and_then(|d| std::fs::canonicalize(d).ok())
            .zip(given.file_name())
            .map(|(d, n)| d.join(n));
        [given.to_owned()]
            .into_iter()
            .chain(dir_resolved)
            .find_map(|p| {
                p.strip_prefix(source)
                    .or_else(|_| p.strip_prefix(&canonical))
                    .ok()
                    .map(Path::to_owned)
            })
            .ok_or_else(|| GivenPath::Outside {
                path: path.to_owned(),
                project: source.to_owned(),
            })?
    } else {
        given.to_owned()
    };
    let mut rel = PathBuf::new();
    for c in inside.components() {
        match c {
            Component::Normal(p) => rel.push(p),
            Component::CurDir => {}
            _ => {
                return Err(GivenPath::Parent(path.to_owned()));
            }
        }
    }
    match rel.to_str() {
        Some("") => Err(GivenPath::NoFile(path.to_owned())),
        Some(s) => Ok(s.to_owned()),
        None => Err(GivenPath::NotUtf8(path.to_owned())),
    }
}

/// Why a path given on the command line names no file of the project.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum GivenPath {
    #[error("{path} is not inside {}", project.display())]
    Outside { path: String, project: PathBuf },
    #[error("{0}: give a path inside the project, without `..`")]
    Parent(String),
    #[error("{0} names no file")]
    NoFile(String),
    #[error("{0} is not valid UTF-8")]
    NotUtf8(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_is_shown_on_one_line_and_cut_short() {
        assert_eq!(
            one_line("sh -c a\nb\tc\u{1b}[31m"),
            "sh -c a\\nb\\tc\\u{1b}[31m"
        );
        let long = "x".repeat(300);
        let shown = one_line(&long);
        assert_eq!(shown.chars().count(), WHO_WIDTH + 1);
        assert!(shown.ends_with('…'));
    }

    #[test]
    fn paths_are_taken_relative_to_the_project() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path();
        std::fs::create_dir(src.join("src")).unwrap();
        let abs = src.join("src/x.rs");
        for given in [
            "src/x.rs",
            "./src/x.rs",
            "src/./x.rs",
            abs.to_str().unwrap(),
        ] {
            assert_eq!(project_path(src, given).unwrap(), "src/x.rs", "{given}");
        }
        assert!(project_path(src, "/etc/passwd").is_err());
        assert!(project_path(src, "../x").is_err());
        assert!(project_path(src, ".").is_err());
    }
}

//! Branches of a project: a point of its history (the base) and a directory of
//! the branch's own changes (`base.rs` reads the base, `base_fuse.rs` serves it,
//! `stack.rs` mounts a branch's layers, `diff.rs` compares branches, `commit.rs`
//! writes what a commit applies), kept in the project's state directory under
//! `branches/NAME/` (see docs/branches.md for the design and its limits).
//!
//! ```text
//! branches/NAME/branch.json   the base (a transaction id), when and by whom it was made
//! branches/NAME/upper/        the branch's own changes (overlayfs's upper layer)
//! branches/NAME/work/         overlayfs's work directory
//! branches/NAME/state/        the state directory of the branch's own mount
//! ```
//!
//! Making a branch copies no file: it records the base and makes empty
//! directories, so it takes as long whatever the size of the project. A
//! branch is made under a temporary name and renamed into place, so a branch
//! either exists whole or not at all, and two made at once under one name
//! cannot both succeed.

mod base;
mod base_fuse;
pub mod commit;
mod diff;
mod stack;

pub use diff::{Tree, changes};
pub use stack::Stack;

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::store::{Store, StoreError};
use crate::transaction::Who;
use crate::transaction::rewind::{self, MarkError, NoPoint, Point};

pub use crate::store::BRANCHES;

/// The longest branch name, in bytes.
const NAME_MAX: usize = 100;

/// Why a branch command could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum BranchError {
    #[error("branch name {name:?}: {why}")]
    BadName { name: String, why: &'static str },
    #[error("a branch named {0:?} exists already")]
    Exists(String),
    #[error("no branch named {0:?}")]
    Missing(String),
    #[error(transparent)]
    Point(#[from] NoPoint),
    #[error(transparent)]
    Mark(MarkError),
    #[error("branch {name:?} belongs to uid {owner}")]
    NotOwner { name: String, owner: u32 },
    #[error("branch {name:?} is mounted at {}", at.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    Mounted { name: String, at: Vec<PathBuf> },
    #[error("branch {name:?} is damaged: {why}")]
    Damaged { name: String, why: String },
    #[error("{rel}: larger than {limit} bytes, more than a transaction takes")]
    TooLarge { rel: String, limit: u64 },
    #[error("{rel}: a name that is not UTF-8, which no payload can carry")]
    NotUtf8 { rel: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> BranchError + 'p {
    move |source| BranchError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// What `branch.json` records.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Meta {
    /// The transaction id the branch starts from: it sees the project as it
    /// was right after it.
    pub base: u64,
    /// The point as it was given (`--from`), or none when the branch took a
    /// checkpoint of its own.
    pub from: Option<String>,
    /// When it was made, RFC 3339.
    pub created: String,
    /// The user who made it, whose it is.
    pub uid: u32,
}

/// A branch of a project.
#[derive(Clone, Debug)]
pub struct Branch {
    pub name: String,
    /// `branches/NAME/`, by the state directory's real path.
    pub dir: PathBuf,
    pub meta: Meta,
    /// The owner and group of `branch.json`: the kernel's word for who made
    /// the branch, which its maker cannot write, unlike the record's text.
    pub made_by: (u32, u32),
}

/// What a branch changed so far: the entries of its upper directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Size {
    /// Files, links and removals (whiteouts) it holds.
    pub entries: u64,
    /// Bytes of the files' contents.
    pub bytes: u64,
}

/// Whether `name` can name a branch: one word a shell, a path and a log line
/// carry unchanged.
pub fn valid_name(name: &str) -> Result<(), BranchError> {
    let bad = |why| {
        Err(BranchError::BadName {
            name: name.to_owned(),
            why,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > NAME_MAX {
        return bad("it is longer than 100 bytes");
    }
    if name.starts_with(['-', '.']) {
        return bad("it starts with '-' or '.'");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return bad("only letters, digits, '-', '_' and '.' may name a branch");
    }
    Ok(())
}

/// Makes branch `name` of the project whose store is `store`, in the state
/// directory at `state` (its real path). Its base is `from`, a point of the
/// history, or else a checkpoint taken now.
pub fn create(
    store: &Store,
    state: &Path,
    name: &str,
    from: Option<&str>,
    who: &Who,
) -> Result<Branch, BranchError> {
    valid_name(name)?;
    let branches = state.join(BRANCHES);
    let dir = branches.join(name);
    if dir.exists() {
        return Err(BranchError::Exists(name.to_owned()));
    }
    let base = match from {
        Some(point) => Point::parse(point)
            .resolve(&store.entries())
            .map_err(BranchError::Point)?,
        None => match rewind::mark(store, None, who) {
            Ok(entry) => entry.tx,
            Err(MarkError::Store(e)) => return Err(e.into()),
            Err(e) => return Err(BranchError::Mark(e)),
        },
    };
    let meta = Meta {
        base,
        from: from.map(str::to_owned),
        created: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        uid: rustix::process::getuid().as_raw(),
    };
    private_dir(&branches)?;
    sweep(&branches);
    let temp = branches.join(format!(".new-{name}-{}", std::process::id()));
    let made = lay_out(&temp, &meta).and_then(|()| {
        fs::rename(&temp, &dir).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty => {
                BranchError::Exists(name.to_owned())
            }
            _ => io_err("rename into place", &dir)(e),
        })
    });
    if made.is_err() {
        let _ = fs::remove_dir_all(&temp);
    }
    made?;
    open(state, name)
}

/// Makes `dir` readable by its owner alone, as the state directory is, if
/// it is not there yet.
fn private_dir(dir: &Path) -> Result<(), BranchError> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(io_err("make", dir)(e)),
        _ => Ok(()),
    }
}

/// A new branch's directory at `dir`: its record and its empty folders.
fn lay_out(dir: &Path, meta: &Meta) -> Result<(), BranchError> {
    private_dir(dir)?;
    for sub in ["upper", "work", "state"] {
        private_dir(&dir.join(sub))?;
    }
    let text = serde_json::to_string_pretty(meta).unwrap_or_default() + "\n";
    let record = dir.join("branch.json");
    fs::write(&record, text).map_err(io_err("write", &record))
}

/// Branch `name` of the state directory at `state`.
pub fn open(state: &Path, name: &str) -> Result<Branch, BranchError> {
    valid_name(name).map_err(|_| BranchError::Missing(name.to_owned()))?;
    let dir = state.join(BRANCHES).join(name);
    let record = dir.join("branch.json");
    let (text, made_by) = match read_record(&record) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(BranchError::Missing(name.to_owned()));
        }
        Err(e) => return Err(io_err("read", &record)(e)),
    };
    let damaged = |why: String| BranchError::Damaged {
        name: name.to_owned(),
        why,
    };
    let meta: Meta =
        serde_json::from_str(&text).map_err(|e| damaged(format!("{}: {e}", record.display())))?;
    // A maker may rewrite its own record: one that names another user
    // than the one who wrote it is not believed.
    if made_by.0 != 0 && made_by.0 != meta.uid {
        return Err(damaged(format!(
            "{} names uid {} but belongs to uid {}",
            record.display(),
            meta.uid,
            made_by.0
        )));
    }
    Ok(Branch {
        name: name.to_owned(),
        dir,
        meta,
        made_by,
    })
}

/// The text of `branch.json`, and its owner and group.
fn read_record(record: &Path) -> io::Result<(String, (u32, u32))> {
    let mut file = fs::File::open(record)?;
    let meta = file.metadata()?;
    let mut text = String::new();
    io::Read::read_to_string(&mut file, &mut text)?;
    Ok((text, (meta.uid(), meta.gid())))
}

/// Every branch of the state directory at `state`, by name; a damaged one
/// comes as its error, so a listing names it rather than hiding it. What a
/// process killed while it made or removed a branch left is removed first:
/// nothing else comes after such a process to do it.
pub fn all(state: &Path) -> Vec<Result<Branch, BranchError>> {
    sweep(&state.join(BRANCHES));
    let Ok(read) = fs::read_dir(state.join(BRANCHES)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = read
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| valid_name(n).is_ok())
        .collect();
    names.sort();
    names.iter().map(|n| open(state, n)).collect()
}

impl Branch {
    /// Who a commit of this branch acts as, file by file, when root runs it
    /// and another user made the branch: that user, with the group its
    /// record was written with (no supplementary group: which it had is not
    /// known from anything it could not have written). The commit then
    /// writes, makes and removes only what that user may now in the
    /// project, and what it makes is that user's. `None`: the one who runs
    /// the commit, the maker or root, acting for itself.
    pub fn maker(&self) -> Option<crate::store::Caller> {
        let me = rustix::process::getuid().as_raw();
        let (uid, gid) = self.made_by;
        (me == 0 && uid != 0).then(|| crate::store::Caller {
            uid,
            gid,
            groups: Vec::new(),
            fsetid: false,
            umask: 0o022,
        })
    }

    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }

    pub fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// The state directory of the branch's own mount.
    pub fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// What the branch changed so far.
    pub fn size(&self) -> Size {
        let mut size = Size::default();
        add_sizes(&self.upper(), &mut size);
        size
    }

    /// The mount points that serve the branch, outermost first: a mount
    /// point beneath its directory, or a mount whose source is beneath it.
    pub fn mounts(&self) -> Vec<PathBuf> {
        let table = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut found = serving(&table, &self.dir);
        found.reverse();
        found
    }

    /// Removes the branch and everything it holds, refused while a mount
    /// serves it. It is first renamed aside, so a removal cut short leaves
    /// no half branch under its name.
    pub fn remove(self) -> Result<(), BranchError> {
        let at = self.mounts();
        if !at.is_empty() {
            return Err(BranchError::Mounted {
                name: self.name,
                at,
            });
        }
        let gone = self
            .dir
            .with_file_name(format!(".gone-{}-{}", self.name, std::process::id()));
        fs::rename(&self.dir, &gone).map_err(io_err("move aside", &self.dir))?;
        fs::remove_dir_all(&gone).map_err(io_err("remove", &gone))?;
        if let Some(branches) = self.dir.parent() {
            sweep(branches);
        }
        Ok(())
    }
}

/// Removes what a process killed while it made or removed a branch left in
/// `branches` (`.new-NAME-PID`, `.gone-NAME-PID`, PID no longer running).
fn sweep(branches: &Path) {
    let Ok(read) = fs::read_dir(branches) else {
        return;
    };
    for entry in read.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let left = name.starts_with(".new-") || name.starts_with(".gone-");
        let pid = name.rsplit('-').next().and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid.filter(|_| left)
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Adds the entries beneath `dir` to `size`; directories themselves do not
/// count (overlayfs makes them to hold what changed beneath).
fn add_sizes(dir: &Path, size: &mut Size) {
    let Ok(read) = fs::read_dir(dir) else {
        return;
    };
    for entry in read.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            add_sizes(&entry.path(), size);
        } else {
            size.entries += 1;
            size.bytes += meta.size();
        }
    }
}

/// The mount points of `table` (a mountinfo table) beneath `dir`, or whose
/// source is beneath it (`editfs:PATH`, the branch mount's name), in the
/// table's order.
fn serving(table: &str, dir: &Path) -> Vec<PathBuf> {
    table
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = PathBuf::from(unescape(left.split(' ').nth(4)?));
            let source = right.split(' ').nth(1)?;
            let source = unescape(source.strip_prefix("editfs:").unwrap_or(source));
            (point.starts_with(dir) || Path::new(&source).starts_with(dir)).then_some(point)
        })
        .collect()
}

/// A field of the mount table with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_one_plain_word() {
        for good in ["try-1", "a", "best_of.3"] {
            assert!(valid_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "-x", "a/b", "a b", "..", &"x".repeat(101)] {
            assert!(valid_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn mounts_beneath_a_branch_or_served_from_it_are_found_outermost_last() {
        let table = "22 1 0:21 / /proc rw - proc proc rw\n\
            50 27 0:40 / /s/.editfs/branches/a\\040b/base ro - fuse.editfs-base editfs-base:/s ro\n\
            51 27 0:41 / /s/.editfs/branches/a\\040b/merged rw - overlay overlay rw,lowerdir=x\n\
            52 27 0:42 / /mnt/b rw - fuse.editfs editfs:/s/.editfs/branches/a\\040b/merged rw\n\
            53 27 0:43 / /mnt/c rw - fuse.editfs editfs:/s/.editfs/branches/ab/merged rw\n";
        let found = serving(table, Path::new("/s/.editfs/branches/a b"));
        let want: Vec<PathBuf> = [
            "/s/.editfs/branches/a b/base",
            "/s/.editfs/branches/a b/merged",
            "/mnt/b",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(found, want);
    }
}

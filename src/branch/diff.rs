//! A branch's files as it holds them (its upper directory over the project
//! at its base), and the net change between a branch and its base or
//! another branch, read from the directories alone: no mount needs to run.
//!
//! overlayfs marks in the upper directory what a branch removed: a removed
//! name is a character device 0/0 (a whiteout), and a directory made anew
//! over one of the base is opaque (`trusted.overlay.opaque` is `y`): nothing
//! of the base shows beneath it.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;

use super::base::{At, Base, inside};
use super::{Branch, BranchError, io_err};
use crate::store::{Store, open_dir};
use crate::transaction::rewind::NetChange;

/// A branch's files: its upper directory over its base.
pub struct Tree {
    branch: Branch,
    base: Base,
}

/// What the upper directory says of a path.
enum Upper {
    /// It holds the path's content.
    File(Vec<u8>),
    /// The branch removed it, or a directory above it.
    Gone,
    /// The base's, unchanged (no entry, nor an opaque directory above it).
    Base,
    /// A directory, or what the upper directory holds and has no content
    /// (a link, a device): not compared.
    Other,
}

impl Tree {
    /// Branch `branch` of the project at `source` (real path), whose state
    /// directory is `state` (real path) and store `store`.
    pub fn open(
        source: &Path,
        state: &Path,
        branch: Branch,
        store: Arc<Store>,
    ) -> Result<Tree, BranchError> {
        let root = open_dir(source)?;
        let hidden = inside(source, state).into_iter().collect();
        let base = Base::new(root, hidden, store, branch.meta.base);
        Ok(Tree { branch, base })
    }

    /// `rel`'s content in the branch, `None` when it holds no such file.
    /// Whoever works in the branch writes its files, so none larger than a
    /// transaction takes is read (a sparse file of gigabytes would be read
    /// whole, and every changed file is held at once).
    pub fn content(&self, rel: &str) -> Result<Option<Vec<u8>>, BranchError> {
        let content = match self.upper(rel)? {
            Upper::File(bytes) => Some(bytes),
            Upper::Gone | Upper::Other => None,
            Upper::Base => return self.base_content(rel),
        };
        match content {
            Some(c) if c.len() as u64 > MAX_FILE => Err(too_large(rel)),
            c => Ok(c),
        }
    }

    /// `rel`'s content at the branch's base, within `MAX_FILE` (a project
    /// file of gigabytes the branch removed is not read whole).
    fn base_content(&self, rel: &str) -> Result<Option<Vec<u8>>, BranchError> {
        if let Ok(At::Source(st)) = self.base.at(rel)
            && st.st_size as u64 > MAX_FILE
        {
            return Err(too_large(rel));
        }
        match self.base.content(rel) {
            Ok(Some(c)) if c.len() as u64 > MAX_FILE => Err(too_large(rel)),
            Ok(c) => Ok(c),
            Err(e) => Err(io_err("read the base of", Path::new(rel))(e.into())),
        }
    }

    /// What the upper directory says of `rel`, read component by component,
    /// no link followed: a link anywhere on the way is no directory of the
    /// branch's (it is what the branch holds there, not a way elsewhere).
    fn upper(&self, rel: &str) -> Result<Upper, BranchError> {
        let upper = self.branch.upper();
        let mut at = upper.clone();
        let parts: Vec<&str> = rel.split('/').collect();
        // Beneath an opaque directory nothing of the base shows: a name the
        // branch does not hold there is gone.
        let mut opaque_above = false;
        let absent = |opaque_above| match opaque_above {
            true => Upper::Gone,
            false => Upper::Base,
        };
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let meta = match fs::symlink_metadata(&at) {
                Ok(meta) => meta,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(absent(opaque_above));
                }
                Err(e) => return Err(io_err("read", &at)(e)),
            };
            let last = i + 1 == parts.len();
            if whiteout(&meta) {
                return Ok(Upper::Gone);
            }
            if last && meta.is_file() {
                return read_beneath(&upper, rel).map(Upper::File);
            }
            if last {
                return Ok(Upper::Other);
            }
            if !meta.is_dir() {
                return Ok(Upper::Gone);
            }
            opaque_above |= opaque(&at);
        }
        Ok(absent(opaque_above))
    }

    /// Every path the branch may have changed: its upper directory's files
    /// and removals, and the base's files beneath what it removed or made
    /// opaque. A superset: the contents tell which did change.
    pub fn touched(&self) -> Result<BTreeSet<String>, BranchError> {
        let mut found = BTreeSet::new();
        self.walk(&self.branch.upper(), "", &mut found)?;
        Ok(found)
    }

    fn walk(&self, dir: &Path, rel: &str, found: &mut BTreeSet<String>) -> Result<(), BranchError> {
        for entry in fs::read_dir(dir).map_err(io_err("read", dir))? {
            let entry = entry.map_err(io_err("read", dir))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                return Err(BranchError::NotUtf8 {
                    rel: join(rel, &entry.file_name().to_string_lossy()),
                });
            };
            let child = join(rel, &name);
            let meta = entry.metadata().map_err(io_err("read", &entry.path()))?;
            if meta.is_dir() {
                if opaque(&entry.path()) {
                    self.base_files(&child, found);
                }
                self.walk(&entry.path(), &child, found)?;
            } else {
                if whiteout(&meta) {
                    self.base_files(&child, found);
                }
                found.insert(child);
            }
        }
        Ok(())
    }

    /// Adds the base's files at and beneath `rel`.
    fn base_files(&self, rel: &str, found: &mut BTreeSet<String>) {
        let Ok(names) = self.base.list(rel) else {
            return;
        };
        for (name, kind) in names {
            let child = join(rel, &name);
            if kind == rustix::fs::FileType::Directory {
                self.base_files(&child, found);
            } else {
                found.insert(child);
            }
        }
    }

    /// The files the project changed between this branch's base and
    /// `other`'s (either way), by the log: a superset (all the project
    /// changed after the earlier base), as `touched`.
    fn between_bases(&self, other: &Tree) -> BTreeSet<String> {
        match self.branch.meta.base.cmp(&other.branch.meta.base) {
            std::cmp::Ordering::Equal => BTreeSet::new(),
            std::cmp::Ordering::Less => self.base.changed(),
            std::cmp::Ordering::Greater => other.base.changed(),
        }
    }
}

/// The largest file a diff or commit reads: what a transaction takes.
const MAX_FILE: u64 = crate::engine::DEFAULT_MAX_FILE;

/// The most bytes of contents a diff or commit holds at once, before and
/// after of every changed file: many files each within `MAX_FILE` (sparse,
/// taking no disk) must not take root's diff gigabytes of memory.
const MAX_HELD: u64 = 16 * MAX_FILE;

fn too_large(rel: &str) -> BranchError {
    BranchError::TooLarge {
        rel: rel.to_owned(),
        limit: MAX_FILE,
    }
}

/// The regular file `rel` beneath the directory `upper`, opened with no
/// link followed on the way (the kernel refuses one), at most `MAX_FILE`
/// bytes of it.
fn read_beneath(upper: &Path, rel: &str) -> Result<Vec<u8>, BranchError> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use std::io::Read;
    let dir = open_dir(upper)?;
    let fd = rustix::fs::openat2(
        &dir,
        rel,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| io_err("read", &upper.join(rel))(e.into()))?;
    let mut file = fs::File::from(fd);
    let meta = file.metadata().map_err(io_err("read", &upper.join(rel)))?;
    if !meta.is_file() {
        return Err(io_err("read", &upper.join(rel))(std::io::Error::other(
            "not a regular file",
        )));
    }
    if meta.len() > MAX_FILE {
        return Err(too_large(rel));
    }
    let mut bytes = Vec::new();
    file.by_ref()
        .take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err("read", &upper.join(rel)))?;
    match bytes.len() as u64 > MAX_FILE {
        true => Err(too_large(rel)),
        false => Ok(bytes),
    }
}

fn join(rel: &str, name: &str) -> String {
    match rel {
        "" => name.to_owned(),
        r => format!("{r}/{name}"),
    }
}

/// Whether an upper directory's entry is overlayfs's mark of a removal.
fn whiteout(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Whether overlayfs marked the upper directory `dir` as hiding the base's.
fn opaque(dir: &Path) -> bool {
    let mut value = [0u8; 4];
    matches!(
        rustix::fs::lgetxattr(dir, "trusted.overlay.opaque", &mut value[..]),
        Ok(n) if value[..n] == *b"y"
    )
}

/// The net change from `from` to `to`, by path: a branch against its base
/// (`to` alone), or two branches. Files alike on both sides are left out.
pub fn changes(from: Option<&Tree>, to: &Tree) -> Result<Vec<NetChange>, BranchError> {
    let mut paths = to.touched()?;
    if let Some(from) = from {
        paths.extend(from.touched()?);
        paths.extend(from.between_bases(to));
    }
    let mut out = Vec::new();
    let mut held = 0u64;
    for rel in paths {
        let before = match from {
            Some(tree) => tree.content(&rel)?,
            None => to.base_content(&rel)?,
        };
        let now = to.content(&rel)?;
        if before != now {
            // Every change is held at once: bounded in all, as each file is.
            held += [&before, &now]
                .iter()
                .map(|c| c.as_ref().map_or(0, |c| c.len() as u64))
                .sum::<u64>();
            if held > MAX_HELD {
                return Err(BranchError::TooLarge {
                    rel: "the branch's changes in all".to_owned(),
                    limit: MAX_HELD,
                });
            }
            out.push(NetChange { rel, before, now });
        }
    }
    Ok(out)
}

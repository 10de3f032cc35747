//! What branches hold of the store: each branch's base is a point of the
//! history its mount still reads, and its own changes and versions take
//! room in the state directory. The version of a file that shows it as it
//! was at such a point is spared from pruning (`--keep` and `--keep-bytes`),
//! and the bytes the branches take count toward `--keep-bytes`, so one cap
//! bounds the whole state directory (see docs/branches.md).
//!
//! The store reads only what it needs of a branch's directory: the `base`
//! of its `branch.json`, and the bytes beneath its `upper/` and `state/`
//! (the branch's changes, and its own mount's versions). What a branch is
//! beyond that belongs to the layer that makes them.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{Objects, Side};

/// The folder of the state directory that holds the branches.
pub const BRANCHES: &str = "branches";

/// How long the bytes the branches take are taken as still true: a branch
/// grown since counts at the next prune after it, and a prune does not walk
/// every branch's files on each commit. Their bases are read at every prune
/// that may drop a version (a few small files): a branch made a moment ago
/// must find its base's versions.
const FRESH: Duration = Duration::from_secs(5);

/// The bytes the branches took when last counted.
#[derive(Default)]
pub(super) struct Held {
    bytes: u64,
    read: Option<Instant>,
    /// A thread counts them again now.
    counting: bool,
}

impl Objects {
    /// The bytes branches take on disk, counted toward `--keep-bytes`. The
    /// first call counts them; later ones answer the last count and, once it
    /// is older than `FRESH`, have a thread of its own count again: a branch
    /// of 200,000 files costs that thread seconds, not whichever commit
    /// prunes next (another user's edit waited 6 s).
    pub(super) fn held_bytes(&self) -> u64 {
        let branches = self.state.join(BRANCHES);
        {
            let mut held = self.held.lock();
            match held.read {
                Some(at) if at.elapsed() < FRESH || held.counting => return held.bytes,
                Some(_) => {
                    held.counting = true;
                    let shared = std::sync::Arc::clone(&self.held);
                    let bytes = held.bytes;
                    drop(held);
                    let spawned = std::thread::Builder::new()
                        .name("branch-bytes".into())
                        .spawn(move || {
                            let bytes = count(&branches);
                            *shared.lock() = Held {
                                bytes,
                                read: Some(Instant::now()),
                                counting: false,
                            };
                        });
                    if spawned.is_err() {
                        self.held.lock().counting = false;
                    }
                    return bytes;
                }
                None => {}
            }
        }
        let bytes = count(&branches);
        *self.held.lock() = Held {
            bytes,
            read: Some(Instant::now()),
            counting: false,
        };
        bytes
    }

    /// The branches' bases, sorted, read now: read once by each prune that
    /// may drop a version, never kept (a branch made a moment ago must find
    /// its base's versions).
    pub(super) fn bases(&self) -> Vec<u64> {
        let mut points: Vec<u64> = branches(&self.state.join(BRANCHES))
            .into_iter()
            .map(|(_, base)| base)
            .collect();
        points.sort_unstable();
        points
    }
}

/// Of the versions `txs` (sorted) of a file on `side`, those one of the
/// branches' `bases` needs: for each base, the first pre-image after it,
/// which is the file as it was at the base (or, where that one was never
/// kept, a later one, spared for nothing but harmless).
pub(super) fn needed(bases: &[u64], side: Side, txs: &[u64]) -> Vec<u64> {
    match side {
        Side::Pre => needed_by(bases, txs),
        Side::Post => Vec::new(),
    }
}

fn needed_by(points: &[u64], txs: &[u64]) -> Vec<u64> {
    let mut out: Vec<u64> = points
        .iter()
        .filter_map(|p| txs.iter().find(|tx| *tx > p).copied())
        .collect();
    out.dedup();
    out
}

/// The branches beneath `branches`, each its directory and base. A branch
/// being made or removed (a name starting with `.`) is left out, as is one
/// whose `branch.json` does not read.
fn branches(branches: &Path) -> Vec<(std::path::PathBuf, u64)> {
    let Ok(entries) = fs::read_dir(branches) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| Some((e.path(), base_of(&e.path().join("branch.json"))?)))
        .collect()
}

fn base_of(meta: &Path) -> Option<u64> {
    let text = fs::read(meta).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&text).ok()?;
    json.get("base")?.as_u64()
}

/// The bytes every branch beneath `branches` takes: its changes and its own
/// mount's versions.
fn count(branches: &Path) -> u64 {
    let mut seen = std::collections::HashSet::new();
    self::branches(branches)
        .iter()
        .map(|(dir, _)| {
            bytes_beneath(&dir.join("upper"), &mut seen)
                + bytes_beneath(&dir.join("state"), &mut seen)
        })
        .sum()
}

/// The bytes the regular files beneath `dir` take on disk (a sparse file
/// counts its blocks, not its length; a file of many links, once, by the
/// inodes in `seen`), on its file system only: a mount beneath it (a
/// branch's layers) is not walked into. Each directory is opened from its
/// parent with no link followed, so a link swapped in for one while it is
/// walked leads nowhere.
fn bytes_beneath(dir: &Path, seen: &mut std::collections::HashSet<(u64, u64)>) -> u64 {
    use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, statat};
    let how = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(top) = rustix::fs::open(dir, how, Mode::empty()) else {
        return 0;
    };
    let Ok(dev) = rustix::fs::fstat(&top).map(|st| st.st_dev) else {
        return 0;
    };
    let mut total = 0;
    let mut stack = vec![top];
    while let Some(at) = stack.pop() {
        let Ok(mut entries) = Dir::read_from(&at) else {
            continue;
        };
        while let Some(Ok(e)) = entries.next() {
            let name = e.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let Ok(st) = statat(&at, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory if st.st_dev == dev => {
                    if let Ok(sub) = rustix::fs::openat(&at, name, how, Mode::empty()) {
                        stack.push(sub);
                    }
                }
                FileType::RegularFile if seen.insert((st.st_dev, st.st_ino)) => {
                    total += st.st_blocks as u64 * 512;
                }
                _ => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn each_base_needs_the_first_pre_image_after_it() {
        assert_eq!(needed_by(&[], &[1, 5, 9]), Vec::<u64>::new());
        assert_eq!(needed_by(&[4], &[1, 5, 9]), [5]);
        assert_eq!(needed_by(&[4, 6], &[1, 5, 9]), [5, 9]);
        assert_eq!(
            needed_by(&[4, 4], &[1, 5, 9]),
            [5],
            "two branches of one base"
        );
        assert_eq!(
            needed_by(&[9], &[1, 5, 9]),
            Vec::<u64>::new(),
            "unchanged since"
        );
    }

    #[test]
    fn a_branch_counts_its_changes_and_versions_and_a_half_made_one_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let b = tmp.path().join("b");
        for sub in ["upper/src", "state/objects", "work"] {
            fs::create_dir_all(b.join(sub)).unwrap();
        }
        fs::write(b.join("branch.json"), r#"{"base":7,"uid":0}"#).unwrap();
        fs::write(b.join("upper/src/a.rs"), [0u8; 100]).unwrap();
        fs::write(b.join("state/objects/x"), [0u8; 20]).unwrap();
        fs::write(b.join("work/scratch"), [0u8; 1000]).unwrap();
        let half = tmp.path().join(".new-c-1");
        fs::create_dir_all(half.join("upper")).unwrap();
        fs::write(half.join("branch.json"), r#"{"base":3}"#).unwrap();
        fs::write(half.join("upper/big"), [0u8; 5000]).unwrap();
        let found = branches(tmp.path());
        assert_eq!(found, [(b.clone(), 7)]);
        let on_disk = |p: &str| fs::metadata(b.join(p)).unwrap().blocks() * 512;
        assert_eq!(
            count(tmp.path()),
            on_disk("upper/src/a.rs") + on_disk("state/objects/x")
        );
        let sparse = b.join("upper/sparse");
        fs::File::create(&sparse).unwrap().set_len(1 << 30).unwrap();
        assert!(
            count(tmp.path()) < 1 << 20,
            "a sparse file counts what it takes on disk"
        );
        fs::write(b.join("upper/big"), vec![1u8; 1 << 20]).unwrap();
        let once = count(tmp.path());
        for i in 0..100 {
            fs::hard_link(b.join("upper/big"), b.join(format!("upper/link{i}"))).unwrap();
        }
        assert_eq!(count(tmp.path()), once, "a file of many links counts once");
    }
}

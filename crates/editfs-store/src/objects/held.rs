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
use std::os::unix::fs::MetadataExt;
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
}

impl Objects {
    /// The bytes branches take on disk, counted toward `--keep-bytes`,
    /// counted again once older than `FRESH` (outside the lock: two prunes
    /// at once may both count).
    pub(super) fn held_bytes(&self) -> u64 {
        {
            let held = self.held.lock();
            if held.read.is_some_and(|at| at.elapsed() < FRESH) {
                return held.bytes;
            }
        }
        let bytes = branches(&self.state.join(BRANCHES))
            .iter()
            .map(|(dir, _)| bytes_beneath(&dir.join("upper")) + bytes_beneath(&dir.join("state")))
            .sum();
        *self.held.lock() = Held {
            bytes,
            read: Some(Instant::now()),
        };
        bytes
    }

    /// Of the versions `txs` (sorted) of a file on `side`, those a branch's
    /// base needs: for each base, the first pre-image after it, which is the
    /// file as it was at the base (or, where that one was never kept, a later
    /// one, spared for nothing but harmless).
    pub(super) fn needed(&self, side: Side, txs: &[u64]) -> Vec<u64> {
        if side != Side::Pre {
            return Vec::new();
        }
        let mut points: Vec<u64> = branches(&self.state.join(BRANCHES))
            .into_iter()
            .map(|(_, base)| base)
            .collect();
        points.sort_unstable();
        needed_by(&points, txs)
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

/// The bytes the regular files beneath `dir` take on disk (a sparse file
/// counts its blocks, not its length), on its file system only: a mount
/// beneath it (a branch's layers) is not walked into.
fn bytes_beneath(dir: &Path) -> u64 {
    let Ok(top) = fs::symlink_metadata(dir) else {
        return 0;
    };
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        let Ok(entries) = fs::read_dir(&at) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else {
                continue;
            };
            if meta.is_dir() && meta.dev() == top.dev() {
                stack.push(e.path());
            } else if meta.is_file() {
                total += meta.blocks() * 512;
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

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
            bytes_beneath(&b.join("upper")) + bytes_beneath(&b.join("state")),
            on_disk("upper/src/a.rs") + on_disk("state/objects/x")
        );
        let sparse = b.join("upper/sparse");
        fs::File::create(&sparse).unwrap().set_len(1 << 30).unwrap();
        assert!(
            bytes_beneath(&b.join("upper")) < 1 << 20,
            "a sparse file counts what it takes on disk"
        );
    }
}

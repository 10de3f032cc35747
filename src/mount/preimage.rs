//! Pre-images of writes that bypass the control files (`sed -i`, an editor's save,
//! `cp` over a file): taken once per open-for-write of an existing file, so a shell
//! edit can be undone like a transaction.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};
use rustix::fs::{Mode, OFlags};
use serde_json::json;

use super::fs::{Core, Loc};
use crate::engine::sha256_hex;
use crate::transaction::{Who, now};

/// Which direct writes get a pre-image.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Paths never snapshotted (build output, ...).
    skip: GlobSet,
    /// Files larger than this are skipped (and the skip logged).
    pub max_size: u64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            skip: GlobSet::empty(),
            max_size: 16 << 20,
        }
    }
}

impl Policy {
    /// `patterns` without a `/` match a file name anywhere (`*.o`); with one, the
    /// path from SOURCE (`target/**`).
    pub fn new(patterns: &[String], max_size: u64) -> Result<Policy, globset::Error> {
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let p = if p.contains('/') {
                p.trim_start_matches('/').to_owned()
            } else {
                format!("**/{p}")
            };
            b.add(Glob::new(&p)?);
        }
        Ok(Policy {
            skip: b.build()?,
            max_size,
        })
    }

    pub fn skips(&self, rel: &Path) -> bool {
        self.skip.is_match(rel)
    }
}

impl Core {
    /// Keeps the current bytes of a file about to be opened for writing.
    pub(super) fn keep_before_write(&self, rel: &Path, loc: &Loc, pid: u32) {
        if self.settings.preimages.skips(rel) {
            return;
        }
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        // Nothing there yet (a new file, a rename onto a free name): nothing to keep.
        let Ok(fd) = rustix::fs::openat(loc.dir(), &loc.name, flags, Mode::empty()) else {
            return;
        };
        let mut file = File::from(fd);
        let Ok(meta) = file.metadata() else { return };
        if !meta.is_file() {
            return;
        }
        let name = rel.to_string_lossy();
        let who = Who::process(pid);
        let Ok(lock) = self.store.lock() else { return };
        let Ok(tx) = self.store.next_tx(&lock) else {
            return;
        };
        let mut entry = json!({
            "tx": tx, "time": now(), "kind": "direct", "pid": who.pid, "command": who.command,
            "applied": 0, "total": 0, "error": null,
        });
        if meta.len() > self.settings.preimages.max_size {
            log::info!(
                "{name}: {} bytes, over the pre-image limit: not kept",
                meta.len()
            );
            entry["outcome"] = json!("skipped");
            entry["files"] = json!([{ "file": name, "reason": "over the size limit" }]);
        } else {
            let mut bytes = Vec::with_capacity(meta.len() as usize);
            if file.read_to_end(&mut bytes).is_err() {
                return;
            }
            if let Err(e) = self.store.keep_pre_image(tx, &name, &bytes) {
                log::error!("cannot keep the pre-image of {name}: {e}");
                return;
            }
            entry["outcome"] = json!("ok");
            // What the write makes of the file is not known here: no `sha256` after.
            let before = sha256_hex(&bytes);
            entry["files"] = json!([{ "file": name, "before": before, "sha256": null, "lines_added": 0, "lines_removed": 0 }]);
        }
        if let Err(e) = self.store.log(&entry) {
            log::error!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_names_anywhere_or_paths_from_the_root() {
        let p = Policy::new(&["*.o".into(), "target/**".into()], 10).unwrap();
        assert!(p.skips(Path::new("a/b/x.o")));
        assert!(p.skips(Path::new("target/debug/foo")));
        assert!(!p.skips(Path::new("src/target.rs")));
        assert!(!Policy::default().skips(Path::new("x.o")));
    }
}

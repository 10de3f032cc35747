//! The keeping of versions outside a commit (a direct write's pre-image, a
//! removed file), pruned and capped as a commit's (how many: `objects::Retention`).

use std::os::fd::BorrowedFd;

use super::{Lock, Store, StoreError, objects};

impl Store {
    /// Drops the oldest versions until `bytes` more fit under `--keep-bytes`,
    /// so the cap holds before a commit adds its versions, not only after
    /// the next trim; refuses versions that alone are more than the cap.
    /// Versions not checkpointed yet are spared (see `spare_unsettled`): for
    /// at most a second, they may stand past the cap.
    pub fn make_room(&self, bytes: u64) -> Result<(), StoreError> {
        let cap = self.retention.cap;
        if bytes > cap {
            return Err(StoreError::OverCap { bytes, cap });
        }
        self.objects.cap(cap - bytes);
        Ok(())
    }

    /// Keeps the stored object `sha` (see `Objects::put_from`) as the pre-image
    /// of `rel` at `tx`, unsynced (as its log line); call with its file's lock held.
    /// `None` when the object went meanwhile (its last version was dropped):
    /// the caller stores it again.
    pub fn keep_pre_image(
        &self,
        _lock: &Lock,
        tx: u64,
        rel: &str,
        sha: &str,
    ) -> Result<Option<String>, StoreError> {
        let name = self.objects.link(objects::Side::Pre, rel, tx, sha)?;
        if name.is_some() {
            self.objects.prune(rel, self.retention.keep);
            self.objects.cap(self.retention.cap);
        }
        Ok(name)
    }

    /// Keeps the file `name` in `dir`, about to be removed, as the pre-image of
    /// `rel` at `tx` (see `Objects::keep_file`, also for `open`); returns its bytes.
    pub fn keep_removed(
        &self,
        tx: u64,
        rel: &str,
        dir: BorrowedFd<'_>,
        name: &std::ffi::OsStr,
        open: bool,
    ) -> Result<Vec<u8>, StoreError> {
        let bytes = self
            .objects
            .keep_file(objects::Side::Pre, rel, tx, dir, name, open)?;
        self.objects.prune(rel, self.retention.keep);
        self.objects.cap(self.retention.cap);
        Ok(bytes)
    }
}

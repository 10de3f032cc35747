//! Buffers a commit reads files into, kept for the next one: a new buffer,
//! or one whose pages the trim gave back, costs a page fault per 4 KiB.

use super::Store;

/// Buffers kept for reuse (`Store::spare`): the file read and the content it
/// replaces of the latest commit.
const SPARE_BUFFERS: usize = 2;

/// Buffers larger than this are freed, not kept (`Store::spare`).
const SPARE_BUFFER_BYTES: usize = 1 << 20;

impl Store {
    /// Remembers that a commit left `bytes`, whose SHA-256 is `sha`, in
    /// `rel`, so that the next commit of `rel` finding them there keeps them by
    /// that hash (see `Objects::remember`).
    pub fn remember(&self, rel: &str, sha: &str, bytes: Vec<u8>) {
        for gone in self.objects.remember(rel, sha, bytes) {
            self.recycle(gone);
        }
    }

    /// An empty buffer to read a file into: a spare one if any (see `spare`).
    pub fn buffer(&self) -> Vec<u8> {
        self.spare.lock().pop().unwrap_or_default()
    }

    /// Keeps `buffer` (its bytes are left as they are: whoever takes it
    /// empties it) for `buffer` to hand out again, or frees it.
    pub fn recycle(&self, buffer: Vec<u8>) {
        if buffer.capacity() > SPARE_BUFFER_BYTES {
            return;
        }
        let mut spare = self.spare.lock();
        if spare.len() < SPARE_BUFFERS {
            spare.push(buffer);
            return;
        }
        drop(spare);
        drop(buffer);
    }
}

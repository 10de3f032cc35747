//! What a commit is asked to do to each of its files: write a new content
//! (`Change`), or remove the file (`Removal`). The transaction layer makes
//! them; the commit (commit.rs) and the contents staged before its lock
//! (staged.rs) read them.

use std::fs::File;
use std::os::fd::BorrowedFd;

use super::{caller, logline};

/// One file of a commit.
pub struct Change<'a> {
    /// Path relative to the project root.
    pub rel: &'a str,
    /// Its directory, held open since the file was read: the new version is
    /// installed there, whatever its path leads to by now.
    pub dir: BorrowedFd<'a>,
    /// The file as it was opened to be read (for its mode, owner and attributes).
    pub old: Option<&'a File>,
    /// Its bytes before, if it existed.
    pub pre: Option<&'a [u8]>,
    pub new: &'a [u8],
    /// The SHA-256 of `new`, when the engine hashed these very bytes for its
    /// report: the store does not hash them a second time. Never a hash that
    /// came from outside.
    pub new_sha: Option<&'a str>,
    /// The user the commit acts for (`None`: the daemon for itself), as
    /// `caller` says: its credentials write a file with other names in place,
    /// and its CAP_FSETID decides whether the new version keeps set-id bits.
    pub by: Option<&'a caller::Caller>,
    /// The mode and owner a file that does not exist now (`old` is `None`) is
    /// made with: a file made for a user is that user's, and an undo brings a
    /// removed file back as it was, since a default mode would show a private
    /// file to every user. `None`: 0o644, the daemon's user.
    pub fresh: Option<logline::Access>,
}

impl Change<'_> {
    /// The file this change replaces at its name: the one read there, not the
    /// file a move takes its mode and owner from.
    pub(crate) fn replaces(&self) -> Option<&File> {
        self.old.filter(|_| self.pre.is_some())
    }
}

/// A file a commit removes (an undo of the transaction that created it).
pub struct Removal<'a> {
    /// Path relative to the project root.
    pub rel: &'a str,
    /// Its directory, held open since the file was read.
    pub dir: BorrowedFd<'a>,
    /// Its bytes now, kept as its pre-image.
    pub pre: &'a [u8],
    /// The file as it was opened to be read: only that file is removed.
    pub file: Option<&'a File>,
    /// The user the removal is made for (`None`: the daemon for itself).
    pub by: Option<&'a caller::Caller>,
}

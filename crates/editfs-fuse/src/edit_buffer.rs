//! The payload of one `F.edit` handle: its bytes, charged to its user's
//! buffer budget, the state of its one transaction, and the outcome that
//! transaction left for every later flush and read.

use parking_lot::{Condvar, Mutex};

use super::budget::Charge;
use super::types::{Errno, Res};
use crate::engine::{ErrorKind as EditKind, Outcome};
use crate::transaction::report::{ErrorKind, Report};
use crate::transaction::{self, Meant};

/// The payload of one `F.edit` handle, and its result once committed.
///
/// Its lock is held only to copy bytes in or out, never through a transaction:
/// a commit thread takes the payload out (`committing`), runs the transaction
/// unlocked, and puts the result back.
#[derive(Default)]
pub struct EditBuffer {
    data: Vec<u8>,
    /// The payload's size: where its furthest write ended. Past the limit, bytes
    /// are counted here but dropped, so the report can state the real size.
    size: usize,
    written: bool,
    /// Opened with `O_TRUNC` (`>`, `open(..., "w")`): the opener is sending a
    /// payload, so closing it unwritten sends an empty one.
    truncated: bool,
    /// A commit thread has taken the payload out and is running it.
    committing: bool,
    committed: Option<Committed>,
    /// The file offset of the first read: `exec 3<>F.edit` shares one offset for
    /// writing and reading, so the report starts wherever the payload ended.
    read_base: Option<u64>,
    /// The buffer's bytes, charged to the user who opened the handle.
    charge: Option<Charge>,
    /// Why a write was refused for want of buffer space: the payload is
    /// incomplete, so it is refused whole rather than committed.
    lost: Option<Errno>,
    /// Who opened the handle: the transaction is checked against that user.
    caller: Option<transaction::Caller>,
    /// The file F's name meant when the handle was opened, and the point in
    /// the lineage of replacements it was opened at.
    meant: Option<(Meant, u64)>,
}

#[derive(Clone)]
pub struct Committed {
    text: Vec<u8>,
    errno: Option<Errno>,
}

impl Committed {
    /// The report `text` a handle reads back, and what `close(2)` answers.
    pub fn new(text: Vec<u8>, errno: Option<Errno>) -> Committed {
        Committed { text, errno }
    }

    /// The report a handle reads back.
    pub fn into_text(self) -> Vec<u8> {
        self.text
    }

    /// A payload that was not received whole: the mount's buffers for open edit
    /// handles were full (ENOSPC), or the user's share of them (EDQUOT).
    fn lost(e: Errno) -> Committed {
        let which = if e == Errno::EDQUOT {
            "your open edit handles hold as much as one user may (--max-buffered-per-user)"
        } else {
            "the open edit handles of all users hold as much as the mount allows (--max-buffered)"
        };
        Committed {
            text: format!(
                "REJECTED: the payload was not received whole, so nothing was changed: {which}\nhint: close edit handles you do not need, then send the payload again\n"
            )
            .into_bytes(),
            errno: Some(e),
        }
    }

    /// A commit that could not run at all (its control file's directory went away).
    pub fn error(e: Errno) -> Committed {
        Committed {
            text: format!(
                "FAILED: the transaction could not run: {}\n",
                std::io::Error::from_raw_os_error(e.code())
            )
            .into_bytes(),
            errno: Some(e),
        }
    }
}

/// What a commit thread finds when it comes to commit a buffer.
pub enum Turn {
    /// Another commit thread is running the payload.
    Running,
    /// Nothing to commit: the outcome, if any.
    Done(Option<Committed>),
    /// The payload, taken out: its bytes kept and the size it reached, who
    /// sent it and what F meant when the handle was opened.
    Payload {
        data: Vec<u8>,
        size: usize,
        caller: Option<transaction::Caller>,
        meant: Option<(Meant, u64)>,
    },
}

/// What a flush answers: the outcome of the handle's transaction, if any.
pub fn flushed(committed: Option<Committed>) -> Res<()> {
    match committed.and_then(|c| c.errno) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The errno `close(2)` returns for a transaction's outcome.
pub fn errno_for(report: &Report) -> Option<Errno> {
    match (report.outcome, report.error.as_ref().map(|e| e.kind)) {
        (Outcome::Ok, _) => None,
        (outcome, Some(kind)) => Some(errno_of(outcome, kind)),
        (Outcome::Rejected, None) => Some(Errno::EINVAL),
        (Outcome::Failed, None) => Some(Errno::EIO),
    }
}

/// The errno of a failed transaction, by the kind of its error. Exhaustive: a
/// new kind must be given its errno here.
fn errno_of(outcome: Outcome, kind: ErrorKind) -> Errno {
    use ErrorKind as K;
    match kind {
        K::IsDirectory => Errno::EISDIR,
        K::OutsideSource => Errno::EXDEV,
        K::DanglingLink => Errno::ENOENT,
        K::Edit(found) => edit_errno(outcome, found),
        _ if outcome == Outcome::Rejected => Errno::EINVAL,
        K::PermissionDenied => Errno::EACCES,
        K::Io | K::BadPath | K::NotWritten | K::OutsideChanges | K::NotAFile => Errno::EIO,
    }
}

/// The errno of what the engine found (see `errno_of`).
fn edit_errno(outcome: Outcome, found: EditKind) -> Errno {
    use EditKind as K;
    match found {
        K::TooLarge => Errno::EFBIG,
        K::OverBudget => Errno::E2BIG,
        _ if outcome == Outcome::Rejected => Errno::EINVAL,
        K::Stale => Errno::ESTALE,
        K::NotFound
        | K::Ambiguous
        | K::Malformed
        | K::NotText
        | K::CountMismatch
        | K::FileExists
        | K::Placeholder
        | K::DiffPrefix
        | K::NumberPrefix
        | K::Duplicates
        | K::WrongFile
        | K::Deleted
        | K::MultiFile
        | K::Syntax => Errno::EIO,
    }
}

/// What a request on an edit handle does, decided under the handle's lock.
pub enum Next {
    /// Commit first: the request goes to a commit thread.
    Commit,
    /// Nothing to commit: answer at once.
    Answer(Option<Committed>),
}

impl EditBuffer {
    /// A buffer for a handle opened with `truncate` (`O_TRUNC`) or without, by
    /// `caller`, when F's name meant `meant`.
    pub fn opened(
        truncate: bool,
        caller: Option<transaction::Caller>,
        meant: Option<(Meant, u64)>,
    ) -> EditBuffer {
        EditBuffer {
            truncated: truncate,
            caller,
            meant,
            ..EditBuffer::default()
        }
    }

    /// The user whose transaction the payload is: who opened the handle, or
    /// the daemon's own user for a handle opened without a caller.
    pub fn user(&self) -> u32 {
        self.caller.as_ref().map_or(0, |c| c.uid)
    }

    /// The buffer, its bytes charged to `charge`.
    pub fn charged_to(self, charge: Charge) -> EditBuffer {
        EditBuffer {
            charge: Some(charge),
            ..self
        }
    }

    /// Makes room for `len` bytes, charging what the buffer grows by; a buffer
    /// never grows past `limit`.
    fn room(&mut self, len: usize, limit: usize) -> Res<()> {
        if len <= self.data.capacity() {
            return Ok(());
        }
        let cap = len
            .max(self.data.capacity().saturating_mul(2))
            .min(limit.max(len));
        if let Some(c) = &mut self.charge {
            c.hold(cap as u64)?;
        }
        self.data.reserve_exact(cap - self.data.len());
        Ok(())
    }

    /// Drops the payload's bytes and gives them back.
    fn free(&mut self) {
        self.data = Vec::new();
        if let Some(c) = &mut self.charge {
            let _ = c.hold(0);
        }
    }

    /// A payload that is neither committed nor being committed.
    pub fn pending(&self) -> bool {
        (self.written || self.truncated) && !self.committing && self.committed.is_none()
    }

    /// Opened with `O_TRUNC`, never written, never committed: an empty payload.
    pub fn unsent_empty(&self) -> bool {
        self.truncated && !self.written && !self.committing && self.committed.is_none()
    }

    /// What a flush or read of this handle does now. While a commit thread runs
    /// the payload, a request waits for it on another one (`Core::settle`), so a
    /// second close of a dup'ed descriptor gets the outcome, not a premature OK.
    pub fn next(&self) -> Next {
        if self.pending() || self.committing {
            Next::Commit
        } else {
            Next::Answer(self.committed.clone())
        }
    }

    /// Takes the payload out for a commit thread: the bytes kept (none once it
    /// passed the limit) and the size it reached. Its charge is given back now:
    /// at most one payload per commit thread is being committed, so what the
    /// commits hold stays bounded.
    fn take(&mut self) -> (Vec<u8>, usize) {
        self.committing = true;
        let data = std::mem::take(&mut self.data);
        self.free();
        (data, self.size)
    }

    /// Takes bytes at `offset`. A write that would take the payload past `limit`
    /// fails with EFBIG, keeping nothing of it, so the writer stops at once and the
    /// transaction is refused as too large (its report states the limit and the
    /// size the payload had reached); one that finds the buffers full fails with
    /// ENOSPC or EDQUOT (see `budget.rs`), and the payload is refused whole.
    pub fn write(&mut self, offset: u64, data: &[u8], limit: usize) -> Res<u32> {
        if self.committed.is_some() || self.committing {
            // One handle, one transaction: a new payload needs a new open.
            return Err(Errno::EINVAL);
        }
        self.written = true;
        if let Some(e) = self.lost {
            return Err(e);
        }
        let start = usize::try_from(offset).map_err(|_| Errno::EFBIG)?;
        let end = start.saturating_add(data.len());
        if end > limit {
            self.size = self.size.max(end);
            self.free();
            return Err(Errno::EFBIG);
        }
        if self.size > limit {
            return Err(Errno::EFBIG);
        }
        if let Err(e) = self.room(end, limit) {
            self.lost = Some(e);
            self.free();
            return Err(e);
        }
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[start..end].copy_from_slice(data);
        self.size = self.size.max(end);
        Ok(data.len() as u32)
    }

    /// Takes the payload out for a commit thread, unless there is nothing to
    /// commit or another commit thread is running it.
    pub fn begin_commit(&mut self) -> Turn {
        if self.committing {
            return Turn::Running;
        }
        if !self.pending() {
            return Turn::Done(self.committed.clone());
        }
        if let Some(e) = self.lost {
            self.committed = Some(Committed::lost(e));
            return Turn::Done(self.committed.clone());
        }
        let (data, size) = self.take();
        Turn::Payload {
            data,
            size,
            caller: self.caller.clone(),
            meant: self.meant,
        }
    }

    /// Puts the outcome of the payload's commit in place.
    pub fn finish_commit(&mut self, committed: Committed) {
        self.committing = false;
        self.committed = Some(committed);
    }

    /// The outcome, once no commit thread is running the payload.
    pub fn outcome(&self) -> Option<Option<Committed>> {
        (!self.committing).then(|| self.committed.clone())
    }

    /// The file offset the report starts at: that of the first read.
    pub fn read_base(&mut self, offset: u64) -> u64 {
        *self.read_base.get_or_insert(offset)
    }
}

/// Where commit threads announce that a handle's outcome is in place, and a
/// request for a payload another commit thread is running waits for it. Its
/// lock comes after `handles` and before a handle's own `EditBuffer` lock (the
/// lock order is in `core.rs`).
#[derive(Default)]
pub struct Settling {
    lock: Mutex<()>,
    /// Signalled whenever a commit thread has put a handle's outcome in place.
    settled: Condvar,
}

impl Settling {
    /// A commit thread has put a handle's outcome in place.
    pub fn announce(&self) {
        let _announce = self.lock.lock();
        self.settled.notify_all();
    }

    /// The outcome of `buf`'s payload, which another commit thread is
    /// running, once it is in place. The lock is held from the look to the
    /// wait, and taken by the committing thread to announce: no announcement
    /// goes unheard.
    pub fn wait(&self, buf: &Mutex<EditBuffer>) -> Option<Committed> {
        let mut waiting = self.lock.lock();
        loop {
            if let Some(outcome) = buf.lock().outcome() {
                return outcome;
            }
            self.settled.wait(&mut waiting);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_past_the_limit_fails_at_once_and_keeps_nothing() {
        let mut b = EditBuffer::default();
        assert_eq!(b.write(0, b"abc", 10), Ok(3));
        assert_eq!(b.write(3, b"def", 10), Ok(3));
        assert_eq!(b.data, b"abcdef");
        assert_eq!(b.write(6, &[b'x'; 100], 10), Err(Errno::EFBIG));
        assert_eq!(
            b.write(6, b"y", 10),
            Err(Errno::EFBIG),
            "and so do later ones"
        );
        assert_eq!(b.size, 106, "the report states the size reached");
        assert!(b.data.capacity() == 0, "nothing is kept");
        assert!(
            b.pending(),
            "the close sends it, to be refused as too large"
        );
    }

    #[test]
    fn buffers_are_charged_to_their_user_and_given_back() {
        use super::super::budget::{Budget, BufferCaps};
        let budget = Budget::new(BufferCaps {
            total: 1000,
            per_user: 100,
        });
        let mut a = EditBuffer::opened(false, None, None).charged_to(budget.account(7));
        assert_eq!(a.write(0, &[b'a'; 60], 500), Ok(60));
        assert!(budget.used() >= 60);
        let mut b = EditBuffer::opened(false, None, None).charged_to(budget.account(7));
        assert_eq!(b.write(0, &[b'b'; 60], 500), Err(Errno::EDQUOT));
        assert_eq!(
            b.write(60, b"more", 500),
            Err(Errno::EDQUOT),
            "refused whole"
        );
        assert!(b.pending());
        let Some(c) = b.lost else {
            panic!("a payload that lost bytes must be refused, not committed");
        };
        assert_eq!(Committed::lost(c).errno, Some(Errno::EDQUOT));
        let (data, _) = a.take();
        assert_eq!(data.len(), 60);
        assert_eq!(budget.used(), 0, "committing gives the bytes back");
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_truncating_open_is_a_payload_even_unwritten() {
        let b = EditBuffer::opened(true, None, None);
        assert!(b.unsent_empty());
        assert!(matches!(b.next(), Next::Commit));
        let b = EditBuffer::opened(false, None, None);
        assert!(!b.unsent_empty());
        assert!(matches!(b.next(), Next::Answer(None)));
    }

    #[test]
    fn while_committing_writes_are_refused_and_requests_wait_for_the_outcome() {
        let mut b = EditBuffer::opened(false, None, None);
        assert_eq!(b.write(0, b"x", 10), Ok(1));
        assert!(matches!(b.next(), Next::Commit));
        assert_eq!(b.take(), (b"x".to_vec(), 1));
        assert_eq!(b.write(1, b"y", 10), Err(Errno::EINVAL));
        assert!(matches!(b.next(), Next::Commit), "no premature answer");
        assert!(!b.pending(), "but no second commit");
    }

    #[test]
    fn close_answers_the_errno_of_the_errors_kind() {
        let failed = |outcome, kind| {
            let mut r = Report::new(outcome, String::new());
            r.error = Some(crate::transaction::report::ErrorReport::plain(kind, "", ""));
            errno_for(&r)
        };
        assert_eq!(
            failed(Outcome::Failed, ErrorKind::IsDirectory),
            Some(Errno::EISDIR)
        );
        assert_eq!(
            failed(Outcome::Failed, ErrorKind::OutsideSource),
            Some(Errno::EXDEV)
        );
        assert_eq!(
            failed(Outcome::Failed, ErrorKind::DanglingLink),
            Some(Errno::ENOENT)
        );
        assert_eq!(
            failed(Outcome::Rejected, ErrorKind::Edit(EditKind::TooLarge)),
            Some(Errno::EFBIG)
        );
        assert_eq!(
            failed(Outcome::Rejected, ErrorKind::Edit(EditKind::Malformed)),
            Some(Errno::EINVAL)
        );
        assert_eq!(
            failed(Outcome::Failed, ErrorKind::Edit(EditKind::Stale)),
            Some(Errno::ESTALE)
        );
        assert_eq!(
            failed(Outcome::Failed, ErrorKind::PermissionDenied),
            Some(Errno::EACCES)
        );
        assert_eq!(
            failed(Outcome::Failed, ErrorKind::Edit(EditKind::NotFound)),
            Some(Errno::EIO)
        );
        assert_eq!(errno_for(&Report::new(Outcome::Ok, String::new())), None);
    }
}

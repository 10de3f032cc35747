//! Control files: `F.edit` takes a transaction, `F.status` and `F.status.json` show
//! the latest report.
//!
//! One open handle of `F.edit` is one transaction: writes are buffered, and the
//! transaction commits at the first flush (any close of a descriptor of the
//! handle) or the first read after writing, never at release, whose errors reach
//! nobody. The handle then reads back that transaction's report, and every later
//! flush repeats its outcome, so `close(2)` fails when the transaction did.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{Errno, FileAttr, FileType};
use rustix::fs::AtFlags;

use super::fs::{Core, Handle, Job, Res, errno};
use super::names::Control;
use super::nodes::Kind;
use crate::engine::{Outcome, Report};
use crate::transaction::{self, Root, Target, Who, multi, undo};

/// What a committing handle acts on.
enum CommitTarget {
    /// `F.edit`: the file `base` in directory node `parent`.
    File { parent: u64, base: OsString },
    /// `.editfs/edit`: several files.
    Multi,
    /// `.editfs/undo`.
    Undo,
}

/// The payload of one `F.edit` handle, and its result once committed.
#[derive(Default)]
pub struct EditBuffer {
    data: Vec<u8>,
    /// More was written than the payload limit allows; the rest was dropped.
    overflow: bool,
    written: bool,
    committed: Option<Committed>,
    /// The file offset of the first read: `exec 3<>F.edit` shares one offset for
    /// writing and reading, so the report starts wherever the payload ended.
    read_base: Option<u64>,
}

#[derive(Clone)]
pub struct Committed {
    text: Vec<u8>,
    errno: Option<Errno>,
}

/// The errno `close(2)` returns for a transaction's outcome.
fn errno_for(report: &Report) -> Option<Errno> {
    let kind = report.error.as_ref().map_or("", |e| e.kind);
    match (report.outcome, kind) {
        (Outcome::Ok, _) => None,
        (_, "too_large") => Some(Errno::EFBIG),
        (Outcome::Rejected, _) => Some(Errno::EINVAL),
        (_, "stale") => Some(Errno::ESTALE),
        (Outcome::Failed, _) => Some(Errno::EIO),
    }
}

impl EditBuffer {
    /// Written to but not committed: a release now would drop the payload.
    pub fn pending(&self) -> bool {
        self.written && self.committed.is_none()
    }

    /// Takes bytes at `offset`; past the limit they are dropped and the payload
    /// is marked oversized, so a huge write costs no memory.
    pub fn write(&mut self, offset: u64, data: &[u8], limit: usize) -> Res<u32> {
        if self.committed.is_some() {
            // One handle, one transaction: a new payload needs a new open.
            return Err(Errno::EINVAL);
        }
        self.written = true;
        let start = usize::try_from(offset).map_err(|_| Errno::EFBIG)?;
        let end = start.saturating_add(data.len());
        let keep = end.min(limit.saturating_add(1));
        if keep < end {
            self.overflow = true;
        }
        if keep > start {
            if self.data.len() < keep {
                self.data.resize(keep, 0);
            }
            self.data[start..keep].copy_from_slice(&data[..keep - start]);
        }
        Ok(data.len() as u32)
    }
}

impl Core {
    /// Attributes of a control file: its file's owner and permissions, exact size.
    pub(super) fn control_attr(
        &self,
        ino: u64,
        parent: u64,
        base: &OsStr,
        control: Control,
    ) -> Res<FileAttr> {
        let dir = self.dir_of(parent)?;
        let st = rustix::fs::statat(&dir, base, AtFlags::SYMLINK_NOFOLLOW).ok();
        let size = match control {
            Control::Edit => 0,
            _ => self
                .status_bytes(&self.path(parent)?.join(base), control)
                .len() as u64,
        };
        let base_perm = st.as_ref().map_or(0o644, |s| (s.st_mode & 0o666) as u16);
        let perm = if control == Control::Edit {
            base_perm
        } else {
            base_perm & 0o444
        };
        let mut a = self.virtual_attr(ino, FileType::RegularFile, perm, size);
        if let Some(s) = st {
            (a.uid, a.gid) = (s.st_uid, s.st_gid);
        }
        Ok(a)
    }

    /// The bytes `F.status` or `F.status.json` shows for the file at `rel`.
    pub(super) fn status_bytes(&self, rel: &Path, control: Control) -> Vec<u8> {
        let report = self.reports.lock().get(rel).cloned();
        let name = rel.to_string_lossy();
        let edit = self.settings.suffixes.name(
            OsStr::new(rel.file_name().unwrap_or_default()),
            Control::Edit,
        );
        let how = format!(
            "write SEARCH/REPLACE blocks to {} and read this file again",
            edit.to_string_lossy()
        );
        match (report, control) {
            (Some(r), Control::StatusJson) => (r.to_json() + "\n").into_bytes(),
            (Some(r), _) => r.to_string().into_bytes(),
            (None, Control::StatusJson) => {
                let v = serde_json::json!({ "file": name, "tx": null, "outcome": null,
                    "message": format!("no transaction on this file since the mount started; {how}") });
                (v.to_string() + "\n").into_bytes()
            }
            (None, _) => format!("NO TRANSACTION YET {name}\nNo transaction has run on this file since the mount started;\n{how}.\n").into_bytes(),
        }
    }

    /// Opens a control file of `base` in `parent`.
    pub(super) fn open_control(
        &self,
        parent: u64,
        base: &OsStr,
        control: Control,
        write: bool,
    ) -> Res<u64> {
        match control {
            Control::Edit => Ok(self.add_handle(Handle::Edit(Default::default()))),
            _ if write => Err(Errno::EACCES),
            _ => {
                let bytes = self.status_bytes(&self.path(parent)?.join(base), control);
                Ok(self.add_handle(Handle::Bytes(bytes)))
            }
        }
    }

    /// What a committing handle of node `ino` acts on.
    fn commit_target(&self, ino: u64) -> Res<CommitTarget> {
        let nodes = self.nodes.read();
        let node = nodes.get(ino).ok_or(Errno::ENOENT)?;
        match &node.kind {
            Kind::Control { base, .. } => Ok(CommitTarget::File {
                parent: node.parent,
                base: base.clone(),
            }),
            Kind::State(p) if p.as_os_str() == "edit" => Ok(CommitTarget::Multi),
            Kind::State(p) if p.as_os_str() == "undo" => Ok(CommitTarget::Undo),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Commits the handle's transaction if it holds an uncommitted payload.
    fn settle(&self, ino: u64, buf: &mut EditBuffer, pid: u32) -> Res<Option<Committed>> {
        if !buf.written {
            return Ok(None);
        }
        if buf.committed.is_none() {
            let mut payload = std::mem::take(&mut buf.data);
            if buf.overflow {
                // Keep it over the limit so the engine refuses it as too large.
                payload.resize(self.settings.engine.max_payload.saturating_add(1), 0);
            }
            let who = Who::process(pid);
            buf.committed = Some(match self.commit_target(ino)? {
                CommitTarget::File { parent, base } => {
                    self.commit(parent, &base, &payload, &who)?
                }
                CommitTarget::Multi => self.commit_multi(&payload, &who),
                CommitTarget::Undo => self.commit_undo(&payload, &who),
            });
        }
        Ok(buf.committed.clone())
    }

    fn root(&self) -> Root<'_> {
        Root {
            fd: self.source.root(),
            path: self.source.path(),
        }
    }

    /// Runs one transaction on `base` in `parent` and publishes its report.
    fn commit(&self, parent: u64, base: &OsStr, payload: &[u8], who: &Who) -> Res<Committed> {
        let dir_path = self.path(parent)?;
        let dir = self.source.dir(&dir_path).map_err(errno)?;
        let rel = dir_path.join(base);
        let old = rustix::fs::statat(&dir, base, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|s| super::nodes::real_id(s.st_ino));
        let report = {
            let _excl = old.map(|id| self.stripe(id).write());
            let name = rel.to_string_lossy();
            let target = Target {
                root: self.root(),
                rel: &name,
                label: &name,
                who,
            };
            transaction::run(Some(&self.store), &target, payload, &self.settings.engine)
        };
        let committed = Committed {
            text: report.to_string().into_bytes(),
            errno: errno_for(&report),
        };
        log::info!(
            "tx {} on {}: {:?}",
            report.tx,
            rel.display(),
            report.outcome
        );
        self.reports.lock().insert(rel, Arc::new(report));
        self.invalidate(parent, base, old);
        Ok(committed)
    }

    /// `.editfs/edit`: a multi-file transaction.
    fn commit_multi(&self, payload: &[u8], who: &Who) -> Committed {
        // Direct writes to these files wait while they commit, as for one file.
        let inos = self.inodes_named_in(payload);
        let _excl = self.stripes_for(&inos);
        let report = multi::run(
            Some(&self.store),
            self.root(),
            payload,
            &self.settings.engine,
            who,
        );
        for r in report
            .files
            .iter()
            .filter(|r| report.outcome == Outcome::Ok && r.outcome == Outcome::Ok)
        {
            self.reports
                .lock()
                .insert(PathBuf::from(&r.file), Arc::new(r.clone()));
            self.invalidate_path(Path::new(&r.file));
        }
        let head = Report {
            outcome: report.outcome,
            error: report.error.clone(),
            ..Report::new(report.outcome, String::new())
        };
        let committed = Committed {
            text: report.to_string().into_bytes(),
            errno: errno_for(&head),
        };
        *self.state_report.lock() = Some((report.to_string(), report.to_json() + "\n"));
        committed
    }

    /// The node ids of the existing files a multi-file payload names.
    fn inodes_named_in(&self, payload: &[u8]) -> Vec<u64> {
        let limit = self.settings.engine.max_payload;
        let Ok((files, _)) = crate::engine::payload::parse_multi(payload, limit) else {
            return Vec::new();
        };
        let rels: Vec<&str> = files.iter().map(|(rel, _)| rel.as_str()).collect();
        self.inodes_of(&rels)
    }

    /// The node ids of the existing files at `rels`, beneath SOURCE.
    fn inodes_of(&self, rels: &[&str]) -> Vec<u64> {
        let id = |rel: &&str| {
            let dir = crate::store::journal::parent_beneath(self.source.root(), rel).ok()?;
            let name = Path::new(rel).file_name()?;
            let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
            Some(super::nodes::real_id(st.st_ino))
        };
        rels.iter().filter_map(id).collect()
    }

    /// `.editfs/undo`: `PATH [TXID] [--force]` restores a kept version of one
    /// file, `--tx TXID [--force]` every file of one transaction.
    fn commit_undo(&self, payload: &[u8], who: &Who) -> Committed {
        let text = String::from_utf8_lossy(payload);
        let (text, json, head) = match undo::Request::parse(&text) {
            Ok(req) => {
                let rels = undo::files(&self.store, &req);
                let rels: Vec<&str> = rels.iter().map(String::as_str).collect();
                let inos = self.inodes_of(&rels);
                let undone = {
                    let _excl = self.stripes_for(&inos);
                    undo::run(&self.store, self.root(), &req, who)
                };
                let head = undone.head();
                if head.outcome == Outcome::Ok {
                    for r in undone.files() {
                        self.reports
                            .lock()
                            .insert(PathBuf::from(&r.file), Arc::new(r.clone()));
                        self.invalidate_path(Path::new(&r.file));
                    }
                }
                (undone.to_string(), undone.to_json(), head)
            }
            Err(why) => {
                let hint = "for example: echo 'src/app.py 12' > .editfs/undo, or echo '--tx 12' > .editfs/undo";
                let r = undo::rejected(&self.store, why, hint, who);
                (r.to_string(), r.to_json(), r)
            }
        };
        *self.state_report.lock() = Some((text.clone(), json + "\n"));
        Committed {
            text: text.into_bytes(),
            errno: errno_for(&head),
        }
    }

    pub(super) fn flush_edit(&self, ino: u64, fh: u64, pid: u32) -> Res<()> {
        let Handle::Edit(buf) = &*self.handle(fh)? else {
            return Ok(());
        };
        let settled = self.settle(ino, &mut buf.lock(), pid)?;
        match settled.and_then(|c| c.errno) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub(super) fn read_edit(
        &self,
        ino: u64,
        buf: &mut EditBuffer,
        pid: u32,
        offset: u64,
        size: u32,
    ) -> Res<Vec<u8>> {
        let text = match self.settle(ino, buf, pid)? {
            Some(c) => c.text,
            None => match self.commit_target(ino)? {
                CommitTarget::File { parent, base } => {
                    self.status_bytes(&self.path(parent)?.join(base), Control::Status)
                }
                _ => self.state_status(false),
            },
        };
        let base = *buf.read_base.get_or_insert(offset);
        Ok(slice(&text, offset.saturating_sub(base), size).to_vec())
    }

    /// `.editfs/status` (or `status.json`): the latest multi-file or undo report.
    pub(super) fn state_status(&self, json: bool) -> Vec<u8> {
        match (&*self.state_report.lock(), json) {
            (Some((_, j)), true) => j.clone().into_bytes(),
            (Some((t, _)), false) => t.clone().into_bytes(),
            (None, true) => b"{\"outcome\": null, \"message\": \"no transaction through .editfs/edit or .editfs/undo yet\"}\n".to_vec(),
            (None, false) => b"NO TRANSACTION YET through .editfs/edit or .editfs/undo\n".to_vec(),
        }
    }

    /// Answers a committing request; runs on the commit thread.
    pub(super) fn run(&self, job: Job) {
        match job {
            Job::Flush {
                ino,
                fh,
                pid,
                reply,
            } => match self.flush_edit(ino, fh, pid) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            },
            Job::Read {
                ino,
                fh,
                pid,
                offset,
                size,
                reply,
            } => {
                let r = self.handle(fh).and_then(|h| match &*h {
                    Handle::Edit(buf) => self.read_edit(ino, &mut buf.lock(), pid, offset, size),
                    _ => Err(Errno::EBADF),
                });
                match r {
                    Ok(data) => reply.data(&data),
                    Err(e) => reply.error(e),
                }
            }
        }
    }

    /// Whether a request on handle `fh` would commit a transaction.
    pub(super) fn commits(&self, fh: u64) -> bool {
        matches!(self.handle(fh).as_deref(), Ok(Handle::Edit(buf)) if buf.lock().pending())
    }

    /// After a rename or unlink of a file, its report follows it (or goes).
    pub(super) fn move_report(&self, from: PathBuf, to: Option<PathBuf>) {
        let mut reports = self.reports.lock();
        if let (Some(r), Some(to)) = (reports.remove(&from), to) {
            reports.insert(to, r);
        }
    }
}

/// `size` bytes of `data` from `offset`, or nothing past the end.
pub fn slice(data: &[u8], offset: u64, size: u32) -> &[u8] {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(data.len());
    let end = start.saturating_add(size as usize).min(data.len());
    &data[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_at_offsets_and_drops_what_is_over_the_limit() {
        let mut b = EditBuffer::default();
        assert_eq!(b.write(0, b"abc", 10), Ok(3));
        assert_eq!(b.write(3, b"def", 10), Ok(3));
        assert_eq!(b.data, b"abcdef");
        assert_eq!(b.write(6, &[b'x'; 100], 10), Ok(100));
        assert!(b.overflow);
        assert_eq!(b.data.len(), 11);
    }

    #[test]
    fn slices_never_panic() {
        assert_eq!(slice(b"hello", 1, 3), b"ell");
        assert_eq!(slice(b"hello", 10, 3), b"");
        assert_eq!(slice(b"hello", u64::MAX, u32::MAX), b"");
    }
}

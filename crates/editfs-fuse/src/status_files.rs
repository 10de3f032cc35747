//! What the report files show, and to whom: `F.status` and `F.status.json` the
//! latest report on F, `.editfs/status` that of the latest multi-file
//! transaction, undo or rewind. A report shows what a file held before its
//! transaction (its diff) and, for a dry run, what no file holds: each is
//! shown only to a user who could read all of that natively.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::AtFlags;

use super::core::Core;
use super::names::Control;
use super::reports::StateReport;
use super::types::{FileAttr, FileType, Requester, Res};
use crate::transaction::Caller;
use crate::transaction::report::{self, Form};

impl Core {
    /// Attributes of a control file: its file's owner and permissions, and
    /// the exact size of what `who` reads in it (a report hidden from that
    /// user tells nothing of its length either).
    pub(super) fn control_attr(
        &self,
        ino: u64,
        (parent, base): (u64, &OsStr),
        control: Control,
        who: Requester,
    ) -> Res<FileAttr> {
        let dir = self.dir_of(parent)?;
        let st = rustix::fs::statat(&dir, base, AtFlags::SYMLINK_NOFOLLOW).ok();
        let size = match control {
            Control::Edit => 0,
            _ => {
                let rel = self.path(parent)?.join(base);
                let shown = match self.status_hidden(&rel, who.uid, || who.caller()) {
                    Some(tx) => hidden_status(&rel, tx, control),
                    None => self.status_bytes(&rel, control),
                };
                shown.len() as u64
            }
        };
        // A file not made yet belongs to no one: its `F.edit` is open to every
        // user, and the commit asks the kernel whether the sender may create it
        // in its directory (a mode of the daemon's own would let only the
        // daemon's user create files through `F.edit`).
        let base_perm = st.as_ref().map_or(0o666, |s| (s.st_mode & 0o666) as u16);
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
    pub(super) fn status_bytes(&self, rel: &Path, control: Control) -> Arc<[u8]> {
        let shown = self.reports.of_file(rel);
        let name = rel.to_string_lossy();
        // A transaction `editfs apply` made since is the most recent one.
        let mine = shown
            .as_ref()
            .map_or(self.reports.started_after_tx(), |r| r.report.tx);
        let form = match control {
            Control::StatusJson => Form::Json,
            _ => Form::Text,
        };
        if let Some(s) = self.store.shared_report_after(&name, mine) {
            return report::render_shared(s, form).into_bytes().into();
        }
        let edit = self.settings.suffixes.name(
            OsStr::new(rel.file_name().unwrap_or_default()),
            Control::Edit,
        );
        match (shown, form) {
            (Some(r), Form::Json) => r.json(),
            (Some(r), Form::Text) => r.text(),
            (None, form) => report::none_yet(&name, &edit.to_string_lossy(), form)
                .into_bytes()
                .into(),
        }
    }

    /// `.editfs/status` (or `status.json`): the latest multi-file or undo report,
    /// for a caller who can read every file it names, or learn that it does not
    /// exist (a payload that named a file wrongly).
    pub(super) fn state_status(&self, json: bool, caller: &Caller) -> Vec<u8> {
        let latest = self.reports.state();
        let shown = latest.as_ref().filter(|r| self.may_see_state(r, caller));
        match (shown, latest.is_some(), json) {
            (Some(r), _, true) => r.json.clone().into_bytes(),
            (Some(r), _, false) => r.text.clone().into_bytes(),
            (None, true, true) => b"{\"outcome\": null, \"message\": \"the latest transaction through .editfs/edit or .editfs/undo was on files you cannot read\"}\n".to_vec(),
            (None, true, false) => b"NOT SHOWN: the latest transaction through .editfs/edit or .editfs/undo was on files you cannot read\n".to_vec(),
            (None, false, true) => b"{\"outcome\": null, \"message\": \"no transaction through .editfs/edit or .editfs/undo yet\"}\n".to_vec(),
            (None, false, false) => b"NO TRANSACTION YET through .editfs/edit or .editfs/undo\n".to_vec(),
        }
    }

    /// The bytes `F.status` or `F.status.json` shows `caller` for the file
    /// at `rel`.
    pub(super) fn status_for(&self, rel: &Path, control: Control, caller: &Caller) -> Arc<[u8]> {
        match self.status_hidden(rel, caller.uid, || caller.clone()) {
            Some(tx) => hidden_status(rel, tx, control),
            None => self.status_bytes(rel, control),
        }
    }

    /// The id of the latest report on `rel` when `caller` could not read the
    /// file before that transaction: its diff and hints show what the file
    /// held then (a secret scrubbed before the file was opened to others).
    /// The caller, of user `uid`, is made only when needed (its groups are
    /// read from /proc): not for root, not where there is no report.
    fn status_hidden(&self, rel: &Path, uid: u32, caller: impl FnOnce() -> Caller) -> Option<u64> {
        if uid == 0 {
            return None;
        }
        let tx = self.reports.of_file(rel)?.report.tx;
        let name = rel.to_string_lossy();
        (tx != 0 && !self.read_before(&caller(), &name, tx)).then_some(tx)
    }

    /// Whether `caller` may read `r` in `.editfs/status` (see `StateReport`).
    fn may_see_state(&self, r: &StateReport, caller: &Caller) -> bool {
        if caller.is_root() || caller.uid == r.by {
            return true;
        }
        let root = self.source.root();
        !r.dry_run
            && r.files.iter().all(|f| {
                (caller.reads_now(&root, f) || caller.sees_missing(&root, f))
                    && r.tx.is_none_or(|tx| self.read_before(caller, f, tx))
            })
    }

    /// Whether `caller` could read `rel` before transaction `tx`, by the
    /// version kept then (none kept: the transaction made it, or kept nothing).
    fn read_before(&self, caller: &Caller, rel: &str, tx: u64) -> bool {
        let kept = self.kept.lock().get(self.store.dir(), rel, tx);
        kept.is_none_or(|(access, above)| caller.could_read(&access, &above))
    }
}

/// What `F.status` shows a user who could not read F before transaction `tx`.
fn hidden_status(rel: &Path, tx: u64, control: Control) -> Arc<[u8]> {
    let name = rel.to_string_lossy();
    let why = "the file was not yours to read before this transaction, so its report is not shown";
    let text = match control {
        Control::StatusJson => {
            serde_json::json!({ "file": name, "tx": tx, "outcome": null, "message": why })
                .to_string()
                + "\n"
        }
        _ => format!("NOT SHOWN {name} (tx {tx}): {why}\n"),
    };
    text.into_bytes().into()
}

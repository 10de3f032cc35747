//! Control files: `F.edit` takes a transaction, `F.status` and `F.status.json` show
//! the latest report.
//!
//! One open handle of `F.edit` is one transaction: writes are buffered, and the
//! transaction commits at the first flush (any close of a descriptor of the
//! handle) or the first read after writing, never at release, whose errors reach
//! nobody. The handle then reads back that transaction's report, and every later
//! flush repeats its outcome, so `close(2)` fails when the transaction did.
//!
//! A handle opened with `O_TRUNC` announces a payload: closed unwritten, it sends
//! an empty one (rejected, with its own report), at the close that leaves the
//! closing process no descriptor of it, or else at release. Without `O_TRUNC`,
//! an unwritten handle (`touch`, a probe, `exec 3<>` to read) commits nothing.
//! The F.edit of a symlink edits its target while that stays inside SOURCE (and
//! out of the state directory); of anything else but a regular file, it fails
//! with a report.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};

use super::commit_gate::{Committing, Telling};
use super::core::{Core, Job, file_type};
use super::edit_buffer::{Committed, EditBuffer, Next, Turn, errno_for, flushed};
use super::handles::Handle;
use super::names::Control;
use super::nodes::Kind;
use super::processes::last_close;
use super::reports::{Shown, StateReport, refused};
use super::types::{Done, Errno, FileType, Requester, Res};
use crate::engine::{Outcome, Received};
use crate::store::LogKind;
use crate::transaction::report::{Form, Render, Report, Reported};
use crate::transaction::{self, Meant, Refused, Root, Target, Who, multi, rewind, undo};

/// What a committing handle acts on.
enum CommitTarget {
    /// `F.edit`: the file `base` in directory node `parent`.
    File { parent: u64, base: OsString },
    /// `.editfs/edit`: several files.
    Multi,
    /// `.editfs/dry-run`: what such a payload would do.
    DryRun,
    /// `.editfs/undo`.
    Undo,
    /// `.editfs/rewind`: every file back to a point of the history.
    Rewind,
    /// `.editfs/checkpoint`: a named point of the history.
    Checkpoint,
}

/// The file an `F.edit` handle's transaction edits.
struct Edited<'a> {
    /// F, as the handle names it.
    rel: &'a Path,
    /// The file edited: F, or the file the symlink F leads to.
    file: &'a Path,
    /// F's directory, as the kernel looked it up (when `file` is F).
    dir: Option<&'a std::os::fd::OwnedFd>,
    /// The file F meant when its handle was opened, and when that was.
    meant: Option<(Meant, u64)>,
}

impl Core {
    /// Opens a control file of `base` in `parent` for `caller`; `truncate` is the
    /// open's `O_TRUNC`.
    pub(super) fn open_control(
        &self,
        (parent, base): (u64, &OsStr),
        control: Control,
        who: Requester,
        (write, truncate): (bool, bool),
    ) -> Res<u64> {
        match control {
            // Only an edit handle needs the caller's groups and capabilities
            // (read from /proc), to check its commit against them.
            Control::Edit => {
                let since = self.commit_gate.mark();
                let (meant, needs_status) = self.meant(parent, base).unzip();
                let caller = who.editor(needs_status.unwrap_or(true));
                let meant = meant.map(|m| (m, since));
                let account = self.budget.account(who.uid);
                let buf = EditBuffer::opened(truncate, Some(caller), meant).charged_to(account);
                Ok(self.handles.add(Handle::Edit(Mutex::new(buf))))
            }
            _ if write => Err(Errno::EACCES),
            _ => {
                let rel = self.path(parent)?.join(base);
                let bytes = self.status_for(&rel, control, &who.caller());
                Ok(self.handles.add(Handle::Bytes {
                    bytes: bytes.to_vec(),
                    _charge: None,
                }))
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
            Kind::State(p) if p.as_os_str() == "dry-run" => Ok(CommitTarget::DryRun),
            Kind::State(p) if p.as_os_str() == "undo" => Ok(CommitTarget::Undo),
            Kind::State(p) if p.as_os_str() == "rewind" => Ok(CommitTarget::Rewind),
            Kind::State(p) if p.as_os_str() == "checkpoint" => Ok(CommitTarget::Checkpoint),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Commits the handle's payload if it has one to commit; runs on a commit
    /// thread only, for a request that was decided to commit when it came. A
    /// payload another commit thread is running is waited for.
    fn settle(&self, ino: u64, buf: &Mutex<EditBuffer>, pid: u32) -> Option<Committed> {
        // Bound first: the buffer's lock goes before any wait.
        let turn = buf.lock().begin_commit();
        let (data, size, caller, meant) = match turn {
            Turn::Running => return self.settling.wait(buf),
            Turn::Done(committed) => return committed,
            Turn::Payload {
                data,
                size,
                caller,
                meant,
            } => (data, size, caller, meant),
        };
        let payload = Received::cut(&data, size);
        // No lock is held here: the transaction, then the kernel's invalidation.
        let who = Who {
            caller,
            ..Who::process(pid)
        };
        let committed = match self.commit_target(ino) {
            Ok(CommitTarget::File { parent, base }) => self
                .commit((parent, &base), payload, &who, meant)
                .unwrap_or_else(Committed::error),
            Ok(CommitTarget::Multi) => self.commit_multi(payload, &who),
            Ok(CommitTarget::DryRun) => self.dry_run(payload, &who),
            Ok(CommitTarget::Undo) => self.commit_undo(&data, &who),
            Ok(CommitTarget::Rewind) => self.commit_rewind(&data, &who),
            Ok(CommitTarget::Checkpoint) => self.commit_checkpoint(&data, &who),
            Err(e) => Committed::error(e),
        };
        buf.lock().finish_commit(committed.clone());
        self.settling.announce();
        Some(committed)
    }

    /// Takes the files at `rels` for one commit: once the latest commit on them
    /// has told the kernel (`Telling`, kept until this commit has told it in
    /// turn), and then the files themselves, alone, against direct writes. A
    /// file replaced while it was awaited (a new inode) is taken again.
    /// Returns what the files were once they were held.
    fn lock_files(&self, rels: &[&str]) -> (Committing<'_>, Telling<'_>, Vec<Meant>) {
        let telling = self.commit_gate.told(rels);
        let (held, now) = self.files_now(rels);
        (held, telling, now)
    }

    /// The files at `rels`, held alone, and what they are once they are
    /// held (a file replaced while it was awaited is taken again).
    fn files_now(&self, rels: &[&str]) -> (Committing<'_>, Vec<Meant>) {
        /// Enough for any honest run of replacements; past it the store's own
        /// check (`Opened::current`, under its lock) still keeps every edit.
        const TRIES: usize = 8;
        let mut ids = self.identities(rels);
        for _ in 1..TRIES {
            let held = self.commit_gate.committing(&node_ids(&self.ids, &ids));
            let now = self.identities(rels);
            if now == ids {
                return (held, now);
            }
            ids = now;
        }
        let held = self.commit_gate.committing(&node_ids(&self.ids, &ids));
        (held, self.identities(rels))
    }

    /// Runs a transaction on the files at `rels` with them taken (`lock_files`),
    /// and records what it made of them when it says it committed: every
    /// commit, of one file, several or an undo, goes through here. The
    /// `Telling` is for the caller to keep until it has told the kernel.
    fn locked<R>(
        &self,
        rels: &[&str],
        transaction: impl FnOnce() -> (R, bool),
    ) -> (R, Telling<'_>) {
        let (_excl, telling, before) = self.lock_files(rels);
        let (done, committed) = transaction();
        if committed {
            self.record_lineage(rels, before);
        }
        (done, telling)
    }

    /// Shows the reports of the files a transaction changed in their `F.status`,
    /// and drops what the kernel cached of them; call with no lock held. A
    /// file the caller was refused is not shown its refusal: natively the
    /// attempt changes nothing of it, its report least of all (the caller
    /// reads why in `.editfs/status`).
    fn publish<'r>(&self, reports: impl Iterator<Item = &'r Report>) {
        for r in reports.filter(|r| !refused(r)) {
            self.reports
                .show(PathBuf::from(&r.file), Arc::new(Shown::new(r.clone())));
            self.invalidate_path(Path::new(&r.file));
        }
    }

    fn root(&self) -> Root<'_> {
        Root {
            fd: self.source.root(),
            path: self.source.path(),
            mount: Some(self.source.mountpoint()),
            from: Path::new(""),
            caller: None,
        }
    }

    /// Runs one transaction on `base` in `parent` (or on the file a symlink there
    /// leads to), which must still be the file `meant`, and publishes its report.
    fn commit(
        &self,
        (parent, base): (u64, &OsStr),
        payload: Received<'_>,
        who: &Who,
        meant: Option<(Meant, u64)>,
    ) -> Res<Committed> {
        let rel = self.path(parent)?.join(base);
        let report = match self.edited_file((parent, base), &rel, who) {
            Ok(file) => {
                // A file made through the mount a moment ago is recorded as
                // made before it is edited, or the edit would take it for one
                // that was there before (and a rewind would keep it).
                self.record_creation_of(&file);
                // F itself is found in the directory node the kernel looked up.
                let dir = (file == rel).then(|| self.real_dir(parent)).transpose()?;
                let at = Edited {
                    rel: &rel,
                    file: &file,
                    dir: dir.as_deref(),
                    meant,
                };
                self.commit_file(at, payload, who)
            }
            Err(refused) => transaction::refused(
                &self.store,
                refused.report(&rel),
                &rel.to_string_lossy(),
                who,
            ),
        };
        let shown = Shown::new(report);
        let committed = Committed::new(shown.text().to_vec(), errno_for(&shown.report));
        let report = &shown.report;
        log::info!(
            "tx {} on {}: {:?}",
            report.tx,
            rel.display(),
            report.outcome
        );
        self.reports.show(rel, Arc::new(shown));
        Ok(committed)
    }

    /// Runs the transaction on `at.file` (reached as `at.rel`), the file held
    /// from its last check of the file to its install (`Gate`), then drops what
    /// the kernel cached of both names, with no lock held.
    fn commit_file(&self, at: Edited<'_>, payload: Received<'_>, who: &Who) -> Report {
        let Edited {
            rel,
            file,
            dir,
            meant,
        } = at;
        let name = file.to_string_lossy();
        let rels = [&*name];
        let gate = Gate::new(self, &rels);
        let hold = || gate.take();
        let target = Target {
            root: self.root(),
            rel: &name,
            label: &name,
            who,
            dir: dir.map(std::os::fd::AsFd::as_fd),
            // What its own earlier transactions made of the file is still
            // it, and so is what another process's transaction made of it.
            meant: meant.map(|(m, since)| {
                let m = self.commit_gate.now(&name, m, since);
                self.or_installed_by_another(&name, m)
            }),
            hold: Some(&hold),
        };
        let report = transaction::run(Some(&self.store), &target, payload, &self.settings.engine);
        // Kept until the kernel was told, below.
        let _telling = gate.done(report.outcome == Outcome::Ok);
        if file != rel && !refused(&report) {
            self.reports
                .show(file.to_owned(), Arc::new(Shown::new(report.clone())));
            self.invalidate_path(rel);
        }
        self.invalidate_path(file);
        report
    }

    /// The directory node `parent`, open, and checked to be that directory: the
    /// descriptor is reopened by path when not cached, and a path may lead
    /// elsewhere by now.
    fn real_dir(&self, parent: u64) -> Res<Arc<std::os::fd::OwnedFd>> {
        let dir = self.dir_of(parent)?;
        let st = rustix::fs::fstat(&*dir).map_err(super::types::errno)?;
        let id = match parent {
            super::nodes::ROOT => parent,
            _ => self.ids.of(&st),
        };
        if id != parent {
            return Err(Errno::ESTALE);
        }
        Ok(dir)
    }

    /// The file an edit of `base` in `parent` would change now, if any, and
    /// whether its caller's status is needed (it has a set-id bit, or is new).
    fn meant(&self, parent: u64, base: &OsStr) -> Option<(Meant, bool)> {
        let rel = self.path(parent).ok()?.join(base);
        // The daemon's own view: only the file's identity is kept, to tell
        // later whether it changed; what the caller may reach is decided then.
        let file = self
            .edited_file((parent, base), &rel, &Who::default())
            .ok()?;
        let st = self.stat_beneath(&file.to_string_lossy());
        // A file with a set-id bit needs the caller's capabilities, one not
        // there yet its umask: both come from /proc (see `Caller::of_editor`).
        let needs_status = st
            .as_ref()
            .is_none_or(|s| s.st_mode & (libc::S_ISUID | libc::S_ISGID) != 0);
        Some((identity(st.as_ref()), needs_status))
    }

    /// `meant`, or the file now at `rel` when the latest transaction on `rel`
    /// that another process shared (`editfs apply` on SOURCE, see shared.rs)
    /// left exactly its bytes: a new version of the file a handle meant,
    /// installed by a transaction, is still that file, whoever made it.
    fn or_installed_by_another(&self, rel: &str, meant: Meant) -> Meant {
        let Some(st) = self.stat_beneath(rel) else {
            return meant;
        };
        let now = identity(Some(&st));
        if now == meant || file_type(st.st_mode) != FileType::RegularFile {
            return meant;
        }
        let left = self
            .store
            .shared_report_after(rel, 0)
            .and_then(|s| s.sha256);
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let holds = |sha: &str| {
            let Ok(fd) = rustix::fs::openat2(self.source.root(), rel, flags, Mode::empty(), how)
            else {
                return false;
            };
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut bytes).is_ok()
                && crate::engine::sha256_hex(&bytes) == sha
        };
        match left {
            Some(sha) if holds(&sha) => now,
            _ => meant,
        }
    }

    /// What the files at `rels` are now (beneath SOURCE, symlinks not followed last).
    fn identities(&self, rels: &[&str]) -> Vec<Meant> {
        let id = |rel: &&str| identity(self.stat_beneath(rel).as_ref());
        rels.iter().map(id).collect()
    }

    /// What is at `rel` beneath SOURCE (a symlink itself, not followed), in
    /// three system calls: for telling files apart, never for reading or
    /// writing them (the transaction resolves its files itself, strictly).
    fn stat_beneath(&self, rel: &str) -> Option<rustix::fs::Stat> {
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat2(self.source.root(), rel, flags, Mode::empty(), how).ok()?;
        rustix::fs::fstat(&fd).ok()
    }

    /// Records what a committed transaction made of the files at `rels`, which
    /// were `before`; call before its `Telling` is let go, so no other commit
    /// on them comes between.
    fn record_lineage(&self, rels: &[&str], before: Vec<Meant>) {
        let after = self.identities(rels);
        self.commit_gate.replaced(rels, before, after);
    }

    /// The file an edit of `rel` changes: `rel` itself (existing or to be made), or
    /// the regular file a symlink at `rel` leads to, as long as it stays in SOURCE.
    /// It is looked at in the directory node `parent` the kernel found `base`
    /// in, held open, rather than by a walk from SOURCE.
    fn edited_file(
        &self,
        (parent, base): (u64, &OsStr),
        rel: &Path,
        who: &Who,
    ) -> Result<PathBuf, Refused> {
        // What cannot be looked at here, the transaction reports as it finds it.
        let Ok(dir) = self.real_dir(parent) else {
            return Ok(rel.to_owned());
        };
        match rustix::fs::statat(&*dir, base, AtFlags::SYMLINK_NOFOLLOW) {
            Err(_) => Ok(rel.to_owned()),
            Ok(st) => match file_type(st.st_mode) {
                FileType::RegularFile => Ok(rel.to_owned()),
                FileType::Symlink => self.root().seen_by(who.caller.as_ref()).link_target(rel),
                FileType::Directory => Err(Refused::Directory),
                _ => Err(Refused::NotAFile),
            },
        }
    }

    /// `.editfs/edit`: a multi-file transaction.
    fn commit_multi(&self, payload: Received<'_>, who: &Who) -> Committed {
        let root = self.root().seen_by(who.caller.as_ref());
        let plan = multi::Plan::parse(root, payload, &self.settings.engine);
        // Direct writes to these files wait while they commit, as for one file.
        let named = plan.files();
        let rels: Vec<&str> = named.iter().map(String::as_str).collect();
        for rel in &rels {
            self.record_creation_of(std::path::Path::new(rel));
        }
        let gate = Gate::new(self, &rels);
        let hold = || gate.take();
        let engine = (
            &self.settings.engine,
            Some(&hold as &transaction::HoldFn<'_>),
        );
        let report = plan.run(Some(&self.store), root, engine, who);
        // Kept until the kernel was told, below.
        let _telling = gate.done(report.outcome == Outcome::Ok);
        // Each file's `F.status` shows the latest transaction on it, failed
        // ones too: a failed transaction's sections say why nothing was written.
        self.publish(report.files.iter());
        self.answer(&Reported::Files(report), (who, false))
    }

    /// `.editfs/dry-run`: what a multi-file payload would do, decided as
    /// `.editfs/edit` decides it, with each file's diff, but written nowhere:
    /// no file, no id, no log line, and no `F.status` changes; only
    /// `.editfs/status` shows the report. The close fails as the edit's would.
    fn dry_run(&self, payload: Received<'_>, who: &Who) -> Committed {
        let opts = &self.settings.engine;
        let root = self.root().seen_by(who.caller.as_ref());
        let report = multi::Plan::parse(root, payload, opts).dry_run(root, opts, who);
        self.answer(&Reported::Files(report), (who, true))
    }

    /// The answer of a handle of `.editfs/edit`, `.editfs/dry-run`,
    /// `.editfs/undo` or `.editfs/rewind`, and `.editfs/status` from now on.
    fn answer(&self, reported: &Reported, (who, dry_run): (&Who, bool)) -> Committed {
        let files = reported.files().iter().map(|r| r.file.clone()).collect();
        self.answer_naming(reported, files, (who, dry_run))
    }

    /// The answer of an undo or rewind request refused before it named a file.
    fn answer_refused(&self, refused: Report, who: &Who) -> Committed {
        self.answer_naming(&Reported::File(refused), Vec::new(), (who, false))
    }

    /// `answer`, `.editfs/status` naming `files` (see `StateReport`).
    fn answer_naming(
        &self,
        reported: &Reported,
        files: Vec<String>,
        (who, dry_run): (&Who, bool),
    ) -> Committed {
        let head = reported.head();
        let text = reported.render(Form::Text);
        self.reports.set_state(StateReport {
            text: text.clone(),
            json: reported.render(Form::Json),
            files,
            by: maker(who),
            tx: (head.tx != 0).then_some(head.tx),
            dry_run,
        });
        Committed::new(text.into_bytes(), errno_for(&head))
    }

    /// `.editfs/undo`: `PATH [TXID] [--force]` restores a kept version of one
    /// file, `--tx TXID [--force]` every file of one transaction.
    fn commit_undo(&self, payload: &[u8], who: &Who) -> Committed {
        let text = String::from_utf8_lossy(payload);
        match undo::Request::parse(&text) {
            Ok(req) => self.restore(&req, who),
            Err(why) => {
                let hint = "for example: echo 'src/app.py 12' > .editfs/undo, or echo '--tx 12' > .editfs/undo";
                let rejected =
                    undo::rejected(&self.store, LogKind::Undo, why.to_string(), hint, who);
                self.answer_refused(rejected, who)
            }
        }
    }

    /// `.editfs/rewind`: `--to TXID|NAME [--dry-run] [--force]` puts every file
    /// changed since that point back as it was then, as one transaction.
    fn commit_rewind(&self, payload: &[u8], who: &Who) -> Committed {
        let text = String::from_utf8_lossy(payload);
        match undo::Request::parse_rewind(&text) {
            Ok((req, false)) => self.restore(&req, who),
            Ok((req, true)) => {
                self.record_creations(true);
                let at = (self.root(), who.caller.as_ref());
                let undone = undo::preview(self.store.objects(), self.store.entries(), at, &req);
                self.answer(&undone, (who, true))
            }
            Err(why) => {
                let hint = "for example: echo '--to before-task' > .editfs/rewind (a checkpoint's name or a transaction id; add --dry-run to see what it would do)";
                let rejected =
                    undo::rejected(&self.store, LogKind::Rewind, why.to_string(), hint, who);
                self.answer_refused(rejected, who)
            }
        }
    }

    /// Runs an undo or a rewind with its files held, and answers with its report.
    fn restore(&self, req: &undo::Request, who: &Who) -> Committed {
        self.record_creations(true);
        let rels = undo::files(&self.store, req);
        let rels: Vec<&str> = rels.iter().map(String::as_str).collect();
        // Kept until the kernel was told, below.
        let (undone, _telling) = self.locked(&rels, || {
            let undone = undo::run(&self.store, self.root(), req, who);
            let ok = undone.head().outcome == Outcome::Ok;
            (undone, ok)
        });
        let head = undone.head();
        if head.outcome == Outcome::Ok {
            self.publish(undone.files().into_iter());
        }
        self.answer(&undone, (who, false))
    }

    /// `.editfs/checkpoint`: `[NAME]` records a point of the history.
    fn commit_checkpoint(&self, payload: &[u8], who: &Who) -> Committed {
        let text = String::from_utf8_lossy(payload);
        let name = Some(text.trim()).filter(|n| !n.is_empty());
        // Files made just before are on its side of the point.
        self.record_creations(true);
        let result = rewind::mark(&self.store, name, who);
        let (text, json) = rewind::marked(&result, None);
        self.reports.set_state(StateReport {
            text: text.clone(),
            json: json + "\n",
            files: Vec::new(),
            by: maker(who),
            tx: None,
            dry_run: false,
        });
        let errno = match result {
            Ok(_) => None,
            Err(rewind::MarkError::Store(_)) => Some(Errno::EIO),
            Err(_) => Some(Errno::EINVAL),
        };
        Committed::new(text.into_bytes(), errno)
    }

    /// The report an edit handle reads back at `offset`, given what it committed.
    fn edit_text(
        &self,
        ino: u64,
        buf: &Mutex<EditBuffer>,
        committed: Option<Committed>,
        offset: u64,
        size: u32,
    ) -> Res<Vec<u8>> {
        let text = match committed {
            Some(c) => c.into_text(),
            None => match self.commit_target(ino)? {
                CommitTarget::File { parent, base } => {
                    self.status_bytes(&self.path(parent)?.join(base), Control::Status)
                        .to_vec()
                }
                // Not this handle's: `.editfs/status` shows the latest to whom may see it.
                _ => b"NO TRANSACTION through this handle: nothing was written to it; the latest report of .editfs/edit or .editfs/undo is in .editfs/status\n".to_vec(),
            },
        };
        let base = buf.lock().read_base(offset);
        Ok(slice(&text, offset.saturating_sub(base), size).to_vec())
    }

    /// A flush of an edit handle: answered at once unless it commits, in which
    /// case a commit thread answers it. The choice is made when the flush comes
    /// (what the buffer holds then, under its lock), so a flush that found nothing
    /// written never commits a payload whose writes are still on their way.
    pub(super) fn flush_edit(&self, ino: u64, handle: Arc<Handle>, pid: u32, done: Done<()>) {
        let Handle::Edit(buf) = &*handle else {
            return done(Ok(()));
        };
        let (next, empty) = {
            let b = buf.lock();
            (b.next(), b.unsent_empty())
        };
        match next {
            // Not the last descriptor of an unwritten handle: the payload may still come.
            Next::Commit if empty && !last_close(pid, ino) => done(Ok(())),
            Next::Commit => self.queue(Job::Flush {
                ino,
                handle,
                pid,
                done,
            }),
            Next::Answer(c) => done(flushed(c)),
        }
    }

    /// A read of an edit handle: its report, committing first if it must.
    pub(super) fn read_edit(
        &self,
        ino: u64,
        handle: Arc<Handle>,
        pid: u32,
        (offset, size): (u64, u32),
        done: Done<Vec<u8>>,
    ) {
        let Handle::Edit(buf) = &*handle else {
            return done(Err(Errno::EBADF));
        };
        let next = buf.lock().next();
        match next {
            Next::Commit => self.queue(Job::Read {
                ino,
                handle,
                pid,
                offset,
                size,
                done,
            }),
            Next::Answer(c) => done(self.edit_text(ino, buf, c, offset, size)),
        }
    }

    /// The last close of a handle opened with `O_TRUNC` and never written sends
    /// its empty payload, so an old report does not stand for it.
    pub(super) fn release_edit(&self, ino: u64, handle: Arc<Handle>, pid: u32) {
        let Handle::Edit(buf) = &*handle else { return };
        let (empty, pending) = {
            let b = buf.lock();
            (b.unsent_empty(), b.pending())
        };
        if empty {
            self.queue(Job::Release { ino, handle, pid });
        } else if pending {
            log::warn!(
                "an edit handle was released without a flush or read: its payload was dropped"
            );
        }
    }

    /// Answers a committing request; runs on a commit thread.
    pub(super) fn run(&self, job: Job) {
        match job {
            Job::Flush {
                ino,
                handle,
                pid,
                done,
            } => {
                let Handle::Edit(buf) = &*handle else {
                    return done(Ok(()));
                };
                done(flushed(self.settle(ino, buf, pid)));
            }
            Job::Read {
                ino,
                handle,
                pid,
                offset,
                size,
                done,
            } => {
                let Handle::Edit(buf) = &*handle else {
                    return done(Err(Errno::EBADF));
                };
                let committed = self.settle(ino, buf, pid);
                done(self.edit_text(ino, buf, committed, offset, size));
            }
            Job::Release { ino, handle, pid } => {
                if let Handle::Edit(buf) = &*handle {
                    self.settle(ino, buf, pid);
                }
            }
        }
    }
}

/// What a file is, from its status (none: there is no file).
fn identity(st: Option<&rustix::fs::Stat>) -> Meant {
    match st {
        Some(st) => Meant::File {
            dev: st.st_dev,
            ino: st.st_ino,
        },
        None => Meant::Absent,
    }
}

/// A commit's hold on its files, taken by the transaction itself (see
/// `transaction::Hold`) only from its last check of them to its install: their
/// files, alone, so direct writes wait for the install and never for the engine's
/// decision, which may be slow and which the transaction makes again if a
/// write changed the file meanwhile. Its `Telling` is taken at once, so two
/// commits on one file still tell the kernel in turn.
struct Gate<'c, 'r> {
    core: &'c Core,
    rels: &'r [&'r str],
    telling: Telling<'c>,
    /// What the files were when they were last taken.
    before: Mutex<Option<Vec<Meant>>>,
}

impl<'c, 'r> Gate<'c, 'r> {
    fn new(core: &'c Core, rels: &'r [&'r str]) -> Self {
        Gate {
            core,
            rels,
            telling: core.commit_gate.told(rels),
            before: Mutex::new(None),
        }
    }

    /// The files, held until the returned value is dropped.
    fn take(&self) -> Box<dyn transaction::Hold + 'c> {
        let (held, now) = self.core.files_now(self.rels);
        *self.before.lock() = Some(now);
        Box::new(held)
    }

    /// Records what a committed transaction made of the files; the `Telling`
    /// is for the caller to keep until it has told the kernel.
    fn done(self, committed: bool) -> Telling<'c> {
        if let (true, Some(before)) = (committed, self.before.into_inner()) {
            self.core.record_lineage(self.rels, before);
        }
        self.telling
    }
}

/// The node ids of the files among `ids` (they are held by node id).
fn node_ids(nodes: &super::nodes::Ids, ids: &[Meant]) -> Vec<u64> {
    let id = |m: &Meant| match m {
        Meant::File { dev, ino } => Some(nodes.real(*dev, *ino)),
        Meant::Absent => None,
    };
    ids.iter().filter_map(id).collect()
}

/// `size` bytes of `data` from `offset`, or nothing past the end.
pub fn slice(data: &[u8], offset: u64, size: u32) -> &[u8] {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(data.len());
    let end = start.saturating_add(size as usize).min(data.len());
    &data[start..end]
}

/// The uid a report is made for: the caller's, or the daemon's own.
fn maker(who: &Who) -> u32 {
    who.caller
        .as_ref()
        .map_or_else(|| rustix::process::geteuid().as_raw(), |c| c.uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_never_panic() {
        assert_eq!(slice(b"hello", 1, 3), b"ell");
        assert_eq!(slice(b"hello", 10, 3), b"");
        assert_eq!(slice(b"hello", u64::MAX, u32::MAX), b"");
    }
}

//! One logic method per FUSE request, dispatched by what the node is: a real
//! file passes through to SOURCE (`real_files.rs`, `dirs.rs`, `xattr.rs`) with the
//! errno SOURCE gives; control files (`control.rs`) and `.editfs/` (`state.rs`)
//! are answered here. `fuse.rs` decodes each request and calls one of these.

use std::ffi::OsStr;

use super::control::slice;
use super::core::Core;
use super::edit_buffer::EditBuffer;
use super::handles::Handle;
use super::names::Control;
use super::nodes::Kind;
use super::real_files::{Set, is_write, read_at, truncates};
use super::state;
use super::types::{
    Done, Errno, FileType, Found, Opened, Register, Requester, Res, Served, Timed, VIRTUAL_TTL,
    errno,
};

impl Core {
    pub(super) fn lookup(&self, who: Requester, parent: u64, name: &OsStr) -> Res<Found> {
        match self.kind(parent)? {
            Kind::State(dir) => self
                .state_lookup(parent, &dir, name)
                .map(|a| (a, VIRTUAL_TTL).into()),
            Kind::Control { .. } => Err(Errno::ENOTDIR),
            // A name that is not there is remembered for a TTL too (a negative entry,
            // node id 0): git and compilers ask for the same missing names again and again.
            Kind::Real => match self.lookup_real(parent, name) {
                Err(Errno::ENOENT) => match self.lookup_control(who, parent, name) {
                    Err(Errno::ENOENT) => Ok((
                        self.virtual_attr(0, FileType::RegularFile, 0, 0),
                        self.ttl_in(parent),
                    )
                        .into()),
                    control => control,
                },
                real => {
                    let found = Found::from(real?);
                    self.retries
                        .looked_up(who.pid, parent, name, found.attr.0.ino);
                    Ok(found)
                }
            },
        }
    }

    /// A missing name that names a control file. Its file may be anything or
    /// nothing: the transaction edits a regular file, creates a missing one,
    /// follows a symlink that stays in SOURCE, and otherwise fails with a report.
    /// Were the name missing instead, `cat > dir.edit` would create a real file.
    ///
    /// The name is kept as long as a missing name in `parent` would be (a real
    /// file that takes it is announced the same way), so an agent's round trip
    /// does not look its two control files up again; their attributes are kept
    /// for no time at all, as a report's size changes with every commit and
    /// readers that trust `st_size` (Node's `readFileSync`) read no further.
    pub(super) fn lookup_control(&self, who: Requester, parent: u64, name: &OsStr) -> Res<Found> {
        let (base, control) = self.settings.suffixes.parse(name).ok_or(Errno::ENOENT)?;
        let kind = Kind::Control {
            base: base.clone(),
            control,
        };
        let ino = self.nodes.write().virtual_node(parent, name, kind, true);
        Ok(Found {
            attr: (
                self.control_attr(ino, (parent, &base), control, who)?,
                VIRTUAL_TTL,
            ),
            name_ttl: self.ttl_in(parent),
        })
    }

    /// A directory's watch goes while the nodes lock is held: a lookup that
    /// brought the node back in between would find the watch still there and
    /// promise long-lived names in it that nothing watches any more.
    pub(super) fn forget(&self, ino: u64, nlookup: u64) {
        let gone = {
            let mut nodes = self.nodes.write();
            let gone = nodes.forget(ino, nlookup);
            if let (true, Some(w)) = (gone, &self.watches) {
                w.forgot(ino);
            }
            gone
        };
        if gone {
            self.cache.forgot(ino);
        }
    }

    /// The attributes `who` is told: a report file's size is that of the
    /// report it shows that user (see `status_for`).
    pub(super) fn getattr(&self, who: Requester, ino: u64, fh: Option<u64>) -> Res<Timed> {
        let node = self.nodes.read().get(ino).cloned().ok_or(Errno::ESTALE)?;
        match &node.kind {
            Kind::Control { base, control } => Ok((
                self.control_attr(ino, (node.parent, base), *control, who)?,
                VIRTUAL_TTL,
            )),
            _ => self.getattr_shared(ino, fh),
        }
    }

    /// The attributes of a node that are the same for every user: a real
    /// file's, or one of the state directory's. A control file has none such
    /// (ENOENT): its size depends on who asks.
    pub(super) fn getattr_shared(&self, ino: u64, fh: Option<u64>) -> Res<Timed> {
        let node = self.nodes.read().get(ino).cloned().ok_or(Errno::ESTALE)?;
        match &node.kind {
            Kind::Control { .. } => Err(Errno::ENOENT),
            Kind::State(rel) => Ok((self.state_attr(ino, rel)?, VIRTUAL_TTL)),
            Kind::Real => self.getattr_real(ino, fh),
        }
    }

    pub(super) fn setattr(
        &self,
        who: Requester,
        ino: u64,
        fh: Option<u64>,
        set: Set,
    ) -> Res<Timed> {
        let chown_or_chmod = set.mode.is_some() || set.owner.0.is_some() || set.owner.1.is_some();
        match self.kind(ino)? {
            // `cat > F.edit` truncates and `touch` sets times: both harmless.
            Kind::Control { .. } if !chown_or_chmod => Ok(()),
            Kind::Control { .. } => Err(Errno::EPERM),
            Kind::State(rel)
                if state::is_control(&rel) && set.mode.is_none() && set.owner.0.is_none() =>
            {
                Ok(())
            }
            Kind::State(_) => Err(Errno::EROFS),
            Kind::Real => self.setattr_real(ino, who, fh, set),
        }?;
        self.getattr(who, ino, fh)
    }

    /// Opens node `ino` with the open flags `flags`; a real file is passed
    /// through when `register` gets a backing id for it.
    pub(super) fn open(
        &self,
        who: Requester,
        ino: u64,
        flags: i32,
        register: Register<'_>,
    ) -> Res<Opened> {
        let node = self.nodes.read().get(ino).cloned().ok_or(Errno::ESTALE)?;
        // An edit handle's close commits; a report's bytes are fixed at the open.
        let (fh, served) = match (node.parent, node.kind) {
            (parent, Kind::Control { base, control }) => {
                let fh = self.open_control(
                    (parent, &base),
                    control,
                    who,
                    (is_write(flags), truncates(flags)),
                )?;
                match control {
                    Control::Edit => (fh, Served::Direct),
                    _ => (fh, Served::Fixed),
                }
            }
            (_, Kind::State(rel)) if state::is_control(&rel) => {
                let fh = self.handles.add(Handle::Edit(parking_lot::Mutex::new(
                    EditBuffer::opened(truncates(flags), Some(who.caller()), None)
                        .charged_to(self.budget.account(who.uid)),
                )));
                (fh, Served::Direct)
            }
            (_, Kind::State(rel)) if !is_write(flags) => {
                let bytes = self.state_bytes(&rel, &who.caller())?;
                let mut charge = self.budget.account(who.uid);
                charge.hold(bytes.len() as u64)?;
                let fh = self.handles.add(Handle::Bytes {
                    bytes,
                    _charge: Some(charge),
                });
                (fh, Served::Fixed)
            }
            (_, Kind::State(_)) => return Err(Errno::EROFS),
            (parent, Kind::Real) => {
                self.opening_in(parent);
                if !is_write(flags) {
                    self.cache
                        .prefetch()
                        .reading_in(parent, || self.dir_of(parent).ok());
                }
                return self.open_file(who, ino, flags, register);
            }
        };
        Ok(Opened { fh, served })
    }

    /// Reads `size` bytes at `offset`; a read of an edit handle may commit first,
    /// on a commit thread, which then answers.
    pub(super) fn read(
        &self,
        who: Requester,
        ino: u64,
        fh: u64,
        (offset, size): (u64, u32),
        done: Done<Vec<u8>>,
    ) {
        let h = match self.handles.get(fh) {
            Ok(h) => h,
            Err(e) => return done(Err(e)),
        };
        let r = match &*h {
            Handle::File { file, .. } => read_at(file, offset, size as usize),
            Handle::Bytes { bytes, .. } => Ok(slice(bytes, offset, size).to_vec()),
            Handle::Edit(_) => return self.read_edit(ino, h, who.pid, (offset, size), done),
        };
        done(r);
    }

    pub(super) fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Res<u32> {
        let h = self.handles.get(fh)?;
        match &*h {
            Handle::File { file, ino, .. } => self.direct_write(*ino, || {
                std::os::unix::fs::FileExt::write_at(file, data, offset)
                    .map(|n| n as u32)
                    .map_err(errno)
            }),
            Handle::Edit(buf) => buf
                .lock()
                .write(offset, data, self.settings.engine.max_payload),
            _ => Err(Errno::EBADF),
        }
    }

    /// A close of a descriptor; that of an edit handle may commit, on a commit
    /// thread, which then answers. The writer's last close of a real file
    /// records its direct write before `close(2)` returns.
    pub(super) fn flush(&self, who: Requester, ino: u64, fh: u64, done: Done<()>) {
        match self.handles.get(fh) {
            Ok(h) if matches!(*h, Handle::File { .. }) => {
                self.finish_write_at_close(ino, fh, who.pid);
                done(Ok(()));
            }
            Ok(h) => self.flush_edit(ino, h, who.pid, done),
            Err(e) => done(Err(e)),
        }
    }

    /// The last close of a handle; a direct write no flush recorded is recorded
    /// here (a handle closed without one, or held by a process the flush's
    /// could not rule out). It is answered (`done`) before an edit
    /// handle's unsent empty payload goes to a commit thread.
    pub(super) fn release(&self, who: Requester, ino: u64, fh: u64, done: Done<()>) {
        let handle = self.handles.remove(fh);
        if let Some(&Handle::File {
            ino: node, writer, ..
        }) = handle.as_deref()
        {
            drop(self.backings.release(node, writer));
            if writer {
                self.cache.touched(node);
            }
        }
        self.running.lock().remove(&fh);
        let pending = self.writes.lock().remove(&fh);
        if let Some(p) = pending {
            self.finish_write(&p, self.loc(ino).ok().as_ref());
        }
        done(Ok(()));
        if let Some(h) = handle {
            self.release_edit(ino, h, who.pid);
        }
    }

    pub(super) fn fsync(&self, fh: u64, datasync: bool) -> Res<()> {
        match &*self.handles.get(fh)? {
            Handle::File { file, .. } if datasync => file.sync_data().map_err(errno),
            Handle::File { file, .. } => file.sync_all().map_err(errno),
            _ => Ok(()),
        }
    }

    /// The kernel agreed to pass files through.
    pub(super) fn pass_through(&self) {
        self.backings.enable();
    }
}

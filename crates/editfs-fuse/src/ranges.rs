//! `lseek` with SEEK_DATA / SEEK_HOLE, and `copy_file_range`: passed through to
//! SOURCE for real files, so a sparse file's holes show through the mount and
//! `cp` copies in the kernel. Without them the kernel would take every file for
//! one run of data, and fuser would log a warning for each request.

use rustix::fs::SeekFrom;

use super::core::Core;
use super::handles::Handle;
use super::types::{Errno, Requester, Res, errno};

/// The most one `copy_file_range` request copies. A copy holds a share of the
/// target file, like a write, so a commit waits for it; callers loop on short counts.
const MAX_COPY: u64 = 64 << 20;

impl Core {
    /// Where the next data (SEEK_DATA) or hole (SEEK_HOLE) at or after `offset`
    /// starts. Control and state files have no holes: their size is what fstat
    /// reports, as for any file without holes.
    pub(super) fn seek(
        &self,
        who: Requester,
        (ino, fh): (u64, u64),
        offset: i64,
        whence: i32,
    ) -> Res<i64> {
        if whence != libc::SEEK_DATA && whence != libc::SEEK_HOLE {
            return Err(Errno::EINVAL);
        }
        let offset = u64::try_from(offset).map_err(|_| Errno::ENXIO)?;
        let handle = self.handles.get(fh)?;
        if let Handle::File { file, .. } = &*handle {
            let to = if whence == libc::SEEK_DATA {
                SeekFrom::Data(offset)
            } else {
                SeekFrom::Hole(offset)
            };
            // Only this request's answer matters: reads and writes use their own offsets.
            let at = rustix::fs::seek(file, to).map_err(errno)?;
            return i64::try_from(at).map_err(|_| Errno::EOVERFLOW);
        }
        let size = self.getattr(who, ino, Some(fh))?.0.size;
        match whence {
            _ if offset >= size => Err(Errno::ENXIO),
            libc::SEEK_DATA => i64::try_from(offset).map_err(|_| Errno::EOVERFLOW),
            _ => i64::try_from(size).map_err(|_| Errno::EOVERFLOW),
        }
    }

    /// Copies up to `len` bytes between two real files in SOURCE. A copy into a
    /// file is a direct write to it, with that write's pre-image and lock. Other
    /// pairs (a control file at either end) answer EOPNOTSUPP, on which `cp` and
    /// other tools fall back to reading and writing, which control files take.
    pub(super) fn copy_range(
        &self,
        (fh_in, off_in): (u64, u64),
        (fh_out, off_out): (u64, u64),
        len: u64,
    ) -> Res<u32> {
        let (from, to) = (self.handles.get(fh_in)?, self.handles.get(fh_out)?);
        let (Handle::File { file: from, .. }, Handle::File { file: to, ino, .. }) = (&*from, &*to)
        else {
            return Err(Errno::EOPNOTSUPP);
        };
        let len = usize::try_from(len.min(MAX_COPY)).map_err(|_| Errno::EINVAL)?;
        let (mut off_in, mut off_out) = (off_in, off_out);
        self.direct_write(*ino, || {
            rustix::fs::copy_file_range(from, Some(&mut off_in), to, Some(&mut off_out), len)
                .map_err(errno)
        })
        .map(|n| n as u32)
    }
}

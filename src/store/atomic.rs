//! Durable, all-or-nothing replacement of a file's bytes.
//!
//! The new bytes go to a temporary file that takes the target's mode, owner and
//! extended attributes, is synced, and is renamed over the target; then the
//! directory is synced so the rename itself survives a crash. A reader sees the
//! old file or the new one, never a mix. The temporary file lives in the state
//! directory when that is on the same file system, so a crash leaves nothing
//! behind in the project; otherwise it sits next to the target under a name
//! starting with `.editfs-tmp-`.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use xattr::FileExt;

use super::{StoreError, io_err};

/// Prefix of temporary files, so recovery and people can recognise them.
pub const TMP_PREFIX: &str = ".editfs-tmp-";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Syncs a directory so that entries created or renamed in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync directory", dir))
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Where to put the temporary file for `target`: `tmp_dir` if a rename from it can reach `target`.
fn tmp_path(target: &Path, tmp_dir: Option<&Path>) -> PathBuf {
    let dir = parent(target);
    let same_fs = |t: &Path| Some(fs::metadata(t).ok()?.dev() == fs::metadata(dir).ok()?.dev());
    let base = match tmp_dir {
        Some(t) if same_fs(t) == Some(true) => t,
        _ => dir,
    };
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    base.join(format!("{TMP_PREFIX}{}-{n}", std::process::id()))
}

/// Replaces `target`'s content with `bytes`, atomically and durably.
pub fn replace(target: &Path, bytes: &[u8], tmp_dir: Option<&Path>) -> Result<(), StoreError> {
    let old = match fs::metadata(target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err("read the metadata of", target)(e)),
    };
    if let Some(m) = old.as_ref().filter(|m| m.nlink() > 1) {
        // Renaming would cut the other names off from the new content.
        log::info!(
            "{} has {} links: writing in place to keep them",
            target.display(),
            m.nlink()
        );
        return write_in_place(target, bytes);
    }
    let tmp = tmp_path(target, tmp_dir);
    let result = write_tmp(&tmp, target, bytes, old.as_ref()).and_then(|()| {
        fs::rename(&tmp, target).map_err(io_err("rename a temporary file over", target))
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    sync_dir(parent(target))
}

fn write_tmp(
    tmp: &Path,
    target: &Path,
    bytes: &[u8],
    old: Option<&fs::Metadata>,
) -> Result<(), StoreError> {
    let mode = old.map_or(0o666, |m| m.mode() & 0o7777);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(tmp)
        .map_err(io_err("create a temporary file for", target))?;
    file.write_all(bytes).map_err(io_err("write", tmp))?;
    if let Some(m) = old {
        keep_metadata(&file, target, m)?;
    }
    file.sync_all().map_err(io_err("sync", tmp))
}

/// Gives the new file the old one's mode, owner and extended attributes.
fn keep_metadata(file: &File, target: &Path, old: &fs::Metadata) -> Result<(), StoreError> {
    file.set_permissions(Permissions::from_mode(old.mode() & 0o7777))
        .map_err(io_err("set the mode of", target))?;
    let mine = file
        .metadata()
        .map_err(io_err("read the metadata of", target))?;
    if (mine.uid(), mine.gid()) != (old.uid(), old.gid()) {
        if let Err(e) = std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid())) {
            log::warn!("cannot keep the owner of {}: {e}", target.display());
        }
        // chown clears set-id bits; put the mode back.
        let _ = file.set_permissions(Permissions::from_mode(old.mode() & 0o7777));
    }
    let names = match xattr::list(target) {
        Ok(names) => names,
        Err(e) => {
            log::debug!("no extended attributes read from {}: {e}", target.display());
            return Ok(());
        }
    };
    for name in names {
        match xattr::get(target, &name) {
            Ok(Some(value)) => {
                if let Err(e) = file.set_xattr(&name, &value) {
                    log::warn!(
                        "cannot keep attribute {name:?} of {}: {e}",
                        target.display()
                    );
                }
            }
            Ok(None) => {}
            Err(e) => log::warn!(
                "cannot read attribute {name:?} of {}: {e}",
                target.display()
            ),
        }
    }
    Ok(())
}

fn write_in_place(target: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut file = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(target)
        .map_err(io_err("open", target))?;
    file.write_all(bytes).map_err(io_err("write", target))?;
    file.sync_all().map_err(io_err("sync", target))
}

/// Writes a new file that nothing else names yet (a snapshot, a counter), durably.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), StoreError> {
    let dir = parent(path);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("{TMP_PREFIX}{}-{n}", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .map_err(io_err("create", &tmp))?;
        file.write_all(bytes).map_err(io_err("write", &tmp))?;
        file.sync_all().map_err(io_err("sync", &tmp))?;
        fs::rename(&tmp, path).map_err(io_err("rename into place", path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_mode_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.sh");
        fs::write(&f, "old").unwrap();
        fs::set_permissions(&f, Permissions::from_mode(0o751)).unwrap();
        replace(&f, b"new", None).unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"new");
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o751);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn keeps_extended_attributes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        fs::write(&f, "old").unwrap();
        if xattr::set(&f, "user.editfs.test", b"v").is_err() {
            eprintln!("this file system has no user xattrs; skipping");
            return;
        }
        replace(&f, b"new", None).unwrap();
        assert_eq!(
            xattr::get(&f, "user.editfs.test").unwrap().as_deref(),
            Some(&b"v"[..])
        );
    }

    #[test]
    fn hard_links_see_the_new_content() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::write(&a, "old").unwrap();
        fs::hard_link(&a, &b).unwrap();
        replace(&a, b"new", None).unwrap();
        assert_eq!(fs::read(&b).unwrap(), b"new");
    }

    #[test]
    fn temp_file_goes_to_the_state_dir_on_the_same_fs() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        fs::create_dir(&state).unwrap();
        let f = dir.path().join("a");
        assert!(tmp_path(&f, Some(&state)).starts_with(&state));
        replace(&f, b"x", Some(&state)).unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"x");
        assert_eq!(fs::read_dir(&state).unwrap().count(), 0);
    }
}

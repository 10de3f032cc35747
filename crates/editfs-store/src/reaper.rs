//! Freeing of disk blocks, off the path of the request that made them free.
//!
//! On a file system mounted with `discard`, freeing a file's blocks is a
//! synchronous discard: the last close of a file a commit renamed over, or the
//! unlink of a kept version's last name, takes milliseconds, where the rest of
//! a commit takes a fraction of one. Nothing anyone sees depends on when that
//! happens: a replaced file has no name any more, and a dropped object is
//! first moved to a fresh name in the state directory's `tmp/` (a rename frees
//! nothing), so its own name is free at once for a commit that stores the same
//! content again. The reaper's thread then closes and unlinks.
//!
//! Queuing a job wakes no thread: a wake-up costs the committing thread as
//! much as the rest of what follows its commit on a virtual machine (an
//! interrupt to another CPU, or the reaper taking its CPU), and the commit's
//! answer waits for it. The reaper is woken by `kick` (the store's checkpoint,
//! at most a second later in a mount), when half its queue is full, or to
//! drain it. Its queue is bounded (`QUEUED`): when it is full, the work is
//! done at once by whoever brings it, so memory and open descriptors stay
//! bounded. What is queued is done before the reaper is dropped (the store
//! closing). A name a crash left in `tmp/` starts with the temporary prefix,
//! and opening the store sweeps it away.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::atomic;

/// Jobs waiting at most: each holds at most one descriptor.
const QUEUED: usize = 256;

/// Work that frees blocks.
enum Job {
    /// The last descriptor of a file that may have no name left.
    Close(File),
    /// A name in `tmp/` that may be the last of its file.
    Unlink(PathBuf),
    /// Answers once every job queued before it is done.
    Barrier(mpsc::Sender<()>),
}

impl Job {
    fn run(self) {
        match self {
            Job::Close(file) => drop(file),
            Job::Unlink(path) => {
                if let Err(e) = std::fs::remove_file(&path)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    log::warn!("cannot remove {}: {e}", path.display());
                }
            }
            Job::Barrier(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// Closes and unlinks in the background (see the module doc).
pub struct Reaper {
    /// `tmp/` of the state directory: where names go before they are unlinked.
    trash: PathBuf,
    /// The queue and its thread, started with the first job.
    worker: Mutex<Option<Worker>>,
}

struct Worker {
    queue: Arc<Queue>,
    thread: JoinHandle<()>,
}

/// Jobs waiting for the reaper's thread, which sleeps on `wake` until it is
/// kicked (see the module doc).
#[derive(Default)]
struct Queue {
    waiting: Mutex<Waiting>,
    wake: Condvar,
}

#[derive(Default)]
struct Waiting {
    jobs: Vec<Job>,
    /// The thread is to run what waits.
    kicked: bool,
    /// The reaper is being dropped: the thread ends once the queue is empty.
    closing: bool,
}

impl Queue {
    fn kick(&self, waiting: &mut Waiting) {
        waiting.kicked = true;
        self.wake.notify_one();
    }
}

impl Reaper {
    /// A reaper whose unlinks go through `trash` (a directory on the file
    /// system of what it unlinks).
    pub fn new(trash: &Path) -> Reaper {
        Reaper {
            trash: trash.to_owned(),
            worker: Mutex::new(None),
        }
    }

    /// Closes `file` in the background: its last close may free its blocks.
    pub fn close(&self, file: File) {
        self.send(Job::Close(file));
    }

    /// Removes the file at `path`, whose blocks its unlink may free: the name
    /// is free when this returns, the blocks later. Fails as a rename or an
    /// unlink of `path` would (not found: there was nothing to remove).
    pub fn remove(&self, path: &Path) -> std::io::Result<()> {
        let aside = self.trash.join(trash_name());
        match std::fs::rename(path, &aside) {
            Ok(()) => {
                self.send(Job::Unlink(aside));
                Ok(())
            }
            // No `tmp/` (a store being made), another file system, or no
            // `path`: the unlink says which.
            Err(_) => std::fs::remove_file(path),
        }
    }

    /// Wakes the thread if anything waits for it (see the module doc).
    pub fn kick(&self) {
        if let Some(w) = self.worker.lock().as_ref() {
            let mut waiting = w.queue.waiting.lock();
            if !waiting.jobs.is_empty() {
                w.queue.kick(&mut waiting);
            }
        }
    }

    /// Waits until everything queued so far is done.
    pub fn drain(&self) {
        let (done, wait) = mpsc::channel();
        if self.send(Job::Barrier(done)) {
            let _ = wait.recv();
        }
    }

    /// Queues `job`, or runs it at once when the queue is full or has no
    /// thread; says whether it was queued.
    fn send(&self, job: Job) -> bool {
        let mut worker = self.worker.lock();
        if worker.is_none() {
            *worker = spawn();
        }
        let Some(w) = worker.as_ref() else {
            drop(worker);
            job.run();
            return false;
        };
        let mut waiting = w.queue.waiting.lock();
        if waiting.jobs.len() >= QUEUED {
            drop(waiting);
            drop(worker);
            job.run();
            return false;
        }
        let now = matches!(job, Job::Barrier(_)) || waiting.jobs.len() >= QUEUED / 2;
        waiting.jobs.push(job);
        if now {
            w.queue.kick(&mut waiting);
        }
        true
    }
}

/// A fresh name for something about to be unlinked, swept at the next open
/// should a crash leave it.
fn trash_name() -> OsString {
    atomic::tmp_name()
}

fn spawn() -> Option<Worker> {
    let queue = Arc::new(Queue::default());
    let jobs = queue.clone();
    let thread = std::thread::Builder::new()
        .name("editfs-reaper".into())
        .spawn(move || work(&jobs));
    match thread {
        Ok(thread) => Some(Worker { queue, thread }),
        Err(e) => {
            log::warn!("no reaper thread ({e}): blocks are freed in the request path");
            None
        }
    }
}

/// The reaper's thread: runs what waits each time it is woken, until the
/// reaper closes and nothing waits.
fn work(queue: &Queue) {
    loop {
        let jobs = {
            let mut waiting = queue.waiting.lock();
            while !waiting.kicked && !waiting.closing {
                queue.wake.wait(&mut waiting);
            }
            waiting.kicked = false;
            if waiting.closing && waiting.jobs.is_empty() {
                return;
            }
            std::mem::take(&mut waiting.jobs)
        };
        jobs.into_iter().for_each(Job::run);
    }
}

impl Drop for Reaper {
    /// Everything queued is done before the store goes.
    fn drop(&mut self) {
        if let Some(Worker { queue, thread }) = self.worker.get_mut().take() {
            let mut waiting = queue.waiting.lock();
            waiting.closing = true;
            queue.kick(&mut waiting);
            drop(waiting);
            if thread.join().is_err() {
                log::error!("the reaper thread panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn a_removed_name_is_free_at_once_and_its_file_goes_once_drained() {
        let tmp = tempfile::tempdir().unwrap();
        let trash = tmp.path().join("tmp");
        fs::create_dir(&trash).unwrap();
        let object = tmp.path().join("object");
        fs::write(&object, "old").unwrap();
        let reaper = Reaper::new(&trash);
        reaper.remove(&object).unwrap();
        fs::write(&object, "same name, new file").unwrap();
        reaper.drain();
        assert_eq!(fs::read(&object).unwrap(), b"same name, new file");
        assert_eq!(fs::read_dir(&trash).unwrap().count(), 0);
    }

    /// The end of a pipe stands for a replaced file: its reader sees the end
    /// of the stream once the reaper closed it.
    fn closed(reader: &mut std::io::PipeReader) -> bool {
        use std::io::Read;
        matches!(reader.read(&mut [0u8; 1]), Ok(0))
    }

    #[test]
    fn a_queued_close_waits_for_a_kick() {
        let tmp = tempfile::tempdir().unwrap();
        let reaper = Reaper::new(tmp.path());
        let (mut reader, writer) = std::io::pipe().unwrap();
        rustix::fs::fcntl_setfl(&reader, rustix::fs::OFlags::NONBLOCK).unwrap();
        reaper.close(File::from(std::os::fd::OwnedFd::from(writer)));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!closed(&mut reader), "closed before any kick");
        reaper.kick();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !closed(&mut reader) {
            assert!(std::time::Instant::now() < deadline, "never closed");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn removing_a_missing_name_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let reaper = Reaper::new(tmp.path());
        let err = reaper.remove(&tmp.path().join("none")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn without_a_trash_directory_the_name_is_removed_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let object = tmp.path().join("object");
        fs::write(&object, "x").unwrap();
        let reaper = Reaper::new(&tmp.path().join("no-such-dir"));
        reaper.remove(&object).unwrap();
        assert!(!object.exists());
    }

    #[test]
    fn what_is_queued_is_done_when_the_reaper_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let trash = tmp.path().join("tmp");
        fs::create_dir(&trash).unwrap();
        let reaper = Reaper::new(&trash);
        let (mut reader, writer) = std::io::pipe().unwrap();
        rustix::fs::fcntl_setfl(&reader, rustix::fs::OFlags::NONBLOCK).unwrap();
        reaper.close(File::from(std::os::fd::OwnedFd::from(writer)));
        for n in 0..QUEUED * 2 {
            let p = tmp.path().join(format!("f{n}"));
            fs::write(&p, "x").unwrap();
            reaper.remove(&p).unwrap();
        }
        drop(reaper);
        assert_eq!(fs::read_dir(&trash).unwrap().count(), 0);
        assert!(closed(&mut reader), "the queued close was made");
    }
}

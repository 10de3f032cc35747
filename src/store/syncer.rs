//! The syncs of a commit's new contents, made on a thread of the store's own
//! while the committing thread keeps the versions and syncs the record (see
//! the store's module doc for why the two may overlap).
//!
//! The thread is started at the first commit and lives as long as the store,
//! so a commit hands its files over a channel instead of spawning a thread of
//! its own (a spawn, its stack's mappings and its exit cost about as much CPU
//! as the rest of a small commit's syncing). Commits are serialized by the
//! store's lock, so one thread is enough. Where no thread can be started, the
//! caller syncs the files itself, before the record, as a commit once did.

use std::fs::File;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

use parking_lot::Mutex;

use super::{StoreError, io_err};

/// Temporary files to sync, each with its name (for the error).
pub type Files = Vec<(File, String)>;

/// Files to sync, and where to say how that went.
type Job = (Files, SyncSender<Result<(), StoreError>>);

#[derive(Default)]
pub struct Syncer {
    /// The thread's queue and the thread, once started.
    started: Mutex<Option<(Sender<Job>, JoinHandle<()>)>>,
}

/// Files being synced on the syncer's thread.
pub struct Pending(Receiver<Result<(), StoreError>>);

impl Pending {
    /// Waits until they are synced.
    pub fn wait(self) -> Result<(), StoreError> {
        self.0.recv().unwrap_or_else(|_| {
            Err(io_err("sync", Path::new("the new contents"))(
                std::io::Error::other("the thread syncing them ended"),
            ))
        })
    }
}

impl Syncer {
    /// Starts syncing `files` on the syncer's thread; gives them back when no
    /// thread can take them.
    pub fn start(&self, files: Files) -> Result<Pending, Files> {
        let mut started = self.started.lock();
        if started.is_none() {
            let (jobs, queue) = mpsc::channel::<Job>();
            let thread = std::thread::Builder::new()
                .name("editfs-sync".into())
                .spawn(move || {
                    for (files, done) in queue {
                        let _ = done.send(sync_all(&files));
                    }
                });
            match thread {
                Ok(thread) => *started = Some((jobs, thread)),
                Err(e) => {
                    log::warn!("cannot start the thread that syncs new contents: {e}");
                    return Err(files);
                }
            }
        }
        let Some((jobs, _)) = started.as_ref() else {
            return Err(files);
        };
        let (done, pending) = mpsc::sync_channel(1);
        jobs.send((files, done))
            .map(|()| Pending(pending))
            .map_err(|mpsc::SendError((files, _))| files)
    }
}

/// Syncs every file of `files` (its bytes, mode and owner).
pub fn sync_all(files: &Files) -> Result<(), StoreError> {
    files
        .iter()
        .try_for_each(|(file, name)| file.sync_all().map_err(io_err("sync", Path::new(name))))
}

impl Drop for Syncer {
    fn drop(&mut self) {
        if let Some((jobs, thread)) = self.started.get_mut().take() {
            drop(jobs);
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_synced_on_one_thread_commit_after_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let syncer = Syncer::default();
        let mut threads = Vec::new();
        for i in 0..3 {
            let path = tmp.path().join(format!("f{i}"));
            let file = File::create(&path).unwrap();
            let pending = syncer
                .start(vec![(file, format!("f{i}"))])
                .unwrap_or_else(|_| panic!("no thread"));
            pending.wait().unwrap();
            let started = syncer.started.lock();
            threads.push(started.as_ref().map(|(_, t)| t.thread().id()));
        }
        assert!(threads[0].is_some());
        assert!(threads.iter().all(|t| *t == threads[0]), "{threads:?}");
    }
}

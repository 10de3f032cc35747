//! The mount's handle (`EditFs`): the shared state (`Core`) and the threads
//! that serve it besides the kernel's requests: commits, checkpoints, the
//! filer of removals and the watcher of SOURCE, started together and ended
//! with the last reference to the state.

use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::commits::Commits;
use super::core::{Core, Job, Settings};
use super::source::Source;
use super::types::Kernel;
use crate::store::Store;

/// The file system as the kernel sees it: the shared state, and the threads that
/// commit transactions.
///
/// Transactions run on their own threads, never on a FUSE worker: a commit waits
/// for the store's lock and then for the kernel to drop cached entries and pages,
/// and the kernel may need a worker to answer a request (a lookup holding the
/// directory lock, a read holding a page) before it can. Were the workers the
/// ones waiting, they could all end up waiting on each other.
pub struct EditFs {
    core: Arc<Core>,
}

impl std::ops::Deref for EditFs {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

impl EditFs {
    pub fn new(
        source: Source,
        store: Store,
        settings: Settings,
        notifier: Arc<OnceLock<Box<dyn Kernel>>>,
    ) -> EditFs {
        let core = Arc::new_cyclic(|me: &Weak<Core>| {
            let me = me.clone();
            let commits = Commits::start(move |job: Job| match me.upgrade() {
                Some(core) => core.run(job),
                None => job.refuse(),
            });
            Core::new(source, store, settings, notifier, commits)
        });
        checkpoints(Arc::downgrade(&core));
        filer(Arc::downgrade(&core));
        if let Some(w) = &core.watches {
            super::watch::start(w.clone(), Arc::downgrade(&core));
        }
        EditFs { core }
    }

    /// What must run once the session ends, whether or not the kernel said
    /// goodbye (it sends no `destroy` for an ordinary unmount).
    pub fn on_exit(&self) -> OnExit {
        OnExit(Arc::clone(&self.core))
    }
}

/// See `EditFs::on_exit`.
pub struct OnExit(Arc<Core>);

impl OnExit {
    /// Records the files made and not recorded yet, files the removals still
    /// waiting and syncs what finished transactions left.
    pub fn run(self) {
        self.0.record_creations(true);
        self.0.store.file_removals(true);
        if let Err(e) = self.0.store.checkpoint() {
            log::error!("checkpoint at unmount: {e}");
        }
    }
}

/// How long a finished commit's log line and its file's new name may wait to be
/// synced (see the store's module doc): the commits of a burst share one sync,
/// and none waits for it.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// How long the checkpoint thread waits to be woken before it looks again:
/// the longest it keeps the mount's state alive after an unmount.
const CHECKPOINT_WAKES: Duration = Duration::from_millis(100);

/// Starts the thread that makes the store's checkpoints while the mount lives:
/// every second, and at once when enough commits wait for one, so that no
/// commit syncs them under the store's lock (see `Store::wait_for_checkpoint`).
fn checkpoints(core: std::sync::Weak<Core>) {
    let spawned = std::thread::Builder::new()
        .name("editfs-checkpoint".into())
        .spawn(move || {
            let mut last = Instant::now();
            loop {
                let Some(core) = core.upgrade() else { return };
                let due = core.store.wait_for_checkpoint(CHECKPOINT_WAKES);
                core.record_creations(false);
                if due || last.elapsed() >= CHECKPOINT_EVERY {
                    last = Instant::now();
                    if let Err(e) = core.store.checkpoint() {
                        log::error!("checkpoint: {e}");
                    }
                    // What an `editfs apply` that died mid-commit left.
                    core.store.recover_dead();
                }
            }
        });
    if let Err(e) = spawned {
        log::error!(
            "cannot start the checkpoint thread: {e}; finished commits are synced every {} commits instead",
            crate::store::CHECKPOINT_AFTER
        );
    }
}

/// How long the filer sleeps when no removal wakes it: the longest it keeps
/// the mount's state alive after an unmount.
const FILER_WAKES: Duration = Duration::from_millis(100);

/// How long no removal must come before the filer starts on those waiting:
/// `rm -r` begins one every few dozen microseconds (a few milliseconds apart
/// when the machine is busy), and the filer then files them once it is done
/// instead of competing with it for the CPU.
const FILER_QUIET: Duration = Duration::from_millis(50);

/// The longest the filer waits for quiet once a removal woke it, so an endless
/// stream of removals is filed too. A transaction or a reader of history files
/// what waits itself, so none of them waits for the filer.
const FILER_WAITS_AT_MOST: Duration = Duration::from_secs(1);

/// The filer's niceness: it does bookkeeping no request waits for, so the
/// mount's requests and the user's programs go first when the CPU is busy.
const FILER_NICE: i32 = 10;

/// Starts the thread that files removals (see the store's `removals.rs`)
/// while the mount lives. Without it, every reader of history files them
/// itself, and so does the next transaction.
fn filer(core: std::sync::Weak<Core>) {
    let spawned = std::thread::Builder::new()
        .name("editfs-removals".into())
        .spawn(move || {
            let me = rustix::thread::gettid();
            if let Err(e) = rustix::process::setpriority_process(Some(me), FILER_NICE) {
                log::debug!("the removal filer keeps its priority: {e}");
            }
            let mut idle = true;
            loop {
                let Some(core) = core.upgrade() else { return };
                core.store.file_removals(idle);
                idle = !core.store.wait_for_removals(FILER_WAKES);
                if !idle {
                    core.store
                        .wait_for_quiet_removals(FILER_QUIET, FILER_WAITS_AT_MOST);
                }
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot start the removal filer: {e}; removals are filed by the next reader");
    }
}

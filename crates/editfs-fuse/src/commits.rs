//! The threads that commit transactions, and the line each user's wait in.
//!
//! A transaction may run for seconds (a payload up to its work budget, a file
//! near the size limit), and whoever may write to the mount can send many at
//! once. Taken in arrival order, one user's queue would hold every other
//! user's edit behind it (a probe held another user's one-block edit 40 s
//! with 16 streams of slow payloads). So each user has a line of their own:
//!
//! - the threads serve the lines in turn, one transaction each, and a line
//!   keeps arrival order;
//! - a user runs at most `PER_USER` transactions at once: the rest of their
//!   line waits, and so the CPU they get is bounded too;
//! - a user with nothing running never waits for a thread: when every thread
//!   is busy, one more is started for them (up to `MOST`), and it ends when
//!   it finds nothing it may take;
//! - a user's second transaction at once runs on a thread niced to
//!   `SECOND_NICE`, so the CPU goes first to users with one running.
//!
//! So another user's edit waits for no one's transaction, only for its share
//! of the CPU and for a transaction on the same file (`transaction::serial`).
//! A user is the uid the transaction runs as; one user's processes share one
//! line, as they share their rights.
//!
//! Lock order: `lines` is taken alone, never across a job or a thread's start.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

/// Transactions one user may run at once. Two keep a user's batch of edits
/// on different files moving on this machine's cores; more would only take
/// CPU from other users.
pub const PER_USER: usize = 2;

/// The threads that always wait for work.
const STEADY: usize = 4;

/// The most threads at once, started ones included: past it, a new user's
/// transaction waits for a thread like any other.
const MOST: usize = 16;

/// Runs one job; given to `Commits::start`.
type Run<J> = dyn Fn(J) + Send + Sync;

/// The lines and the threads that serve them.
pub struct Commits<J> {
    lines: Mutex<Lines<J>>,
    ready: Condvar,
    run: Box<Run<J>>,
}

/// Who waits, who runs, and how many threads there are.
struct Lines<J> {
    waiting: HashMap<u32, VecDeque<J>>,
    /// Users with a job waiting, in the order they are served.
    turns: VecDeque<u32>,
    running: HashMap<u32, usize>,
    idle: usize,
    threads: usize,
}

impl<J> Lines<J> {
    /// The next job a thread may take: the first user in turn below their
    /// share, who then goes to the back of the turns if more of theirs wait.
    fn take(&mut self) -> Option<(u32, J, usize)> {
        let at = self
            .turns
            .iter()
            .position(|u| self.running.get(u).copied().unwrap_or(0) < PER_USER)?;
        let user = self.turns.remove(at)?;
        let line = self.waiting.get_mut(&user)?;
        let job = line.pop_front()?;
        if line.is_empty() {
            self.waiting.remove(&user);
        } else {
            self.turns.push_back(user);
        }
        let running = self.running.entry(user).or_insert(0);
        *running += 1;
        Some((user, job, *running))
    }

    fn finished(&mut self, user: u32) {
        if let Some(n) = self.running.get_mut(&user) {
            *n -= 1;
            if *n == 0 {
                self.running.remove(&user);
            }
        }
    }
}

impl<J: Send + 'static> Commits<J> {
    /// The lines, with their steady threads already waiting.
    pub fn start(run: impl Fn(J) + Send + Sync + 'static) -> Arc<Commits<J>> {
        let commits = Arc::new(Commits {
            lines: Mutex::new(Lines {
                waiting: HashMap::new(),
                turns: VecDeque::new(),
                running: HashMap::new(),
                idle: 0,
                threads: STEADY,
            }),
            ready: Condvar::new(),
            run: Box::new(run),
        });
        for _ in 0..STEADY {
            commits.spawn(true);
        }
        commits
    }

    /// Puts `job` in `user`'s line, and starts a thread for it if every
    /// thread is busy and `user` has nothing running.
    pub fn push(self: &Arc<Self>, user: u32, job: J) {
        let more = {
            let mut lines = self.lines.lock();
            if !lines.waiting.contains_key(&user) {
                lines.turns.push_back(user);
            }
            lines.waiting.entry(user).or_default().push_back(job);
            let first = !lines.running.contains_key(&user);
            let more = lines.idle == 0 && first && lines.threads < MOST;
            if more {
                lines.threads += 1;
            }
            more
        };
        if more {
            self.spawn(false);
        } else {
            self.ready.notify_one();
        }
    }

    /// Starts a thread: a steady one waits for work, another ends when it
    /// finds none it may take.
    fn spawn(self: &Arc<Self>, steady: bool) {
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("editfs-commit".into())
            .spawn(move || me.serve(steady));
        if let Err(e) = spawned {
            log::error!("cannot start a commit thread: {e}");
            self.lines.lock().threads -= 1;
            self.ready.notify_one();
        }
    }

    fn serve(&self, steady: bool) {
        while let Some((user, job, nth)) = self.next(steady) {
            share_cpu(nth);
            (self.run)(job);
            self.lines.lock().finished(user);
            // A user who was at their share may now run again, on a thread
            // that is waiting.
            self.ready.notify_one();
        }
    }

    /// The next job this thread may take; for a thread that is not steady,
    /// nothing once there is none, and the thread ends.
    fn next(&self, steady: bool) -> Option<(u32, J, usize)> {
        let mut lines = self.lines.lock();
        loop {
            if let Some(next) = lines.take() {
                return Some(next);
            }
            if !steady {
                lines.threads -= 1;
                return None;
            }
            lines.idle += 1;
            self.ready.wait(&mut lines);
            lines.idle -= 1;
        }
    }
}

/// The niceness of a thread that runs a user's second transaction at once:
/// its CPU goes first to transactions of users with nothing else running
/// (nice 10 weighs a tenth of nice 0 in the kernel's scheduler).
const SECOND_NICE: i32 = 10;

/// Sets this thread's niceness for the `nth` transaction its user runs now:
/// a user's first runs at the daemon's own, any more at `SECOND_NICE`. A
/// daemon that may not lower a niceness again (not root) serves one user
/// anyway, and leaves it as is.
fn share_cpu(nth: usize) {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let nice = if nth > 1 { SECOND_NICE } else { 0 };
    let me = rustix::thread::gettid();
    if rustix::process::getpriority_process(Some(me)).is_ok_and(|now| now == nice) {
        return;
    }
    if let Err(e) = rustix::process::setpriority_process(Some(me), nice) {
        log::debug!("a commit thread keeps its niceness: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Longest any test waits for a job that must run: a watchdog, far above
    /// what a loaded machine needs.
    const WATCHDOG: Duration = Duration::from_secs(60);

    /// A job that tells it started, then waits until let go.
    struct Blocking {
        started: mpsc::Sender<(u32, usize)>,
        go: Arc<(Mutex<bool>, Condvar)>,
        id: (u32, usize),
    }

    fn pool() -> Arc<Commits<Blocking>> {
        Commits::start(|job: Blocking| {
            let _ = job.started.send(job.id);
            let (lock, cvar) = &*job.go;
            let mut go = lock.lock();
            while !*go {
                cvar.wait(&mut go);
            }
        })
    }

    fn gate() -> Arc<(Mutex<bool>, Condvar)> {
        Arc::new((Mutex::new(false), Condvar::new()))
    }

    fn open(gate: &(Mutex<bool>, Condvar)) {
        *gate.0.lock() = true;
        gate.1.notify_all();
    }

    #[test]
    fn another_users_job_runs_while_one_user_has_many_running_and_waiting() {
        let commits = pool();
        let (started, seen) = mpsc::channel();
        let held = gate();
        for n in 0..3 * STEADY {
            let job = Blocking {
                started: started.clone(),
                go: held.clone(),
                id: (1000, n),
            };
            commits.push(1000, job);
        }
        let mut first = Vec::new();
        for _ in 0..PER_USER {
            first.push(
                seen.recv_timeout(WATCHDOG)
                    .expect("the first user's jobs start"),
            );
        }
        let free = gate();
        open(&free);
        commits.push(
            2000,
            Blocking {
                started,
                go: free,
                id: (2000, 0),
            },
        );
        let next = seen
            .recv_timeout(WATCHDOG)
            .expect("the other user's job starts while the first user's wait");
        assert_eq!(next, (2000, 0), "first user's jobs started: {first:?}");
        open(&held);
        let rest: Vec<_> = (0..3 * STEADY - PER_USER)
            .map(|_| seen.recv_timeout(WATCHDOG).expect("every job runs"))
            .collect();
        assert!(rest.iter().all(|(u, _)| *u == 1000));
    }

    #[test]
    fn a_new_user_gets_a_thread_when_every_steady_one_is_busy() {
        let commits = pool();
        let (started, seen) = mpsc::channel();
        let held = gate();
        for user in 0..STEADY as u32 {
            commits.push(
                user,
                Blocking {
                    started: started.clone(),
                    go: held.clone(),
                    id: (user, 0),
                },
            );
        }
        for _ in 0..STEADY {
            seen.recv_timeout(WATCHDOG).expect("each user's job starts");
        }
        let free = gate();
        open(&free);
        commits.push(
            99,
            Blocking {
                started,
                go: free,
                id: (99, 0),
            },
        );
        assert_eq!(seen.recv_timeout(WATCHDOG), Ok((99, 0)));
        open(&held);
        commits.wait_for_steady();
    }

    /// Each job of one user waits, once started, for a permit of the test's:
    /// with every started job held, which jobs started says which the line
    /// handed out, in what order, and how many at once, whatever the
    /// scheduler does with the threads in between.
    #[test]
    fn one_users_line_keeps_its_order_and_its_share() {
        const JOBS: usize = 40;
        let (started, seen) = mpsc::channel();
        let permits = Arc::new((Mutex::new(0usize), Condvar::new()));
        let taken = Arc::clone(&permits);
        let running = Arc::new(Mutex::new((0usize, 0usize)));
        let counts = Arc::clone(&running);
        let commits = Commits::start(move |n: usize| {
            {
                let mut c = counts.lock();
                c.0 += 1;
                c.1 = c.1.max(c.0);
            }
            let _ = started.send(n);
            let (lock, cvar) = &*taken;
            let mut left = lock.lock();
            while *left == 0 {
                cvar.wait(&mut left);
            }
            *left -= 1;
            counts.lock().0 -= 1;
        });
        for n in 0..JOBS {
            commits.push(7, n);
        }
        let mut got: Vec<usize> = Vec::new();
        for done in 0..=JOBS - PER_USER {
            // Every job started so far is held but `done` of them: the line
            // has handed out exactly the next PER_USER, no more.
            while got.len() < done + PER_USER {
                got.push(seen.recv_timeout(WATCHDOG).expect("the next job starts"));
            }
            let mut sorted = got.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..done + PER_USER).collect::<Vec<_>>(), "{got:?}");
            assert!(
                seen.try_recv().is_err(),
                "more than {PER_USER} of one user's jobs at once: {got:?}"
            );
            let (lock, cvar) = &*permits;
            *lock.lock() += 1;
            cvar.notify_one();
        }
        let most = running.lock().1;
        assert!(most <= PER_USER, "{most} ran at once");
        let (lock, cvar) = &*permits;
        *lock.lock() += JOBS;
        cvar.notify_all();
    }

    #[test]
    fn a_users_second_transaction_at_once_runs_niced_and_another_users_first_does_not() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("needs root, to lower a niceness again; skipping");
            return;
        }
        let held = gate();
        let (told, seen) = mpsc::channel();
        let go = held.clone();
        let commits = Commits::start(move |user: u32| {
            let me = rustix::thread::gettid();
            let nice = rustix::process::getpriority_process(Some(me)).unwrap_or(-100);
            let _ = told.send((user, nice));
            if user == 1 {
                let (lock, cvar) = &*go;
                let mut open = lock.lock();
                while !*open {
                    cvar.wait(&mut open);
                }
            }
        });
        commits.push(1, 1);
        commits.push(1, 1);
        let mut first: Vec<i32> = (0..2)
            .map(|_| seen.recv_timeout(WATCHDOG).expect("both run").1)
            .collect();
        first.sort_unstable();
        assert_eq!(first, vec![0, SECOND_NICE]);
        commits.push(2, 2);
        assert_eq!(seen.recv_timeout(WATCHDOG), Ok((2, 0)));
        open(&held);
    }

    impl<J: Send + 'static> Commits<J> {
        /// Waits until the threads started for new users have ended.
        fn wait_for_steady(&self) {
            let deadline = std::time::Instant::now() + WATCHDOG;
            while self.lines.lock().threads > STEADY {
                assert!(
                    std::time::Instant::now() < deadline,
                    "extra threads never ended"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

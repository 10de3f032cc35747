//! The mount under concurrency: commits racing direct writes, opens racing renames
//! over a file, and a mixed stress run. Every workload runs under a watchdog: a
//! hang aborts the FUSE connection and fails the test instead of hanging the machine.

use crate::common;

use std::fs;
use std::io::Write;
use std::os::fd::IntoRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Mount;

/// A text file of a few hundred KiB whose first line is `flip: A`.
fn big_and_small(src: &Path) {
    let mut big = String::from("flip: A\n");
    while big.len() < 300 * 1024 {
        big.push_str(&".".repeat(63));
        big.push('\n');
    }
    fs::write(src.join("big.txt"), big).unwrap();
    fs::write(src.join("small.txt"), "count: 0\n").unwrap();
}

#[test]
fn multi_file_commits_and_undos_never_deadlock_with_a_direct_pwrite_to_the_same_file() {
    let Some(m) = Mount::start(&[], big_and_small) else {
        return;
    };
    // The writer holds a page of big.txt locked while its write waits for the daemon;
    // each commit then drops big.txt's pages. Neither may wait for the other.
    let script = r#"
python3 -c "
import os, itertools
fd = os.open('big.txt', os.O_WRONLY)
for k in itertools.count():
    os.pwrite(fd, b'X', 100 + 4096 * (k % 60))
    if k == 59:
        open('ready', 'w').close()
" &
writer=$!
# From its 60th write on, the writer writes bytes the file holds already: the
# commits race its writes, and none is stale for a change of content however
# slowly a loaded machine runs it.
while [ ! -e ready ]; do sleep 0.01; done
for i in $(seq 1 30); do
  from=A; to=B; [ $((i % 2)) = 0 ] && { from=B; to=A; }
  printf 'big.txt\n<<<<<<< SEARCH\nflip: %s\n=======\nflip: %s\n>>>>>>> REPLACE\nsmall.txt\n<<<<<<< SEARCH\ncount: %s\n=======\ncount: %s\n>>>>>>> REPLACE\n' \
    $from $to $((i - 1)) $i > .editfs/edit
done
head -c 8 big.txt
# An undo drops the pages of the file it restores just the same.
for i in 1 2 3 4 5; do
  echo 'big.txt --force' | cat > .editfs/undo || echo "undo $i failed"
done
kill $writer
wait
cat small.txt"#;
    let out = m.ok_within(script, Duration::from_secs(60));
    assert_eq!(out, "flip: A\ncount: 30\n");
}

#[test]
fn directory_moves_racing_patches_that_name_both_directories_never_deadlock() {
    let Some(m) = Mount::start(&[], |src| {
        fs::create_dir(src.join("d1")).unwrap();
        for i in 1..=6 {
            fs::write(src.join(format!("d1/f{i}.txt")), "start\nEND\n").unwrap();
        }
    }) else {
        return;
    };
    // A move of the directory takes the locks of the files it holds, while a
    // patch holds one of them and waits for the other directory's name.
    let script = r#"
end=$((SECONDS + 4))
( while [ $SECONDS -lt $end ]; do mv d1 d2 2>/dev/null; mv d2 d1 2>/dev/null; done ) &
mover=$!
while [ $SECONDS -lt $end ]; do
  for a in d1 d2; do
    b=d1; [ $a = d1 ] && b=d2
    printf '*** Begin Patch\n*** Update File: %s/f3.txt\n@@\n-END\n+x\n+END\n*** Add File: %s\n+y\n*** End Patch\n' $a $b \
      > .editfs/edit 2>/dev/null
    rm -f $b 2>/dev/null
  done
done
wait $mover
echo done"#;
    assert_eq!(m.ok_within(script, Duration::from_secs(60)), "done\n");
}

#[test]
fn opens_of_a_file_never_fail_while_commits_rename_new_versions_over_it() {
    let Some(m) = Mount::start(&[], |src| {
        fs::write(src.join("f.txt"), "n: 0\n").unwrap();
    }) else {
        return;
    };
    // Three readers open, stat and read f.txt in a loop while 200 commits each
    // rename a new version over it: the name always exists, so no open may fail.
    let script = r#"
cat > /tmp/reader-$$.py <<'EOF'
import os, sys
errors = {}
while not os.path.exists(sys.argv[1]):
    try:
        os.stat('f.txt')
        with open('f.txt') as f:
            f.read()
    except OSError as e:
        errors[e.strerror] = errors.get(e.strerror, 0) + 1
for k, v in errors.items():
    print(f'{k}: {v}')
EOF
stop=/tmp/stop-$$
for r in 1 2 3; do python3 /tmp/reader-$$.py $stop & done
python3 -c "
for i in range(200):
    with open('f.txt.edit', 'w') as f:
        f.write('{\"search\": \"n: %d\", \"replace\": \"n: %d\"}' % (i, i + 1))
"
touch $stop
wait
rm -f $stop /tmp/reader-$$.py
cat f.txt"#;
    let out = m.ok_within(script, Duration::from_secs(120));
    assert_eq!(out, "n: 200\n", "no reader may see an error");
}

/// Three committers and two renamers replace one name while three readers open
/// it and read its status, for `secs`: each renames a new version over the name,
/// so an open can meet its node replaced, look the name up again and meet that
/// one replaced too. Natively an open of a name that exists never fails; the
/// failures, by call and error.
fn opens_under_several_committers(secs: u64) -> Vec<String> {
    // Renames over f.txt keep no pre-image, so they come fast.
    let Some(m) = Mount::start(&["--no-snapshot", "f.txt"], |src| {
        fs::write(src.join("f.txt"), "anchor\n").unwrap();
    }) else {
        return Vec::new();
    };
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let fail = |failures: &Mutex<Vec<String>>, what: String| {
        failures.lock().unwrap().push(what);
    };
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (mnt, stop, failures) = (m.mnt.clone(), stop.clone(), failures.clone());
            std::thread::spawn(move || {
                let mut opens = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    opens += 1;
                    match fs::File::open(mnt.join("f.txt")) {
                        Ok(mut f) => {
                            let mut text = String::new();
                            if let Err(e) = std::io::Read::read_to_string(&mut f, &mut text) {
                                fail(&failures, format!("read f.txt: {e}"));
                            } else if !text.starts_with("anchor\n") {
                                fail(&failures, format!("read f.txt: torn: {text:?}"));
                            }
                        }
                        Err(e) => fail(&failures, format!("open f.txt: {e}")),
                    }
                    if let Err(e) = fs::read(mnt.join("f.txt.status")) {
                        fail(&failures, format!("read f.txt.status: {e}"));
                    }
                }
                opens
            })
        })
        .collect();
    let committers: Vec<_> = (0..3)
        .map(|c| {
            let (mnt, stop, failures) = (m.mnt.clone(), stop.clone(), failures.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let payload =
                        format!(r#"{{"search": "anchor\n", "replace": "anchor\n{c}-{n}\n"}}"#);
                    match send(&mnt.join("f.txt.edit"), &payload) {
                        // A rename put another file under the name since the
                        // edit's open: the edit is stale, as the contract says.
                        Err(e) if e.starts_with("close") && e.contains("os error 116") => {}
                        Err(e) => fail(&failures, e),
                        Ok(()) => {}
                    }
                }
                n
            })
        })
        .collect();
    // Renames through the mount replace the name far more often than commits do.
    let renamers: Vec<_> = (0..2)
        .map(|r| {
            let (mnt, src) = (m.mnt.clone(), m.src.clone());
            let (stop, failures) = (stop.clone(), failures.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                let tmp = format!("f.tmp{r}");
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    // Written in SOURCE, where it is quick; renamed through the mount.
                    let renamed = fs::write(src.join(&tmp), format!("anchor\nrenamed {r}-{n}\n"))
                        .and_then(|()| fs::rename(mnt.join(&tmp), mnt.join("f.txt")));
                    if let Err(e) = renamed {
                        fail(&failures, format!("rename over f.txt: {e}"));
                    }
                }
                n
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let opens: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let commits: u64 = committers
        .into_iter()
        .chain(renamers)
        .map(|c| c.join().unwrap())
        .sum();
    let failures = failures.lock().unwrap().clone();
    eprintln!(
        "{opens} opens during {commits} commits: {} failed",
        failures.len()
    );
    failures
}

#[test]
fn opens_never_fail_while_several_committers_replace_one_name() {
    let failures = opens_under_several_committers(3);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same for 20 s: `cargo test --test mount_races -- --ignored`.
#[test]
#[ignore = "takes 20 s"]
fn opens_never_fail_while_several_committers_replace_one_name_for_long() {
    let failures = opens_under_several_committers(20);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// What each worker is doing, and since when: the watchdog's view.
#[derive(Default)]
struct Watch {
    busy: Mutex<Vec<Option<(String, Instant)>>>,
    stuck: Mutex<Option<String>>,
    stop: AtomicBool,
}

impl Watch {
    fn slot(&self) -> usize {
        let mut busy = self.busy.lock().unwrap();
        busy.push(None);
        busy.len() - 1
    }

    /// Runs one operation of worker `slot`, visible to the watchdog while it runs.
    fn op<T>(&self, slot: usize, what: impl Into<String>, f: impl FnOnce() -> T) -> T {
        self.busy.lock().unwrap()[slot] = Some((what.into(), Instant::now()));
        let r = f();
        self.busy.lock().unwrap()[slot] = None;
        r
    }

    /// The first operation running longer than `limit`.
    fn overdue(&self, limit: Duration) -> Option<String> {
        let busy = self.busy.lock().unwrap();
        busy.iter()
            .flatten()
            .find(|(_, since)| since.elapsed() > limit)
            .map(|(what, since)| format!("{what} (stuck for {:?})", since.elapsed()))
    }
}

/// Writes `payload` to a control file as an agent does (truncate, write, close) and
/// says whether `close` acknowledged it.
fn send(path: &Path, payload: &str) -> Result<(), String> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| format!("open {}: {e}", path.display()))?;
    f.write_all(payload.as_bytes())
        .map_err(|e| format!("write {}: {e}", path.display()))?;
    // SAFETY: the descriptor was just taken out of `f`, which no longer owns it.
    match unsafe { libc::close(f.into_raw_fd()) } {
        0 => Ok(()),
        _ => Err(format!(
            "close {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        )),
    }
}

/// The mixed workload's files: edited ones (never written otherwise), a file under
/// direct writes, one renamed over, and one edited and undone.
fn stress_project(src: &Path) {
    for e in 0..3 {
        fs::write(src.join(format!("e{e}.txt")), "head\nanchor\ntail\n").unwrap();
    }
    big_and_small(src);
    fs::write(src.join("r.txt"), "gen 0\n").unwrap();
    fs::write(src.join("u.txt"), "u: 0\n").unwrap();
}

struct Stress {
    mnt: PathBuf,
    watch: Arc<Watch>,
    deadline: Instant,
    /// Edits whose close returned 0: (file, marker line).
    acked: Mutex<Vec<(String, String)>>,
    errors: Mutex<Vec<String>>,
}

impl Stress {
    fn running(&self) -> bool {
        Instant::now() < self.deadline && !self.watch.stop.load(Ordering::Relaxed)
    }

    fn error(&self, e: String) {
        self.errors.lock().unwrap().push(e);
    }

    fn spawn(
        self: &Arc<Self>,
        name: &str,
        work: fn(&Stress, usize, u64),
    ) -> std::thread::JoinHandle<()> {
        let me = self.clone();
        let slot = self.watch.slot();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut n = 0;
                while me.running() {
                    work(&me, slot, n);
                    n += 1;
                }
            })
            .unwrap()
    }
}

fn single_edit(s: &Stress, slot: usize, n: u64) {
    let file = format!("e{}.txt", n % 3);
    let mark = format!("single-{slot}-{n}");
    let payload = format!(r#"{{"search": "anchor\n", "replace": "anchor\n{mark}\n"}}"#);
    let path = s.mnt.join(format!("{file}.edit"));
    match s
        .watch
        .op(slot, format!("edit {file}"), || send(&path, &payload))
    {
        Ok(()) => s.acked.lock().unwrap().push((file, mark)),
        Err(e) => s.error(e),
    }
}

fn multi_edit(s: &Stress, slot: usize, n: u64) {
    let file = format!("e{}.txt", n % 3);
    let mark = format!("multi-{slot}-{n}");
    let payload = format!(
        r#"[{{"path": "big.txt", "search": "flip: [A-Z]", "replace": "flip: {}", "regex": true}},
            {{"path": "{file}", "search": "anchor\n", "replace": "anchor\n{mark}\n"}}]"#,
        if n.is_multiple_of(2) { 'B' } else { 'A' }
    );
    let path = s.mnt.join(".editfs/edit");
    match s
        .watch
        .op(slot, "multi-file edit", || send(&path, &payload))
    {
        Ok(()) => s.acked.lock().unwrap().push((file, mark)),
        Err(e) => s.error(e),
    }
}

fn direct_write(s: &Stress, slot: usize, n: u64) {
    let r = s.watch.op(slot, "pwrite big.txt", || {
        let f = fs::OpenOptions::new()
            .write(true)
            .open(s.mnt.join("big.txt"))?;
        for k in 0..20 {
            f.write_at(b"X", 100 + 4096 * ((n * 20 + k) % 60))?;
        }
        Ok::<_, std::io::Error>(())
    });
    if let Err(e) = r {
        s.error(format!("pwrite big.txt: {e}"));
    }
}

fn read_all(s: &Stress, slot: usize, n: u64) {
    let file = ["e0.txt", "e1.txt", "e2.txt", "big.txt", "r.txt", "u.txt"][n as usize % 6];
    if let Err(e) = s
        .watch
        .op(slot, format!("read {file}"), || fs::read(s.mnt.join(file)))
    {
        s.error(format!("read {file}: {e}"));
    }
}

fn rename_over(s: &Stress, slot: usize, n: u64) {
    let r = s.watch.op(slot, "rename over r.txt", || {
        fs::write(s.mnt.join("r.tmp"), format!("gen {n}\n"))?;
        fs::rename(s.mnt.join("r.tmp"), s.mnt.join("r.txt"))
    });
    if let Err(e) = r {
        s.error(format!("rename over r.txt: {e}"));
    }
}

fn edit_and_undo(s: &Stress, slot: usize, n: u64) {
    let edit = format!(r#"{{"search": "u: {n}", "replace": "u: {}"}}"#, n + 1);
    let r = s.watch.op(slot, "edit u.txt", || {
        send(&s.mnt.join("u.txt.edit"), &edit)
    });
    let r = r.and_then(|()| {
        s.watch.op(slot, "undo u.txt", || {
            send(&s.mnt.join(".editfs/undo"), "u.txt\n")
        })
    });
    let r = r.and_then(|()| {
        // Undone, the file reads as before the edit; set it up for the next round.
        let next = format!(r#"{{"search": "u: {n}", "replace": "u: {}"}}"#, n + 1);
        s.watch.op(slot, "edit u.txt", || {
            send(&s.mnt.join("u.txt.edit"), &next)
        })
    });
    if let Err(e) = r {
        s.error(e);
        s.watch.stop.store(true, Ordering::Relaxed);
    }
}

/// Seconds of mixed load: short by default, longer with `EDITFS_STRESS_SECS`
/// (scripts/stress.sh).
fn stress_secs() -> u64 {
    std::env::var("EDITFS_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4)
}

#[test]
fn stress_no_operation_hangs_and_no_acknowledged_edit_is_lost() {
    let Some(m) = Mount::start(&[], stress_project) else {
        return;
    };
    let limit = Duration::from_secs(5);
    let s = Arc::new(Stress {
        mnt: m.mnt.clone(),
        watch: Arc::new(Watch::default()),
        deadline: Instant::now() + Duration::from_secs(stress_secs()),
        acked: Mutex::new(Vec::new()),
        errors: Mutex::new(Vec::new()),
    });
    let workers: Vec<_> = [
        ("single-1", single_edit as fn(&Stress, usize, u64)),
        ("single-2", single_edit),
        ("multi", multi_edit),
        ("writer", direct_write),
        ("reader-1", read_all),
        ("reader-2", read_all),
        ("renamer", rename_over),
        ("undoer", edit_and_undo),
    ]
    .into_iter()
    .map(|(name, work)| s.spawn(name, work))
    .collect();
    while workers.iter().any(|w| !w.is_finished()) {
        if let Some(what) = s.watch.overdue(limit) {
            *s.watch.stuck.lock().unwrap() = Some(what);
            s.watch.stop.store(true, Ordering::Relaxed);
            m.abort();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for w in workers {
        w.join().unwrap();
    }
    if let Some(what) = s.watch.stuck.lock().unwrap().take() {
        panic!("an operation hung over {limit:?}: {what}; the connection was aborted");
    }
    let errors = s.errors.lock().unwrap();
    assert!(
        errors.is_empty(),
        "operations failed: {errors:#?}\ndaemon log:\n{}\ntransactions that did not succeed:\n{}",
        m.log(),
        fs::read_to_string(m.mnt.join(".editfs/log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.contains(r#""outcome":"ok""#))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let acked = s.acked.lock().unwrap();
    assert!(acked.len() > 10, "too little work done: {}", acked.len());
    for (file, mark) in acked.iter() {
        let text = fs::read_to_string(m.src.join(file)).unwrap();
        assert!(
            text.lines().any(|l| l == mark),
            "acknowledged edit {mark} is missing from {file}"
        );
    }
    eprintln!(
        "stress: {} acknowledged edits, every one in its file",
        acked.len()
    );
}

/// 3,000 files in `big/`, none of them ever changed by the test below.
fn crowded(src: &Path) {
    let dir = src.join("big");
    fs::create_dir(&dir).unwrap();
    for i in 0..3000 {
        fs::write(dir.join(format!("f{i:05}")), "").unwrap();
    }
}

/// A listing read in many requests keeps its offsets while another process
/// lists the same directory anew and files come and go beside it: every
/// entry that stayed is seen exactly once. When the readers shared one
/// listing of the directory, the slow one resumed at its offset in the
/// other's newer listing and saw some names twice and others not at all.
#[test]
fn a_slow_listing_sees_each_unchanged_entry_once_while_others_list_and_change_the_directory() {
    let Some(m) = Mount::start(&[], crowded) else {
        return;
    };
    let script = r#"
( for i in $(seq 1 400); do : > big/c_$i; rm -f big/c_$((i - 3)); sleep 0.005; done ) &
churn=$!
( while kill -0 $churn 2>/dev/null; do ls -f big >/dev/null; sleep 0.02; done ) &
lister=$!
for run in 1 2 3; do
python3 - <<'PY'
import collections, os, time
seen = collections.Counter()
with os.scandir("big") as it:
    for e in it:
        seen[e.name] += 1
        time.sleep(0.0002)
kept = {n: k for n, k in seen.items() if n.startswith("f")}
twice = sorted(n for n, k in kept.items() if k > 1)
print(len(kept), twice[:3])
PY
done
kill $churn $lister 2>/dev/null
wait
"#;
    let out = m.ok_within(script, Duration::from_secs(120));
    assert_eq!(out, "3000 []\n".repeat(3), "entries missing or seen twice");
}

/// Unlinking each entry as a walk reaches it (a hand-written `rm -r`) removes
/// them all, as natively: the walk resumes where SOURCE's own seek cookie
/// says, not at an index into a listing the removals shifted. With indices,
/// a walk after an `ls` skipped 1,022 of 3,000 files.
#[test]
fn a_walk_that_unlinks_each_entry_it_reaches_removes_them_all() {
    let Some(m) = Mount::start(&[], crowded) else {
        return;
    };
    let script = r#"
ls big >/dev/null
python3 - <<'PY'
import os
n = 0
for e in os.scandir("big"):
    os.unlink(e.path)
    n += 1
print(n, len(os.listdir("big")))
PY
"#;
    let out = m.ok_within(script, Duration::from_secs(120));
    assert_eq!(out, "3000 0\n", "unlinked, left");
}

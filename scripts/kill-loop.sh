#!/usr/bin/env bash
# Kills the daemon with SIGKILL at random moments of a mixed workload, N times
# (default 1000), and checks after each restart (which recovers any cut-short
# commit) that
#   - every file is wholly old or wholly new: all its lines carry one version,
#   - the two files of a multi-file transaction carry the same version,
#   - every edit whose close() returned 0 is in its file.
#
#   scripts/kill-loop.sh          # 1000 kills
#   scripts/kill-loop.sh 50       # a short run
#
# Workload: per worker, single-file edits through F.edit, multi-file edits
# through .editfs/edit, and direct writes (open, write, close) of a third file.
# Needs FUSE. Exits non-zero at the first violation; the work directory stays.
# A watchdog fails any step stuck over 30 s (STUCK_AFTER): it prints each
# process involved with its state and kernel stack, aborts the FUSE connection
# (which frees every process waiting on it) and stops; with KEEP_GOING=1 it
# goes on to the next round instead and counts the hangs.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-1000}
cargo build --release
editfs=$PWD/target/release/editfs
work=$(mktemp -d)
echo "kill loop: $rounds rounds in $work"

exec python3 - "$editfs" "$work" "$rounds" <<'PY'
import os, random, signal, subprocess, sys, time

editfs, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
src, mnt = os.path.join(work, "src"), os.path.join(work, "mnt")
acks = os.path.join(work, "acks")
os.makedirs(src); os.makedirs(mnt); os.makedirs(acks)
WORKERS, LINES = 3, 200
STUCK_AFTER = float(os.environ.get("STUCK_AFTER", "30"))
KEEP_GOING = os.environ.get("KEEP_GOING") == "1"
connection = None  # the mount's FUSE connection number, once mounted
hangs = 0

def describe(pid):
    """A process's command, state, and the kernel stack of each of its threads."""
    def read(path):
        try:
            with open(path) as fh:
                return fh.read().strip()
        except OSError as e:
            return f"({e.strerror})"
    out = [f"  pid {pid}: {read(f'/proc/{pid}/cmdline').replace(chr(0), ' ')}"]
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return out + ["    (gone)"]
    for tid in tids:
        t = f"/proc/{pid}/task/{tid}"
        state = read(f"{t}/stat").rsplit(")", 1)[-1].split()[:1]
        out.append(f"    thread {tid} {read(f'{t}/comm')} state {' '.join(state)} wchan {read(f'{t}/wchan')}")
        out += ["      " + l for l in read(f"{t}/stack").splitlines()]
    return out

def stuck(what, pids):
    """Fails the run: `what` took over STUCK_AFTER seconds."""
    report = [f"FAIL: stuck over {STUCK_AFTER:.0f} s: {what}"]
    for pid in pids:
        report += describe(pid)
    if connection is not None:
        try:
            with open(f"/sys/fs/fuse/connections/{connection}/abort", "w") as fh:
                fh.write("1")
            report.append(f"aborted FUSE connection {connection}")
        except OSError as e:
            report.append(f"cannot abort FUSE connection {connection}: {e}")
    subprocess.run([editfs, "unmount", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=STUCK_AFTER)
    if not KEEP_GOING:
        sys.exit("\n".join(report))
    global hangs
    hangs += 1
    print("\n".join(report), flush=True)

def reap(pid, what):
    """Waits for child `pid` to end, or fails the run as stuck."""
    deadline = time.time() + STUCK_AFTER
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.time() > deadline:
            stuck(what, [pid] + ([daemon.pid] if daemon.poll() is None else []))
            deadline = time.time() + STUCK_AFTER
        time.sleep(0.01)

def body(v):
    return "".join(f"v{v} line {i}\n" for i in range(LINES))

def files(w):
    return [f"single{w}.txt", f"multi{w}a.txt", f"multi{w}b.txt", f"direct{w}.txt"]

for w in range(WORKERS):
    for f in files(w):
        with open(os.path.join(src, f), "w") as fh:
            fh.write(body(0))

def version(path):
    """The one version all lines of `path` carry; fails if they differ."""
    with open(path) as fh:
        lines = fh.read().splitlines()
    want = [f"v{lines[0].split()[0][1:]} line {i}" for i in range(LINES)] if lines else []
    if len(lines) != LINES or lines != want:
        sys.exit(f"FAIL: {path} is torn or partial ({len(lines)} lines, first {lines[:1]}, last {lines[-1:]})")
    return int(lines[0].split()[0][1:])

def acked(w):
    best = {}
    try:
        with open(os.path.join(acks, str(w))) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 2:
                    best[parts[0]] = max(best.get(parts[0], 0), int(parts[1]))
    except FileNotFoundError:
        pass
    return best

def check():
    for w in range(WORKERS):
        got = {f: version(os.path.join(src, f)) for f in files(w)}
        if got[f"multi{w}a.txt"] != got[f"multi{w}b.txt"]:
            sys.exit(f"FAIL: multi-file transaction half applied: {got}")
        for f, v in acked(w).items():
            if got[f] < v:
                sys.exit(f"FAIL: {f} has v{got[f]} but an edit to v{v} was acknowledged")

def block(v):
    return f"<<<<<<< SEARCH\n{body(v)}=======\n{body(v + 1)}>>>>>>> REPLACE\n"

def worker(w):
    """Runs in a child process until killed."""
    rnd = random.Random()
    ack = open(os.path.join(acks, str(w)), "a")
    single, ma, mb, direct = files(w)
    def done(f, v):
        ack.write(f"{f} {v}\n"); ack.flush(); os.fsync(ack.fileno())
    while True:
        op = rnd.randrange(3)
        try:
            if op == 0:
                v = version(os.path.join(mnt, single))
                with open(os.path.join(mnt, single + ".edit"), "w") as fh:
                    fh.write(block(v))
                done(single, v + 1)
            elif op == 1:
                v = version(os.path.join(mnt, ma))
                with open(os.path.join(mnt, ".editfs/edit"), "w") as fh:
                    fh.write(f"{ma}\n{block(v)}{mb}\n{block(v)}")
                done(ma, v + 1); done(mb, v + 1)
            else:
                # A direct write is not a transaction: only a finished one counts.
                v = version(os.path.join(mnt, direct))
                tmp = os.path.join(mnt, direct + ".tmp")
                with open(tmp, "w") as fh:
                    fh.write(body(v + 1))
                os.rename(tmp, os.path.join(mnt, direct))
                done(direct, v + 1)
        except (OSError, SystemExit):
            time.sleep(0.01)

def mounted():
    """The FUSE connection number of the mount, or None when not mounted."""
    with open("/proc/self/mountinfo") as fh:
        for l in fh:
            fields = l.split()
            if fields[4] == mnt:
                return int(fields[2].split(":")[1])
    return None

def start():
    global connection
    log = open(os.path.join(work, "daemon.log"), "ab")
    d = subprocess.Popen([editfs, "mount", src, mnt], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    began = time.time()
    while (conn := mounted()) is None:
        if d.poll() is not None:
            sys.exit(f"FAIL: the daemon did not mount again (see {work}/daemon.log)")
        if time.time() - began > STUCK_AFTER:
            stuck("mounting again", [d.pid])
        time.sleep(0.01)
    connection = conn
    return d

for r in range(1, rounds + 1):
    daemon = start()
    # The mount recovered whatever the last kill cut short: check SOURCE now.
    check()
    kids = []
    for w in range(WORKERS):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            worker(w)
            os._exit(0)
        kids.append(pid)
    time.sleep(random.uniform(0.05, 1.5))
    daemon.send_signal(signal.SIGKILL)
    try:
        daemon.wait(timeout=STUCK_AFTER)
    except subprocess.TimeoutExpired:
        stuck("the daemon dying after SIGKILL", [daemon.pid] + kids)
        daemon.wait(timeout=STUCK_AFTER)
    for pid in kids:
        os.kill(pid, signal.SIGKILL)
        reap(pid, "a worker dying after SIGKILL")
    try:
        subprocess.run([editfs, "unmount", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=STUCK_AFTER)
    except subprocess.TimeoutExpired:
        stuck("editfs unmount", kids)
    if r % 10 == 0 or r == rounds:
        print(f"round {r}/{rounds}: every file whole, every acknowledged edit kept; {hangs} hangs", flush=True)

daemon = start()
check()
daemon.send_signal(signal.SIGTERM)
try:
    daemon.wait(timeout=STUCK_AFTER)
except subprocess.TimeoutExpired:
    stuck("the daemon stopping on SIGTERM", [daemon.pid])
print(f"kill loop: {rounds} kills, no torn file, no lost edit, {hangs} hangs recovered by aborting the connection")
sys.exit(1 if hangs else 0)
PY

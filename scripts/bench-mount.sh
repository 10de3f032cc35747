#!/usr/bin/env bash
# Benchmarks the same workloads on a native directory, an editfs mount of it and a
# bindfs mount of it (both mirror the SAME source directory), and prints, per workload,
# the median time per filesystem, the ratios editfs/native and bindfs/native, and how
# editfs compares with bindfs.
#
#   scripts/bench-mount.sh            # REPS=5 (fast workloads and reads), HEAVY_REPS=3, RT_REPS=50
#
# Environment: REPS, HEAVY_REPS, RT_REPS, RTIN_REPS (repetitions), BIG_MIB (size of the
# sequential read and write files, default 1024), EDITFS=path (an editfs binary to
# measure instead of building this tree's, to compare two versions back to back),
# EDITFS_ARGS="--threads 8" (more options for the editfs mount, to compare settings),
# KEEP=1 (keep the temp dir and print its path), SETTLE_S (seconds the disk is left
# to settle before each sequential write, default 3),
# ROWS="grep git rss" (run only these rows: floor cold seq write overwrite find
# findcold grep grepcold untar rmrf git gitcold cargo gitcrate rt rtin rtnew cp; rss is
# measured after grep).
# Cold rows drop the page cache, dentries and inodes before each repetition (root
# only; the rows are left out otherwise): for a FUSE view that also drops the
# kernel's cached names and attributes of the mount. The
# real workload is a copy of regex-syntax from ~/.cargo/registry/src, built offline
# (its optional and dev dependencies dropped); the row is left out without it.
# Installs fuse3 (fusermount3) and bindfs with apt-get when they are missing (as root).
# Everything lives in a temp dir under /tmp, removed at exit; every mount is unmounted
# at exit, also on failure or Ctrl-C. A workload that fails on a view is shown as FAIL
# and its command and error are printed after the table; the script then exits 1.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
repo_dir=$PWD

REPS=${REPS:-5}
HEAVY_REPS=${HEAVY_REPS:-3}
RT_REPS=${RT_REPS:-50}
RTIN_REPS=${RTIN_REPS:-300}
BIG_MIB=${BIG_MIB:-1024}
ROWS=${ROWS:-}
CMD_TIMEOUT=${CMD_TIMEOUT:-300}
SETTLE_S=${SETTLE_S:-3}

# want ROW...: whether any of these rows is to run
want() {
  [ -z "$ROWS" ] && return 0
  local r
  for r in "$@"; do [[ " $ROWS " == *" $r "* ]] && return 0; done
  return 1
}
say() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'bench-mount: %s\n' "$*" >&2; exit 2; }

# ---------------------------------------------------------------- prerequisites
if [ "${BASH_VERSINFO[0]}" -lt 5 ]; then die "needs bash >= 5 (EPOCHREALTIME)"; fi
need_pkgs=()
command -v fusermount3 >/dev/null 2>&1 || need_pkgs+=(fuse3)
command -v bindfs >/dev/null 2>&1 || need_pkgs+=(bindfs)
for tool in git python3 tar find grep; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required"
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing ${need_pkgs[*]} with apt-get"
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need_pkgs[@]}" >/dev/null 2>&1 ||
    die "apt-get install ${need_pkgs[*]} failed"
fi
[ -c /dev/fuse ] || die "/dev/fuse does not exist: FUSE is not available here (load the fuse module or run the container with --device /dev/fuse)"

if [ -n "${EDITFS:-}" ]; then
  editfs=$EDITFS
else
  say "cargo build --release"
  cargo build --release --quiet
  editfs=$repo_dir/target/release/editfs
fi
[ -x "$editfs" ] || die "no $editfs after the build"

# ---------------------------------------------------------------- temp dir, mounts, cleanup
work=$(mktemp -d /tmp/editfs-bench.XXXXXX)
src=$work/source        # the directory every view mirrors
mnt_e=$work/mnt-editfs
mnt_b=$work/mnt-bindfs
mkdir -p "$src" "$mnt_e" "$mnt_b" "$work/editfs-state" "$work/err"

is_mounted() { mountpoint -q "$1" 2>/dev/null; }
unmount_all() {
  if is_mounted "$mnt_e"; then
    "$editfs" unmount "$mnt_e" 2>/dev/null || fusermount3 -u "$mnt_e" 2>/dev/null || umount -l "$mnt_e" 2>/dev/null || true
  fi
  if is_mounted "$mnt_b"; then
    fusermount3 -u "$mnt_b" 2>/dev/null || umount -l "$mnt_b" 2>/dev/null || true
  fi
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  cd /
  unmount_all
  # the daemon finishes its own work after the unmount (its last checkpoint, freeing
  # what it dropped), in the state directory below $work: wait for it to end
  local i
  for ((i = 0; i < 100; i++)); do
    [ -n "${editfs_pid:-}" ] && kill -0 "$editfs_pid" 2>/dev/null || break
    sleep 0.1
  done
  if is_mounted "$mnt_e" || is_mounted "$mnt_b"; then
    echo "bench-mount: a mount is still active; leaving $work in place" >&2
  elif [ "${KEEP:-0}" = 1 ]; then
    echo "bench-mount: kept $work" >&2
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# git must not refuse the repository when a view reports another owner, and must not
# read the user's configuration.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'

# ---------------------------------------------------------------- data (written directly in SOURCE)
say "generating data in $src"
! want cold seq || dd if=/dev/zero of="$src/big.bin" bs=1M count="$BIG_MIB" status=none

python3 - "$src" "$work/small-gen" <<'PY'
import os, sys, random
src, small = sys.argv[1], sys.argv[2]
random.seed(1)
words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()

def body(i):
    lines = [f"file {i}: " + " ".join(random.choice(words) for _ in range(12)) for _ in range(4)]
    if i % 97 == 0:
        lines.append("the needle_xyzzy is here")
    return "\n".join(lines) + "\n"

# 50 dirs x 20 subdirs x 50 files = 50,000 files
n = 0
for a in range(50):
    for b in range(20):
        d = os.path.join(src, "tree", f"d{a:02}", f"s{b:02}")
        os.makedirs(d)
        for c in range(50):
            with open(os.path.join(d, f"f{c:02}.txt"), "w") as f:
                f.write(body(n))
            n += 1

# 10 x 10 x 50 = 5,000 files for the untar / rm -rf workload
for a in range(10):
    for b in range(10):
        d = os.path.join(small, "x", f"d{a}", f"s{b}")
        os.makedirs(d)
        for c in range(50):
            with open(os.path.join(d, f"f{c:02}.txt"), "w") as f:
                f.write(body(c))

# git repository: a copy of a real source tree is added by the shell; ~2,000 generated files
for a in range(4):
    d = os.path.join(src, "repo", "gen", f"mod{a}")
    os.makedirs(d)
    for c in range(500):
        with open(os.path.join(d, f"unit{c:03}.rs"), "w") as f:
            f.write(f"// unit {a}/{c}\n")
            for k in range(20):
                f.write(f"pub fn f{k}_{c}(x: u64) -> u64 {{ x.wrapping_mul({k + 3}) ^ {c} }}\n")

# the 100 KiB file edited by the round trips
lines, size, i = [], 0, 0
while size < 100 * 1024 - 200:
    l = f"line {i:05}: " + " ".join(random.choice(words) for _ in range(8)) + "\n"
    lines.append(l); size += len(l); i += 1
lines.insert(len(lines) // 2, "marker = alpha\n")
lines.insert(len(lines) // 3, "counter = 0\n")
os.makedirs(os.path.join(src, "edit"))
with open(os.path.join(src, "edit", "big.txt"), "w") as f:
    f.write("".join(lines))
PY
tar cf "$work/small.tar" -C "$work/small-gen" x
rm -rf "$work/small-gen"
head -c 102400 "$src/edit/big.txt" >"$work/ref100k.bin"
cp "$src/edit/big.txt" "$work/big.txt.orig"

cp -r "$repo_dir/src" "$src/repo/src"
cp "$repo_dir/Cargo.toml" "$src/repo/"
(
  cd "$src/repo"
  git init -q
  git add -A
  git -c user.name=bench -c user.email=bench@example.invalid commit -q -m "bench repository"
  git status --porcelain >/dev/null
)
repo_files=$(cd "$src/repo" && git ls-files | wc -l)

# a real crate: incremental cargo build and git status in it
crate_src=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name 'regex-syntax-0.8.*' 2>/dev/null | sort | tail -1)
if [ -n "$crate_src" ] && command -v cargo >/dev/null && want cargo gitcrate; then
  cp -r "$crate_src" "$src/crate"
  rm -f "$src/crate/Cargo.lock"
  python3 "$repo_dir/scripts/offline-crate" "$src/crate/Cargo.toml"
  (
    cd "$src/crate"
    git init -q
    printf 'target/\n' >.gitignore
    git add -A
    git -c user.name=bench -c user.email=bench@example.invalid commit -q -m "real crate"
  )
  say "building $(basename "$crate_src") once, natively"
  (cd "$src/crate" && cargo build --offline --quiet) >"$work/err/crate-build" 2>&1 ||
    { cat "$work/err/crate-build" >&2; die "the crate copy does not build natively"; }
  crate_name=$(basename "$crate_src")
else
  crate_name=""
fi
(cd "$src" && mkdir -p small && for i in $(seq 300); do head -c 4096 /dev/urandom >"small/f$i"; done)

printf '<<<<<<< SEARCH\nmarker = alpha\n=======\nmarker = beta\n>>>>>>> REPLACE\n' >"$work/payload-a"
printf '<<<<<<< SEARCH\nmarker = beta\n=======\nmarker = alpha\n>>>>>>> REPLACE\n' >"$work/payload-b"

# ---------------------------------------------------------------- mounts
say "mounting editfs and bindfs on $src"
if ! "$editfs" mount "$src" "$mnt_e" --daemon --state-dir "$work/editfs-state" ${EDITFS_ARGS:-} >"$work/err/mount-editfs" 2>&1; then
  cat "$work/err/mount-editfs" >&2
  [ -f "$work/editfs-state/daemon.log" ] && tail -20 "$work/editfs-state/daemon.log" >&2
  die "editfs could not mount $src on $mnt_e (see above)"
fi
is_mounted "$mnt_e" || die "editfs mount returned but $mnt_e is not a mount point"
editfs_pid=$(grep -o 'by pid [0-9]*' "$work/err/mount-editfs" | grep -o '[0-9]*$' || true)
[ -d "$mnt_e/tree" ] || die "editfs is mounted but $mnt_e/tree is missing"
if ! bindfs "$src" "$mnt_b" 2>"$work/err/mount-bindfs"; then
  cat "$work/err/mount-bindfs" >&2
  die "bindfs could not mount $src on $mnt_b"
fi
is_mounted "$mnt_b" || die "bindfs returned but $mnt_b is not a mount point"

views=(native editfs bindfs)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A root=([native]=$src [editfs]=$mnt_e [bindfs]=$mnt_b)

# ---------------------------------------------------------------- timing helpers
declare -A RES     # RES[workload|view] = median in ms, or FAIL
declare -A NOTE    # NOTE[workload|view] = a correctness remark
failures=()
now_us() { local t=${EPOCHREALTIME/./}; echo "$((10#$t))"; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) exit 1; if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

fail() { # workload view description errfile
  RES["$1|$2"]=FAIL
  failures+=("$1 on $2: \$ $3"$'\n'"   -> $(head -c 600 "$4" | tr '\n' ' ')")
}

# time_cmd WORKLOAD VIEW REPS WARMUPS CMD...   (CMD runs in the view's root)
time_cmd() {
  local w=$1 v=$2 reps=$3 warm=$4; shift 4
  local err=$work/err/$RANDOM t0 t1 i samples=()
  for ((i = 0; i < warm + reps; i++)); do
    t0=$(now_us)
    if ! (cd "${root[$v]}" && timeout "$CMD_TIMEOUT" "$@") >/dev/null 2>"$err"; then
      fail "$w" "$v" "cd ${root[$v]} && $*" "$err"
      return 0
    fi
    t1=$(now_us)
    ((i < warm)) || samples+=("$(((t1 - t0)))")
  done
  RES["$w|$v"]=$(printf '%s\n' "${samples[@]}" | median | awk '{printf "%.3f", $1/1000}')
}

# ---------------------------------------------------------------- workloads
W_ORDER=()
declare -A W_LABEL

add_w() { want "$1" || return 0; W_ORDER+=("$1"); W_LABEL[$1]=$2; }
can_drop=0
[ "$(id -u)" = 0 ] && [ -w /proc/sys/vm/drop_caches ] && can_drop=1
add_w floor "one round trip (statfs), us"
[ "$can_drop" = 0 ] || add_w cold "1 GiB sequential read (cat), cold"
add_w seq "1 GiB sequential read (cat), warm"
add_w write "1 GiB sequential write (dd bs=1M)"
add_w overwrite "overwrite 300 files (O_TRUNC)"
add_w find "find -printf %s, 50k files, warm"
[ "$can_drop" = 0 ] || add_w findcold "find -printf %s, 50k files, cold"
add_w grep "grep -r, 50k files, warm"
[ "$can_drop" = 0 ] || add_w grepcold "grep -r, 50k files, cold"
add_w untar "tar xf 5k files"
add_w rmrf "rm -rf 5k files"
add_w git "git status, $repo_files files, warm"
[ "$can_drop" = 0 ] || add_w gitcold "git status, $repo_files files, cold"
[ -z "$crate_name" ] || {
  add_w cargo "cargo build, incremental, $crate_name"
  add_w gitcrate "git status, $crate_name"
}
add_w rt "edit round trip, 2x cat (+2 execs)"
add_w rtin "edit round trip, in-process (p90 below)"
add_w rtnew "edit round trip, new content each time"
add_w cp "ref: cp 100 KiB file"
[ "$BIG_MIB" = 1024 ] || {
  W_LABEL[seq]="$BIG_MIB MiB sequential read (cat), warm"
  W_LABEL[cold]="$BIG_MIB MiB sequential read (cat), cold"
  W_LABEL[write]="$BIG_MIB MiB sequential write (dd bs=1M)"
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# time_cold WORKLOAD VIEW REPS CMD...: as time_cmd, with the caches dropped before
# each repetition (outside the timing)
time_cold() {
  local w=$1 v=$2 reps=$3; shift 3
  [ "$can_drop" = 1 ] && want "$w" || return 0
  local err=$work/err/$RANDOM t0 t1 i samples=()
  for ((i = 0; i < reps; i++)); do
    drop_caches
    t0=$(now_us)
    if ! (cd "${root[$v]}" && timeout "$CMD_TIMEOUT" "$@") >/dev/null 2>"$err"; then
      fail "$w" "$v" "cd ${root[$v]} && $*" "$err"
      return 0
    fi
    t1=$(now_us)
    samples+=("$((t1 - t0))")
  done
  RES["$w|$v"]=$(printf '%s\n' "${samples[@]}" | median | awk '{printf "%.3f", $1/1000}')
}
# one request and its answer, in us: the kernel never caches statfs, so on a FUSE
# view each call is a request the daemon answers with one statfs of its own
round_trip() {
  python3 - "$1" <<'PY'
import os, sys, time
runs = []
for _ in range(5):
    t = time.perf_counter()
    for _ in range(2000):
        os.statvfs(sys.argv[1])
    runs.append((time.perf_counter() - t) / 2000 * 1e6)
print(sorted(runs)[2])
PY
}

# in_process_round_trips FILE N [new]: the edit round trip exactly as an agent's tool
# makes it, with no process start: open F.edit (O_WRONLY|O_TRUNC), write the block,
# close, read F.status; N timed (plus 4 untimed first). Without `new` the two payloads
# alternate, an even number in all, so the file ends as it began. With `new` every
# round trip writes a content the store has never kept (the line `counter = K` becomes
# `counter = K+1`), so each commit also stores its new version: the path of an agent's
# real edits, where the two alternating contents are stored already. Prints the median
# and the 90th percentile, in ms.
in_process_round_trips() {
  python3 - "$1" "$2" "${3:-}" "$work/payload-a" "$work/payload-b" <<'PY'
import os, re, sys, time
f, n, new = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "new"
if new:
    k = int(re.search(rb"^counter = (\d+)$", open(f, "rb").read(), re.M).group(1))
    payload = lambda i: b"<<<<<<< SEARCH\ncounter = %d\n=======\ncounter = %d\n>>>>>>> REPLACE\n" % (k + i, k + i + 1)
else:
    pair = [open(p, "rb").read() for p in sys.argv[4:6]]
    payload = lambda i: pair[i % 2]
    n += n % 2
samples = []
for i in range(n + 4):
    body = payload(i)
    t = time.perf_counter()
    fd = os.open(f + ".edit", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, body)
    os.close(fd)
    with open(f + ".status", "rb") as s:
        status = s.read()
    took = time.perf_counter() - t
    if not status.startswith(b"OK "):
        sys.exit("round trip %d: %s" % (i, status[:300].decode(errors="replace")))
    if i >= 4:
        samples.append(took * 1e3)
samples.sort()
print("%.3f %.3f" % (samples[len(samples) // 2], samples[int(len(samples) * 0.9)]))
PY
}

# correctness: each view must list/grep/git-status like the native directory
check_same() { # workload view file-native file-view what
  if ! cmp -s "$3" "$4"; then
    NOTE["$1|$2"]="$5 differs from native"
    failures+=("$1 on $2: $5 differs from native: $(diff "$3" "$4" | head -5 | tr '\n' ' ')")
  fi
}

# untar, every view before any rm -rf: on ext4 without a journal, an inode
# allocation skips the inodes freed in the last minute one by one, so a tar
# right after an rm -rf is slowed by the rm, and by how much depends on the
# order of the views. Each view extracts into trees of its own (kept for the
# rm -rf row); no row frees inodes between them.
untar_all() {
  local v r i t0 t1 n ut
  rm -rf "$src/untar"
  mkdir "$src/untar"
  for v in "${views[@]}"; do
    r=${root[$v]} ut=()
    say "$v: tar xf"
    for ((i = 0; i < REPS; i++)); do
      if ! mkdir "$r/untar/$v-$i" 2>"$work/err/untar-$v"; then
        fail untar "$v" "mkdir $r/untar/$v-$i" "$work/err/untar-$v"; break
      fi
      t0=$(now_us)
      if ! timeout "$CMD_TIMEOUT" tar xf "$work/small.tar" -C "$r/untar/$v-$i" 2>"$work/err/untar-$v"; then
        fail untar "$v" "tar xf $work/small.tar -C $r/untar/$v-$i" "$work/err/untar-$v"; break
      fi
      t1=$(now_us); ut+=("$((t1 - t0))")
      n=$(find "$src/untar/$v-$i" -type f | wc -l)
      if [ "$n" != 5000 ]; then
        failures+=("untar on $v: $n files extracted instead of 5000"); RES[untar|$v]=FAIL; break
      fi
    done
    if [ "${RES[untar|$v]:-}" != FAIL ]; then
      RES[untar|$v]=$(printf '%s\n' "${ut[@]}" | median | awk '{printf "%.3f", $1/1000}')
    else
      RES[rmrf|$v]=FAIL
    fi
  done
}
want untar rmrf && untar_all


# interleaved ROW REPS STEP: times `STEP run VIEW I` for every view in each
# repetition I, back to back, each repetition starting at the next view, after
# `STEP prepare VIEW I` (untimed). The big sequential rows run this way: their times
# move with the disk's and the page cache's state, which drifts over the minutes
# between one view's rows and the next's, so rows timed view after view compared the
# drift more than the views (the 1 GiB write read 1.48x native that way, 1.04x
# interleaved).
interleaved() {
  local w=$1 reps=$2 step=$3 n=${#views[@]} i k v t0 t1
  declare -A samples=()
  for ((i = 0; i < reps; i++)); do
    for ((k = 0; k < n; k++)); do
      v=${views[(i + k) % n]}
      [ "${RES[$w|$v]:-}" = FAIL ] && continue
      say "$v: ${W_LABEL[$w]} ($((i + 1))/$reps)"
      "$step" prepare "$v" "$i"
      t0=$(now_us)
      if ! "$step" run "$v" "$i" >/dev/null 2>"$work/err/$w-$v"; then
        fail "$w" "$v" "$("$step" describe "$v" "$i")" "$work/err/$w-$v"
        continue
      fi
      t1=$(now_us)
      samples[$v]+="$((t1 - t0)) "
    done
  done
  for v in "${views[@]}"; do
    [ "${RES[$w|$v]:-}" = FAIL ] ||
      RES[$w|$v]=$(printf '%s\n' ${samples[$v]} | median | awk '{printf "%.3f", $1/1000}')
  done
}

# Reading the big file with the page cache dropped first.
cold_read() {
  case $1 in
    prepare) drop_caches ;;
    run) cat "${root[$2]}/big.bin" ;;
    describe) echo "cat ${root[$2]}/big.bin" ;;
  esac
}

# Reading the big file from the page cache (read once before the row).
warm_read() {
  case $1 in
    prepare) ;;
    run) cat "${root[$2]}/big.bin" ;;
    describe) echo "cat ${root[$2]}/big.bin" ;;
  esac
}

# Writing a new file of BIG_MIB MiB. Every write makes a file of its own, removed
# only after the row: on this kind of disk a removal's discards slow the next writer
# that reuses its blocks, and a removal through editfs keeps the file as a pre-image
# instead, so removing between writes would time the views' removals.
seq_write() {
  case $1 in
    prepare) sync; sleep "$SETTLE_S" ;;
    run) dd if=/dev/zero of="${root[$2]}/written-$2-$3.bin" bs=1M count="$BIG_MIB" status=none ;;
    describe) echo "dd if=/dev/zero of=${root[$2]}/written-$2-$3.bin bs=1M count=$BIG_MIB" ;;
  esac
}

if want cold && [ "$can_drop" = 1 ]; then interleaved cold "$REPS" cold_read; fi
if want seq; then
  for v in "${views[@]}"; do cat "${root[$v]}/big.bin" >/dev/null; done
  interleaved seq "$REPS" warm_read
fi
if want write; then
  interleaved write "$HEAVY_REPS" seq_write
  rm -f "${root[native]}"/written-*.bin
  sync
fi

for v in "${views[@]}"; do
  r=${root[$v]}
  if want floor; then
    say "$v: one round trip"
    RES[floor|$v]=$(round_trip "$r" 2>"$work/err/floor-$v") || fail floor "$v" "statvfs $r" "$work/err/floor-$v"
  fi

  if want overwrite; then
    say "$v: overwrite 300 files"
    time_cmd overwrite "$v" "$REPS" 1 python3 -c '
import os
for n in os.listdir("small"):
    fd = os.open("small/" + n, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"x" * 4096)
    os.close(fd)'
  fi

  if want find findcold; then
    say "$v: find"
    (cd "$r" && find tree -printf '%p %s\n' | sort) >"$work/find-$v.out" 2>"$work/err/find-$v" ||
      fail find "$v" "cd $r && find tree -printf '%p %s\n'" "$work/err/find-$v"
    [ "${RES[find|$v]:-}" = FAIL ] || {
      check_same find "$v" "$work/find-native.out" "$work/find-$v.out" "find output"
      ! want find || time_cmd find "$v" "$REPS" 0 find tree -printf '%s\n'
      time_cold findcold "$v" "$REPS" find tree -printf '%s\n'
    }
  fi

  if want grep grepcold; then
    say "$v: grep -r"
    (cd "$r" && grep -r needle_xyzzy tree | sort) >"$work/grep-$v.out" 2>"$work/err/grep-$v" ||
      fail grep "$v" "cd $r && grep -r needle_xyzzy tree" "$work/err/grep-$v"
    [ "${RES[grep|$v]:-}" = FAIL ] || {
      check_same grep "$v" "$work/grep-native.out" "$work/grep-$v.out" "grep output"
      ! want grep || time_cmd grep "$v" "$HEAVY_REPS" 0 grep -r needle_xyzzy tree
      time_cold grepcold "$v" "$HEAVY_REPS" grep -r needle_xyzzy tree
    }
    [ "$v" != editfs ] || [ -z "$editfs_pid" ] ||
      rss_walk_kib=$(awk '/^VmRSS/ {print $2}' "/proc/$editfs_pid/status" 2>/dev/null || echo "")
  fi

  if want rmrf && [ "${RES[rmrf|$v]:-}" != FAIL ]; then
    say "$v: rm -rf"
    rm_=()
    for ((i = 0; i < REPS; i++)); do
      [ -d "$src/untar/$v-$i/x" ] || { RES[rmrf|$v]=FAIL; failures+=("rmrf on $v: no tree $i to remove"); break; }
      t0=$(now_us)
      if ! timeout "$CMD_TIMEOUT" rm -rf "$r/untar/$v-$i/x" 2>"$work/err/rmrf-$v"; then
        fail rmrf "$v" "rm -rf $r/untar/$v-$i/x" "$work/err/rmrf-$v"; break
      fi
      t1=$(now_us); rm_+=("$((t1 - t0))")
      if [ -e "$src/untar/$v-$i/x" ]; then
        failures+=("rmrf on $v: $src/untar/$v-$i/x still exists after rm -rf"); RES[rmrf|$v]=FAIL; break
      fi
    done
    [ "${RES[rmrf|$v]:-}" = FAIL ] || RES[rmrf|$v]=$(printf '%s\n' "${rm_[@]}" | median | awk '{printf "%.3f", $1/1000}')
  fi

  if want git gitcold; then
    say "$v: git status"
    # warm-up: refreshes the index for this view's stat data (written through the view)
    if (cd "$r/repo" && git status --porcelain && git status --porcelain) >"$work/git-$v.out" 2>"$work/err/git-$v"; then
      check_same git "$v" "$work/git-native.out" "$work/git-$v.out" "git status output"
      ! want git || time_cmd git "$v" "$REPS" 0 git -C repo status --porcelain
      time_cold gitcold "$v" "$REPS" git -C repo status --porcelain
    else
      fail git "$v" "cd $r/repo && git status --porcelain" "$work/err/git-$v"
    fi
  fi

  if [ -n "$crate_name" ]; then
    say "$v: cargo build and git status in $crate_name"
    samples=()
    (cd "$r/crate" && cargo build --offline --quiet) >/dev/null 2>&1 || true # this view's warm-up
    for ((i = 0; i < HEAVY_REPS; i++)); do
      touch "$r/crate/src/lib.rs"
      t0=$(now_us)
      if ! (cd "$r/crate" && timeout "$CMD_TIMEOUT" cargo build --offline --quiet) >/dev/null 2>"$work/err/cargo-$v"; then
        fail cargo "$v" "cd $r/crate && cargo build --offline" "$work/err/cargo-$v"; break
      fi
      t1=$(now_us)
      samples+=("$((t1 - t0))")
    done
    [ "${RES[cargo|$v]:-}" = FAIL ] || RES[cargo|$v]=$(printf '%s\n' "${samples[@]}" | median | awk '{printf "%.3f", $1/1000}')
    git -C "$r/crate" status --porcelain >/dev/null 2>&1 || true
    time_cmd gitcrate "$v" "$REPS" 1 git -C crate status --porcelain
  fi

  if [ "$v" = editfs ] && [ -n "$editfs_pid" ]; then
    rss_kib=$(awk '/^VmRSS/ {print $2}' "/proc/$editfs_pid/status" 2>/dev/null || echo "")
  fi

  if want cp; then
    say "$v: cp 100 KiB (reference)"
    time_cmd cp "$v" "$RT_REPS" 2 cp "$work/ref100k.bin" edit/copy.bin
    rm -f "$src/edit/copy.bin"
  fi

  if want rt; then
    if [ "$v" = editfs ]; then
      say "editfs: $RT_REPS edit round trips"
      f=$mnt_e/edit/big.txt
      samples=()
      for ((i = 0; i < RT_REPS + 2; i++)); do
        if ((i % 2)); then p=$work/payload-b; else p=$work/payload-a; fi
        t0=$(now_us)
        if ! cat "$p" >"$f.edit" 2>"$work/err/rt"; then
          { echo "(cat $p > $f.edit failed)"; cat "$f.status" 2>&1 | head -15; } >>"$work/err/rt"
          fail rt editfs "cat $p > $f.edit; cat $f.status" "$work/err/rt"; break
        fi
        cat "$f.status" >/dev/null
        t1=$(now_us)
        ((i < 2)) || samples+=("$((t1 - t0))")
      done
      if [ "${RES[rt|editfs]:-}" != FAIL ]; then
        head -1 "$f.status" | grep -q '^OK ' ||
          failures+=("rt on editfs: last status is not OK: $(head -3 "$f.status" | tr '\n' ' ')")
        cmp -s "$src/edit/big.txt" "$work/big.txt.orig" ||
          failures+=("rt on editfs: after an even number of round trips $src/edit/big.txt differs from the original")
        RES[rt|editfs]=$(printf '%s\n' "${samples[@]}" | median | awk '{printf "%.3f", $1/1000}')
      fi
    fi
  fi

  if want rtin && [ "$v" = editfs ]; then
    say "editfs: $RTIN_REPS edit round trips in one process"
    if in_process_round_trips "$mnt_e/edit/big.txt" "$RTIN_REPS" >"$work/rtin" 2>"$work/err/rtin"; then
      read -r rtin_median rtin_p90 <"$work/rtin"
      RES[rtin|editfs]=$rtin_median
      cmp -s "$src/edit/big.txt" "$work/big.txt.orig" ||
        failures+=("rtin on editfs: after an even number of round trips $src/edit/big.txt differs from the original")
    else
      fail rtin editfs "in-process round trips on $mnt_e/edit/big.txt" "$work/err/rtin"
    fi
  fi

  # after rt and rtin, which check that the file ends as it began
  if want rtnew && [ "$v" = editfs ]; then
    say "editfs: $RTIN_REPS edit round trips with new content, in one process"
    if in_process_round_trips "$mnt_e/edit/big.txt" "$RTIN_REPS" new >"$work/rtnew" 2>"$work/err/rtnew"; then
      read -r rtnew_median rtnew_p90 <"$work/rtnew"
      RES[rtnew|editfs]=$rtnew_median
    else
      fail rtnew editfs "in-process round trips with new content on $mnt_e/edit/big.txt" "$work/err/rtnew"
    fi
  fi
done

# ---------------------------------------------------------------- table
ratio() { # a b -> a/b
  case "$1$2" in *FAIL* | *-*) echo "-"; return ;; esac
  awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2fx", a/b; else print "-"}'
}
verdict() { # editfs bindfs
  case "$1$2" in *FAIL* | *-*) echo "-"; return ;; esac
  awk -v e="$1" -v b="$2" 'BEGIN {
    if (e <= b) printf "faster by %.0f%%", (b - e) / b * 100
    else printf "slower by %.0f%%", (e - b) / b * 100 }'
}
fmt() { case "$1" in FAIL | -) printf '%s' "$1" ;; *) awk -v x="$1" 'BEGIN {printf (x >= 100 ? "%.0f" : x >= 10 ? "%.1f" : "%.2f"), x}' ;; esac; }

echo
echo "editfs mount benchmark: $(nproc) CPUs, $(uname -r); medians in ms"
echo "load average before the run: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "reps: $HEAVY_REPS (write, grep, cargo), $REPS (reads, find, tar, rm, git, overwrite), $RT_REPS (edit round trip, cp)"
printf '%-38s %9s %9s %9s %9s %9s  %s\n' workload native editfs bindfs e/native b/native "editfs vs bindfs"
printf '%s\n' "$(printf '%.0s-' {1..112})"
for w in "${W_ORDER[@]}"; do
  n=${RES[$w|native]:--} e=${RES[$w|editfs]:--} b=${RES[$w|bindfs]:--}
  printf '%-38s %9s %9s %9s %9s %9s  %s\n' "${W_LABEL[$w]}" "$(fmt "$n")" "$(fmt "$e")" "$(fmt "$b")" \
    "$(ratio "$e" "$n")" "$(ratio "$b" "$n")" "$(verdict "$e" "$b")"
done
[ -z "${rss_walk_kib:-}" ] || echo "editfs daemon RSS after walking 50,000 files (find, grep -r): $((rss_walk_kib / 1024)) MiB"
[ -z "${rss_kib:-}" ] || echo "editfs daemon RSS after the rows above: $((rss_kib / 1024)) MiB"
echo "round trip = statvfs of the view's root, in us: on editfs and bindfs one request to the"
echo "daemon and its answer (the kernel caches none), natively the system call alone."
echo "edit round trip (100 KiB file, 1 block) = cat PAYLOAD > F.edit; cat F.status: two"
echo "process starts included (editfs only; native and bindfs have no control files)."
echo "in-process: open F.edit, write, close, read F.status from one python process, $RTIN_REPS times."
echo "new content: the same, each round trip a content the store has not kept (stored too)."
[ -z "${rtin_p90:-}" ] || echo "in-process edit round trip: median ${RES[rtin|editfs]} ms, p90 $rtin_p90 ms"
[ -z "${rtnew_p90:-}" ] || echo "in-process edit round trip, new content: median ${RES[rtnew|editfs]} ms, p90 $rtnew_p90 ms"
echo "The cp row is a reference: a plain 100 KiB write on each view."
for k in "${!NOTE[@]}"; do echo "note: $k: ${NOTE[$k]}"; done

if [ ${#failures[@]} -gt 0 ]; then
  echo
  echo "FAILURES:"
  printf ' - %s\n' "${failures[@]}"
  exit 1
fi

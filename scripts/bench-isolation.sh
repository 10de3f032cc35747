#!/usr/bin/env bash
# Measures how far one caller can delay another, and what memory and disk it can
# make the daemon take. A root daemon serves SOURCE with `-o allow_other`; an
# attacker (nobody) sends each worst case below in a loop for ATTACK_S seconds,
# while another user (uid VICTIM_UID) does one-block edits of its own small file
# and direct writes of another, back to back. Per attack it prints that user's
# round trip (p50 and worst, edits and direct writes apart), the daemon's peak RSS
# during the attack (VmHWM, reset before each one) and the state directory's size.
#
#   scripts/bench-isolation.sh              # release build of this tree
#
# Attacks:
#   idle     nothing (the baseline)
#   misses   2,250 one-line SEARCHes that match nothing, against a 1 MB file
#   regex    12 regex operations that are slow to run, against a 1 MB file
#   touched  a slow payload against a 1.66 MB file that the attacker appends to
#            while it is decided
#   sparse   a 40-byte edit (and a direct write) of a 2 GiB sparse file
#   distinct edits of FILES distinct files with large blocks
#   streams  STREAMS processes at once, each sending the regex payload to a
#            1 MB file of its own, over and over: the commit threads' queue
#            full of one user's slow transactions
#   multi    one .editfs/edit payload that rewrites MULTI of the distinct files
#            in one transaction (a payload just under 100 KiB), there and back
#   undo     the same transaction, then its undo (MULTI files restored at once)
#   rewind   a checkpoint, the same transaction, then a rewind to the checkpoint
#   rmtree   rm -r through the mount of a tree of RMFILES files of 1 MiB each
#            (put back in SOURCE between rounds): removals the filer hashes
#
# Environment: EDITFS=path (a binary to measure instead of building this tree's),
# ATTACK_S (seconds per attack, default 15), FILES (default 5000), STREAMS
# (default 16), MULTI (default 300), RMFILES (default 300), VICTIM_UID
# (default 4242), ATTACKS="misses sparse" (run only these), KEEP=1 (keep the
# temp dir). Target: the other user's worst round trip <= 50 ms under each.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
repo_dir=$PWD

ATTACK_S=${ATTACK_S:-15}
FILES=${FILES:-5000}
STREAMS=${STREAMS:-16}
MULTI=${MULTI:-300}
VICTIM_UID=${VICTIM_UID:-4242}
RMFILES=${RMFILES:-300}
ATTACKS=${ATTACKS:-idle misses regex touched sparse distinct streams multi undo rewind rmtree}
say() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'bench-isolation: %s\n' "$*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "run as root: the daemon is root's and the callers are other users"
[ "${BASH_VERSINFO[0]}" -ge 5 ] || die "needs bash >= 5 (EPOCHREALTIME)"
[ -c /dev/fuse ] || die "/dev/fuse does not exist: FUSE is not available here"
for tool in setpriv python3 du; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required"
done

if [ -n "${EDITFS:-}" ]; then
  editfs=$EDITFS
else
  say "cargo build --release"
  cargo build --release --quiet
  editfs=$repo_dir/target/release/editfs
fi
[ -x "$editfs" ] || die "no $editfs"

work=$(mktemp -d /tmp/editfs-iso.XXXXXX)
chmod 755 "$work"
src=$work/source
mnt=$work/mnt
mkdir -p "$src/att" "$src/victim" "$mnt"
cleanup() {
  set +e
  touch "$work/stop"
  wait 2>/dev/null
  mountpoint -q "$mnt" && { "$editfs" unmount "$mnt" 2>/dev/null || umount -l "$mnt"; }
  if [ -n "${KEEP:-}" ]; then echo "bench-isolation: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_victim() { setpriv --reuid="$VICTIM_UID" --regid="$VICTIM_UID" --clear-groups "$@"; }

# ---------------------------------------------------------------- the project
say "making the project ($FILES distinct files)"
python3 - "$src" "$FILES" "$STREAMS" "$MULTI" <<'EOF'
import os, sys
src, files, streams, multi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def lines(n, tag):
    return "".join(f"    let value_{tag}_{i} = compute({i}, \"{tag}\"); // line {i}\n" for i in range(n))
with open(f"{src}/att/big.txt", "w") as f:        # ~1 MB
    f.write(lines(15000, "b"))
os.makedirs(f"{src}/att/s", exist_ok=True)
for k in range(streams):                            # ~1 MB each
    with open(f"{src}/att/s/{k}.txt", "w") as f:
        f.write(lines(15000, f"s{k}"))
with open(f"{src}/att/touched.txt", "w") as f:    # ~1.66 MB
    f.write(lines(25000, "t"))
os.makedirs(f"{src}/att/d", exist_ok=True)
for i in range(files):
    with open(f"{src}/att/d/f{i}.txt", "w") as f:
        f.write(f"line one of {i}\n" + "x" * 60 + "\n")
with open(f"{src}/victim/v.txt", "w") as f:
    f.write("alpha\nbeta\ngamma\n")
with open(f"{src}/victim/w.txt", "w") as f:
    f.write("direct\n")
# The 2,250 misses: one-line SEARCHes that match nothing, just under 100 KiB.
with open(f"{src}/../misses.payload", "w") as f:
    for i in range(2250):
        f.write(f"<<<<<<< SEARCH\nq{i:04}\n=======\n>>>>>>> REPLACE\n")
# Twelve regex operations that are slow to run: a match with its groups at
# every character of the file (about 3 s each before the work budget).
import json
ops = [{"search": r"(\w)|(\W)", "replace": "$0", "regex": True, "all": True}
       for _ in range(12)]
with open(f"{src}/../regex.payload", "w") as f:
    json.dump(ops, f)
# A large block for each distinct file.
with open(f"{src}/../distinct.tail", "w") as f:
    f.write("=======\n" + ("y" * 99 + "\n") * 800 + ">>>>>>> REPLACE\n")
# One multi-file payload over the first MULTI distinct files, and its way back.
def multi_payload(there):
    out = []
    for i in range(min(multi, files)):
        a, b = f"line one of {i}", f"line one of {i}, changed " + "z" * 200
        old, new = (a, b) if there else (b, a)
        out.append(f"att/d/f{i}.txt\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n")
    return "".join(out)
with open(f"{src}/../multi.there", "w") as f:
    f.write(multi_payload(True))
with open(f"{src}/../multi.back", "w") as f:
    f.write(multi_payload(False))
EOF
truncate -s 2G "$src/att/sparse.txt"
printf 'the one line of data in a sparse file\n' | dd of="$src/att/sparse.txt" conv=notrunc status=none
chown -R 65534:65534 "$src/att"
chown -R "$VICTIM_UID:$VICTIM_UID" "$src/victim"
chmod 755 "$src" "$src/att" "$src/victim"

say "mounting ($editfs)"
started=$("$editfs" mount "$src" "$mnt" --daemon -o allow_other)
pid=$(sed -n 's/.* by pid \([0-9]*\).*/\1/p' <<<"$started")
[ -n "$pid" ] || die "no pid in: $started"
state=$src/.editfs

# ---------------------------------------------------------------- the other user
# One line per round trip: kind, start, end (seconds).
victim_loop() {
  local out=$1 i=0 t0 t1
  while [ ! -e "$work/stop" ]; do
    t0=$EPOCHREALTIME
    if ((i % 2)); then
      printf '<<<<<<< SEARCH\nbeta\n=======\nBETA\n>>>>>>> REPLACE\n' >"$mnt/victim/v.txt.edit" || true
    else
      printf '<<<<<<< SEARCH\nBETA\n=======\nbeta\n>>>>>>> REPLACE\n' >"$mnt/victim/v.txt.edit" || true
    fi
    t1=$EPOCHREALTIME
    echo "edit $t0 $t1" >>"$out"
    t0=$EPOCHREALTIME
    printf 'direct %s\n' "$i" >"$mnt/victim/w.txt" || true
    t1=$EPOCHREALTIME
    echo "direct $t0 $t1" >>"$out"
    i=$((i + 1))
    sleep 0.02
  done
}
export -f victim_loop
export mnt work

# ---------------------------------------------------------------- the attacks
attack_misses() { as_nobody bash -c 'cat "$1" >"$2/att/big.txt.edit"' _ "$work/misses.payload" "$mnt" 2>/dev/null || true; }
attack_regex() { as_nobody bash -c 'cat "$1" >"$2/att/big.txt.edit"' _ "$work/regex.payload" "$mnt" 2>/dev/null || true; }
attack_touched() {
  as_nobody bash -c '
    ( for i in $(seq 1 200); do echo "touch $i" >>"$2/att/touched.txt"; sleep 0.05; done ) &
    cat "$1" >"$2/att/touched.txt.edit"; kill $! 2>/dev/null; wait' _ "$work/misses.payload" "$mnt" 2>/dev/null || true
}
attack_sparse() {
  as_nobody bash -c '
    printf "<<<<<<< SEARCH\nthe one line of data in a sparse file\n=======\nthe one line, edited\n>>>>>>> REPLACE\n" >"$1/att/sparse.txt.edit"
    printf "<<<<<<< SEARCH\nthe one line, edited\n=======\nthe one line of data in a sparse file\n>>>>>>> REPLACE\n" >"$1/att/sparse.txt.edit"
    printf "x" | dd of="$1/att/sparse.txt" bs=1 seek=1000 conv=notrunc status=none' _ "$mnt" 2>/dev/null || true
}
distinct_at=0
attack_distinct() {
  local n=$((distinct_at + 200))
  as_nobody bash -c '
    for ((i = $1; i < $2 && i < $3; i++)); do
      { printf "<<<<<<< SEARCH\nline one of %s\n" "$i"; cat "$4"; } >"$5/att/d/f$i.txt.edit"
    done' _ "$distinct_at" "$n" "$FILES" "$work/distinct.tail" "$mnt" 2>/dev/null || true
  distinct_at=$n
  [ "$distinct_at" -lt "$FILES" ] || distinct_at=0
}
attack_streams() {
  local k pids=()
  for ((k = 0; k < STREAMS; k++)); do
    as_nobody bash -c 'cat "$1" >"$2/att/s/$3.txt.edit"' _ "$work/regex.payload" "$mnt" "$k" 2>/dev/null &
    pids+=($!)
  done
  wait "${pids[@]}" || true
}
multi_there() { as_nobody bash -c 'cat "$1" >"$2/.editfs/edit"' _ "$work/multi.there" "$mnt" 2>/dev/null || true; }
multi_back() { as_nobody bash -c 'cat "$1" >"$2/.editfs/edit"' _ "$work/multi.back" "$mnt" 2>/dev/null || true; }
attack_multi() { multi_there; multi_back; }
attack_undo() {
  multi_there
  as_nobody bash -c 'echo "--tx $(sed -n "1s/.*(tx \([0-9]*\),.*/\1/p" "$1/.editfs/status")" >"$1/.editfs/undo"' _ "$mnt" 2>/dev/null || true
}
rewinds=0
attack_rewind() {
  rewinds=$((rewinds + 1))
  as_nobody bash -c 'echo "b$2" >"$1/.editfs/checkpoint"' _ "$mnt" "$rewinds" 2>/dev/null || true
  multi_there
  as_nobody bash -c 'echo "--to b$2" >"$1/.editfs/rewind"' _ "$mnt" "$rewinds" 2>/dev/null || true
}
attack_rmtree() {
  if [ ! -d "$work/tree" ]; then
    mkdir -p "$work/tree"
    for ((i = 0; i < RMFILES; i++)); do head -c 1048576 /dev/urandom >"$work/tree/f$i"; done
  fi
  cp -a "$work/tree" "$src/att/tree"
  chown -R 65534:65534 "$src/att/tree"
  as_nobody rm -rf "$mnt/att/tree" 2>/dev/null || true
  rm -rf "$src/att/tree"
}
attack_idle() { sleep 1; }

results=()
for attack in $ATTACKS; do
  declare -F "attack_$attack" >/dev/null || die "unknown attack $attack"
  say "attack: $attack (${ATTACK_S}s)"
  echo 5 >"/proc/$pid/clear_refs"
  log=$work/victim-$attack
  : >"$log"
  chmod 666 "$log"
  rm -f "$work/stop"
  as_victim bash -c "victim_loop $log" &
  victim=$!
  end=$((SECONDS + ATTACK_S))
  rounds=0
  while [ $SECONDS -lt $end ]; do
    "attack_$attack"
    rounds=$((rounds + 1))
  done
  touch "$work/stop"
  wait "$victim" || true
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  state_kib=$(du -sk "$state" | cut -f1)
  sparse_kib=$(du -k "$src/att/sparse.txt" | cut -f1)
  results+=("$(python3 - "$log" "$attack" "$rounds" "$hwm" "$rss" "$state_kib" "$sparse_kib" <<'EOF'
import sys
log, attack, rounds, hwm, rss, state, sparse = sys.argv[1:]
ms = {"edit": [], "direct": []}
for line in open(log):
    kind, t0, t1 = line.split()
    ms[kind].append((float(t1) - float(t0)) * 1000)
def stats(v):
    if not v:
        return "        -        -"
    v.sort()
    return f"{v[len(v) // 2]:9.1f}{v[-1]:9.1f}"
print(f"{attack:<9}{int(rounds):>7}{stats(ms['edit'])}{stats(ms['direct'])}"
      f"{int(hwm) / 1024:10.0f}{int(rss) / 1024:9.0f}{int(state) / 1024:10.0f}{int(sparse) / 1024:10.0f}")
EOF
)")
done

echo
echo "editfs: $editfs; $(nproc) cores; ${ATTACK_S}s per attack; the other user's round trips in ms"
printf '%-9s%7s%9s%9s%9s%9s%10s%9s%10s%10s\n' attack rounds "edit p50" worst "dir p50" worst \
  "HWM MiB" "RSS MiB" "state MiB" "sparse MiB"
printf '%s\n' "${results[@]}"

#!/usr/bin/env bash
# Benchmarks branches: how long `editfs branch create` takes on trees of growing size
# (it copies nothing, so it should not grow with them), then the same workloads on the
# native directory, the project's editfs mount and a branch mount of the same project,
# the median of each.
#
#   scripts/bench-branch.sh         # REPS=5 runs a row, HEAVY_REPS=3 for cargo build
#
# Environment: REPS, HEAVY_REPS, FILES (files of the tree the workloads read, default
# 5000), EDITFS=path (an editfs binary to measure instead of building this tree's),
# KEEP=1 (keep the temp dir). The cargo row builds a copy of regex-syntax from
# ~/.cargo/registry/src offline (incrementally, after a touch), and is left out without
# it. Root only (a branch mount needs overlayfs). Everything lives in a temp dir under
# /tmp; every mount is taken off at exit, also on failure or Ctrl-C.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

REPS=${REPS:-5}
HEAVY_REPS=${HEAVY_REPS:-3}
FILES=${FILES:-5000}
say() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'bench-branch: %s\n' "$*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root: a branch mount needs overlayfs"
[ "${BASH_VERSINFO[0]}" -ge 5 ] || die "needs bash >= 5 (EPOCHREALTIME)"

if [ -z "${EDITFS:-}" ]; then
  say "cargo build --release"
  cargo build --release --quiet
  EDITFS=$PWD/target/release/editfs
fi

work=$(mktemp -d /tmp/editfs-bench-branch.XXXXXX)
mounts=()
cleanup() {
  local m
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    m=${mounts[i]}
    "$EDITFS" unmount "$m" >/dev/null 2>&1 || true
  done
  sleep 0.5
  grep -o "$work[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

now_us() { local t=${EPOCHREALTIME/./}; echo "$t"; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { awk -v u="$1" 'BEGIN {printf "%.1f", u / 1000}'; }

# time_it REPS CMD...: the median microseconds of CMD, run REPS times
time_it() {
  local reps=$1 samples=() t0 t1
  shift
  for ((i = 0; i < reps; i++)); do
    t0=$(now_us)
    "$@" >/dev/null 2>&1 || { echo FAIL; return; }
    t1=$(now_us)
    samples+=("$((t1 - t0))")
  done
  median "${samples[@]}"
}

# ------------------------------------------------------------ branch creation
printf '\n%-28s %12s\n' "branch create, tree of" "median ms"
for n in 100 10000 100000; do
  p=$work/create-$n
  mkdir -p "$p"
  python3 - "$p" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "d%d" % (i // 1000))
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "f%d" % i), "w").close()
PY
  samples=()
  for ((i = 0; i < REPS; i++)); do
    t0=$(now_us)
    "$EDITFS" branch create "$p" "b$i" >/dev/null
    t1=$(now_us)
    samples+=("$((t1 - t0))")
  done
  printf '%-28s %12s\n' "$n files" "$(ms "$(median "${samples[@]}")")"
done

# ------------------------------------------------------------ the workloads
src=$work/project
mkdir -p "$src/tree"
say "making $FILES files"
for ((i = 0; i < FILES; i++)); do
  d=$src/tree/d$((i / 100))
  [ -d "$d" ] || mkdir -p "$d"
  printf 'line %d of a file\nfn f%d() {}\n' "$i" "$i" >"$d/f$i.rs"
done
(cd "$src" && git init -q && git add -A && git -c user.name=b -c user.email=b@example.invalid commit -qm t)
crate_src=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name 'regex-syntax-0.8.*' 2>/dev/null | sort | tail -1)
if [ -n "$crate_src" ] && command -v cargo >/dev/null; then
  cp -r "$crate_src" "$src/crate"
  rm -f "$src/crate/Cargo.lock"
  python3 scripts/offline-crate "$src/crate/Cargo.toml"
  (cd "$src/crate" && cargo build --offline --quiet) >/dev/null 2>&1 || crate_src=""
fi

mkdir -p "$work/mnt" "$work/branch"
"$EDITFS" mount "$src" "$work/mnt" --daemon >/dev/null
mounts+=("$work/mnt")
"$EDITFS" branch create "$src" bench >/dev/null
"$EDITFS" mount "$src" "$work/branch" --branch bench --daemon >/dev/null
mounts+=("$work/branch")

printf '\n%-32s %10s %10s %10s\n' "workload (median ms)" native project branch
row() {
  local name=$1 reps=$2
  shift 2
  local out=()
  for view in "$src" "$work/mnt" "$work/branch"; do
    out+=("$(cd "$view" && ms "$(time_it "$reps" "$@")")")
  done
  printf '%-32s %10s %10s %10s\n' "$name" "${out[@]}"
}
row "read every file (cat)" "$REPS" sh -c 'find tree -type f -exec cat {} + >/dev/null'
row "find" "$REPS" find tree
row "grep -r" "$REPS" grep -r 'fn f4' tree
row "git status" "$REPS" git status --porcelain
if [ -n "$crate_src" ]; then
  for view in "$src" "$work/mnt" "$work/branch"; do
    (cd "$view/crate" && cargo build --offline --quiet) >/dev/null 2>&1 || true
  done
  row "cargo build (after a touch)" "$HEAVY_REPS" sh -c 'touch crate/src/lib.rs && cd crate && cargo build --offline --quiet'
fi

#!/usr/bin/env bash
# The edit round trip on a 100 KiB source file through a mount, with the syntax
# check (`--syntax-check refuse`, the default) and without it (`off`, as editfs was
# before the check): open F.edit with O_TRUNC, write one block, close, read F.status,
# RTIN_REPS times (default 300, plus 4 untimed), alternating two contents of one
# function in the middle of the file. Prints the median and the 90th percentile per
# language and setting (each the median of four rounds), and the ratio of the medians.
#
#   scripts/bench-syntax.sh           # EDITFS=path to measure another binary
set -euo pipefail

repo_dir=$(cd "$(dirname "$0")/.." && pwd)
reps=${RTIN_REPS:-300}
if [ -n "${EDITFS:-}" ]; then
  editfs=$EDITFS
else
  (cd "$repo_dir" && cargo build --release --bin editfs >/dev/null 2>&1) || {
    echo "bench-syntax: the release build failed" >&2
    exit 1
  }
  editfs=$repo_dir/target/release/editfs
fi
work=$(mktemp -d /tmp/editfs-bench-syntax.XXXXXX)
src=$work/src
mnt=$work/mnt
mkdir -p "$src"
cleanup() {
  for m in "$mnt"-*; do
    "$editfs" unmount "$m" 2>/dev/null || fusermount3 -u "$m" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# 100 KiB of small functions, and two payloads that swap one function's line back and forth.
python3 - "$src" "$work" <<'PY'
import sys
src, work = sys.argv[1], sys.argv[2]
units = {
    "app.py": "def handler_{i}(state, count):\n    if count > {i}:\n        total = state.get(\"total\", 0) + count\n        for item in state[\"items\"]:\n            total += len(item)\n        return total\n    return None\n\n\n",
    "lib.rs": "fn handler_{i}(state: &State, count: usize) -> Option<usize> {\n    if count > {i} {\n        let mut total = state.total + count;\n        for item in &state.items {\n            total += item.len();\n        }\n        return Some(total);\n    }\n    None\n}\n\n",
}
lines = {"app.py": "        total = state.get(\"total\", 0) + count  # h300\n",
         "lib.rs": "        let mut total = state.total + count; // h300\n"}
for name, unit in units.items():
    text, i = "", 0
    while len(text) < 100 * 1024:
        u = unit.replace("{i}", str(i))
        if i == 300:
            first = u.split("\n")[2] + "\n"
            u = u.replace(first, lines[name], 1)
        text += u
        i += 1
    open(f"{src}/{name}", "w").write(text)
    a = lines[name]
    b = a.replace("count", "count + 1", 1)
    open(f"{work}/{name}.a", "w").write(f"<<<<<<< SEARCH\n{a}=======\n{b}>>>>>>> REPLACE\n")
    open(f"{work}/{name}.b", "w").write(f"<<<<<<< SEARCH\n{b}=======\n{a}>>>>>>> REPLACE\n")
PY

round_trips() { # FILE PAYLOAD-A PAYLOAD-B: prints "median p90" in ms
  python3 - "$1" "$reps" "$2" "$3" <<'PY'
import os, sys, time
f, n = sys.argv[1], int(sys.argv[2])
pair = [open(p, "rb").read() for p in sys.argv[3:5]]
n += n % 2
samples = []
for i in range(n + 4):
    t = time.perf_counter()
    fd = os.open(f + ".edit", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, pair[i % 2])
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

declare -A med
echo "edit round trip, 100 KiB file, $reps round trips each in 4 rounds (ms; load average $(cut -d' ' -f1 /proc/loadavg))"
# Each setting has its own mount point and state directory, so one daemon's
# exit never races the next one's start. Both are mounted at once and measured
# in turns, four rounds each, so that a change in the machine's load falls on
# both alike; a setting's figure is the median of its rounds' medians.
for mode in off refuse; do
  mkdir -p "$mnt-$mode" "$work/state-$mode"
  "$editfs" mount "$src" "$mnt-$mode" --daemon --state-dir "$work/state-$mode" --syntax-check "$mode" >/dev/null
done
reps=$(((reps + 3) / 4))
declare -A rounds
for round in 1 2 3 4; do
  # Each round starts with the other setting, so neither always goes first.
  order="off refuse"
  [ $((round % 2)) -eq 0 ] && order="refuse off"
  for f in app.py lib.rs; do
    for mode in $order; do
      read -r m p90 < <(round_trips "$mnt-$mode/$f" "$work/$f.a" "$work/$f.b")
      grep -q "syntax: ok" "$mnt-$mode/$f.status" || [ "$mode" = off ] || {
        echo "bench-syntax: $f was not checked" >&2
        exit 1
      }
      rounds[$f|$mode]+="$m $p90;"
    done
  done
done
mid() { tr ';' '\n' | awk 'NF' | sort -n -k"$1" | awk -v k="$1" '{ v[NR] = $k } END { print v[int((NR + 1) / 2)] }'; }
for f in app.py lib.rs; do
  for mode in off refuse; do
    med[$f|$mode]=$(mid 1 <<<"${rounds[$f|$mode]}")
    printf '  %-7s --syntax-check %-6s median %s  p90 %s\n' "$f" "$mode" "${med[$f|$mode]}" "$(mid 2 <<<"${rounds[$f|$mode]}")"
  done
done
for mode in off refuse; do
  "$editfs" unmount "$mnt-$mode"
done
for f in app.py lib.rs; do
  awk -v a="${med[$f|refuse]}" -v b="${med[$f|off]}" -v f="$f" \
    'BEGIN { printf "  %-7s with the check / without: %.2fx\n", f, a / b }'
done

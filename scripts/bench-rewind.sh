#!/usr/bin/env bash
# Measures a rewind of a long session: a project of FILES files is mounted, a
# checkpoint taken, and TXS transactions made through the mount (edits through
# F.edit, direct writes, new files, removals and moves, in turn), and a
# directory of DIRFILES files moved whole with `mv`; then `editfs rewind --to`
# the checkpoint. Prints the directory move's time, the rewind's time and peak
# memory (and the diff's before it), and checks that every file reads as it
# did at the checkpoint.
#
#   scripts/bench-rewind.sh                 # release build of this tree
#
# Environment: EDITFS=path (a binary to measure instead of building this
# tree's), FILES (default 500), TXS (default 1000), DIRFILES (default 500,
# 4 KiB each), KEEP=1 (keep the temp dir).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

FILES=${FILES:-500}
TXS=${TXS:-1000}
DIRFILES=${DIRFILES:-500}
say() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'bench-rewind: %s\n' "$*" >&2; exit 2; }

[ -c /dev/fuse ] || die "/dev/fuse does not exist: FUSE is not available here"
[ -x /usr/bin/time ] || die "/usr/bin/time is required (GNU time, for the peak memory)"
if [ -n "${EDITFS:-}" ]; then
  editfs=$EDITFS
else
  say "cargo build --release"
  cargo build --release --quiet
  editfs=$PWD/target/release/editfs
fi

work=$(mktemp -d /tmp/editfs-rewind.XXXXXX)
src=$work/source
mnt=$work/mnt
mkdir -p "$src" "$mnt"
cleanup() {
  set +e
  mountpoint -q "$mnt" && { "$editfs" unmount "$mnt" 2>/dev/null || umount -l "$mnt"; }
  if [ -n "${KEEP:-}" ]; then echo "bench-rewind: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

say "making the project ($FILES files, and $DIRFILES in bulk/)"
python3 - "$src" "$FILES" "$DIRFILES" <<'EOF'
import os, sys
src, files, dirfiles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(files):
    d = f"{src}/pkg{i % 20}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/m{i}.py", "w") as f:
        f.write("".join(f"def f{i}_{j}(x):\n    return x + {j}\n\n" for j in range(60)))
for i in range(dirfiles):
    d = f"{src}/bulk/part{i // 100}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/b{i}.txt", "w") as f:
        f.write(f"{i:08d}\n" * 455)
EOF
(cd "$src" && find . -type f -printf '%P\n' | sort | xargs sha256sum) > "$work/before.sums"

"$editfs" mount "$src" "$mnt" --daemon >/dev/null
echo start | cat > "$mnt/.editfs/checkpoint"

say "$TXS transactions through the mount"
python3 - "$mnt" "$FILES" "$TXS" <<'EOF'
import os, sys
mnt, files, txs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
path = lambda i: f"{mnt}/pkg{i % 20}/m{i}.py"
gone, made = set(), 0
for t in range(txs):
    i = (t * 7) % files
    kind = t % 5
    if i in gone:    # a file removed or moved away gets no more changes
        kind = 2
    if kind == 0:    # an edit through F.edit
        j = t % 60
        with open(path(i) + ".edit", "w") as f:
            f.write(f"<<<<<<< SEARCH\n    return x + {j}\n=======\n    return x + {j} + {t}\n>>>>>>> REPLACE\n")
        gone.discard(i)
    elif kind == 1:  # a direct write
        with open(path(i), "a") as f:
            f.write(f"# direct {t}\n")
    elif kind == 2:  # a new file
        with open(f"{mnt}/pkg{t % 20}/new{made}.py", "w") as f:
            f.write(f"made = {t}\n")
        made += 1
    elif kind == 3:  # a removal
        os.remove(path(i))
        gone.add(i)
    else:            # a move
        os.rename(path(i), path(i) + ".moved")
        gone.add(i)
EOF

measure() {
  local name=$1 out=$work/time.$1
  shift
  /usr/bin/time -f '%e %M' -o "$out" "$@" >"$work/out.$name" 2>&1 || true
  read -r secs kib <"$out"
  printf '%s %s\n' "$secs" "$kib"
}
say "mv of a directory of $DIRFILES files through the mount"
read -r mv_s _ < <(measure mv mv "$mnt/bulk" "$mnt/bulk.moved")
sleep 1
read -r diff_s diff_kib < <(measure diff "$editfs" diff "$src" --since start --name-status)
changed=$(grep -c '^[MADR]' "$work/out.diff" || true)
read -r rewind_s rewind_kib < <(measure rewind "$editfs" rewind "$src" --to start)
"$editfs" unmount "$mnt"
(cd "$src" && find . -path ./.editfs -prune -o -type f -printf '%P\n' | sort | xargs sha256sum) > "$work/after.sums"
if cmp -s "$work/before.sums" "$work/after.sums"; then same=yes; else same=NO; fi
kept=$(du -sk "$src/.editfs" | cut -f1)

echo
echo "editfs: $editfs; $(nproc) cores; $FILES files, $TXS transactions, a directory of $DIRFILES files moved"
printf '%-8s %8s %10s\n' step seconds "peak MiB"
printf '%-8s %8s %10s\n' mv-dir "$mv_s" -
printf '%-8s %8s %10d\n' diff "$diff_s" $((diff_kib / 1024))
printf '%-8s %8s %10d\n' rewind "$rewind_s" $((rewind_kib / 1024))
echo "files in the net diff: $changed; state directory: $((kept / 1024)) MiB; tree as at the checkpoint: $same"
[ "$same" = yes ]

#!/usr/bin/env bash
# Counts the FUSE requests a command makes on a mount, by opcode, with the time
# each kind took from the kernel sending it to the answer (queueing included).
#
#   scripts/fuse-requests.sh MOUNT COMMAND [ARGS...]
#   scripts/fuse-requests.sh /mnt/p grep -r needle /mnt/p/src
#
# It reads the kernel's fuse tracepoints (Linux 6.16 or later; root, tracefs
# mounted) in a tracing instance of its own, so it disturbs no other tracing,
# and counts only the requests of MOUNT's connection (other mounts, other
# processes on MOUNT while COMMAND runs are counted too: run it on a quiet mount).
# Which kernel path sent a request shows with perf:
#   perf record -e fuse:fuse_request_send -g -- COMMAND; perf script
set -euo pipefail
export LC_ALL=C

die() { printf 'fuse-requests: %s\n' "$*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: $0 MOUNT COMMAND [ARGS...]"
mnt=$1
shift
mountpoint -q "$mnt" || die "$mnt is not a mount point"
tracefs=/sys/kernel/tracing
[ -d "$tracefs/events/fuse/fuse_request_send" ] ||
  die "no fuse tracepoints in $tracefs (needs root, tracefs and Linux 6.16 or later)"
command -v python3 >/dev/null || die "python3 is required"

# The connection number the tracepoints carry is the mount's anonymous device minor.
conn=$(($(stat -c %d "$mnt") & 0xff | ($(stat -c %d "$mnt") >> 12 & ~0xff)))
inst=$tracefs/instances/editfs-requests-$$
mkdir "$inst" || die "cannot create a tracing instance in $tracefs/instances"
trap 'echo 0 >"$inst/tracing_on" 2>/dev/null; rmdir "$inst" 2>/dev/null || true' EXIT
echo 0 >"$inst/tracing_on"
echo 65536 >"$inst/buffer_size_kb"
echo 1 >"$inst/events/fuse/fuse_request_send/enable"
echo 1 >"$inst/events/fuse/fuse_request_end/enable"

echo 1 >"$inst/tracing_on"
t0=$EPOCHREALTIME
rc=0
"$@" >/dev/null || rc=$?
t1=$EPOCHREALTIME
echo 0 >"$inst/tracing_on"

python3 - "$conn" "$t0" "$t1" "$rc" "$*" "$inst/trace" <<'PY'
import collections, re, sys
conn, t0, t1, rc, cmd, trace = sys.argv[1:]
send_re = re.compile(r"\s(\d+\.\d+): fuse_request_send: connection (\d+) req (\d+) opcode \d+ \((\w+)\)")
end_re = re.compile(r"\s(\d+\.\d+): fuse_request_end: connection (\d+) req (\d+) len \d+ error (-?\d+)")
sent, count, total, errors = {}, collections.Counter(), collections.Counter(), collections.Counter()
lost = False
with open(trace) as f:
    for line in f:
        if "LOST" in line and "EVENTS" in line:
            lost = True
        m = send_re.search(line)
        if m and m.group(2) == conn:
            sent[m.group(3)] = (float(m.group(1)), m.group(4).removeprefix("FUSE_"))
            continue
        m = end_re.search(line)
        if m and m.group(2) == conn and m.group(3) in sent:
            at, op = sent.pop(m.group(3))
            count[op] += 1
            total[op] += float(m.group(1)) - at
            errors[op] += m.group(4) != "0"
for _, op in sent.values():  # sent, never answered while tracing (forgets, interrupts)
    count[op] += 1
print(f"$ {cmd}: {(float(t1) - float(t0)) * 1000:.1f} ms, exit {rc}")
print(f"{'request':16} {'count':>8} {'errors':>7} {'total ms':>9} {'mean us':>8}")
for op, n in count.most_common():
    print(f"{op:16} {n:8} {errors[op]:7} {total[op] * 1000:9.1f} {total[op] / n * 1e6:8.1f}")
print(f"{'all':16} {sum(count.values()):8} {sum(errors.values()):7} {sum(total.values()) * 1000:9.1f}")
if lost:
    print("warning: the trace buffer overflowed; counts are low")
PY

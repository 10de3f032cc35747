#!/usr/bin/env bash
# Runs a command (an agent, its tools) under bubblewrap with an editfs mount as
# its project: the mount is the working directory and the only project path it
# can see or write; SOURCE and the state directory are out of its sight, so every
# change goes through the mount (and its history), and the control files
# (F.edit, F.status, .editfs/edit, .editfs/undo) work from inside.
#
#   editfs mount ~/project /mnt/project --daemon
#   scripts/sandbox.sh /mnt/project -- my-agent --task "fix the tests"
#
# What the command sees: the system read-only (/usr, /bin, /lib*, /etc, /opt),
# fresh /dev, /proc, and empty writable /tmp, /run, /home and /root (gone when it
# exits), MOUNT read-write at its own path. It keeps the network. Extra paths:
#   SANDBOX_RO=/path:/other   bound read-only (a toolchain in ~/.cargo, say)
#   SANDBOX_RW=/path          bound read-write (a cache)
#   SANDBOX_NO_NET=1          no network
# A SOURCE that lies under one of the visible system paths is covered with an
# empty directory. Keep the state directory (--state-dir) out of those paths
# too; its default, SOURCE/.editfs, goes with SOURCE.
#
# Needs bwrap (Debian/Ubuntu: apt-get install bubblewrap). Exits with the
# command's status, or 2 for bad usage.
set -euo pipefail

usage() {
  echo "usage: scripts/sandbox.sh MOUNT -- COMMAND [ARG...]" >&2
  exit 2
}

[ "$#" -ge 3 ] && [ "$2" = "--" ] || usage
mnt=$(realpath -e -- "$1") || { echo "sandbox.sh: $1: no such directory" >&2; exit 2; }
shift 2

if ! command -v bwrap >/dev/null 2>&1; then
  echo "sandbox.sh: bwrap is missing (apt-get install bubblewrap)" >&2
  exit 2
fi

# The mount's line in mountinfo: field 5 is the mount point, and after " - "
# come the type and the source, which editfs names "editfs:SOURCE".
line=$(awk -v m="$mnt" '{ p = $5; gsub(/\\040/, " ", p); if (p == m) print }' /proc/self/mountinfo | tail -n 1)
if [ -z "$line" ]; then
  echo "sandbox.sh: $mnt is not a mount point: start it with \`editfs mount SOURCE $mnt --daemon\`" >&2
  exit 2
fi
fsname=$(printf '%s\n' "${line#* - }" | awk '{ print $2 }')
source_dir=""
case "$fsname" in
  editfs:*) source_dir=$(printf '%b' "${fsname#editfs:}") ;;
  *) echo "sandbox.sh: warning: $mnt does not look like an editfs mount ($fsname)" >&2 ;;
esac

args=(
  --die-with-parent --new-session
  --unshare-all
  --ro-bind /usr /usr
  --ro-bind /etc /etc
  --ro-bind-try /opt /opt
  --dev /dev --proc /proc
  --tmpfs /tmp --tmpfs /run --tmpfs /home --tmpfs /root
)
[ -n "${SANDBOX_NO_NET:-}" ] || args+=(--share-net)
# /bin, /lib and friends are symlinks into /usr on merged systems: keep them so.
for d in /bin /sbin /lib /lib32 /lib64 /libx32; do
  if [ -L "$d" ]; then
    args+=(--symlink "$(readlink "$d")" "$d")
  elif [ -d "$d" ]; then
    args+=(--ro-bind "$d" "$d")
  fi
done
visible=(/usr /etc /opt /bin /sbin /lib /lib32 /lib64 /libx32)
split_paths() { tr ':' '\n' <<<"$1" | sed '/^$/d'; }
while IFS= read -r p; do
  args+=(--ro-bind "$p" "$p")
  visible+=("$(realpath -m -- "$p")")
done < <(split_paths "${SANDBOX_RO:-}")
while IFS= read -r p; do
  args+=(--bind "$p" "$p")
  visible+=("$(realpath -m -- "$p")")
done < <(split_paths "${SANDBOX_RW:-}")
# Cover SOURCE only where the sandbox would show it; elsewhere it is simply absent.
if [ -n "$source_dir" ]; then
  for v in "${visible[@]}"; do
    case "$source_dir/" in
      "$v"/*) args+=(--tmpfs "$source_dir"); break ;;
    esac
  done
fi
args+=(--bind "$mnt" "$mnt" --chdir "$mnt" --setenv PWD "$mnt")

exec bwrap "${args[@]}" -- "$@"

#!/usr/bin/env bash
# POSIX conformance of the mount: pjdfstest and fsx against a fresh mount of an
# empty directory, the way other FUSE file systems are checked.
#
#   scripts/posix.sh            # both, with fsx -N 20000
#   FSX_OPS=200000 scripts/posix.sh
#   PJD_FILTER=link:: scripts/posix.sh   # only the pjdfstest cases whose names match
#   EDITFS=target/debug/editfs scripts/posix.sh   # that binary, not a release build
#
# Needs root (pjdfstest switches to two unprivileged users, nobody/nogroup and
# daemon/daemon, and the mount uses allow_other). Installs what is missing:
# fuse3, and the two checkers from the crate registry (pjdfstest's build needs
# libacl1-dev). Exits non-zero when either checker reports a failure; the logs
# stay in the printed work directory. `cargo test` runs it (tests/system/posix.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "scripts/posix.sh must run as root (pjdfstest switches users)" >&2
  exit 2
fi

need() { command -v "$1" >/dev/null 2>&1; }
apt_missing=()
export PATH="$HOME/.cargo/bin:$PATH"
need fusermount3 || apt_missing+=(fuse3)
need pjdfstest || dpkg -s libacl1-dev >/dev/null 2>&1 || apt_missing+=(libacl1-dev)
if [ "${#apt_missing[@]}" -gt 0 ]; then
  echo "installing ${apt_missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi
need pjdfstest || cargo install --locked pjdfstest@0.2.2
need fsx || cargo install --locked fsx@0.3.2

editfs=${EDITFS:-}
if [ -z "$editfs" ]; then
  cargo build --release
  editfs=$PWD/target/release/editfs
fi

work=$(mktemp -d)
chmod 755 "$work"
mkdir "$work/src" "$work/mnt"
chmod 755 "$work/src" "$work/mnt"
cleanup() { "$editfs" unmount "$work/mnt" >/dev/null 2>&1 || true; }
trap cleanup EXIT

cat >"$work/pjdfstest.toml" <<'EOF'
[features]
posix_fallocate = {}
utime_now = {}
utimensat = {}
rename_ctime = {}

[settings]
naptime = 0.05

[dummy_auth]
entries = [
  ["nobody", "nogroup"],
  ["daemon", "daemon"],
]
EOF

"$editfs" mount "$work/src" "$work/mnt" --daemon -o allow_other

status=0
echo "pjdfstest (log: $work/pjdfstest.log)"
mkdir "$work/mnt/pjd"
chmod 777 "$work/mnt/pjd"
if (cd "$work/mnt/pjd" && pjdfstest -c "$work/pjdfstest.toml" -p "$work/mnt/pjd" ${PJD_FILTER:-}) >"$work/pjdfstest.log" 2>&1; then
  grep '^Summary' "$work/pjdfstest.log"
else
  status=1
  grep -E 'FAILED$' "$work/pjdfstest.log" || true
  grep '^Summary' "$work/pjdfstest.log" || tail -20 "$work/pjdfstest.log"
fi

ops=${FSX_OPS:-20000}
echo "fsx -N $ops (log: $work/fsx.log)"
if fsx -N "$ops" -P "$work" "$work/mnt/fsx.bin" >"$work/fsx.log" 2>&1; then
  tail -1 "$work/fsx.log"
else
  status=1
  tail -20 "$work/fsx.log"
fi
exit "$status"

#!/usr/bin/env bash
# The main job on the bundled example project: build editfs, mount a copy of
# demo/project, edit greet.py through its control file, show the status and the
# file, unmount. Installs fuse3 (for fusermount3) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v fusermount3 >/dev/null 2>&1; then
  echo "installing fuse3 (fusermount3)..." >&2
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq fuse3 >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq fuse3 >/dev/null; fi
fi
echo "building editfs (the first build takes a few minutes; cargo shows its progress)..." >&2
cargo build --release
editfs=$PWD/target/release/editfs

work=$(mktemp -d)
cp -r demo/project "$work/project"
mkdir "$work/mnt"
cleanup() { "$editfs" unmount "$work/mnt" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

run() { printf '\n$ %s\n' "$*"; eval "$@"; }

"$editfs" mount "$work/project" "$work/mnt" --daemon
cd "$work/mnt"
run ls
run "cat '$OLDPWD/demo/fix-greeting.edit'"
run "cat '$OLDPWD/demo/fix-greeting.edit' > greet.py.edit"
run cat greet.py.status
run cat greet.py
run ls .editfs/snapshots/greet.py
cd /
run "'$editfs' unmount '$work/mnt'"

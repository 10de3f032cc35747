#!/usr/bin/env bash
# Builds editfs, applies demo/fix-greeting.edit to a copy of the bundled example
# project (demo/project) and prints the report and the edited file.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r demo/project "$work/project"
mkdir "$work/project/.editfs"   # snapshots and the log go here

echo "\$ editfs apply project/greet.py demo/fix-greeting.edit"
status=0
./target/release/editfs apply "$work/project/greet.py" demo/fix-greeting.edit || status=$?
echo
echo "\$ cat project/greet.py"
cat "$work/project/greet.py"
exit "$status"

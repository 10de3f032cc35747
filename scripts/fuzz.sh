#!/usr/bin/env bash
# Fuzzes the payload parsers and the edit engine with the property tests
# `never_panics_never_writes_on_failure` (no panic, no write on failure, a
# report that parses) and `never_partly_applies`, in release mode.
#
#   scripts/fuzz.sh              # 1,000,000 cases each, split over all cores
#   scripts/fuzz.sh 5000000      # more
#   JOBS=1 scripts/fuzz.sh 20000 # one process
#
# CI runs the same properties with their short default counts through `cargo test`.
# Each process draws its own random inputs; a failure prints its minimal input.
set -euo pipefail
cd "$(dirname "$0")/.."

total=${1:-1000000}
jobs=${JOBS:-$(nproc)}
per=$(((total + jobs - 1) / jobs))
cargo test --release --test engine --no-run
echo "fuzzing: $jobs processes x $per cases per property"
pids=()
for _ in $(seq "$jobs"); do
  EDITFS_FUZZ_CASES=$per cargo test --release -q --test engine -- \
    --exact properties::never_panics_never_writes_on_failure properties::never_partly_applies &
  pids+=("$!")
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
if [ "$status" = 0 ]; then
  echo "fuzzing: $((per * jobs)) cases per property, no failure"
fi
exit "$status"

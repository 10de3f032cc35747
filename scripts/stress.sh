#!/usr/bin/env bash
# Runs the mount's stress test for longer than CI does: writers, readers, single-
# and multi-file commits, undo and renames on shared files, under a watchdog that
# fails on any operation stuck over 5 s. Needs root (or FUSE) like the other
# mount tests. Usage: scripts/stress.sh [SECONDS]   (default 300)
set -euo pipefail
cd "$(dirname "$0")/.."
export EDITFS_STRESS_SECS="${1:-300}"
echo "stress: ${EDITFS_STRESS_SECS}s of mixed load on a real mount"
cargo test --test system -- --nocapture mount_races::stress_

#!/usr/bin/env bash
# Sessions outlive the daemon (issue 18, Acceptance): N sessions (default
# 20), each with a shell loop three levels deep (create, append+fsync,
# read-back, mkdir/rmdir, rename, readdir, stat, git status, a descriptor
# held for append), a process appending to a held file every 10 ms and one
# writing through a shared mmap, while 10 takeovers and 10 kill -9 + starts
# alternate between two builds of wsfs. Fails on any failed operation or
# lost write; prints the pause per kind of restart (p50, p99, max). Needs
# root, /dev/fuse and python3 (for the mmap writer; skipped without it).
#
#   hack/measure-outlive.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
WSFS_MEASURE=1 WSFS_MEASURE_N="${1:-20}" \
  go test -count=1 -timeout 30m -run '^TestMeasureOutlive$' -v ./mounts/ | grep -E '^(MEASURE|--- |ok|FAIL|\s+\S+_test.go)'

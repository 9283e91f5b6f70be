#!/usr/bin/env bash
# Sessions per daemon (issue 4, Measure): one `wsfs serve`, N sessions (default
# 200) each on its own small root; prints p50/p99 create and remove latency
# and the daemon's RSS per idle session. Needs root and /dev/fuse.
#
#   hack/measure-sessions.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
WSFS_MEASURE=1 WSFS_MEASURE_N="${1:-200}" \
  go test -count=1 -run '^TestMeasureSessionsPerDaemon$' -v ./mounts/ | grep -E '^(MEASURE|--- |ok|FAIL)'

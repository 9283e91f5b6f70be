#!/usr/bin/env bash
# Sessions per daemon at scale (issue 22): builds wsfs and hack/scalebench,
# then for each count (default 100,1000,5000) runs one `wsfs serve` with that
# many sessions, each on its own small root, created one at a time through
# the API, and prints create/remove p50/p99 (and the p99 of the last tenth of
# the creates), daemon RSS and anonymous memory per idle session, threads, and
# CPU while idle; writes heap-N.pprof (summarize: go tool pprof -top
# -sample_index=inuse_space BIN heap-N.pprof) and daemon-N.log to OUT.
# Needs root and /dev/fuse. Not a test: it asserts nothing.
#
#   hack/measure-scale.sh [COUNTS] [OUT]      e.g. hack/measure-scale.sh 100,1000 /tmp/scale
set -euo pipefail
cd "$(dirname "$0")/.."
counts="${1:-100,1000,5000}"
out="${2:-$(mktemp -d)}"
mkdir -p "$out"
go build -o "$out/wsfs" ./cmd/wsfs
go build -o "$out/scalebench" ./hack/scalebench
# Each session holds descriptors and inotify watches; raise what a shell can.
ulimit -n "$(ulimit -Hn)" || true
"$out/scalebench" -wsfs "$out/wsfs" -n "$counts" -out "$out"
echo "profiles and logs: $out"

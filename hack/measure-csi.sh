#!/usr/bin/env bash
# Volumes per node at scale (issue 22): one `wsfs csi` plugin, N volumes
# (default 1000) published one at a time through its CSI socket by
# NodePublishVolume over gRPC, as kubelet does (csi/bench_test.go's
# BenchmarkPublishUnpublish), then unpublished. Prints publish/unpublish
# p50/p99, the plugin's RSS and descriptors per published volume and its CPU
# while all are published and idle. Needs root and /dev/fuse. Not a test: it
# asserts nothing. Extra arguments go to go test (e.g. -benchtime=2x).
#
#   hack/measure-csi.sh [N] [go test flags...]      e.g. hack/measure-csi.sh 1000
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-1000}"
shift || true
# Each volume holds descriptors; raise what a shell can.
ulimit -n "$(ulimit -Hn)" || true
exec go test -run '^$' -bench '^BenchmarkPublishUnpublish$' -benchtime=1x -timeout 60m "$@" ./csi/ -csi.volumes "$n"

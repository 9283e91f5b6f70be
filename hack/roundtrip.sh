#!/usr/bin/env bash
# Usage: hack/roundtrip.sh
#
# The cost of one FUSE round trip, wsfs beside fuse-overlayfs in the same
# interleaved run: a statfs(2), an lgetxattr(2) of security.selinux (what
# `ls -l` asks for every entry), an open+close and an open+read+fstat+close
# of a small file, each ROUNDTRIP_N (20000) times; per round trip the wall
# time, the server's CPU time and its context switches (hack/roundtrip).
# Not a test; it asserts nothing. Run as root with /dev/fuse and
# fuse-overlayfs (hack/ci-setup.sh installs it).
#
# wsfs is hack/benchmount (fusefs.Mount, default configuration), once per
# entry of ROUNDTRIP_PROCS: "default" runs it as `wsfs mount` runs
# (fusefs.TuneProcs: GOMAXPROCS a quarter of the CPUs, at least 1), a number
# runs it with that GOMAXPROCS (e.g. ROUNDTRIP_PROCS="default 1 2").
# ROUNDTRIP_TRANSPORTS ("dev io-uring") lists the FUSE transports wsfs runs
# with (benchmount -fuse-transport): each entry of ROUNDTRIP_PROCS once per
# transport, io-uring configurations named wsfs-uring-<procs>. io-uring is
# skipped with a line when the fuse module's enable_uring parameter is off
# (this script never changes it: echo 1 > /sys/module/fuse/parameters/enable_uring).
# ROUNDTRIP_THINK ("0 20") lists the microseconds of busy computation
# between two round trips (0: a tight loop; 20: about what `ls -l` spends on
# an entry, which lets an idle CPU go to sleep between requests).
# ROUNDTRIP_CLIENTS ("1") lists how many clients make the round trips at
# once, each a thread pinned to its own CPU (hack/roundtrip's CLIENTS): 2
# on 2 CPUs is a parallel tool, or one that moves between CPUs.
# ROUNDTRIP_ROUNDS (2) rounds, configurations in turn within each.
# First it prints the floor under any round trip here (hack/switchcost): the
# same hand-off of the CPU and back without a file system, between two
# threads, two processes on one CPU (what a request served on the caller's
# CPU, as over io_uring, cannot go below) and two processes on two CPUs (a
# wake-up of another CPU).
# Everything is made under a fresh directory below ROUNDTRIP_TMPDIR
# (/var/tmp) and unmounted by exact path on exit.
set -euo pipefail

N=${ROUNDTRIP_N:-20000}
ROUNDS=${ROUNDTRIP_ROUNDS:-2}
read -r -a PROCS <<<"${ROUNDTRIP_PROCS:-default}"
read -r -a THINK <<<"${ROUNDTRIP_THINK:-0 20}"
read -r -a CLIENTS <<<"${ROUNDTRIP_CLIENTS:-1}"
read -r -a TRANSPORTS <<<"${ROUNDTRIP_TRANSPORTS:-dev io-uring}"
URING_PARAM=/sys/module/fuse/parameters/enable_uring
HERE=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" != 0 ]; then
	echo "roundtrip: run as root (it mounts with mount(2))" >&2
	exit 2
fi
command -v fuse-overlayfs >/dev/null || {
	echo "roundtrip: fuse-overlayfs not found (apt-get install fuse-overlayfs, or hack/ci-setup.sh)" >&2
	exit 2
}

TMP=$(mktemp -d "${ROUNDTRIP_TMPDIR:-/var/tmp}/wsfs-roundtrip.XXXXXX")
MOUNTS=()
PIDS=()
cleanup() {
	local mp p
	cd /
	for mp in "${MOUNTS[@]}"; do
		if awk -v p="$mp" '$2 == p { f = 1 } END { exit !f }' /proc/mounts; then
			umount -- "$mp" 2>/dev/null || umount -l -- "$mp"
		fi
	done
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf -- "$TMP"
}
trap cleanup EXIT

(cd "$HERE" && go build -o "$TMP/benchmount" ./hack/benchmount && go build -o "$TMP/roundtrip" ./hack/roundtrip &&
	go build -o "$TMP/switchcost" ./hack/switchcost)

declare -A PID
CONFIGS=()
for tr in "${TRANSPORTS[@]}"; do
	if [ "$tr" = io-uring ] && [ "$(cat "$URING_PARAM" 2>/dev/null)" != Y ]; then
		echo "roundtrip: wsfs-uring skipped: FUSE over io_uring is off ($URING_PARAM is not Y)" >&2
		continue
	fi
	for p in "${PROCS[@]}"; do
		c=wsfs-$p
		[ "$tr" = io-uring ] && c=wsfs-uring-$p
		mkdir -p "$TMP/$c/root" "$TMP/$c/mnt"
		echo hello >"$TMP/$c/root/f"
		if [ "$p" = default ]; then
			"$TMP/benchmount" -fuse-transport "$tr" -root "$TMP/$c/root" -mountpoint "$TMP/$c/mnt" >"$TMP/$c/out" 2>&1 &
		else
			GOMAXPROCS=$p "$TMP/benchmount" -fuse-transport "$tr" -root "$TMP/$c/root" -mountpoint "$TMP/$c/mnt" >"$TMP/$c/out" 2>&1 &
		fi
		PID[$c]=$!
		PIDS+=("${PID[$c]}")
		MOUNTS+=("$TMP/$c/mnt")
		for ((i = 0; i < 100; i++)); do
			grep -q ready "$TMP/$c/out" 2>/dev/null && break
			sleep 0.1
		done
		grep -q ready "$TMP/$c/out" || { cat "$TMP/$c/out" >&2; exit 1; }
		CONFIGS+=("$c")
	done
done
mkdir -p "$TMP/ovl/lower" "$TMP/ovl/upper" "$TMP/ovl/work" "$TMP/ovl/mnt"
echo hello >"$TMP/ovl/upper/f"
fuse-overlayfs -f -o "lowerdir=$TMP/ovl/lower,upperdir=$TMP/ovl/upper,workdir=$TMP/ovl/work" "$TMP/ovl/mnt" >"$TMP/ovl/out" 2>&1 &
PID[overlay]=$!
PIDS+=("${PID[overlay]}")
MOUNTS+=("$TMP/ovl/mnt")
for ((i = 0; i < 100; i++)); do
	awk -v p="$TMP/ovl/mnt" '$2 == p { f = 1 } END { exit !f }' /proc/mounts && break
	sleep 0.1
done
CONFIGS+=(overlay)

file() { if [ "$1" = overlay ]; then echo "$TMP/ovl/mnt/f"; else echo "$TMP/$1/mnt/f"; fi; }

echo "### FUSE round trips: $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $N per line"
echo "Hand-off floor (hack/switchcost, µs per round trip between two threads or processes, no file system):"
"$TMP/switchcost" | sed 's/^/  /'
for clients in "${CLIENTS[@]}"; do
	for think in "${THINK[@]}"; do
		for kind in statfs getxattr open openread; do
			for ((r = 1; r <= ROUNDS; r++)); do
				for c in "${CONFIGS[@]}"; do
					printf '%-14s ' "$c"
					"$TMP/roundtrip" "$kind" "$(file "$c")" "$N" "${PID[$c]}" "$think" "$clients"
				done
			done
		done
	done
done

#!/usr/bin/env bash
# Usage: hack/deeptree.sh [levels]
#
# What a tree deeper than PATH_MAX costs through the mount (issue 20 item
# 17): a chain of DEEP_LEVELS (40) directories with 250-byte names (about
# 10,000 bytes deep at the bottom), built by cd-ing one level at a time, as
# a build script would. At each level: mkdir the next directory, cd into it,
# touch f and stat it, then DEEP_REPS (40) more create+stat+unlink rounds of
# other names to measure the per-operation cost at that depth. Served by
# hack/benchmount (workspace-write policy over the root) and, in the same
# run, natively on the backing directory. Not a test; it asserts nothing.
# Run as root. Prints microseconds per level round at depth 1, 20 and 40
# (the median of the three levels around each), mount and native, and the
# ratios: depth40/depth1 says whether the per-operation cost grows with
# depth, mount/native what the mount costs. DEEP_PROFILE=FILE writes the
# server's CPU profile there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LEVELS=${1:-${DEEP_LEVELS:-40}}
REPS=${DEEP_REPS:-40}
work=$(mktemp -d /var/tmp/wsfs-deeptree.XXXXXX)
BM_PID=
cleanup() {
	[ -n "$BM_PID" ] && kill "$BM_PID" 2>/dev/null && wait "$BM_PID" 2>/dev/null || true
	mountpoint -q "$work/mnt" 2>/dev/null && umount -l "$work/mnt"
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/benchmount" ./hack/benchmount
mkdir -p "$work/tree/native" "$work/tree/mounted" "$work/mnt"

# build DIR: builds the chain under DIR and prints one line per level: the
# level and the microseconds its round took.
build() {
	python3 - "$1" "$LEVELS" "$REPS" <<'PY'
import os, sys, time
top, levels, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.chdir(top)
for i in range(1, levels + 1):
    t0 = time.perf_counter_ns()
    d = "d" * 248 + "%02d" % i
    os.mkdir(d)
    os.chdir(d)
    open("f", "w").close()
    os.stat("f")
    for j in range(reps):
        g = "g%d" % j
        open(g, "w").close()
        os.stat(g)
        os.unlink(g)
    print(i, (time.perf_counter_ns() - t0) // 1000)
PY
}

prof=()
[ -n "${DEEP_PROFILE:-}" ] && prof=(-cpuprofile "$DEEP_PROFILE")
rm -f "$work/out"; mkfifo "$work/out"
"$work/benchmount" -root "$work/tree" -mountpoint "$work/mnt" "${prof[@]}" >"$work/out" 2>>"$work/log" &
BM_PID=$!
read -r line <"$work/out"
[ "$line" = ready ] || { echo "benchmount: $line" >&2; cat "$work/log" >&2; exit 1; }
build "$work/mnt/mounted" >"$work/mount.txt"
build "$work/tree/native" >"$work/native.txt"
kill "$BM_PID"; wait "$BM_PID" || true
BM_PID=

# at FILE LEVEL: the median of the rounds at LEVEL-1, LEVEL, LEVEL+1 (those
# that exist).
at() {
	awk -v l="$2" '$1 >= l-1 && $1 <= l+1 {print $2}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
mid=$(( (LEVELS + 1) / 2 ))
printf 'per level round (mkdir+cd+touch+stat, then %d x create+stat+unlink), microseconds\n' "$REPS"
printf '%-8s %10s %10s %8s\n' depth mount_us native_us ratio
for l in 1 "$mid" "$LEVELS"; do
	m=$(at "$work/mount.txt" "$l"); n=$(at "$work/native.txt" "$l")
	printf '%-8s %10s %10s %8.2f\n' "$l" "$m" "$n" "$(echo "$m / $n" | bc -l)"
done
m1=$(at "$work/mount.txt" 1); mN=$(at "$work/mount.txt" "$LEVELS")
n1=$(at "$work/native.txt" 1); nN=$(at "$work/native.txt" "$LEVELS")
printf 'growth depth%d/depth1: mount %.2f native %.2f\n' "$LEVELS" "$(echo "$mN / $m1" | bc -l)" "$(echo "$nN / $n1" | bc -l)"
printf 'total seconds: mount %.2f native %.2f\n' \
	"$(awk '{s+=$2} END {print s/1e6}' "$work/mount.txt")" "$(awk '{s+=$2} END {print s/1e6}' "$work/native.txt")"

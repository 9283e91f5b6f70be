#!/usr/bin/env bash
# Usage: hack/fdcache-cost.sh
#
# What the node descriptor cache costs when a tree does not fit in it
# (issue 18 item 6): the same tree of 10,000 files (20 directories of 500,
# 5 bytes each) served by hack/benchmount under two descriptor limits, in
# interleaved rounds:
#   fits   prlimit --nofile=20000: cache capacity 15,000, every node's
#          descriptor stays open (as before the cache)
#   small  prlimit --nofile=800: capacity 600, so nearly every use of a node
#          after the walk moved on closes one descriptor and opens one again
#          (by name in its parent, or open_by_handle_at(2))
# Timed, on a fresh mount each round: a cold stat walk (find -printf: one
# LOOKUP per entry), then grep -r twice (every file opened and read; the
# second pass finds every descriptor of "small" closed). Not a test; it
# asserts nothing. Run as root. Prints the median seconds and the ratio
# small/fits. COST_REPS (5) rounds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPS=${COST_REPS:-5}
work=$(mktemp -d /var/tmp/wsfs-fdcache-cost.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for m in "$work"/mnt-*; do mountpoint -q "$m" 2>/dev/null && umount -l "$m"; done
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/benchmount" ./hack/benchmount
tree="$work/tree"
mkdir -p "$tree"
for d in $(seq 1 20); do mkdir "$tree/d$d"; (cd "$tree/d$d" && for f in $(seq 1 500); do echo "x$f" >"f$f"; done); done
now() { date +%s.%N; }
declare -A t
for rep in $(seq 1 "$REPS"); do
	for cfg in fits small; do
		lim=20000
		[ "$cfg" = small ] && lim=800
		mnt="$work/mnt-$cfg"
		mkdir -p "$mnt"
		rm -f "$work/out"; mkfifo "$work/out"
		prlimit --nofile=$lim:$lim "$work/benchmount" -root "$tree" -mountpoint "$mnt" >"$work/out" 2>>"$work/log" &
		BM_PID=$!
		pids+=("$BM_PID")
		read -r line <"$work/out"
		[ "$line" = ready ] || { echo "benchmount: $line" >&2; cat "$work/log" >&2; exit 1; }
		a=$(now); find "$mnt" -printf '%s\n' >/dev/null; b=$(now)
		grep -r -c x "$mnt" >/dev/null; c=$(now)
		grep -r -c x "$mnt" >/dev/null; d=$(now)
		kill "$BM_PID"; wait "$BM_PID" || true
		mountpoint -q "$mnt" && { echo "$mnt still mounted after benchmount exited" >&2; exit 1; }
		t[walk_$cfg]="${t[walk_$cfg]:-} $(echo "$b - $a" | bc)"
		t[grep1_$cfg]="${t[grep1_$cfg]:-} $(echo "$c - $b" | bc)"
		t[grep2_$cfg]="${t[grep2_$cfg]:-} $(echo "$d - $c" | bc)"
	done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-12s %10s %10s %8s\n' workload fits_s small_s ratio
for w in walk grep1 grep2; do
	f=$(echo "${t[${w}_fits]}" | median)
	s=$(echo "${t[${w}_small]}" | median)
	printf '%-12s %10.3f %10.3f %7.3fx\n' "$w" "$f" "$s" "$(echo "$s / $f" | bc -l)"
done

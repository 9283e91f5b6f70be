#!/usr/bin/env bash
# Usage: hack/keep-cost.sh
#
# What keeping a connection's state for a successor costs (issue 18): the
# same tree served by hack/benchmount without and with -keep (a holder in
# the server process; every new node, open and release is then appended to
# the state memfd), in interleaved rounds. The timed workloads are the ones
# that tell the kernel of new nodes, where the state is written: a cold
# stat walk (a fresh mount: every entry a LOOKUP), creating KEEP_FILES
# (5000) files and removing them. Not a test; it asserts nothing. Run as
# root. Prints the median seconds of each, the ratio kept/plain, and the
# state's size per 1,000 nodes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPS=${KEEP_REPS:-5}
FILES=${KEEP_FILES:-5000}
work=$(mktemp -d /var/tmp/wsfs-keep-cost.XXXXXX)
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
# 20 directories of 500 files: 10,000 nodes for the walk.
for d in $(seq 1 20); do mkdir "$tree/d$d"; (cd "$tree/d$d" && touch $(seq -f 'f%g' 1 500)); done

now() { date +%s.%N; }
declare -A t
for rep in $(seq 1 "$REPS"); do
	for cfg in plain kept; do
		mnt="$work/mnt-$cfg"
		mkdir -p "$mnt"
		args=(-root "$tree" -mountpoint "$mnt")
		[ "$cfg" = kept ] && args+=(-keep "$work/holder.sock")
		rm -f "$work/out"; mkfifo "$work/out"
		"$work/benchmount" "${args[@]}" >"$work/out" 2>>"$work/log" &
		BM_PID=$!
		pids+=("$BM_PID")
		read -r line <"$work/out"
		[ "$line" = ready ] || { echo "benchmount: $line" >&2; cat "$work/log" >&2; exit 1; }
		a=$(now); find "$mnt" -printf '%s\n' >/dev/null; b=$(now)
		mkdir "$mnt/new"; (cd "$mnt/new" && for i in $(seq 1 "$FILES"); do : >"f$i"; done); c=$(now)
		rm -r "$mnt/new"; d=$(now)
		if [ "$cfg" = kept ]; then
			# The server keeps the state mapped, not open (its
			# descriptor is closed once the holder has a copy).
			state=$(for f in /proc/"$BM_PID"/fd/* /proc/"$BM_PID"/map_files/*; do case "$(readlink "$f")" in /memfd:wsfs-conn*) stat -L -c '%b * %B' "$f" | bc ;; esac; done | sort -n | tail -1)
			t[state]="${t[state]:-} $state"
		fi
		kill "$BM_PID"; wait "$BM_PID" || true
		mountpoint -q "$mnt" && { echo "$mnt still mounted after benchmount exited" >&2; exit 1; }
		t[walk_$cfg]="${t[walk_$cfg]:-} $(echo "$b - $a" | bc)"
		t[create_$cfg]="${t[create_$cfg]:-} $(echo "$c - $b" | bc)"
		t[delete_$cfg]="${t[delete_$cfg]:-} $(echo "$d - $c" | bc)"
	done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-12s %10s %10s %8s\n' workload plain_s kept_s ratio
for w in walk create delete; do
	p=$(echo "${t[walk_plain]}" | median); [ "$w" != walk ] && p=$(echo "${t[${w}_plain]}" | median)
	k=$(echo "${t[${w}_kept]}" | median)
	printf '%-12s %10.3f %10.3f %7.3fx\n' "$w" "$p" "$k" "$(echo "$k / $p" | bc -l)"
done
s=$(echo "${t[state]}" | median)
# Nodes the state describes: the tree's 10,021 entries, plus the created
# files and their forgets (appended, compacted only by a successor).
echo "state after a walk of 10,021 nodes and $FILES creates+removes: $s bytes ($(echo "$s * 1000 / (10021 + $FILES)" | bc) bytes per 1,000 nodes touched)"

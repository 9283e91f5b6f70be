#!/usr/bin/env bash
# What passing write opens through FUSE passthrough saves, to decide issue
# 20 item 7 (README, "Policy changes and open descriptors"). A write open
# that is not passed through sends every write(2) to the server, where the
# policy could decide it; a passed-through one goes to the backing file in
# the kernel. One `wsfs mount` passes write opens through (the default as
# root); a second one runs with --no-passthrough, so every write reaches the
# server: the cost of "every write decided".
#
#   bash hack/revocation-cost.sh            # 256 MiB, 3 repetitions
#   SIZE_MB=64 REPS=5 bash hack/revocation-cost.sh
#
# Prints, per server and block size, the median MiB/s of dd writing SIZE_MB
# into a new file with conv=fsync, and of native ext4 in the same directory.
# Needs root (FUSE passthrough).
set -euo pipefail
size=${SIZE_MB:-256}
reps=${REPS:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /var/tmp/wsfs-revocation.XXXXXX)
chmod 0755 "$work"
bin=$work/wsfs
(cd "$here" && go build -o "$bin" ./cmd/wsfs)
chmod 0755 "$bin"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for m in "$work"/*/mnt "$work"/*/mnt@host; do
		grep -q " $m " /proc/mounts 2>/dev/null && umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

# start NAME FLAGS...: mounts $work/NAME/root at $work/NAME/mnt.
start() {
	local d=$work/$1
	shift
	mkdir -p "$d/root" "$d/mnt"
	"$bin" mount --root "$d/root" --mountpoint "$d/mnt" --mode full-access "$@" >/dev/null 2>"$d/log" &
	pids+=($!)
	for _ in $(seq 200); do
		grep -q " $d/mnt fuse" /proc/mounts && return 0
		sleep 0.05
	done
	echo "revocation-cost: the mount at $d/mnt did not come up:" >&2
	cat "$d/log" >&2
	exit 1
}

# rate DIR BS: median MiB/s of dd writing $size MiB in blocks of BS.
rate() {
	local dir=$1 bs=$2 count r
	count=$((size * 1024 * 1024 / $(numfmt --from=iec "$bs")))
	for _ in $(seq "$reps"); do
		rm -f "$dir/f"
		r=$(dd if=/dev/zero of="$dir/f" bs="$bs" count="$count" conv=fsync 2>&1 | awk '/copied/ {print $(NF-1), $NF}')
		case $r in
		*GB/s) echo "$r" | awk '{printf "%.0f\n", $1 * 1000 / 1.048576}' ;;
		*MB/s) echo "$r" | awk '{printf "%.0f\n", $1 / 1.048576}' ;;
		*kB/s) echo "$r" | awk '{printf "%.1f\n", $1 / 1048.576}' ;;
		esac
	done | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
	rm -f "$dir/f"
}

start pt
start nopt --no-passthrough
mkdir -p "$work/native"
printf '%-34s %10s %10s\n' "writes of ${size} MiB (MiB/s)" "bs=4K" "bs=1M"
for row in "native ext4:$work/native" "wsfs, passed through:$work/pt/mnt" "wsfs, every write to the server:$work/nopt/mnt"; do
	IFS=: read -r name dir <<<"$row"
	printf '%-34s %10s %10s\n' "$name" "$(rate "$dir" 4K)" "$(rate "$dir" 1M)"
done

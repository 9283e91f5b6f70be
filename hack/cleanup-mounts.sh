#!/usr/bin/env bash
# Usage: hack/cleanup-mounts.sh DIR
#
# Lazily unmounts every FUSE mount and every overlay (a layered session's,
# README "Layers") at DIR or below it (an exact path prefix, read from
# /proc/mounts), deepest first. Meant for leftovers of a crashed test or
# demo; it touches nothing outside DIR.
set -euo pipefail

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
dir=$(realpath -m -- "$1")
dir=${dir%/}
if [ -z "$dir" ]; then
	echo "cleanup-mounts: refusing to clean up every mount under /" >&2
	exit 2
fi

# /proc/mounts escapes space, tab, newline and backslash as \040 \011 \012 \134.
unescape() {
	local s=$1
	s=${s//\\040/ }
	s=${s//\\011/$'\t'}
	s=${s//\\012/$'\n'}
	s=${s//\\134/\\}
	printf '%s' "$s"
}

mapfile -t mounts < <(awk '$3 == "fuse" || $3 ~ /^fuse\./ || $3 == "fuseblk" || $3 == "overlay" { print $2 }' /proc/mounts | sort -r)
status=0
for m in "${mounts[@]}"; do
	mp=$(unescape "$m")
	case "$mp" in
	"$dir" | "$dir"/*)
		echo "cleanup-mounts: unmounting $mp"
		if ! umount -l -- "$mp" 2>/dev/null && ! fusermount3 -u -z -- "$mp" 2>/dev/null; then
			echo "cleanup-mounts: could not unmount $mp" >&2
			status=1
		fi
		;;
	esac
done
exit "$status"

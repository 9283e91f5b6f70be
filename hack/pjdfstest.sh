#!/usr/bin/env bash
# Runs pjdfstest (the POSIX file system test suite) on wsfs --allow-other
# mounts, one per policy mode, and prints prove's summary for each.
#
#   PJDFSTEST_SRC=/path/to/pjdfstest bash hack/pjdfstest.sh [MODE...]
#
# It fetches nothing: PJDFSTEST_SRC names a pjdfstest source tree (a checkout
# of github.com/pjd/pjdfstest), copied and built here (autoreconf, configure,
# make: needs autoconf, automake, a C compiler and make). Without it the
# script says so and exits 0. MODEs default to "full-access workspace-write".
# Needs root (pjdfstest acts as many users) and prove (perl). The subset is
# PJDFSTEST_TESTS, default the directories wsfs is expected to pass:
# chmod chown link mkdir open rename rmdir symlink truncate unlink utimensat.
#
# Expected: 0 failed files in full-access; in workspace-write only the files
# that make block or character devices fail (EPERM by policy, README
# "Policy"). PJDFSTEST_KEEP=1 keeps the work directory (prove's logs).
# NATIVE=1 also runs the subset in a directory of the file system
# holding the work directory, for reference. LAYER=1 serves each mount on a
# copy-on-write layer (wsfs mount --layer, README "Layers"): the same files
# are expected to pass. Exit code: 0 when every run
# completed (failures are reported, not fatal), 1 on a setup error.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tests=${PJDFSTEST_TESTS:-"chmod chown link mkdir open rename rmdir symlink truncate unlink utimensat"}
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(full-access workspace-write)

if [ -z "${PJDFSTEST_SRC:-}" ] || [ ! -f "${PJDFSTEST_SRC}/pjdfstest.c" ]; then
	echo "pjdfstest.sh: skipped: PJDFSTEST_SRC does not name a pjdfstest source tree (set PJDFSTEST_SRC=/path/to/pjdfstest; this script downloads nothing)"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "pjdfstest.sh: pjdfstest must run as root" >&2
	exit 1
fi
for tool in autoreconf make cc prove go; do
	command -v "$tool" >/dev/null || { echo "pjdfstest.sh: $tool not found (apt-get install autoconf automake gcc make perl)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/wsfs-pjdfstest.XXXXXX)
chmod 0755 "$work"
server=""
mnt=""
cleanup() {
	if [ -n "$server" ]; then
		kill -TERM "$server" 2>/dev/null || true
		wait "$server" 2>/dev/null || true
	fi
	if [ -n "$mnt" ] && grep -q " $mnt fuse" /proc/mounts; then
		umount -l "$mnt" || true
	fi
	if [ "${PJDFSTEST_KEEP:-}" = 1 ]; then
		echo "pjdfstest.sh: kept $work (prove logs: $work/prove-*.log)"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

echo "pjdfstest.sh: building pjdfstest from $PJDFSTEST_SRC and wsfs in $work"
mkdir "$work/src"
(cd "$PJDFSTEST_SRC" && tar --exclude=.git -cf - .) | tar -C "$work/src" -xf -
if ! (cd "$work/src" && autoreconf -ifs && ./configure && make pjdfstest) >"$work/build.log" 2>&1; then
	tail -20 "$work/build.log" >&2
	echo "pjdfstest.sh: building pjdfstest failed" >&2
	exit 1
fi
go build -o "$work/wsfs" ./cmd/wsfs

# prove_in DIR LABEL: runs the subset in DIR, prints the summary and the
# failed files.
prove_in() {
	local dir=$1 label=$2 out=$work/prove-${2// /-}.log dirs=()
	for t in $tests; do dirs+=("$work/src/tests/$t"); done
	(cd "$dir" && prove -r "${dirs[@]}") >"$out" 2>&1 || true
	echo "== $label"
	# The failed files with their failed-test counts, each marked when the
	# file makes block or character devices (refused outside full-access),
	# then prove's Files=/Tests= and Result lines.
	local failed nfailed=0 ndev=0 f
	failed=$(sed -n '/^Test Summary Report/,$p' "$out" | grep -E '^/.*Failed: [1-9]' | sed "s#$work/src/tests/##" || true)
	while read -r f rest; do
		[ -n "$f" ] || continue
		nfailed=$((nfailed + 1))
		if grep -qE '\<(block|char)\>' "$work/src/tests/$f"; then
			ndev=$((ndev + 1))
			echo "  $f $rest [makes devices]"
		else
			echo "  $f $rest"
		fi
	done <<<"$failed"
	echo "  failed files: $nfailed ($ndev of them make block/char devices)"
	grep -E '^(Files=|Result:)' "$out" | sed 's/^/  /' || tail -5 "$out"
}

if [ "${NATIVE:-}" = 1 ]; then
	mkdir "$work/native"
	prove_in "$work/native" native
fi

for mode in "${modes[@]}"; do
	root=$work/root-$mode
	mnt=$work/mnt-$mode
	mkdir -m 0755 "$root" "$mnt"
	layer=()
	[ "${LAYER:-}" = 1 ] && layer=(--layer "$work/layer-$mode")
	"$work/wsfs" mount --root "$root" --mountpoint "$mnt" --allow-other --mode "$mode" "${layer[@]}" >"$work/server-$mode.log" 2>&1 &
	server=$!
	for _ in $(seq 100); do
		grep -q "^mounted" "$work/server-$mode.log" && break
		kill -0 "$server" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q "^mounted" "$work/server-$mode.log"; then
		cat "$work/server-$mode.log" >&2
		echo "pjdfstest.sh: wsfs mount ($mode) did not start" >&2
		exit 1
	fi
	prove_in "$mnt" "wsfs $mode"
	kill -TERM "$server"
	wait "$server" || true
	server=""
	if grep -q " $mnt fuse" /proc/mounts; then
		echo "pjdfstest.sh: $mnt still mounted after the server stopped" >&2
		umount -l "$mnt"
	fi
	mnt=""
done

#!/usr/bin/env bash
# Usage: hack/restart-storm.sh [ROUNDS]
#
# Restarts and takeovers that follow each other while processes work in a
# session (issue 18). One wsfs serve with a session; a loop with its cwd
# three levels deep in the mount writes, renames, removes, reads and lists
# without a pause. Each round kill -9s the serving daemon, starts a
# successor, and moments later (0-0.2 s, random) a second one, which takes
# over from the first (or loses the race and exits naming the winner).
# ROUNDS defaults to 15. Run as root. Not a test: it reports, and exits 1
# when the loop saw an error, a daemon logged an unknown node, a panic or
# a lookup-count underflow, a process under the work directory is in D
# state, or the mount does not serve at the end.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS=${1:-15}
work=$(mktemp -d /var/tmp/wsfs-restart-storm.XXXXXX)
bin=$work/wsfs sock=$work/wsfs.sock mp=$work/mnt/s1
daemons=()
cleanup() {
	touch "$work/stop"
	local serving
	serving=$(head -1 "$work/state/lock" 2>/dev/null)
	[ -n "$serving" ] && kill -INT "$serving" 2>/dev/null
	for i in $(seq 50); do grep -q " $work/" /proc/mounts || break; sleep 0.1; done
	for p in "${daemons[@]}"; do kill -9 "$p" 2>/dev/null; done
	grep " $work/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done
	pkill -f -- "--socket $work/state/holder.sock" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$bin" ./cmd/wsfs || exit 1
mkdir -p "$work/proj/a/b/c" "$work/state"
for i in $(seq 1 200); do echo "$i" >"$work/proj/f$i"; done
start() {
	"$bin" serve --socket "$sock" --state-dir "$work/state" --mount-base "$work/mnt" >>"$work/log.$1" 2>&1 &
	daemons+=($!)
	disown $!
}
start 0
for i in $(seq 100); do "$bin" session list --socket "$sock" >/dev/null 2>&1 && break; sleep 0.1; done
"$bin" session create s1 --socket "$sock" --root "$work/proj" >/dev/null || { cat "$work/log.0"; exit 1; }
(
	cd "$mp/a/b/c" || exit 1
	i=0
	while [ ! -e "$work/stop" ]; do
		echo "$i" >"w$((i % 50))" || echo "ERR write $i"
		mv "w$((i % 50))" "v$((i % 50))" || echo "ERR mv $i"
		cat "$mp/f$((i % 200 + 1))" >/dev/null || echo "ERR cat $i"
		rm -f "v$(((i + 25) % 50))" || echo "ERR rm $i"
		ls "$mp" >/dev/null || echo "ERR ls $i"
		i=$((i + 1))
	done
	echo "iterations $i"
) >"$work/loop.out" 2>&1 &
loop=$!
for r in $(seq 1 "$ROUNDS"); do
	sleep 0.5
	kill -9 "$(head -1 "$work/state/lock")"
	start "$r.b"
	sleep "0.$((RANDOM % 3))"
	start "$r.c"
	# One of the two serves: its pid is in the lock once it took it.
	for i in $(seq 100); do grep -qh "msg=serving" "$work/log.$r.b" "$work/log.$r.c" 2>/dev/null && break; sleep 0.1; done
	sleep 0.3
done
sleep 1
touch "$work/stop"
wait "$loop"
bad=0
errs=$(grep -c ERR "$work/loop.out")
echo "rounds: $ROUNDS; loop: $(grep iterations "$work/loop.out"), errors: $errs"
[ "$errs" = 0 ] || { grep -m5 ERR "$work/loop.out"; bad=1; }
logged=$(cat "$work"/log.* | grep -c -E 'panic|unknown node|underflow')
echo "daemon log lines with a panic, an unknown node or an underflow: $logged"
[ "$logged" = 0 ] || { cat "$work"/log.* | grep -m5 -E 'panic|unknown node|underflow'; bad=1; }
for p in $(pgrep -f -- "$work"); do
	if [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = D ]; then
		echo "D state: pid $p ($(cat "/proc/$p/comm"))"
		bad=1
	fi
done
if [ "$(timeout 10 cat "$mp/f1")" != 1 ]; then
	echo "the mount does not serve f1 at the end"
	bad=1
fi
[ "$bad" = 0 ] && echo "ok"
exit "$bad"

#!/usr/bin/env bash
# Usage: hack/bench.sh
#
# The benchmark of issue 3 ("Measure"): native vs wsfs vs go-fuse's
# example/loopback on a real tree. Not a test; it asserts nothing. Run as root
# (it mounts with mount(2) and drops caches); it needs /dev/fuse, git, tar,
# find, dd.
#
# Tree: a copy of $(go env GOROOT)/src (BENCH_SMALL=1: $(go env GOROOT)/src/net)
# made into a git repository (git init, add -A, commit, gc), copied once per
# configuration, so each configuration has its own identical backing tree on
# the same file system (no configuration rewrites another one's .git/index).
#   native    the backing directory itself
#   wsfs      hack/benchmount: fusefs.Mount with the default Config and
#             policy.Compile(policy.Spec{Primary: root, Temp: []string{}}).
#             Not `wsfs mount`, which serves the same Config but has no way
#             to dump Stats() between workloads (SIGUSR1 here).
#   loopback  go-fuse's example/loopback, built from the module graph
#             (-directmount as root; 1 s entry/attr timeouts, while wsfs by
#             default caches for a minute and invalidates on host changes)
#
# Workloads (run with the tree as working directory):
#   git_status     git status >/dev/null (warm: see below)
#   stat_walk      find . -printf '%s %T@\n' >/dev/null (lstat of every entry)
#   ls_lR          ls -lR >/dev/null
#   create_delete  mkdir a fresh subdir, create BENCH_FILES (5000) empty files
#                  in it (bash ': > fN'), then rm -r it
#   tar            tar cf - . | cat >/dev/null (cat, so tar cannot see
#                  /dev/null and skip reading)
#   write          dd if=/dev/zero bs=1M count=BENCH_MIB (256) conv=fsync
#   read           dd the file back with bs=1M; before it, untimed, the page
#                  cache is dropped (sync; echo 3 >/proc/sys/vm/drop_caches)
#                  for every configuration alike, so this is a COLD read. With
#                  BENCH_DROP_CACHES=0 (or when not root) it is a warm read for
#                  all. The file is removed afterwards, untimed.
#
# Interleaving: BENCH_REPS (5) repetitions; in each, every workload runs once
# per configuration, configurations in round-robin order (rotated by one each
# repetition). Before each repetition, untimed, every configuration runs
# `git status` and `tar` once, so every repetition starts warm (the cold read
# of the previous repetition dropped all caches). The table gives the median
# seconds over the repetitions and the ratio to native.
#
# FUSE opcode counts, two sources:
#  1. wsfs Stats() during the timed runs: benchmount writes Stats() as JSON
#     on SIGUSR1; the script dumps before and after each timed wsfs workload
#     (outside the timed span) and reports the median delta per counter.
#     Stats() counts only the node-tree operations fusefs implements (lookup,
#     getattr, open, create, ...), not READDIRPLUS, RELEASE, FORGET, READ...;
#     its "lookup" also counts the lookups go-fuse makes for each READDIRPLUS
#     entry, so it is not the number of LOOKUP requests.
#  2. Every request, for wsfs and loopback alike: after the timed runs, one
#     extra untimed pass mounts each with go-fuse debug output (benchmount
#     -debug, loopback -debug), warms up as above, runs each workload once and
#     counts the "rx N: OPCODE" lines the workload produced. FORGETs arrive
#     whenever the kernel evicts inodes, so they are charged to the workload
#     running at the time. BENCH_OPCOUNT=0 skips this pass.
#
# A workload that fails (non-zero exit) does not stop the run: its cell says
# FAIL n/REPS and the first lines of its stderr are printed under the table.
# Every mount is unmounted in an EXIT trap, by exact path, even on failure.
# Temp dir: under BENCH_TMPDIR (/tmp); BENCH_KEEP=1 keeps it (logs, results).
# Defaults take about 2-3 minutes on 2 shared cores; BENCH_REPS=1 BENCH_SMALL=1 is a
# quick check (about 20 s).
set -euo pipefail

REPS=${BENCH_REPS:-5}
SMALL=${BENCH_SMALL:-0}
NFILES=${BENCH_FILES:-5000}
MIB=${BENCH_MIB:-256}
OPCOUNT=${BENCH_OPCOUNT:-1}
DROP=${BENCH_DROP_CACHES:-1}
KEEP=${BENCH_KEEP:-0}

# git sees no system or user configuration: same behaviour on every machine.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
	echo "bench: not root: reading warm (no drop_caches), mounting via fusermount3" >&2
	DROP=0
fi
if [ "$DROP" = 1 ] && [ ! -w /proc/sys/vm/drop_caches ]; then
	echo "bench: /proc/sys/vm/drop_caches not writable: reading warm" >&2
	DROP=0
fi

TMP=$(mktemp -d "${BENCH_TMPDIR:-/tmp}/wsfs-bench.XXXXXX")
MOUNTS=() # exact mountpoints this script made
PIDS=()   # server processes this script started

is_mounted() { awk -v p="$1" '$2 == p { f = 1 } END { exit !f }' /proc/mounts; }

cleanup() {
	local rc=$? mp pid left=0
	trap - EXIT INT TERM
	cd /
	for mp in "${MOUNTS[@]}"; do
		if is_mounted "$mp"; then
			umount -- "$mp" 2>/dev/null || umount -l -- "$mp" 2>/dev/null ||
				fusermount3 -u -z -- "$mp" 2>/dev/null || true
		fi
	done
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	for mp in "${MOUNTS[@]}"; do
		if is_mounted "$mp"; then
			echo "bench: still mounted: $mp" >&2
			left=1
		fi
	done
	if [ "$KEEP" = 1 ] || [ "$left" = 1 ]; then
		echo "bench: kept $TMP" >&2
	else
		rm -rf --one-file-system -- "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log() { printf 'bench: %s\n' "$*" >&2; }
now() { printf '%s' "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", b - a }'; }

# --- build ---------------------------------------------------------------
BIN=$TMP/bin
mkdir -p "$BIN"
log "building benchmount and loopback"
(cd "$HERE" && go build -o "$BIN/benchmount" ./hack/benchmount &&
	go build -o "$BIN/loopback" github.com/hanwen/go-fuse/v2/example/loopback)

# --- tree ----------------------------------------------------------------
GOROOT_SRC=$(go env GOROOT)/src
SRC=$GOROOT_SRC
[ "$SMALL" = 1 ] && SRC=$GOROOT_SRC/net
log "building the tree from $SRC"
BASE=$TMP/base
mkdir -p "$BASE"
cp -a "$SRC" "$BASE/tree"
(
	cd "$BASE/tree"
	git init -q
	git config gc.auto 0 # no background gc during the build or the timed runs
	git add -A
	git -c user.name=bench -c user.email=bench@localhost commit -q -m tree
	git gc -q
)
NFILES_TREE=$(find "$BASE/tree" -type f | wc -l)

CONFIGS=(native wsfs loopback)
declare -A BACK DIR
for c in "${CONFIGS[@]}"; do
	BACK[$c]=$TMP/back-$c
	cp -a "$BASE/tree" "${BACK[$c]}"
done
rm -rf "$BASE"
DIR[native]=${BACK[native]}

# --- mounts --------------------------------------------------------------
WSFS_PID=
STATS=$TMP/wsfs-stats.json

# wait_ready FILE WORD PID: until FILE has a line WORD (the server is serving).
wait_ready() {
	local i
	for ((i = 0; i < 200; i++)); do
		if grep -qx -- "$2" "$1" 2>/dev/null; then return 0; fi
		if ! kill -0 "$3" 2>/dev/null; then break; fi
		sleep 0.05
	done
	echo "bench: server $3 did not come up; its output:" >&2
	cat "$1" "$1.err" >&2 2>/dev/null || true
	return 1
}

# mount_wsfs MOUNTPOINT [-debug]: sets WSFS_PID.
mount_wsfs() {
	local mp=$1
	shift
	mkdir -p "$mp"
	MOUNTS+=("$mp")
	"$BIN/benchmount" -root "${BACK[wsfs]}" -mountpoint "$mp" -stats "$STATS" "$@" \
		>"$mp.out" 2>"$mp.out.err" &
	WSFS_PID=$!
	PIDS+=("$WSFS_PID")
	wait_ready "$mp.out" ready "$WSFS_PID"
}

# mount_loopback MOUNTPOINT [-debug]: sets LOOP_PID.
mount_loopback() {
	local mp=$1 direct=()
	shift
	mkdir -p "$mp"
	MOUNTS+=("$mp")
	[ "$(id -u)" -eq 0 ] && direct=(-directmount)
	"$BIN/loopback" "${direct[@]}" "$@" "$mp" "${BACK[loopback]}" \
		>"$mp.out" 2>"$mp.out.err" &
	LOOP_PID=$!
	PIDS+=("$LOOP_PID")
	wait_ready "$mp.out" 'Mounted!' "$LOOP_PID"
}

# unmount_server MOUNTPOINT PID: unmount by exact path, wait for the server.
unmount_server() {
	cd /
	umount -- "$1" 2>/dev/null || umount -l -- "$1" 2>/dev/null || fusermount3 -u -z -- "$1"
	wait "$2" 2>/dev/null || true
}

# --- workloads -----------------------------------------------------------
WORKLOADS=(git_status stat_walk ls_lR create_delete tar write read)
SEQ=0 # fresh names for create_delete

wl_git_status() { git status >/dev/null; }
wl_stat_walk() { find . -printf '%s %T@\n' >/dev/null; }
wl_ls_lR() { ls -lR >/dev/null; }
wl_create_delete() {
	local d=bench-cd-$1 i
	mkdir "$d" || return
	for ((i = 0; i < NFILES; i++)); do
		: >"$d/f$i" || return
	done
	rm -r "$d"
}
wl_tar() { tar cf - . | cat >/dev/null; }
wl_write() { dd if=/dev/zero of=bench-big bs=1M count="$MIB" conv=fsync status=none; }
wl_read() { dd if=bench-big of=/dev/null bs=1M status=none; }

drop_caches() {
	sync
	if [ "$DROP" = 1 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
}

# run_workload WORKLOAD DIR ERRFILE: runs it in DIR, timed; prints
# "SECONDS ok" or "SECONDS FAIL". A failing workload does not stop the run:
# its cell in the table says FAIL and its stderr is kept in ERRFILE.
# (errexit does not apply inside an `if`, so the wl_ functions check every
# step themselves.) Untimed preparation (dropping caches before read) and
# cleanup (removing the read file) happen here, outside the timed span.
run_workload() {
	local w=$1 d=$2 t0 t1 st=ok
	if [ "$w" = read ]; then drop_caches; fi
	SEQ=$((SEQ + 1))
	t0=$(now)
	if ! (cd "$d" && "wl_$w" "$SEQ") 2>"$3"; then st=FAIL; fi
	t1=$(now)
	if [ "$w" = read ]; then rm -f -- "$d/bench-big"; fi
	printf '%s %s\n' "$(elapsed "$t0" "$t1")" "$st"
}

# warm_up DIR: untimed; failures are reported by the timed runs, not here.
warm_up() {
	(
		cd "$1" || exit
		git status >/dev/null 2>&1
		tar cf - . 2>/dev/null | cat >/dev/null
	) || true
}

# wsfs_stats: current Stats().Ops of the wsfs mount as "op count" lines.
wsfs_stats() {
	local i
	rm -f -- "$STATS"
	kill -USR1 "$WSFS_PID"
	for ((i = 0; i < 200; i++)); do
		[ -e "$STATS" ] && break
		sleep 0.01
	done
	[ -e "$STATS" ] || {
		echo "bench: no Stats() dump from pid $WSFS_PID" >&2
		return 1
	}
	# The JSON is flat: {"Ops":{"lookup":1,...},"Denials":{...}}.
	sed -n 's/.*"Ops":{\([^}]*\)}.*/\1/p' "$STATS" | tr ',' '\n' | tr -d '"' | tr ':' ' ' | sed '/^$/d'
}

# --- timed runs ----------------------------------------------------------
RESULTS=$TMP/results.tsv # workload config rep seconds ok|FAIL
OPSTATS=$TMP/wsfs-ops.tsv # workload rep op delta
: >"$RESULTS"
: >"$OPSTATS"

DIR[wsfs]=$TMP/mnt-wsfs
DIR[loopback]=$TMP/mnt-loopback
mount_wsfs "${DIR[wsfs]}"
mount_loopback "${DIR[loopback]}"

log "tree: $NFILES_TREE files; $REPS repetitions; read: $([ "$DROP" = 1 ] && echo cold || echo warm)"
start=$(now)
for ((rep = 1; rep <= REPS; rep++)); do
	order=()
	for ((k = 0; k < ${#CONFIGS[@]}; k++)); do
		order+=("${CONFIGS[(rep - 1 + k) % ${#CONFIGS[@]}]}")
	done
	log "repetition $rep/$REPS (order: ${order[*]})"
	for c in "${order[@]}"; do warm_up "${DIR[$c]}"; done
	for w in "${WORKLOADS[@]}"; do
		for c in "${order[@]}"; do
			if [ "$c" = wsfs ]; then wsfs_stats >"$TMP/before"; fi
			read -r s st < <(run_workload "$w" "${DIR[$c]}" "$TMP/err-$w-$c-$rep")
			printf '%s\t%s\t%s\t%s\t%s\n' "$w" "$c" "$rep" "$s" "$st" >>"$RESULTS"
			if [ "$st" != ok ]; then log "$w on $c failed: $(head -c 300 "$TMP/err-$w-$c-$rep")"; fi
			if [ "$c" = wsfs ]; then
				wsfs_stats >"$TMP/after"
				awk -v w="$w" -v r="$rep" 'NR == FNR { b[$1] = $2; next }
					{ d = $2 - b[$1]; if (d) printf "%s\t%s\t%s\t%d\n", w, r, $1, d }' \
					"$TMP/before" "$TMP/after" >>"$OPSTATS"
			fi
		done
	done
done
log "timed runs: $(elapsed "$start" "$(now)") s"
unmount_server "${DIR[wsfs]}" "$WSFS_PID"
unmount_server "${DIR[loopback]}" "$LOOP_PID"

# --- debug-output opcode pass ---------------------------------------------
OPCOUNTS=$TMP/opcounts.tsv # workload config opcode count
: >"$OPCOUNTS"
count_ops() { # LOGFILE FROM TO: "OPCODE count" for the rx lines in [FROM, TO)
	tail -c +"$(($2 + 1))" "$1" | head -c "$(($3 - $2))" |
		awk '/doBatchForget:/ { next } # one line per inode of a BATCH_FORGET already counted
			{ for (i = 1; i + 2 <= NF; i++) if ($i == "rx" && $(i + 1) ~ /^[0-9]+:$/) { n[$(i + 2)]++; break } }
			END { for (o in n) print o, n[o] }'
}
if [ "$OPCOUNT" = 1 ]; then
	log "opcode pass (debug output, untimed)"
	for c in wsfs loopback; do
		mp=$TMP/dbg-$c
		if [ "$c" = wsfs ]; then
			mount_wsfs "$mp" -debug
			pid=$WSFS_PID
		else
			mount_loopback "$mp" -debug
			pid=$LOOP_PID
		fi
		dbglog=$mp.out.err
		warm_up "$mp"
		for w in "${WORKLOADS[@]}"; do
			sleep 0.2
			from=$(stat -c %s "$dbglog")
			run_workload "$w" "$mp" "$TMP/err-$w-dbg-$c" >/dev/null
			sleep 0.2
			to=$(stat -c %s "$dbglog")
			count_ops "$dbglog" "$from" "$to" |
				awk -v w="$w" -v c="$c" '{ printf "%s\t%s\t%s\t%s\n", w, c, $1, $2 }' >>"$OPCOUNTS"
		done
		unmount_server "$mp" "$pid"
	done
fi

# --- report --------------------------------------------------------------
median() { # numbers on stdin -> median
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "NaN"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
med() { awk -v w="$1" -v c="$2" -F'\t' '$1 == w && $2 == c { print $4 }' "$RESULTS" | median; }
nfail() { awk -v w="$1" -v c="$2" -F'\t' '$1 == w && $2 == c && $5 != "ok" { n++ } END { print n + 0 }' "$RESULTS"; }
# cell SECONDS NATIVE FAILS: "s (ratio)", marked when some repetition failed.
cell() {
	awk -v s="$1" -v n="$2" -v f="$3" -v r="$REPS" 'BEGIN {
		printf "%.3f (%.2fx)", s, s / n; if (f) printf " FAIL %d/%d", f, r }'
}

echo
echo "### wsfs benchmark: $(uname -r), $(nproc) CPUs, go-fuse $(cd "$HERE" && go list -m -f '{{.Version}}' github.com/hanwen/go-fuse/v2)"
echo
echo "Tree: copy of ${SRC#"$(go env GOROOT)"/} ($NFILES_TREE files, packed git repo); median of $REPS interleaved repetitions;"
echo "create_delete = $NFILES files; write/read = $MIB MiB, read $([ "$DROP" = 1 ] && echo "cold (caches dropped before it for every config)" || echo "warm (no cache drop)")."
echo
echo "| workload | native s | wsfs s (ratio) | loopback s (ratio) |"
echo "|---|---:|---:|---:|"
FAILED=()
for w in "${WORKLOADS[@]}"; do
	n=$(med "$w" native)
	nf=$(nfail "$w" native)
	nat=$(printf '%.3f' "$n")
	[ "$nf" -gt 0 ] && nat+=" FAIL $nf/$REPS" && FAILED+=("$w native")
	row="| $w | $nat"
	for c in wsfs loopback; do
		f=$(nfail "$w" "$c")
		row+=" | $(cell "$(med "$w" "$c")" "$n" "$f")"
		[ "$f" -gt 0 ] && FAILED+=("$w $c")
	done
	echo "$row |"
done
for f in "${FAILED[@]}"; do
	read -r w c <<<"$f"
	errf=$(awk -F'\t' -v w="$w" -v c="$c" '$1 == w && $2 == c && $5 != "ok" { print $3; exit }' "$RESULTS")
	echo
	echo "FAIL: $w on $c in $(nfail "$w" "$c") of $REPS repetitions (its time is until it failed). Its stderr begins:"
	echo
	head -5 "$TMP/err-$w-$c-$errf" | sed 's/^/    /'
done

echo
echo "wsfs Stats() per workload, median over the $REPS timed repetitions (node-tree ops only):"
echo
echo "| workload | Stats() ops |"
echo "|---|---|"
for w in "${WORKLOADS[@]}"; do
	ops=$(awk -F'\t' -v w="$w" '$1 == w { print $3 }' "$OPSTATS" | sort -u)
	line="(none) "
	[ -n "$ops" ] && line=
	for o in $ops; do
		# Reps with no change are missing rows: pad with zeros.
		m=$(awk -F'\t' -v w="$w" -v o="$o" -v reps="$REPS" '$1 == w && $3 == o { print $4; n++ }
			END { for (; n < reps; n++) print 0 }' "$OPSTATS" | median)
		line+="$o=$m "
	done
	echo "| $w | ${line% } |"
done

if [ "$OPCOUNT" = 1 ]; then
	echo
	echo "FUSE requests per workload from go-fuse debug output (one untimed run each; 'rx' lines):"
	echo
	echo "| workload | wsfs total | loopback total | wsfs by opcode | loopback by opcode |"
	echo "|---|---:|---:|---|---|"
	optotal() { awk -F'\t' -v w="$1" -v c="$2" '$1 == w && $2 == c { s += $4 } END { print s + 0 }' "$OPCOUNTS"; }
	opby() {
		awk -F'\t' -v w="$1" -v c="$2" '$1 == w && $2 == c { print $4, $3 }' "$OPCOUNTS" | sort -rn |
			awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $2, $1 }'
	}
	for w in "${WORKLOADS[@]}"; do
		echo "| $w | $(optotal "$w" wsfs) | $(optotal "$w" loopback) | $(opby "$w" wsfs) | $(opby "$w" loopback) |"
	done
fi

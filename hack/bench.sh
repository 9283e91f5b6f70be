#!/usr/bin/env bash
# Usage: hack/bench.sh
#
# The benchmark of issues 3 and 10: native vs wsfs vs go-fuse's
# example/loopback vs fuse-overlayfs on a real tree, in the same interleaved
# rounds. Not a test; it asserts nothing. Run as root (it mounts with
# mount(2)); it needs /dev/fuse, git, tar, find, fio and fuse-overlayfs, and
# installs the last two with apt-get when they are missing (as root; otherwise
# it says what to install and stops).
#
# Tree: a copy of $(go env GOROOT)/src (BENCH_SMALL=1: $(go env GOROOT)/src/net)
# plus this repository's sources in wsfs-src/ (for go vet / go build), made
# into a git repository (git init, add -A, commit, gc), copied once per
# configuration, so each configuration has its own identical backing tree on
# the same file system (no configuration rewrites another one's .git/index).
#   native    the backing directory itself
#   wsfs      hack/benchmount: fusefs.Mount with the default Config and
#             policy.Compile(policy.Spec{Primary: root, Temp: []string{}}),
#             on /dev/fuse (-fuse-transport dev).
#   wsfs-layer  hack/benchmount -layer: the same on a copy-on-write layer
#             (the kernel's overlayfs over the tree, mounts.OpenLayer), as a
#             layered session serves it: writes land in the layer.
#   wsfs-uring  the same over FUSE over io_uring (-fuse-transport io-uring);
#             left out with a line when the fuse module's enable_uring
#             parameter is off (this script never changes it: echo 1 >
#             /sys/module/fuse/parameters/enable_uring).
#   loopback  go-fuse's example/loopback, built from the module graph
#             (-directmount as root; 1 s entry/attr timeouts)
#   overlay   fuse-overlayfs with the backing tree as its upper layer and an
#             empty lower layer (so every write lands in the tree itself, as
#             with the others), its default options (it mounts noatime).
#
# Workloads (run with the tree as working directory):
#   git_status    git status >/dev/null
#   find_count    find . | wc -l
#   stat_walk     find . -printf '%s %T@\n' (lstat of every entry)
#   ls_lR         ls -lR
#   create_5k     mkdir bench-cd; BENCH_FILES (5000) empty files in it
#                 (bash ': > fN')
#   delete_5k     rm -r bench-cd (the files create_5k made)
#   tar           tar cf - . | cat >/dev/null (cat, so tar cannot see
#                 /dev/null and skip reading)
#   grep_r        grep -rI WORD . for a WORD made at run time, so no file
#                 has it (every file opened and read; exit 1 is success)
#   rg            rg -uu WORD . (ripgrep, installed with apt-get when
#                 missing; the row is left out with a line when it cannot be)
#   fio_write     fio sequential write, bs 1 MiB, BENCH_MIB (256) MiB, fsync at end
#   fio_read      fio sequential read of that file, bs 1 MiB
#   fio_randread  fio 4 KiB random reads of that file, BENCH_RAND_MIB (64) MiB
#                 in all (fixed seed); the file is removed afterwards, untimed
#   go_vet        go vet ./... in wsfs-src (warm build cache)
#   go_build      go build ./... in wsfs-src (warm build cache)
# Reads are warm (no cache drop: the machine is shared and drop_caches slows
# everyone; fio --invalidate=0). BENCH_DROP_CACHES=1 drops the page cache
# before each fio read, for every configuration alike (a cold read).
#
# Interleaving: BENCH_REPS (3) repetitions; in each, every workload runs once
# per configuration, configurations in round-robin order (rotated by one each
# repetition). Before each repetition, untimed, every configuration runs
# git status and tar once (and, before the first, go vet and go build), so
# every repetition starts warm.
# The table gives the median seconds over the repetitions, the ratio to native
# and, last, the geometric mean of each column's ratios; a second table the
# fastest and slowest repetition of each cell.
#
# Server cost: CPU seconds (utime + stime from /proc/PID/stat) of each server
# process during each timed workload (median over repetitions), its total over
# the timed runs, and its peak RSS (VmHWM from /proc/PID/status).
#
# FUSE requests: after the timed runs, one extra untimed pass mounts each FUSE
# configuration with debug output (benchmount -debug, loopback -debug,
# fuse-overlayfs -d), warms up as above (again right before each metadata
# workload, so no entry timeout has run out), runs each workload once and counts
# the requests the workload produced ("rx N: OPCODE" lines of go-fuse,
# "unique: N, opcode: OPCODE" lines of libfuse). FORGETs arrive whenever the
# kernel evicts inodes, so they are charged to the workload running at the
# time. BENCH_OPCOUNT=0 skips this pass.
#
# A workload that fails (non-zero exit) does not stop the run: its cell says
# FAIL n/REPS and the first lines of its stderr are printed under the table.
# Every mount is unmounted in an EXIT trap, by exact path, even on failure.
# Temp dir: under BENCH_TMPDIR (/tmp); BENCH_KEEP=1 keeps it (logs, results).
# BENCH_CONFIGS="native wsfs" runs a subset (native is always included).
# BENCH_WORKLOADS="ls_lR tar" runs a subset of the workloads, in the order
# given (delete_5k needs create_5k before it, fio_read and fio_randread need
# fio_write); the geomean row is then over that subset.
# Defaults take about 6-8 minutes on 2 shared cores; BENCH_REPS=1
# BENCH_SMALL=1 BENCH_OPCOUNT=0 is a quick check (about a minute).
set -euo pipefail

REPS=${BENCH_REPS:-3}
SMALL=${BENCH_SMALL:-0}
NFILES=${BENCH_FILES:-5000}
MIB=${BENCH_MIB:-256}
RAND_MIB=${BENCH_RAND_MIB:-64}
OPCOUNT=${BENCH_OPCOUNT:-1}
DROP=${BENCH_DROP_CACHES:-0}
KEEP=${BENCH_KEEP:-0}
read -r -a CONFIGS <<<"${BENCH_CONFIGS:-native wsfs wsfs-uring loopback overlay}"
[ "${CONFIGS[0]}" = native ] || CONFIGS=(native "${CONFIGS[@]/native/}")
read -r -a CONFIGS <<<"${CONFIGS[*]}"

# git sees no system or user configuration: same behaviour on every machine.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
# go: no VCS stamping (it would run git in the tree), no toolchain switch.
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
	echo "bench: run as root (mount(2), the page cache drop, apt-get)" >&2
	exit 2
fi
need=()
command -v fio >/dev/null 2>&1 || need+=(fio)
command -v fuse-overlayfs >/dev/null 2>&1 || need+=(fuse-overlayfs)
command -v git >/dev/null 2>&1 || need+=(git)
if [ "${#need[@]}" -gt 0 ]; then
	echo "bench: installing ${need[*]} (apt-get)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } || {
		echo "bench: cannot install ${need[*]}: install them (Debian: apt-get install ${need[*]}) and run again" >&2
		exit 2
	}
fi
if [[ " ${CONFIGS[*]} " == *" wsfs-uring "* ]] && [ "$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null)" != Y ]; then
	echo "bench: wsfs-uring left out: FUSE over io_uring is off (/sys/module/fuse/parameters/enable_uring is not Y)" >&2
	CONFIGS=("${CONFIGS[@]/wsfs-uring/}")
	read -r -a CONFIGS <<<"${CONFIGS[*]}"
fi
if ! command -v rg >/dev/null 2>&1; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ripgrep >/dev/null 2>&1 || true
fi
HAVE_RG=1
command -v rg >/dev/null 2>&1 || {
	HAVE_RG=0
	echo "bench: rg row left out: ripgrep is not installed and apt-get could not install it" >&2
}
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
has() { [[ " ${CONFIGS[*]} " == *" $1 "* ]]; }

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
log "building the tree from $SRC and $HERE"
BASE=$TMP/base
mkdir -p "$BASE"
cp -a "$SRC" "$BASE/tree"
mkdir "$BASE/tree/wsfs-src"
(cd "$HERE" && git ls-files -z | xargs -0 cp --parents -t "$BASE/tree/wsfs-src")
(
	cd "$BASE/tree"
	git init -q
	git config gc.auto 0 # no background gc during the build or the timed runs
	git add -A
	git -c user.name=bench -c user.email=bench@localhost commit -q -m tree
	git gc -q
)
NFILES_TREE=$(find "$BASE/tree" -type f | wc -l)

declare -A BACK DIR PID
for c in "${CONFIGS[@]}"; do
	BACK[$c]=$TMP/back-$c
	cp -a "$BASE/tree" "${BACK[$c]}"
done
rm -rf "$BASE"
DIR[native]=${BACK[native]}
mkdir -p "$TMP/ovl-lower"

# --- mounts --------------------------------------------------------------

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

# wait_mounted MOUNTPOINT PID: until MOUNTPOINT is in /proc/mounts.
wait_mounted() {
	local i
	for ((i = 0; i < 200; i++)); do
		if is_mounted "$1"; then return 0; fi
		if ! kill -0 "$2" 2>/dev/null; then break; fi
		sleep 0.05
	done
	echo "bench: server $2 did not mount $1; its output:" >&2
	cat "$1.out" "$1.out.err" >&2 2>/dev/null || true
	return 1
}

# mount_config CONFIG MOUNTPOINT [debug]: mounts it, sets PID[CONFIG].
mount_config() {
	local c=$1 mp=$2 dbg=${3:-} p
	mkdir -p "$mp"
	MOUNTS+=("$mp")
	case $c in
	wsfs | wsfs-uring | wsfs-layer)
		local tr=dev layer=()
		[ "$c" = wsfs-uring ] && tr=io-uring
		[ "$c" = wsfs-layer ] && layer=(-layer "$TMP/layer-$(basename "$mp")")
		"$BIN/benchmount" -fuse-transport "$tr" -root "${BACK[$c]}" -mountpoint "$mp" ${dbg:+-debug} "${layer[@]}" \
			>"$mp.out" 2>"$mp.out.err" &
		p=$!
		PIDS+=("$p")
		wait_ready "$mp.out" ready "$p"
		;;
	loopback)
		"$BIN/loopback" -directmount ${dbg:+-debug} "$mp" "${BACK[loopback]}" \
			>"$mp.out" 2>"$mp.out.err" &
		p=$!
		PIDS+=("$p")
		wait_ready "$mp.out" 'Mounted!' "$p"
		;;
	overlay)
		rm -rf "$TMP/ovl-work"
		mkdir -p "$TMP/ovl-work"
		fuse-overlayfs -f ${dbg:+-d} \
			-o "lowerdir=$TMP/ovl-lower,upperdir=${BACK[overlay]},workdir=$TMP/ovl-work" "$mp" \
			>"$mp.out" 2>"$mp.out.err" &
		p=$!
		PIDS+=("$p")
		wait_mounted "$mp" "$p"
		;;
	esac
	PID[$c]=$p
}

# alive PID: the process exists and is not a zombie.
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# unmount_server MOUNTPOINT PID: unmount by exact path, stop the server and
# wait for it. A mount something still held is detached lazily and its
# server keeps serving it (go-fuse's loopback ignores SIGTERM then): after
# 10 s it is killed.
unmount_server() {
	local i
	cd /
	umount -- "$1" 2>/dev/null || umount -l -- "$1" 2>/dev/null || fusermount3 -u -z -- "$1"
	kill -TERM "$2" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		alive "$2" || break
		sleep 0.1
	done
	if alive "$2"; then
		log "server $2 still running 10 s after unmounting $1: killing it"
		kill -KILL "$2" 2>/dev/null || true
	fi
	wait "$2" 2>/dev/null || true
}

# cpu_ticks PID: utime + stime of PID in clock ticks (proc(5) fields 14, 15).
cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || {
		echo 0
		return
	}
	s=${s##*) } # after the comm field, which may hold spaces
	awk '{ print $12 + $13 }' <<<"$s"
}
peak_rss_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
HZ=$(getconf CLK_TCK)

# --- workloads -----------------------------------------------------------
WORKLOADS=(git_status find_count stat_walk ls_lR create_5k delete_5k tar grep_r rg fio_write fio_read fio_randread go_vet go_build)
if [ -n "${BENCH_WORKLOADS:-}" ]; then
	read -r -a WORKLOADS <<<"$BENCH_WORKLOADS"
	for w in "${WORKLOADS[@]}"; do
		if [[ " git_status find_count stat_walk ls_lR create_5k delete_5k tar grep_r rg fio_write fio_read fio_randread go_vet go_build " != *" $w "* ]]; then
			echo "bench: BENCH_WORKLOADS: unknown workload $w" >&2
			exit 2
		fi
	done
fi
if [ "$HAVE_RG" = 0 ]; then
	kept=()
	for w in "${WORKLOADS[@]}"; do [ "$w" = rg ] || kept+=("$w"); done
	WORKLOADS=("${kept[@]}")
fi

FIO=(fio --output=/dev/null --ioengine=psync --fallocate=none --invalidate=0 --filename=bench-big)
wl_git_status() { git status >/dev/null; }
wl_find_count() { find . | wc -l >/dev/null; }
wl_stat_walk() { find . -printf '%s %T@\n' >/dev/null; }
wl_ls_lR() { ls -lR >/dev/null; }
wl_create_5k() {
	local i
	mkdir bench-cd || return
	for ((i = 0; i < NFILES; i++)); do
		: >"bench-cd/f$i" || return
	done
}
wl_delete_5k() { rm -r bench-cd; }
wl_tar() { tar cf - . | cat >/dev/null; }
# grep and rg exit 1 when nothing matches: that is the expected outcome.
ABSENT=absent-$RANDOM$RANDOM-word
wl_grep_r() {
	local rc=0
	grep -rI "$ABSENT" . >/dev/null || rc=$?
	[ "$rc" = 1 ]
}
wl_rg() {
	local rc=0
	rg -uu "$ABSENT" . >/dev/null || rc=$?
	[ "$rc" = 1 ]
}
wl_fio_write() { "${FIO[@]}" --name=w --rw=write --bs=1M --size="${MIB}M" --end_fsync=1; }
wl_fio_read() { "${FIO[@]}" --name=r --rw=read --bs=1M --size="${MIB}M"; }
wl_fio_randread() {
	"${FIO[@]}" --name=rr --rw=randread --bs=4k --size="${MIB}M" --io_size="${RAND_MIB}M" --randseed=1
}
wl_go_vet() { cd wsfs-src && go vet ./...; }
wl_go_build() { cd wsfs-src && go build ./...; }

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# run_workload WORKLOAD DIR ERRFILE: runs it in DIR, timed; prints
# "SECONDS ok" or "SECONDS FAIL". A failing workload does not stop the run:
# its cell in the table says FAIL and its stderr is kept in ERRFILE.
# (errexit does not apply inside an `if`, so the wl_ functions check every
# step themselves.) Untimed preparation (dropping caches before a read) and
# cleanup (removing the read file) happen here, outside the timed span.
run_workload() {
	local w=$1 d=$2 t0 t1 st=ok
	if [ "$DROP" = 1 ] && [[ $w == fio_*read ]]; then drop_caches; fi
	t0=$(now)
	if ! (cd "$d" && "wl_$w") 2>"$3"; then st=FAIL; fi
	t1=$(now)
	if [ "$w" = fio_randread ]; then rm -f -- "$d/bench-big"; fi
	if [ "$w" = delete_5k ]; then rm -rf -- "$d/bench-cd"; fi
	printf '%s %s\n' "$(elapsed "$t0" "$t1")" "$st"
}

# warm_up DIR [go]: untimed; failures are reported by the timed runs, not
# here. With "go" it also fills the build cache (once per mount is enough:
# the cache is outside the tree).
warm_up() {
	(
		cd "$1" || exit
		git status >/dev/null 2>&1
		tar cf - . 2>/dev/null | cat >/dev/null
		if [ "${2:-}" = go ]; then
			cd wsfs-src && go vet ./... >/dev/null 2>&1 && go build ./... >/dev/null 2>&1
		fi
	) || true
}

# --- timed runs ----------------------------------------------------------
RESULTS=$TMP/results.tsv # workload config rep seconds ok|FAIL cpu-seconds
: >"$RESULTS"
declare -A CPU0 RSS
for c in "${CONFIGS[@]}"; do
	[ "$c" = native ] && continue
	DIR[$c]=$TMP/mnt-$c
	mount_config "$c" "${DIR[$c]}"
	CPU0[$c]=$(cpu_ticks "${PID[$c]}")
done

log "tree: $NFILES_TREE files; $REPS repetitions; configs: ${CONFIGS[*]}; reads: $([ "$DROP" = 1 ] && echo cold || echo warm)"
start=$(now)
for ((rep = 1; rep <= REPS; rep++)); do
	order=()
	for ((k = 0; k < ${#CONFIGS[@]}; k++)); do
		order+=("${CONFIGS[(rep - 1 + k) % ${#CONFIGS[@]}]}")
	done
	log "repetition $rep/$REPS (order: ${order[*]})"
	for c in "${order[@]}"; do warm_up "${DIR[$c]}" "$([ "$rep" = 1 ] && echo go)"; done
	for w in "${WORKLOADS[@]}"; do
		for c in "${order[@]}"; do
			t0=0 cpu=0
			if [ "$c" != native ]; then t0=$(cpu_ticks "${PID[$c]}"); fi
			read -r s st < <(run_workload "$w" "${DIR[$c]}" "$TMP/err-$w-$c-$rep")
			if [ "$c" != native ]; then
				cpu=$(awk -v a="$t0" -v b="$(cpu_ticks "${PID[$c]}")" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz }')
			fi
			printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$c" "$rep" "$s" "$st" "$cpu" >>"$RESULTS"
			if [ "$st" != ok ]; then log "$w on $c failed: $(head -c 300 "$TMP/err-$w-$c-$rep")"; fi
		done
	done
done
log "timed runs: $(elapsed "$start" "$(now)") s"
declare -A CPUTOT
for c in "${CONFIGS[@]}"; do
	[ "$c" = native ] && continue
	CPUTOT[$c]=$(awk -v a="${CPU0[$c]}" -v b="$(cpu_ticks "${PID[$c]}")" -v hz="$HZ" 'BEGIN { printf "%.1f", (b - a) / hz }')
	RSS[$c]=$(peak_rss_kib "${PID[$c]}")
	unmount_server "${DIR[$c]}" "${PID[$c]}"
done

# --- debug-output request pass --------------------------------------------
OPCOUNTS=$TMP/opcounts.tsv # workload config opcode count
: >"$OPCOUNTS"
count_ops() { # LOGFILE FROM TO: "OPCODE count" for the request lines in [FROM, TO)
	tail -c +"$(($2 + 1))" "$1" | head -c "$(($3 - $2))" |
		awk '/doBatchForget:/ { next } # one line per inode of a BATCH_FORGET already counted
			/^unique: [0-9]+, opcode: / { o = $4; n[o]++; next } # libfuse
			{ for (i = 1; i + 2 <= NF; i++) if ($i == "rx" && $(i + 1) ~ /^[0-9]+:$/) { n[$(i + 2)]++; break } }
			END { for (o in n) print o, n[o] }'
}
FUSECONFIGS=()
for c in "${CONFIGS[@]}"; do
	if [ "$c" != native ]; then FUSECONFIGS+=("$c"); fi
done
if [ "$OPCOUNT" = 1 ]; then
	log "request-count pass (debug output, untimed)"
	for c in "${FUSECONFIGS[@]}"; do
		mp=$TMP/dbg-$c
		mount_config "$c" "$mp" debug
		dbglog=$mp.out.err
		warm_up "$mp" go
		for w in "${WORKLOADS[@]}"; do
			# Warm right before each counted workload: the whole pass can
			# outlast a 60 s entry timeout under load, and expired entries
			# are not what a warm run sends.
			case $w in create_5k | delete_5k | fio_*) ;; *) warm_up "$mp" ;; esac
			sleep 0.2
			from=$(stat -c %s "$dbglog")
			run_workload "$w" "$mp" "$TMP/err-$w-dbg-$c" >/dev/null
			sleep 0.2
			to=$(stat -c %s "$dbglog")
			count_ops "$dbglog" "$from" "$to" |
				awk -v w="$w" -v c="$c" '{ printf "%s\t%s\t%s\t%s\n", w, c, $1, $2 }' >>"$OPCOUNTS"
		done
		unmount_server "$mp" "${PID[$c]}"
	done
fi

# --- report --------------------------------------------------------------
median() { # numbers on stdin -> median
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "NaN"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
med() { awk -v w="$1" -v c="$2" -F'\t' '$1 == w && $2 == c { print $4 }' "$RESULTS" | median; }
medcpu() { awk -v w="$1" -v c="$2" -F'\t' '$1 == w && $2 == c { print $6 }' "$RESULTS" | median; }
# spread WORKLOAD CONFIG: "min–max" seconds over the repetitions.
spread() {
	awk -v w="$1" -v c="$2" -F'\t' '$1 == w && $2 == c { print $4 }' "$RESULTS" | sort -g |
		awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) printf "%.3f–%.3f", lo, hi }'
}
nfail() { awk -v w="$1" -v c="$2" -F'\t' '$1 == w && $2 == c && $5 != "ok" { n++ } END { print n + 0 }' "$RESULTS"; }
# cell SECONDS NATIVE FAILS: "s (ratio)", marked when some repetition failed.
cell() {
	awk -v s="$1" -v n="$2" -v f="$3" -v r="$REPS" 'BEGIN {
		printf "%.3f (%.2fx)", s, s / n; if (f) printf " FAIL %d/%d", f, r }'
}

echo
echo "### wsfs benchmark: $(uname -r), $(nproc) CPUs, load average at the end $(cut -d' ' -f1-3 /proc/loadavg), go-fuse $(cd "$HERE" && go list -m -f '{{.Version}}' github.com/hanwen/go-fuse/v2), $(fuse-overlayfs --version 2>/dev/null | grep -m1 '^fuse-overlayfs')"
echo
echo "Tree: copy of ${SRC#"$(go env GOROOT)"/} + wsfs sources ($NFILES_TREE files, packed git repo); median of $REPS interleaved repetitions;"
echo "create/delete = $NFILES files; fio: $MIB MiB file, 1 MiB sequential, 4 KiB random ($RAND_MIB MiB); reads $([ "$DROP" = 1 ] && echo "cold (caches dropped before each for every config)" || echo "warm (no cache drop)")."
echo
hdr="| workload | native s"
sep="|---|---:"
for c in "${FUSECONFIGS[@]}"; do
	hdr+=" | $c s (ratio)"
	sep+="|---:"
done
echo "$hdr |"
echo "$sep|"
FAILED=()
declare -A LOGSUM
for w in "${WORKLOADS[@]}"; do
	n=$(med "$w" native)
	nf=$(nfail "$w" native)
	nat=$(printf '%.3f' "$n")
	[ "$nf" -gt 0 ] && nat+=" FAIL $nf/$REPS" && FAILED+=("$w native")
	row="| $w | $nat"
	for c in "${FUSECONFIGS[@]}"; do
		s=$(med "$w" "$c")
		f=$(nfail "$w" "$c")
		row+=" | $(cell "$s" "$n" "$f")"
		[ "$f" -gt 0 ] && FAILED+=("$w $c")
		LOGSUM[$c]=$(awk -v a="${LOGSUM[$c]:-0}" -v s="$s" -v n="$n" 'BEGIN { print a + log(s / n) }')
	done
	echo "$row |"
done
row="| **geomean** |"
for c in "${FUSECONFIGS[@]}"; do
	row+=" | **$(awk -v l="${LOGSUM[$c]}" -v k="${#WORKLOADS[@]}" 'BEGIN { printf "%.2fx", exp(l / k) }')**"
done
echo "$row |"
for f in "${FAILED[@]}"; do
	read -r w c <<<"$f"
	errf=$(awk -F'\t' -v w="$w" -v c="$c" '$1 == w && $2 == c && $5 != "ok" { print $3; exit }' "$RESULTS")
	echo
	echo "FAIL: $w on $c in $(nfail "$w" "$c") of $REPS repetitions (its time is until it failed). Its stderr begins:"
	echo
	head -5 "$TMP/err-$w-$c-$errf" | sed 's/^/    /'
done

echo
echo "Spread: fastest–slowest seconds over the repetitions (a single row whose ranges overlap is within this run's noise):"
echo
hdr="| workload | native"
sep="|---|---:"
for c in "${FUSECONFIGS[@]}"; do
	hdr+=" | $c"
	sep+="|---:"
done
echo "$hdr |"
echo "$sep|"
for w in "${WORKLOADS[@]}"; do
	row="| $w | $(spread "$w" native)"
	for c in "${FUSECONFIGS[@]}"; do row+=" | $(spread "$w" "$c")"; done
	echo "$row |"
done

echo
echo "Server CPU seconds per workload (median over the repetitions), total over the timed runs, peak RSS:"
echo
hdr="| workload"
sep="|---"
for c in "${FUSECONFIGS[@]}"; do
	hdr+=" | $c CPU s"
	sep+="|---:"
done
echo "$hdr |"
echo "$sep|"
for w in "${WORKLOADS[@]}"; do
	row="| $w"
	for c in "${FUSECONFIGS[@]}"; do row+=" | $(medcpu "$w" "$c")"; done
	echo "$row |"
done
row="| total CPU s (all timed runs)"
for c in "${FUSECONFIGS[@]}"; do row+=" | ${CPUTOT[$c]}"; done
echo "$row |"
row="| peak RSS MiB"
for c in "${FUSECONFIGS[@]}"; do row+=" | $(awk -v k="${RSS[$c]}" 'BEGIN { printf "%.0f", k / 1024 }')"; done
echo "$row |"

if [ "$OPCOUNT" = 1 ]; then
	echo
	echo "FUSE requests per workload from debug output (one untimed run each):"
	echo
	hdr="| workload"
	sep="|---"
	for c in "${FUSECONFIGS[@]}"; do
		hdr+=" | $c total"
		sep+="|---:"
	done
	echo "$hdr |"
	echo "$sep|"
	optotal() { awk -F'\t' -v w="$1" -v c="$2" '$1 == w && $2 == c { s += $4 } END { print s + 0 }' "$OPCOUNTS"; }
	opby() {
		awk -F'\t' -v w="$1" -v c="$2" '$1 == w && $2 == c { print $4, $3 }' "$OPCOUNTS" | sort -rn |
			awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $2, $1 }'
	}
	for w in "${WORKLOADS[@]}"; do
		row="| $w"
		for c in "${FUSECONFIGS[@]}"; do row+=" | $(optotal "$w" "$c")"; done
		echo "$row |"
	done
	echo
	echo "By opcode:"
	echo
	for c in "${FUSECONFIGS[@]}"; do
		echo "- $c:"
		for w in "${WORKLOADS[@]}"; do
			echo "  - $w: $(opby "$w" "$c")"
		done
	done
fi

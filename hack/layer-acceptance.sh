#!/usr/bin/env bash
# Issue 23's acceptance, run for real: one script (npm ci, pip install,
# rm -rf src, git checkout -b x && git commit -am, chmod -R go-w, mv dir1
# dir2, ln, ln -s, setfattr, truncate, a SQLite WAL write, and chown,
# mkfifo, a setgid directory) run natively in a copy of a project and
# through `wsfs exec` in a layered session on the original, then compared
# with hack/treesnap (every path: type, mode, owner, size, content hash,
# link text, xattrs but overlayfs's trusted.overlay.*, which names are one
# inode):
#
#   - the original is unchanged (with mtimes and ctimes) until commit;
#   - the session sees what the native run made; git agrees (status,
#     HEAD, log);
#   - `session diff --json` lists exactly the paths the native run changed;
#   - after `session commit` the original equals the native run's result,
#     and each file has the session's mtime;
#   - a second layered session (on a second copy, same script): after
#     `session discard` the copy is unchanged and the session sees it again.
#
#   hack/layer-acceptance.sh
#
# Prints each check and a final "layer-acceptance: ok"; exits 1 when a
# check fails (all checks run; each difference is printed), 2 on a setup
# error. Needs root (overlayfs, FUSE), Linux 6.8+, go, git, unshare,
# setfattr (Debian package attr; hack/ci-setup.sh installs it); npm and
# python3 are used when present (a step whose tool is missing is skipped in
# both runs, and said so). No network: npm installs a tarball packed here
# (npm pack, a package-lock.json, npm ci --offline), pip a package whose
# source tree is made here (--no-index, its own PEP 517 backend, no
# setuptools). WSFS_BIN uses a built wsfs instead of building one;
# LAYER_ACCEPTANCE_DIR is where the work directory is made (default
# /var/tmp; it must allow trusted xattrs: ext4, xfs, btrfs, tmpfs).
# Everything (the daemon, its mounts, the work directory) is removed on
# exit, failure included; LAYER_ACCEPTANCE_KEEP=1 keeps the work directory
# (the trees, treesnap's descriptions in snaps/, the logs), unmounted.
#
# What cannot be equal by nature is left out, and said so in the output:
# access times always; mtimes and ctimes between the two runs (compared:
# the original's before and after, and each file's mtime after commit
# with the session's); a git index's stat data
# (ctime, mtime, dev, ino and size of each entry: the rest of the index is
# compared). Both runs happen at one path ($work/at, a bind mount in a
# private mount namespace: of the native copy, or of the session's mount),
# since pip records its source's absolute path (direct_url.json and its
# hash in RECORD). pip runs with --no-compile and python with -B: a .pyc
# records the path it was compiled at (pip --target's random temporary
# directory) or its source's mtime (an import's).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The project's modes must not depend on the caller's umask (a test
# process's may be 0); the script both runs execute sets its own too.
umask 022

if [ "$(id -u)" -ne 0 ]; then
	echo "layer-acceptance: needs root (overlayfs and FUSE mounts)" >&2
	exit 2
fi
for tool in git unshare setfattr; do
	if ! command -v "$tool" >/dev/null; then
		echo "layer-acceptance: $tool not found (hack/ci-setup.sh installs it; setfattr is in Debian's attr)" >&2
		exit 2
	fi
done
[ -n "${WSFS_BIN:-}" ] || command -v go >/dev/null || {
	echo "layer-acceptance: go not found (needed to build wsfs and hack/treesnap)" >&2
	exit 2
}

# The differences known between the native run's result and the project
# after commit, as treesnap cmp prints them (prefixes); none now (hard
# links the session made are committed linked). A known difference that no
# longer shows fails the check.
known_commit=()
# The same for the mtimes of regular files, the session's before commit
# against the project's after: a file rewritten with equal content is no
# change (README, "Layers": Diff compares content, mode, owner, xattrs), so
# commit leaves the project's file and its mtime (npm ci rewrites
# node_modules/.package-lock.json; natively its mtime is the new one).
known_mtime=()

parent=${LAYER_ACCEPTANCE_DIR:-/var/tmp}
work=$(mktemp -d "$parent/wsfs-layer-acceptance.XXXXXX")
chmod 0755 "$work"
daemon=
failed=0

cleanup() {
	local status=$?
	set +e
	cd /
	if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then
		# SIGINT is the full stop: every session unmounted.
		kill -INT "$daemon"
		for _ in $(seq 300); do
			kill -0 "$daemon" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$daemon" 2>/dev/null; then
			echo "layer-acceptance: wsfs serve still running 30 s after SIGINT; killed" >&2
			kill -KILL "$daemon"
			status=1
		fi
		wait "$daemon" 2>/dev/null
	fi
	if [ -f "$work/serve.log" ] && [ "$status" -ne 0 ]; then
		echo "layer-acceptance: the daemon's log (last 30 lines):" >&2
		tail -30 "$work/serve.log" >&2
	fi
	# A full stop unmounts every session and layer: one left is a bug.
	if [ -n "$daemon" ] && awk -v w="$work/" 'index($2, w) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
		echo "layer-acceptance: mounts left under $work after the daemon's full stop:" >&2
		awk -v w="$work/" 'index($2, w) == 1 { print "  " $3 " " $2 }' /proc/mounts >&2
		status=1
	fi
	bash "$repo/hack/cleanup-mounts.sh" "$work" || status=1
	local left="$work removed"
	if [ "${LAYER_ACCEPTANCE_KEEP:-}" = 1 ]; then
		left="$work kept: the trees, snaps/ (treesnap's descriptions), the logs"
	else
		rm -rf --one-file-system "$work"
		if [ -e "$work" ]; then
			echo "layer-acceptance: $work could not be removed" >&2
			status=1
		fi
	fi
	if [ "$status" -eq 0 ]; then
		[ "${LAYER_ACCEPTANCE_KEEP:-}" = 1 ] && echo "layer-acceptance: $left"
		echo "layer-acceptance: ok"
	else
		echo "layer-acceptance: FAILED (exit $status; $left)" >&2
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "layer-acceptance: $*"; }
die() {
	echo "layer-acceptance: $*" >&2
	exit 2
}
# pass WHAT / fail WHAT: a check's verdict (failures are counted, the
# remaining checks still run).
pass() { say "ok: $*"; }
fail() {
	say "FAIL: $*"
	failed=$((failed + 1))
}

bin=$work/bin
mkdir "$bin"
if [ -n "${WSFS_BIN:-}" ]; then
	ln -s "$WSFS_BIN" "$bin/wsfs"
else
	say "building wsfs"
	(cd "$repo" && go build -o "$bin/wsfs" ./cmd/wsfs)
fi
(cd "$repo" && go build -o "$bin/treesnap" ./hack/treesnap)
wsfs=$bin/wsfs
snap=$bin/treesnap

have_npm=0
have_python=0
command -v npm >/dev/null && command -v node >/dev/null && have_npm=1
command -v python3 >/dev/null && have_python=1
[ "$have_npm" = 1 ] || say "npm or node not found: npm ci is skipped in both runs"
[ "$have_python" = 1 ] || say "python3 not found: pip install and the SQLite WAL write are skipped in both runs"
if [ "$have_npm" = 1 ]; then known_mtime+=('"node_modules/.package-lock.json": mt:'); fi

# One environment for every git, npm and pip run here and in both runs:
# nothing from the host's configuration, commits with fixed names and
# dates (so the two runs make the same objects), npm offline with its own
# cache.
export LC_ALL=C TZ=UTC HOME=$work/home
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=acceptance GIT_AUTHOR_EMAIL=acceptance@wsfs.invalid
export GIT_COMMITTER_NAME=acceptance GIT_COMMITTER_EMAIL=acceptance@wsfs.invalid
export GIT_AUTHOR_DATE='2024-01-01T00:00:00Z' GIT_COMMITTER_DATE='2024-01-01T00:00:00Z'
export npm_config_offline=true npm_config_audit=false npm_config_fund=false
export npm_config_update_notifier=false npm_config_cache=$work/npm-cache
export npm_config_userconfig=$work/home/.npmrc npm_config_globalconfig=$work/home/npmrc-global
export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PYTHONDONTWRITEBYTECODE
export HAVE_NPM=$have_npm HAVE_PYTHON=$have_python
mkdir "$HOME"

# The project.
proj=$work/proj
say "making the project $proj"
mkdir -p "$proj"/{src/lib,dir1/sub,shared}
cd "$proj"
git init -q -b main
printf 'node_modules/\nvendor/\n*.db\n*.db-*\nlocalpkg/\n' >.gitignore
printf '# project\n' >README
printf 'int main(void) { return 0; }\n' >src/main.c
printf 'int util(void) { return 1; }\n' >src/lib/util.c
printf 'a\n' >dir1/a
printf 'b\n' >dir1/sub/b
chmod 0666 dir1/sub/b
# chmod -R go-w then changes dir1 itself before mv renames it.
chmod 0777 dir1
printf '#!/bin/sh\necho tool\n' >tool
chmod 0775 tool
head -c 10000 /dev/zero | tr '\0' x >big
printf 'keep\n' >keep
chown 1234:5678 keep
setfattr -n user.tag -v v1 keep
setfattr -n user.dir -v d1 dir1
printf 'owned\n' >owned
chown 1234:5678 owned
chmod 0640 owned
chown 0:5678 shared
chmod 2775 shared
printf 'one inode\n' >hl1
ln hl1 hl2
ln -s keep link
if command -v setfacl >/dev/null; then
	setfacl -m u:1234:rw dir1/sub/b
else
	say "setfacl not found: the project has no POSIX ACL"
fi
git add -A
git commit -q -m initial
if [ "$have_npm" = 1 ]; then
	# A dependency packed here, a lock file naming it, and a stale
	# node_modules that npm ci replaces.
	mkdir -p "$work/pkgsrc/leftpad" deps node_modules/old-pkg
	printf '{"name": "leftpad-local", "version": "1.0.0", "main": "index.js", "bin": {"leftpad": "bin.js"}}\n' >"$work/pkgsrc/leftpad/package.json"
	printf 'module.exports = (s, n) => String(s).padStart(n);\n' >"$work/pkgsrc/leftpad/index.js"
	printf '#!/usr/bin/env node\nconsole.log(require("./index.js")(process.argv[2], 8));\n' >"$work/pkgsrc/leftpad/bin.js"
	(cd "$work/pkgsrc/leftpad" && npm pack --silent --pack-destination "$proj/deps" >/dev/null)
	printf '{"name": "proj", "version": "1.0.0", "private": true, "dependencies": {"leftpad-local": "file:deps/leftpad-local-1.0.0.tgz"}}\n' >package.json
	npm install --silent --package-lock-only >/dev/null
	printf 'stale\n' >node_modules/old-pkg/index.js
	git add -A
	git commit -q -m npm
fi
if [ "$have_python" = 1 ]; then
	# A package pip builds from this source tree with its own PEP 517
	# backend (no setuptools, no wheel, no index), and a SQLite database
	# in WAL mode.
	mkdir -p localpkg/localpkg
	printf 'def hello():\n    return "hi"\n' >localpkg/localpkg/__init__.py
	printf '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n' >localpkg/pyproject.toml
	cat >localpkg/backend.py <<'EOF'
"""A PEP 517 build backend with no dependencies (pip needs no network)."""
import base64, hashlib, os, zipfile

NAME, VERSION = "localpkg", "1.0.0"
DIST = f"{NAME}-{VERSION}.dist-info"
WHEN = (1980, 1, 1, 0, 0, 0)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for name in sorted(os.listdir(NAME)):
        if name.endswith(".py"):
            with open(os.path.join(NAME, name), "rb") as f:
                files[f"{NAME}/{name}"] = f.read()
    files[f"{DIST}/METADATA"] = f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode()
    files[f"{DIST}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: backend.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    wheel = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as z:
        for path, data in files.items():
            z.writestr(zipfile.ZipInfo(path, WHEN), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{DIST}/RECORD,,")
        z.writestr(zipfile.ZipInfo(f"{DIST}/RECORD", WHEN), "\n".join(record) + "\n")
    return wheel
EOF
	python3 - <<'EOF'
import sqlite3
c = sqlite3.connect("app.db")
assert c.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
c.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)")
c.executemany("INSERT INTO t(v) VALUES (?)", [("first %d" % i,) for i in range(100)])
c.commit()
c.close()
EOF
fi
cd "$work"
mkdir at

# The script both runs execute, in the tree at $work/at (their cwd).
cat >"$work/session-script.sh" <<'EOF'
set -euo pipefail
umask 022
step() { echo "script: $*"; }
if [ "$HAVE_NPM" = 1 ]; then
	step "npm ci"
	npm ci --silent --offline --no-audit --no-fund
	[ "$(node_modules/.bin/leftpad x)" = "       x" ]
fi
if [ "$HAVE_PYTHON" = 1 ]; then
	step "pip install ./localpkg --target ./vendor"
	python3 -m pip install -q --no-index --no-build-isolation --no-compile ./localpkg --target ./vendor 2>&1 | { grep -v "Running pip as the 'root' user" || true; }
	[ "$(PYTHONPATH=vendor python3 -B -c 'import localpkg; print(localpkg.hello())')" = hi ]
fi
step "append to keep (owned by 1234:5678)"
echo appended >>keep
step "rm -rf src"
rm -rf src
step "git checkout -b x && git commit -am"
git checkout -q -b x
git commit -q -am "session change"
step "chmod -R go-w dir1 tool"
chmod -R go-w dir1 tool
step "mv dir1 dir2"
mv dir1 dir2
step "ln keep hard"
ln keep hard
step "ln -s dir2/a sym"
ln -s dir2/a sym
step "setfattr (set on tool, remove from keep)"
setfattr -n user.note -v set tool
setfattr -x user.tag keep
step "truncate -s 5 big"
truncate -s 5 big
step "chown 4321:8765 owned; mkfifo fifo; a file and a directory in a setgid directory"
chown 4321:8765 owned
mkfifo fifo
echo new >shared/new
mkdir shared/sub
if [ "$HAVE_PYTHON" = 1 ]; then
	step "SQLite WAL write (readers in this and in other processes meanwhile)"
	python3 - <<'PY'
import os, sqlite3, subprocess, sys
COUNT = "import sqlite3; print(sqlite3.connect('app.db').execute('SELECT count(*) FROM t').fetchone()[0])"
a = sqlite3.connect("app.db")
assert a.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
b = sqlite3.connect("app.db")
for i in range(10):
    with a:
        a.executemany("INSERT INTO t(v) VALUES (?)", [("row %d %d" % (i, j),) for j in range(50)])
    want = 100 + (i + 1) * 50
    assert b.execute("SELECT count(*) FROM t").fetchone()[0] == want
    # Another process reads the WAL through the shared -shm mapping.
    other = subprocess.run([sys.executable, "-B", "-c", COUNT], capture_output=True, text=True, check=True)
    assert other.stdout == "%d\n" % want, other
assert os.path.exists("app.db-wal") and os.path.exists("app.db-shm"), "no -wal/-shm while open"
b.close()
a.close()
PY
fi
git status --porcelain >/dev/null
step done
EOF

# run_at DIR LOG [LAUNCHER...]: runs the script at $work/at, a bind mount
# of DIR (the launcher's cwd) in a private mount namespace, through the
# launcher.
run_at() {
	local dir=$1 log=$2
	shift 2
	(cd "$dir" && "$@" unshare -m --propagation private -- bash -c 'mount --bind . "$1" && cd "$1" && exec bash "$2"' _ "$work/at" "$work/session-script.sh") >"$log" 2>&1
}

# compare [-fields F,... -type T] WHAT A B [KNOWN...]: the check that
# descriptions A and B are equal (in those fields of those objects: treesnap
# cmp); a difference line starting with one of KNOWN is printed as a known
# difference and does not fail the check, but a KNOWN that no line starts
# with does (the list stays exact: remove what got fixed).
compare() {
	local opts=()
	while [ "${1:0:1}" = - ]; do
		opts+=("$1" "$2")
		shift 2
	done
	local what=$1 a=$2 b=$3 line k bad=0 out
	shift 3
	local -A seen=()
	local rc=0
	out=$("$snap" cmp "${opts[@]}" "$a" "$b") || rc=$?
	if [ "$rc" -gt 1 ]; then
		fail "$what: treesnap cmp $a $b failed"
		return
	fi
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		for k in "$@"; do
			if [[ $line == "$k"* ]]; then
				seen[$k]=1
				say "  known difference (A -> B): $line"
				continue 2
			fi
		done
		say "  differs (A -> B): $line"
		bad=1
	done <<<"$out"
	for k in "$@"; do
		if [ -z "${seen[$k]:-}" ]; then
			say "  known difference not seen any more (remove it from the list): $k"
			bad=1
		fi
	done
	if [ "$bad" = 1 ]; then
		fail "$what"
	elif [ -n "$out" ]; then
		pass "$what (but the known differences above)"
	else
		pass "$what"
	fi
}

# gitstate DIR: what git says of the repository at DIR, without writing
# its index.
gitstate() {
	git -C "$1" --no-optional-locks status --porcelain=v1 --branch --untracked-files=all
	git -C "$1" rev-parse HEAD
	git -C "$1" log --format='%H %s' x
}

native=$work/native
proj2=$work/proj2
cp -a "$proj" "$native"
cp -a "$proj" "$proj2"
s=$work/snaps
mkdir "$s"
"$snap" snap -times "$proj" >"$s/orig.t"
"$snap" snap "$proj" >"$s/orig"
"$snap" snap -times "$proj2" >"$s/orig2.t"
"$snap" snap "$native" >"$s/native-before"
say "left out of every comparison: access times; ctimes and mtimes between runs (compared: the original's before and after, and each committed file's mtime with the session's); a git index's stat data"
compare "cp -a made a faithful copy (the native run's start equals the original)" "$s/orig" "$s/native-before"

say "native run in $native (at $work/at)"
if ! run_at "$native" "$work/native.log"; then
	cat "$work/native.log"
	die "the native run failed"
fi
sed 's/^/  /' "$work/native.log"
"$snap" snap "$native" >"$s/native-after"

say "starting wsfs serve (state $work/state)"
sock=$work/wsfs.sock
export WSFS_SOCKET=$sock
"$wsfs" serve --socket "$sock" --state-dir "$work/state" --mount-base "$work/mnt" --keep-connections=false >"$work/serve.log" 2>&1 &
daemon=$!
for _ in $(seq 600); do
	grep -q 'msg=serving' "$work/serve.log" && break
	kill -0 "$daemon" 2>/dev/null || break
	sleep 0.1
done
grep -q 'msg=serving' "$work/serve.log" || die "wsfs serve did not start"
"$wsfs" session create l1 --root "$proj" --layer >/dev/null
"$wsfs" session create l2 --root "$proj2" --layer >/dev/null

say "layered run: wsfs exec --session l1 (at $work/at)"
if ! run_at "$work" "$work/layered.log" "$wsfs" exec --session l1 --; then
	cat "$work/layered.log"
	fail "the layered run failed"
fi
sed 's/^/  /' "$work/layered.log"
if cmp -s "$work/native.log" "$work/layered.log"; then
	pass "the layered run printed what the native run printed"
else
	fail "the layered run printed something else: $(diff "$work/native.log" "$work/layered.log" | tr '\n' ' ')"
fi

"$snap" snap -times "$proj" >"$s/orig-after-run.t"
compare "the original is unchanged until commit (mtimes and ctimes too)" "$s/orig.t" "$s/orig-after-run.t"
"$snap" snap "$work/mnt/l1" >"$s/session-view"
compare "the session sees what the native run made (A: native, B: the session's mount)" "$s/native-after" "$s/session-view"
gitstate "$native" >"$s/git-native"
gitstate "$work/mnt/l1" >"$s/git-session"
if cmp -s "$s/git-native" "$s/git-session"; then
	pass "git agrees in the session (status, HEAD $(sed -n '/^[0-9a-f]\{40\}$/{p;q}' "$s/git-native"), log)"
else
	fail "git differs (A: native, B: session): $(diff "$s/git-native" "$s/git-session" | tr '\n' ' ')"
fi

"$wsfs" session diff l1 --json >"$s/diff.json"
say "session diff l1 lists $(grep -o '"path":' "$s/diff.json" | wc -l) changes; the native run changed $("$snap" changed "$s/native-before" "$s/native-after" | wc -l) paths"
if out=$("$snap" cover "$s/diff.json" "$s/native-before" "$s/native-after"); then
	pass "session diff --json lists exactly the paths the native run changed"
else
	printf '%s\n' "$out" | sed 's/^/layer-acceptance:   /'
	fail "session diff --json and the native run's changes differ"
fi

"$snap" snap -times "$work/mnt/l1" >"$s/session-view.t"
say "session commit l1"
if "$wsfs" session commit l1 >"$s/commit.out"; then
	pass "commit applied $(wc -l <"$s/commit.out") paths, none left"
else
	sed 's/^/  /' "$s/commit.out"
	fail "commit left paths in the layer"
fi
"$snap" snap "$proj" >"$s/orig-committed"
"$snap" snap -times "$proj" >"$s/orig-committed.t"
compare "after commit the project equals the native run's result (A: native, B: project)" "$s/native-after" "$s/orig-committed" "${known_commit[@]}"
compare -fields mt -type f "after commit each file has the session's mtime (A: the session's view, B: project)" "$s/session-view.t" "$s/orig-committed.t" "${known_mtime[@]}"
gitstate "$proj" >"$s/git-committed"
if cmp -s "$s/git-native" "$s/git-committed"; then
	pass "git agrees in the project after commit"
else
	fail "git differs after commit (A: native, B: project): $(diff "$s/git-native" "$s/git-committed" | tr '\n' ' ')"
fi
if [ -z "$("$wsfs" session diff l1 --stat)" ]; then
	pass "session diff l1 is empty after commit"
else
	fail "session diff l1 after commit: $("$wsfs" session diff l1 --stat | tr '\n' ' ')"
fi

say "layered run: wsfs exec --session l2 (on $proj2, at $work/at)"
if ! run_at "$work" "$work/layered2.log" "$wsfs" exec --session l2 --; then
	cat "$work/layered2.log"
	fail "the second layered run failed"
fi
"$snap" snap "$work/mnt/l2" >"$s/session2-view"
compare "the second session sees what the native run made" "$s/native-after" "$s/session2-view"
"$snap" snap -times "$proj2" >"$s/orig2-after-run.t"
compare "the second original is unchanged until discard (mtimes and ctimes too)" "$s/orig2.t" "$s/orig2-after-run.t"
say "session discard l2"
"$wsfs" session discard l2 >/dev/null
"$snap" snap -times "$proj2" >"$s/orig2-discarded.t"
compare "after discard the second original is unchanged (mtimes and ctimes too)" "$s/orig2.t" "$s/orig2-discarded.t"
"$snap" snap "$proj2" >"$s/orig2"
"$snap" snap "$work/mnt/l2" >"$s/session2-discarded"
compare "after discard the session sees the original (A: original, B: the session's mount)" "$s/orig2" "$s/session2-discarded"
if [ -z "$("$wsfs" session diff l2 --stat)" ]; then
	pass "session diff l2 is empty after discard"
else
	fail "session diff l2 after discard: $("$wsfs" session diff l2 --stat | tr '\n' ' ')"
fi

"$wsfs" session rm l1 l2 >/dev/null
if [ -z "$(ls -A "$work/state/layers")" ]; then
	pass "the layers went with their sessions"
else
	fail "layers left after session rm: $(ls -A "$work/state/layers" | tr '\n' ' ')"
fi
if [ "$failed" -gt 0 ]; then
	say "$failed checks failed"
	exit 1
fi

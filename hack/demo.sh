#!/usr/bin/env bash
# Mounts a small project with `wsfs mount` and shows what the mount does:
# reads and writes pass through, a write through a symlink that escapes the
# project is refused (EROFS), a write to .git/hooks is refused (EACCES), and
# `wsfs resolve` agrees with the kernel (`pwd -P`). Unmounts and removes
# everything on exit, failure included. Exits non-zero if anything differs.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# What this host needs for the demo, set up by hack/ci-setup.sh, said before
# it is done (each change is announced again as it is made, and only when
# needed). WSFS_DEMO_NO_SETUP=1 skips it on a host set up by hand.
if [ -z "${WSFS_DEMO_NO_SETUP:-}" ]; then
	cat <<'EOF'
demo: running hack/ci-setup.sh first. Where this host lacks them it will:
  - install packages with apt-get (fuse3, git, bubblewrap, nodejs, npm, ...),
  - load the fuse module, or create /dev/fuse,
  - make /dev/fuse mode 0666,
  - add the line user_allow_other to /etc/fuse.conf.
Set WSFS_DEMO_NO_SETUP=1 to skip this.
EOF
	bash "$repo/hack/ci-setup.sh"
fi

# The demo tree lives outside the temp area (/tmp), which a workspace-write
# session may write: the "outside" directory must be outside every root.
work=$(mktemp -d /var/tmp/wsfs-demo.XXXXXX)
proj=$work/project
mnt=$work/mnt
bin=$work/wsfs
pid=

cleanup() {
	local status=$?
	set +e
	cd /
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
		wait "$pid" 2>/dev/null
	fi
	bash "$repo/hack/cleanup-mounts.sh" "$work"
	rm -rf --one-file-system "$work"
	if [ "$status" -eq 0 ]; then
		echo "demo: ok (unmounted, $work removed)"
	else
		echo "demo: FAILED (exit $status; unmounted, $work removed)" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -t 1 ]; then
	say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
else
	say() { printf '\n$ %s\n' "$*"; }
fi
fail() {
	echo "demo: $*" >&2
	exit 1
}
# expect_error TEXT CMD: CMD must fail with TEXT in its error output.
expect_error() {
	local text=$1 out
	shift
	say "$*"
	if out=$(bash -c "$*" 2>&1); then
		fail "expected '$text', but it succeeded"
	fi
	printf '%s\n' "$out"
	[[ $out == *"$text"* ]] || fail "expected '$text'"
}

echo "building wsfs"
(cd "$repo" && go build -o "$bin" ./cmd/wsfs)

# The project: a file, a symlink inside, a symlink that escapes, a git repo.
mkdir -p "$proj/src/pkg" "$work/outside" "$mnt"
printf 'package main\n\nfunc main() {}\n' >"$proj/src/main.go"
printf 'package pkg\n' >"$proj/src/pkg/pkg.go"
printf 'not part of the project\n' >"$work/outside/notes.txt"
ln -s src/pkg "$proj/pkg"
ln -s ../outside/notes.txt "$proj/notes"
git -C "$proj" init -q

say "wsfs mount --session demo --root $proj --mountpoint $mnt &"
TMPDIR=/tmp "$bin" mount --session demo --root "$proj" --mountpoint "$mnt" >"$work/mount.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	grep -q '^mounted ' "$work/mount.log" && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
cat "$work/mount.log"
grep -q '^mounted ' "$work/mount.log" || fail "wsfs mount did not mount"

say "ls -l $mnt"
ls -l "$mnt"

say "cat $mnt/pkg/../main.go    # pkg -> src/pkg, so pkg/.. is src, as on the host"
cat "$mnt/pkg/../main.go"

say "echo hello >$mnt/src/hello.txt && cat $proj/src/hello.txt"
echo hello >"$mnt/src/hello.txt"
[ "$(cat "$proj/src/hello.txt")" = hello ] || fail "the write did not reach the project"
cat "$proj/src/hello.txt"

say "readlink $mnt/notes; cat $mnt/notes    # escapes the project: a link into the host view"
readlink "$mnt/notes"
cat "$mnt/notes"
expect_error "Read-only file system" "echo changed >>'$mnt/notes'"
grep -q changed "$work/outside/notes.txt" && fail "the write through the escaping link landed outside"

expect_error "Permission denied" "echo 'echo pwned' >'$mnt/.git/hooks/pre-commit'"
[ -e "$proj/.git/hooks/pre-commit" ] && fail "a hook was created"

say "cd -P $mnt/pkg/.. && pwd -P; cd $mnt && wsfs resolve pkg/.. pkg/pkg.go"
kernel=$(cd -P "$mnt/pkg/.." && pwd -P)
echo "$kernel"
resolved=$(cd "$mnt" && "$bin" resolve pkg/.. pkg/pkg.go)
printf '%s\n' "$resolved"
key=$(head -n1 <<<"$resolved" | cut -f2)
[ "$key" = "$kernel" ] || fail "wsfs resolve ($key) disagrees with pwd -P ($kernel)"
[ "$key" = "$mnt/src" ] || fail "pkg/.. should be $mnt/src, not $key"
echo "wsfs resolve agrees with pwd -P"

say "kill -TERM \$wsfs_pid    # unmounts and exits"
kill -TERM "$pid"
wait "$pid" || fail "wsfs mount exited with $?"
pid=
echo "wsfs mount's log (denials are logged with op, path, rule and pid):"
cat "$work/mount.log"
if grep -qF " $mnt fuse" /proc/mounts; then fail "still mounted"; fi

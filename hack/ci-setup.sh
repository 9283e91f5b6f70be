#!/usr/bin/env bash
# Installs what wsfs's tests and demo need on a Debian machine: fuse3
# (fusermount3 and the FUSE device), git, bubblewrap (exec --confine), the
# tools the end-to-end tests drive the mount with (python3, flock, stat,
# truncate, setfacl, setfattr), Node.js and npm with the TypeScript client's locked
# dependencies (npm ci in clients/typescript); /dev/fuse 0666 and
# user_allow_other for the tests that run wsfs as an ordinary user. Idempotent: apt-get
# runs only when something is missing. Needs root (or sudo).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	sudo=(sudo)
fi

# retry CMD...: the steps that reach a registry (Debian apt, the Go module
# proxy, npm) get three tries, so that one transient network failure does
# not fail CI.
retry() {
	local i
	for i in 1 2 3; do
		"$@" && return 0
		[ "$i" -lt 3 ] || return 1
		echo "ci-setup: try $i of: $* failed; again in $((i * 10)) s" >&2
		sleep $((i * 10))
	done
}

need=()
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v git >/dev/null 2>&1 || need+=(git)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# python3 -m venv (TestLinksPythonVenv) needs Debian's python3-venv.
{ command -v python3 >/dev/null 2>&1 && python3 -c 'import ensurepip' 2>/dev/null; } || need+=(python3-venv)
command -v flock >/dev/null 2>&1 || need+=(util-linux)
command -v truncate >/dev/null 2>&1 || need+=(coreutils)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap) # wsfs exec --confine's jail
# setfacl/getfacl: the default-ACL tests compare the mount with native ext4.
command -v setfacl >/dev/null 2>&1 || need+=(acl)
# setfattr: hack/layer-acceptance.sh's script (issue 23) sets and removes xattrs.
command -v setfattr >/dev/null 2>&1 || need+=(attr)
# Node.js and npm for the TypeScript client's tests (clients/typescript):
# Debian's packages when the machine has none.
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ "${#need[@]}" -gt 0 ]; then
	echo "ci-setup: changing this host: installing ${need[*]} (apt-get)"
	retry "${sudo[@]}" apt-get update -qq
	retry "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The fuse module is built in or loaded on most kernels; in a container
# modprobe may be missing or refused, which is fine when /dev/fuse exists.
"${sudo[@]}" modprobe fuse >/dev/null 2>&1 || true
if [ ! -e /dev/fuse ]; then
	echo "ci-setup: changing this host: creating /dev/fuse (mode 0666)"
	"${sudo[@]}" mknod -m 0666 /dev/fuse c 10 229 2>/dev/null || true
fi
if [ ! -c /dev/fuse ]; then
	echo "ci-setup: /dev/fuse is missing and cannot be created: tests that mount will fail" >&2
	exit 1
fi
# The unprivileged-server tests (issue 8) run wsfs as an ordinary user
# (uid 65534) through fusermount3: it needs /dev/fuse open to everyone (the
# usual 0666; some images ship 0600) and, for --allow-other, user_allow_other
# in /etc/fuse.conf (fuse(8)).
if [ "$(stat -c %a /dev/fuse)" != 666 ]; then
	echo "ci-setup: changing this host: chmod 0666 /dev/fuse (was $(stat -c %a /dev/fuse))"
	"${sudo[@]}" chmod 0666 /dev/fuse
fi
if ! grep -qx 'user_allow_other' /etc/fuse.conf 2>/dev/null; then
	echo "ci-setup: changing this host: adding user_allow_other to /etc/fuse.conf"
	echo user_allow_other | "${sudo[@]}" tee -a /etc/fuse.conf >/dev/null
fi
# staticcheck for .ci/run, at the version it pins (STATICCHECK_VERSION).
if [ -n "${STATICCHECK_VERSION:-}" ]; then
	sc="$(go env GOPATH)/bin/staticcheck"
	if ! "$sc" -version 2>/dev/null | grep -q "(${STATICCHECK_VERSION#v})"; then
		echo "ci-setup: installing staticcheck ${STATICCHECK_VERSION}"
		retry go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
	fi
fi
# The module's dependencies, from the Go module proxy, before vet and the
# tests need them.
(cd "$(dirname "${BASH_SOURCE[0]}")/.." && retry go mod download)
# The TypeScript client's dependencies, exactly as package-lock.json pins
# them (from the npm registry).
(cd "$(dirname "${BASH_SOURCE[0]}")/../clients/typescript" && retry npm ci --no-audit --no-fund --loglevel=error)
echo "ci-setup: ok ($(fusermount3 -V 2>&1 | head -n1), $(git --version), node $(node --version))"

package fusefs_test

// Acceptance 2: real tools inside the mount, each run as a child process.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// gitEnv isolates git from the host's configuration.
func gitEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{
		"HOME=" + home, "XDG_CONFIG_HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
		"GIT_PAGER=cat", "PAGER=cat", "LC_ALL=C",
	}
}

func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	hasGit := exec.Command("git", "--version").Run() == nil
	goBin, goErr := exec.LookPath("go")
	var goroot string
	if goErr == nil {
		out, err := exec.Command(goBin, "env", "GOROOT").Output()
		if err != nil {
			t.Fatalf("go env GOROOT: %v", err)
		}
		goroot = strings.TrimSpace(string(out))
	}
	gitSkip := ""
	switch {
	case !hasGit:
		gitSkip = "git is not installed on this host"
	case goroot == "":
		gitSkip = "go is not installed on this host (the repo is a copy of $(go env GOROOT)/src/net)"
	}
	env := gitEnv(t)
	srcs := []string{"net", "crypto", "os"}
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		if gitSkip != "" {
			return
		}
		var cp []string
		for _, s := range srcs {
			cp = append(cp, shq(filepath.Join(goroot, "src", s)))
		}
		script := "set -e; mkdir repo; cp -a " + strings.Join(cp, " ") + " repo/; cd repo; " +
			"git init -q -b main; git add -A; git -c user.email=t@t -c user.name=t commit -qm init; git ls-files | wc -l"
		out, errOut, code := shEnv(t, b, env, script)
		if code != 0 {
			t.Fatalf("making the git repo on the backing dir: exit %d: %s %s", code, out, errOut)
		}
		t.Logf("git repo of %s files (copied from %v)", strings.TrimSpace(out), srcs)
	}))
	repo, brepo := filepath.Join(mnt, "repo"), filepath.Join(backing, "repo")

	// step runs script in dir with the git env and checks output and exit.
	step := func(t *testing.T, dir, script, want string) bool {
		t.Helper()
		out, errOut, code := shEnv(t, dir, env, script)
		if code != 0 || out != want {
			t.Errorf("%s (in %s):\n  exit %d, stdout %q\n  want exit 0, stdout %q\n  stderr: %s", script, dir, code, abbrev(out, 1500), want, abbrev(errOut, 1500))
			return false
		}
		return true
	}

	t.Run("git", func(t *testing.T) {
		if gitSkip != "" {
			t.Skip(gitSkip)
		}
		// Stat identity first (before anything refreshes the index): the
		// index was written on the backing; through the mount, plumbing
		// that does not refresh must see no stat-dirty entry.
		step(t, brepo, "git diff-files --name-only | wc -l", "0\n")
		step(t, repo, "git diff-files --name-only | head -5; git diff-files --name-only | wc -l", "0\n")
		step(t, repo, "git status --porcelain", "")
		step(t, repo, "git checkout -q -b x && git rev-parse --abbrev-ref HEAD", "x\n")
		step(t, repo, "echo '// edit in mount' >> net/net.go && git status --porcelain", " M net/net.go\n")
		step(t, repo, "git commit -qam edit && git log --oneline | wc -l && git status --porcelain", "2\n")
		step(t, repo, "echo '// stash me' >> net/ip.go && git stash -q && git status --porcelain && git stash list | wc -l && { tail -1 net/ip.go | grep -c 'stash me' || true; }", "1\n0\n")
		step(t, repo, "git stash pop -q && git status --porcelain && git checkout -- net/ip.go && git status --porcelain", " M net/ip.go\n")
		step(t, repo, "git gc -q --prune=now && git count-objects -v | grep '^count:' && git status --porcelain", "count: 0\n")
		step(t, repo, "git fsck --no-progress 2>&1 | grep -v '^dangling' | wc -l", "0\n")
		// The host sees the same repository state, and the index written
		// through the mount is not stat-dirty on the host.
		step(t, brepo, "git rev-parse --abbrev-ref HEAD && git log --oneline | wc -l && git diff-files --name-only | wc -l && git status --porcelain", "x\n2\n0\n")
		step(t, repo, "git diff-files --name-only | wc -l", "0\n")
	})

	t.Run("go-build-vet", func(t *testing.T) {
		if goErr != nil {
			t.Skip("go is not installed on this host")
		}
		gocache, err := exec.Command(goBin, "env", "GOCACHE").Output()
		if err != nil {
			t.Fatal(err)
		}
		goEnv := append(append([]string{}, env...), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local",
			"GOCACHE="+strings.TrimSpace(string(gocache)), "GOPATH="+filepath.Join(testBase, "gopath"), "CGO_ENABLED=0")
		script := `set -e
mkdir -p gomod/sub && cd gomod
printf 'module example.com/m\n\ngo 1.22\n' > go.mod
cat > main.go <<'EOF'
package main

import (
	"fmt"

	"example.com/m/sub"
)

func main() { fmt.Println(sub.Hello()) }
EOF
cat > sub/sub.go <<'EOF'
package sub

// Hello greets.
func Hello() string { return "hello from the mount" }
EOF
go build ./...
go vet .
go vet ./...
go build -o prog .
./prog
`
		out, errOut, code := shEnv(t, mnt, goEnv, script)
		if code != 0 || out != "hello from the mount\n" {
			t.Errorf("go build/vet in the mount: exit %d stdout %q, want 0 and %q\nstderr: %s", code, out, "hello from the mount\n", abbrev(errOut, 3000))
		}
	})

	t.Run("atomic-save", func(t *testing.T) {
		need(t, "python3")
		dir := filepath.Join(mnt, "edit")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFileT(t, filepath.Join(dir, "doc.txt"), "old content\n", 0o644)
		oldIno := lstatT(t, filepath.Join(dir, "doc.txt")).Ino
		const save = `
import os
p, tmp = "doc.txt", ".doc.txt.tmp"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"new content\n")
os.fsync(fd)
os.close(fd)
os.rename(tmp, p)
dfd = os.open(".", os.O_RDONLY)
os.fsync(dfd)
os.close(dfd)
print(open(p).read(), end="")
`
		step(t, dir, "python3 -c "+shq(save)+" && ls -A | tr '\\n' ' '", "new content\ndoc.txt ")
		st := lstatT(t, filepath.Join(dir, "doc.txt"))
		bst := lstatT(t, filepath.Join(backing, "edit/doc.txt"))
		if st.Ino == oldIno || st.Ino != bst.Ino || st.Nlink != 1 || st.Mode&0o7777 != 0o644 {
			t.Errorf("after atomic save: ino %d (old %d, backing %d) nlink %d mode %#o; want a new inode equal to the backing's, nlink 1, 0644", st.Ino, oldIno, bst.Ino, st.Nlink, st.Mode&0o7777)
		}
		if b, _ := os.ReadFile(filepath.Join(backing, "edit/doc.txt")); string(b) != "new content\n" {
			t.Errorf("backing doc.txt = %q after atomic save", b)
		}
		if _, err := exec.LookPath("vim"); err == nil {
			step(t, dir, `vim -Nu NONE -i NONE -n -es -c 'set backupcopy=no' -c '$put =\"vim line\"' -c 'wq' doc.txt; echo rc=$?; cat doc.txt; ls -A | tr '\n' ' '`,
				"rc=0\nnew content\nvim line\ndoc.txt ")
		} else {
			t.Log("vim not installed; python3 atomic save only")
		}
	})

	t.Run("shell-script", func(t *testing.T) {
		dir := filepath.Join(mnt, "scripts")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		step(t, dir, `umask 022; printf '#!/bin/sh\necho "script ran: $*" "$(pwd -P)"\n' > s.sh && chmod +x s.sh && ./s.sh a b && stat -c %a s.sh`,
			"script ran: a b "+dir+"\n755\n")
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(backing, "scripts/s.sh"), &st); err != nil || st.Mode&0o7777 != 0o755 {
			t.Errorf("backing s.sh mode %#o (%v), want 0755", st.Mode&0o7777, err)
		}
	})
}

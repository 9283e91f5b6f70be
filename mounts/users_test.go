package mounts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// asUID runs script with bash as uid:uid (no supplementary groups) from
// "/" and returns its result; a script that wants its pid logged starts
// with `echo $$` and execs its command.
func asUID(t *testing.T, uid uint32, script string) result {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	return run(t, cmd)
}

// openUpDirs makes each of dirs and its ancestors searchable by every user.
func openUpDirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		for d := dir; d != "/"; d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, fi.Mode().Perm()|fi.Mode()&os.ModeSticky|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSessionUsers: `session create --users 65534`: uid 65534 reads and
// writes through the session's mount and its host view, its objects are
// its own; uid 65533 (not listed) gets EACCES, logged with its uid and
// pid; a session without --users stays owner-only (the kernel refuses
// 65534 without allow_other); a sub-session inherits the users and may not
// list another; a jail runs as a listed uid (exec --confine --user) and
// refuses an unlisted one.
func TestSessionUsers(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "a.txt", "sub/")
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if r := d.wsfs(t, "session", "create", "u1", "--root", root, "--users", "65534"); r.code != 0 {
		t.Fatalf("create --users: %d %s", r.code, r.stderr)
	}
	if r := d.wsfs(t, "session", "create", "solo", "--root", root); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	mp, solo := filepath.Join(d.mountBase, "u1"), filepath.Join(d.mountBase, "solo")
	// Every ancestor of the root and the mount base searchable (the
	// test's temp directory is 0700): host permissions apply to other
	// users, in a jail too.
	openUpDirs(t, d.mountBase)
	s, err := d.c.Get(t.Context(), "u1")
	if err != nil || len(s.Users) != 1 || s.Users[0] != 65534 {
		t.Fatalf("show u1: users %v, %v; want [65534]", s.Users, err)
	}

	r := asUID(t, 65534, "set -e; umask 022; cd "+mp+"; cat a.txt; echo mine > own; echo more >> own; cat own; stat -c '%u:%g %a' own; mkdir d; stat -c %u d")
	if r.code != 0 || r.stdout != "a.txtmine\nmore\n65534:65534 644\n65534\n" {
		t.Fatalf("uid 65534 in its session: %+v", r)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, "own"), &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("own in the root: %d:%d, %v; want 65534:65534", st.Uid, st.Gid, err)
	}
	hv := filepath.Join(d.mountBase, "@host", "u1")
	if r := asUID(t, 65534, "cat "+hv+"/etc/hostname >/dev/null && echo ok"); r.stdout != "ok\n" {
		t.Errorf("uid 65534 reads through the host view: %+v", r)
	}

	r = asUID(t, 65533, "echo $$; exec cat "+mp+"/a.txt")
	pid, _, _ := strings.Cut(r.stdout, "\n")
	if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("uid 65533: %+v, want Permission denied", r)
	}
	found := false
	for _, l := range strings.Split(d.logText(), "\n") {
		if strings.Contains(l, "msg=denied") && strings.Contains(l, "session=u1") && strings.Contains(l, "rule=users:not-listed") &&
			strings.Contains(l, " uid=65533 ") && strings.HasSuffix(l, " pid="+pid) {
			found = true
		}
	}
	if !found {
		t.Errorf("no denial line for uid 65533 pid %s:\n%s", pid, d.logText())
	}
	if r := asUID(t, 65534, "exec ls "+solo); r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("uid 65534 in an owner-only session: %+v, want Permission denied", r)
	}

	// Sub-sessions narrow the users list, never widen it.
	if r := d.wsfs(t, "session", "create", "kid", "--root", root, "--parent", "u1"); r.code != 0 {
		t.Fatalf("create kid: %d %s", r.code, r.stderr)
	}
	if s, err := d.c.Get(t.Context(), "kid"); err != nil || len(s.Users) != 1 || s.Users[0] != 65534 {
		t.Errorf("kid inherits users: %v, %v", s.Users, err)
	}
	r = d.wsfs(t, "session", "create", "kid2", "--root", root, "--parent", "u1", "--users", "65534,65533")
	if want := `session "kid2": users: uid 65533: parent "u1" does not serve it; a sub-session may only narrow its parent's users`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("kid2 widening users: %+v, want %q", r, want)
	}
	r = d.wsfs(t, "session", "create", "bad", "--root", root, "--users", "0")
	if want := "wsfs: --users: uid 0: root is always served; list the other uids only\n"; r.code != 2 || r.stderr != want {
		t.Errorf("--users 0: %+v, want %q", r, want)
	}

	// A jail run as the listed uid; an unlisted one is refused.
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap missing: jail part skipped")
	}
	r = d.exec(t, "u1", []string{"--confine", "--user", "65534"}, "sh", "-c", `id -u; echo j > jailed; stat -c %u jailed; echo t > "$TMPDIR/t" && echo tmp ok`)
	if r.code != 0 || r.stdout != "65534\n65534\ntmp ok\n" {
		t.Errorf("exec --confine --user 65534: %+v", r)
	}
	r = d.exec(t, "u1", []string{"--confine", "--user", "65533"}, "true")
	if want := "wsfs: exec: --user 65533: session u1 does not serve uid 65533 (its users: 65534; session create --users)\n"; r.code != 2 || r.stderr != want {
		t.Errorf("exec --confine --user 65533: %+v, want exit 2 %q", r, want)
	}
	r = d.exec(t, "solo", []string{"--confine", "--user", "65534"}, "true")
	if want := "wsfs: exec: --user 65534: session solo does not serve uid 65534 (session create --users)\n"; r.code != 2 || r.stderr != want {
		t.Errorf("exec --confine --user 65534 in an owner-only session: %+v, want exit 2 %q", r, want)
	}
	r = d.exec(t, "u1", []string{"--user", "65534"}, "true")
	if want := "wsfs: exec: --user: only with --confine\n"; r.code != 2 || r.stderr != want {
		t.Errorf("exec --user without --confine: %+v, want %q", r, want)
	}
}

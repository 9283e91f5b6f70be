package fusefs_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/policy"
)

// TestUsersGate: a mount with a users list is allow_other; the listed uid
// (65534) reads and writes and its objects are its own; an unlisted uid
// (65533) gets EACCES for every operation, each refusal logged with its
// uid and pid and counted under "users:not-listed"; root is served.
func TestUsersGate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: other uids and allow_other")
	}
	need(t, "stat")
	var logs syncBuffer
	backing, mnt, srv := mountT(t, func(s *mountSetup) {
		s.cfg.Users = []uint32{nobody}
		s.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	openUpT(t, backing)
	openUpT(t, mnt)
	if err := os.Chmod(mnt, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backing, "shared"), []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{userPath}

	out, errOut, code := shAs(t, asUser(nobody, nobody), mnt, env,
		`set -e; umask 022; echo mine > own; echo more >> own; cat shared own; stat -c '%u:%g %a' own; mkdir d; stat -c '%u:%g' d`)
	if code != 0 {
		t.Fatalf("listed uid %d: exit %d: %s", nobody, code, errOut)
	}
	if want := fmt.Sprintf("root's\nmine\nmore\n%d:%d 644\n%d:%d\n", nobody, nobody, nobody, nobody); out != want {
		t.Errorf("listed uid: got %q, want %q", out, want)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(backing, "own"), &st); err != nil || st.Uid != nobody || st.Gid != nobody {
		t.Errorf("backing own: uid %d gid %d (%v), want %d:%d", st.Uid, st.Gid, err, nobody, nobody)
	}

	const other = 65533
	for _, script := range []string{"exec cat shared", "exec stat -c %u", "exec touch new", "exec ls"} {
		out, errOut, code = shAs(t, asUser(other, other), "/", env, "echo $$; cd "+shq(mnt)+" 2>/dev/null; "+script+" "+shq(mnt+"/shared"))
		pid, _, _ := strings.Cut(out, "\n")
		if code == 0 || !strings.Contains(errOut, "Permission denied") {
			t.Errorf("unlisted uid %d: %s: exit %d, stderr %q; want Permission denied (EACCES)", other, script, code, errOut)
		}
		line := ""
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, " uid="+fmt.Sprint(other)+" ") && strings.HasSuffix(l, " pid="+pid) {
				line = l
			}
		}
		if !strings.Contains(line, "msg=denied") || !strings.Contains(line, "rule=users:not-listed") || !strings.Contains(line, "errno=EACCES") {
			t.Errorf("unlisted uid %d: %s (pid %s): no denial line with uid, pid and rule; log:\n%s", other, script, pid, logs.String())
		}
	}
	if _, err := os.Stat(filepath.Join(backing, "new")); !os.IsNotExist(err) {
		t.Errorf("unlisted uid created new: %v", err)
	}
	if n := srv.Stats().Denials["users:not-listed"]; n < 4 {
		t.Errorf("denials counted under users:not-listed: %d, want >= 4", n)
	}
	// Root is always served.
	if out := shOK(t, mnt, "cat own"); out != "mine\nmore\n" {
		t.Errorf("root reads own: %q", out)
	}
}

// TestCheckUsers: the users list's rules, each error naming the uid.
func TestCheckUsers(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    []uint32
	}{
		{"", "", nil},
		{"1000, 65534", "", []uint32{1000, 65534}},
		{"0", `users: uid 0: root is always served; list the other uids only`, nil},
		{"4294967295", `users: uid 4294967295: not a valid uid ((uid_t)-1)`, nil},
		{"7,7", `users: uid 7: listed twice`, nil},
		{"alice", `users "alice": "alice" is not a uid (a decimal number)`, nil},
		{"-1", `users "-1": "-1" is not a uid (a decimal number)`, nil},
	} {
		got, err := fusefs.ParseUsers(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseUsers(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ParseUsers(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	_, err := fusefs.Mount(fusefs.Config{Root: "/", Mountpoint: "/nonexistent", Policy: compileT(t, policy.Spec{Primary: "/"}), Users: []uint32{0}})
	if err == nil || !strings.HasPrefix(err.Error(), "users: uid 0:") {
		t.Errorf("Mount with users [0]: %v", err)
	}
}

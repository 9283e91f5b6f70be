package mounts

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// A torn last line (a crash in the middle of an append) is dropped and
// truncated on open; the next append continues the sequence.
func TestEventLogTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.events")
	l, events, err := openEventLog(path, true)
	if err != nil || len(events) != 0 {
		t.Fatalf("open new: %v %v", events, err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, to := range []string{"/m/a", "/m/b"} {
		if _, err := l.append(Event{Time: at, Type: EventCd, From: "/m", To: to}); err != nil {
			t.Fatal(err)
		}
	}
	l.close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":3,"time":"2026-01-02T03:04:05Z","type":"cd","fr`)
	f.Close()

	l, events, err = openEventLog(path, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Seq: 1, Time: at, Type: EventCd, From: "/m", To: "/m/a"},
		{Seq: 2, Time: at, Type: EventCd, From: "/m", To: "/m/b"},
	}
	if !reflect.DeepEqual(events, want) {
		t.Fatalf("events after a torn append:\n got %+v\nwant %+v", events, want)
	}
	ev, err := l.append(Event{Time: at, Type: EventRecover, From: "/m/b", To: "/m", Reason: "gone"})
	if err != nil || ev.Seq != 3 {
		t.Fatalf("append after reopen: %+v %v", ev, err)
	}
	l.close()
	data, _ := os.ReadFile(path)
	wantText := `{"seq":1,"time":"2026-01-02T03:04:05Z","type":"cd","from":"/m","to":"/m/a"}
{"seq":2,"time":"2026-01-02T03:04:05Z","type":"cd","from":"/m","to":"/m/b"}
{"seq":3,"time":"2026-01-02T03:04:05Z","type":"recover","from":"/m/b","to":"/m","reason":"gone"}
`
	if string(data) != wantText {
		t.Fatalf("log:\n%s\nwant:\n%s", data, wantText)
	}
}

// A complete line that does not parse is corruption, not a torn append.
func TestEventLogCorruptLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.events")
	os.WriteFile(path, []byte("{\"seq\":1}\nnot json\n"), 0o600)
	_, _, err := openEventLog(path, false)
	if err == nil || err.Error() != "event log "+path+": line 2: invalid character 'o' in literal null (expecting 'u')" {
		t.Fatalf("corrupt log: %v", err)
	}
}

func TestValidID(t *testing.T) {
	for _, id := range []string{"a", "A-b_c.9", "..x", strings.Repeat("x", 64)} {
		if err := ValidID(id); err != nil {
			t.Errorf("ValidID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "a b", "é", "x\n", strings.Repeat("x", 65)} {
		if err := ValidID(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidID(%q): %v, want ErrInvalid", id, err)
		}
	}
}

func TestCodeStatus(t *testing.T) {
	for code, status := range map[Code]int{
		CodeInvalid: 400, CodeForbidden: 403, CodeNotFound: 404, CodeMethod: 405,
		CodeExists: 409, CodeBusy: 409, CodeOriginGone: 409, CodeRootChanged: 409, CodeFailed: 409,
		CodeTooLarge: 413, CodeInternal: 500, "unknown": 500,
	} {
		if got := code.Status(); got != status {
			t.Errorf("%s: status %d, want %d", code, got, status)
		}
	}
	err := errorf(CodeBusy, "session %q: %w", "x", os.ErrExist)
	if !errors.Is(err, ErrBusy) || errors.Is(err, ErrExists) || !errors.Is(err, os.ErrExist) || CodeOf(err) != CodeBusy || CodeOf(os.ErrExist) != CodeInternal {
		t.Fatalf("error matching: %v", err)
	}
}

// Temp file names of record writes cannot be mistaken for a session's own
// files, whatever the session id; writeFileAtomic leaves only the file.
func TestTempName(t *testing.T) {
	for name, want := range map[string]bool{
		"x.json+tmp-123":       true,
		"x.json.tmp-1":         true, // an earlier version's leftover
		"x.json.tmp-1.json":    false,
		"x.json.tmp-1.events":  false,
		"x.json.tmp-1.pending": false,
		"x.json+tmp-":          false,
		"x.json+tmp-12a":       false,
		"x.events+tmp-1":       false,
		"x.json":               false,
	} {
		if got := isTempName(name); got != want {
			t.Errorf("isTempName(%q) = %v, want %v", name, got, want)
		}
	}
	dir := t.TempDir()
	if err := writeFileAtomic(dir, "x.json.tmp-1.json", []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "x.json.tmp-1.json" {
		t.Fatalf("after writeFileAtomic: %v %v, want only x.json.tmp-1.json", ents, err)
	}
}

// decodeBody: a body one byte over the limit is too_large even when the
// value fits; a value that is not an object (null included) is invalid.
func TestDecodeBody(t *testing.T) {
	pad := func(n int) string {
		v := `{"cd":"x"`
		return v + strings.Repeat(" ", n-len(v)-1) + "}"
	}
	for _, tc := range []struct {
		body string
		code Code
		msg  string
	}{
		{pad(MaxBodyBytes), "", ""},
		{pad(MaxBodyBytes-1) + "\n", "", ""},
		{pad(MaxBodyBytes) + "\n", CodeTooLarge, "request body: larger than 1048576 bytes"},
		{pad(MaxBodyBytes + 1), CodeTooLarge, "request body: larger than 1048576 bytes"},
		{"null", CodeInvalid, "request body: null: a JSON object is required"},
		{" \n null ", CodeInvalid, "request body: null: a JSON object is required"},
		{"[]", CodeInvalid, "request body: an array: a JSON object is required"},
		{"true", CodeInvalid, "request body: a boolean: a JSON object is required"},
		{"", CodeInvalid, "request body: empty, a JSON object is required"},
		{`{"cd":"x"} {}`, CodeInvalid, "request body: trailing data after the JSON value"},
		{`{"cd":"x","y":1}`, CodeInvalid, `request body: json: unknown field "y"`},
		{`{"cd":1}`, CodeInvalid, `request body: field "cd": want a string, got a JSON number`},
		{`{"cd":["x"]}`, CodeInvalid, `request body: field "cd": want a string, got a JSON array`},
		{`{"cd":"y","cd":"x"}`, CodeInvalid, `request body: key "cd" given twice`},
	} {
		var req api.CwdRequest
		err := decodeBody(httptest.NewRequest("POST", "/v1/sessions/s/cwd", strings.NewReader(tc.body)), &req)
		short := tc.body
		if len(short) > 40 {
			short = fmt.Sprintf("%.20s...(%d bytes)", short, len(short))
		}
		if CodeOf(err) != tc.code || (err != nil && err.Error() != tc.msg) {
			t.Errorf("body %q: %v (code %q), want code %q %q", short, err, CodeOf(err), tc.code, tc.msg)
		}
		if err == nil && req.Cd != "x" {
			t.Errorf("body %q: decoded %+v", short, req)
		}
	}
}

// duplicateKey: a key twice in one object is refused at any depth; the same
// key in different objects, and equal values in arrays, are fine.
func TestDuplicateKey(t *testing.T) {
	for body, want := range map[string]string{
		`{}`: "",
		`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}],"d":["a","a"]}`: "",
		`{"a":{},"b":[],"c":[[],{}],"d":{"e":{"f":null}}}`:        "",
		`{"mode":"full-access","mode":"read-only"}`:               `key "mode" given twice`,
		`{"policy":{"roots":[{"path":"/x","path":"/y"}]}}`:        `key "path" given twice`,
		`{"a":{"b":1},"c":2,"a":3}`:                               `key "a" given twice`,
		`{"labels":{"k":"1","k":"2"}}`:                            `key "k" given twice`,
		// Keys compared unescaped; strings holding quotes, braces and
		// commas are values, not structure.
		`{"mo\u0064e":"a","mode":"b"}`:                `key "mode" given twice`,
		`{"a":"x\",\"a\":{","b":"}],\"b\""}`:          "",
		`{"a":["\"a\"",{"a":1}],"b":{"\"":1,"\\":2}}`: "",
		` { "a" : 1 , "a" : 2 } `:                     `key "a" given twice`,
	} {
		err := duplicateKey([]byte(body))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("duplicateKey(%s) = %q, want %q", body, got, want)
		}
	}
}

// A lock holder that lets go between takeLock's first attempt and its look
// at /proc/locks (a killed daemon exiting) leaves no holder to name: takeLock
// looks once more and takes the lock, where it said "held by pid 0" before.
// A live holder is still named.
func TestTakeLockHolderLetGo(t *testing.T) {
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "lock")
	open := func() *os.File {
		f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	holder, f := open(), open() // two open file descriptions: flock(2) locks conflict
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	err := takeLock(f, lockPath, dir, lockOpts{log: slog.Default()})
	if want := fmt.Sprintf("held by pid %d", os.Getpid()); err == nil || err.Error() != want {
		t.Fatalf("takeLock with a live holder = %v, want %q", err, want)
	}
	betweenLockLooks = func() { unix.Flock(int(holder.Fd()), unix.LOCK_UN) }
	t.Cleanup(func() { betweenLockLooks = nil })
	if err := takeLock(f, lockPath, dir, lockOpts{log: slog.Default()}); err != nil {
		t.Fatalf("takeLock after the holder let go = %v, want nil", err)
	}
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("flock by another description after takeLock = %v, want EWOULDBLOCK (takeLock holds it)", err)
	}
	if b, err := os.ReadFile(lockPath); err != nil || string(b) != fmt.Sprintf("%d\n", os.Getpid()) {
		t.Errorf("lock file after takeLock = %q, %v; want this process's pid", b, err)
	}
}

// The pid of the lock's last holder, recorded in the file, is waited for only
// while that process is dying: a live one (a stale record whose pid now
// names another process) delays nothing.
func TestTakeLockRecordedHolderAlive(t *testing.T) {
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "lock")
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	if err := os.WriteFile(lockPath, []byte(fmt.Sprintf("%d\n", other.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// Waiting for it would end in "has not exited" after lockWait.
	if err := takeLock(f, lockPath, dir, lockOpts{log: slog.Default()}); err != nil {
		t.Fatalf("takeLock with a live recorded holder = %v, want nil", err)
	}
	if b, err := os.ReadFile(lockPath); err != nil || string(b) != fmt.Sprintf("%d\n", os.Getpid()) {
		t.Errorf("lock file after takeLock = %q, %v; want this process's pid", b, err)
	}
}

// TestDecodeBodyUnknownFieldWhere: an unknown field inside a nested object
// of the body says where it is.
func TestDecodeBodyUnknownFieldWhere(t *testing.T) {
	for body, want := range map[string]string{
		`{"id":"s","root":"/r","policy":{"mode":"read-only","extra":1}}`:                       `request body: unknown field "extra" in policy`,
		`{"id":"s","root":"/r","policy":{"additional":[{"path":"/x","access":"none","y":2}]}}`: `request body: unknown field "y" in policy.additional[0]`,
		`{"id":"s","root":"/r","colour":"red"}`:                                                `request body: json: unknown field "colour"`,
	} {
		var req api.CreateRequest
		err := decodeBody(httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(body)), &req)
		if err == nil || err.Error() != want || CodeOf(err) != CodeInvalid {
			t.Errorf("decodeBody(%s): %v, want %q", body, err, want)
		}
	}
}

// A takeover whose running daemon ends (a kill -9 landing) between the look
// at the lock and the SIGTERM finds no process to signal (ESRCH): it waits
// for the lock, which the ended daemon let go, instead of failing with
// "could not be asked to stop: no such process" (a restart right after a
// kill -9 failed so).
func TestTakeOverHolderEnded(t *testing.T) {
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "lock")
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	pid := ended.Process.Pid // reaped: kill(2) says ESRCH
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Skipf("pid %d was reused (kill: %v)", pid, err)
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := takeOver(f, pid, lockPath, slog.Default(), nil); err != nil {
		t.Fatalf("takeOver from ended pid %d = %v, want nil", pid, err)
	}
	other, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("flock by another description after takeOver = %v, want EWOULDBLOCK (takeOver holds it)", err)
	}
}

// A successor waiting for a killed daemon to exit whose lock another
// successor takes first (two started right after a kill -9) says so at
// once, as a takeover does, instead of waiting out lockWait and blaming
// the killed daemon ("killed but has not exited after 1m0s").
func TestAwaitExitTakenFirst(t *testing.T) {
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "lock")
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	open := func() *os.File {
		f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	other, f := open(), open()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	err := awaitExit(f, ended.Process.Pid, lockPath, dir, false)
	if want := fmt.Sprintf("taken over by pid %d first", os.Getpid()); err == nil || err.Error() != want {
		t.Fatalf("awaitExit = %v, want %q", err, want)
	}
}

// suspended names the daemon in takeover.suspended while it runs with the
// recorded start time; a file of a pid alone, as a build before the start
// time writes it, names that pid while it runs (a successor of this build
// took over from such a daemon as from a stale file before: it waited out
// lockWait and failed).
func TestSuspendedFormats(t *testing.T) {
	state := t.TempDir()
	self := os.Getpid()
	start, err := procStart(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		want int
	}{
		{fmt.Sprintf("%d %d\n", self, start), self},
		{fmt.Sprintf("%d\n", self), self},
		{fmt.Sprintf("%d %d\n", self, start+1), 0},
		{"x\n", 0},
	} {
		if err := os.WriteFile(filepath.Join(state, suspendName), []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := suspended(state); got != c.want {
			t.Errorf("suspended with %q = %d, want %d", c.file, got, c.want)
		}
	}
}

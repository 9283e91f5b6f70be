package mounts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
)

// apiError sends a request and asserts its status, error code and message.
func (d *daemon) apiError(t *testing.T, method, path, body string, status int, code mounts.Code, msg string) {
	t.Helper()
	got, b := d.rawRequest(t, method, path, strings.NewReader(body))
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(b), &eb); err != nil || got != status || eb.Error.Code != code || eb.Error.Message != msg {
		t.Fatalf("%s %s: status %d body %q, want %d code %s message %q", method, path, got, b, status, code, msg)
	}
}

// sortedMounts returns the FUSE mount points under dir, sorted.
func sortedMounts(t *testing.T, dir string) []string {
	t.Helper()
	m := fuseMountsUnder(t, dir)
	sort.Strings(m)
	return m
}

// A session id that looks like an old temp file name ("x.json.tmp-1") keeps
// its record, log and temp directory over a restart; leftovers of
// interrupted record writes (this version's "<id>.json+tmp-N" and the
// earlier "<id>.json.tmp-N") are deleted.
func TestTempLikeSessionIDSurvivesRestart(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	const id = "x.json.tmp-1"
	root := filepath.Join(dir, "root")
	mkTree(t, root, "sub/")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: root}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Chdir(ctx, id, "sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.SetPolicy(ctx, id, api.Policy{Mode: api.ModeReadOnly}); err != nil {
		t.Fatal(err)
	}
	d.stop()
	sessDir := filepath.Join(d.stateDir, "sessions")
	for _, name := range []string{id + ".json+tmp-123", "y.json.tmp-456"} {
		if err := os.WriteFile(filepath.Join(sessDir, name), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	d2 := startDaemon(t, dir)
	s, err := d2.c.Get(ctx, id)
	if err != nil || s.State != mounts.StateMounted || s.Cwd != s.Mountpoint+"/sub" || s.Mode != api.ModeReadOnly {
		t.Fatalf("%s after restart: %+v %v, want mounted, cwd sub, read-only", id, s, err)
	}
	if got, want := entries(t, sessDir), []string{id + ".events", id + ".json"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sessions after restart: %v, want %v", got, want)
	}
	if got := entries(t, filepath.Join(d2.stateDir, "tmp")); !reflect.DeepEqual(got, []string{id}) {
		t.Fatalf("temp dirs after restart: %v, want [%s]", got, id)
	}
	if err := d2.c.Remove(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, sessDir); len(got) != 0 {
		t.Fatalf("sessions after remove: %v", got)
	}
}

// A session may not be nested in the daemon's own places: its root may not
// be, be inside or contain the state directory, the mount base or another
// session's mountpoint, and its mountpoint may not be inside another
// session's root. Each refusal is 400 "invalid" with a one-line message
// naming both paths, and leaves nothing behind. Overlapping roots are fine.
func TestNestingRefused(t *testing.T) {
	dir := canon(t, newDaemonDir(t))
	state, base := filepath.Join(dir, "s", "state"), filepath.Join(dir, "m", "mnt")
	d := startDaemonAt(t, dir, state, base)
	ctx := context.Background()
	root, root2, other := filepath.Join(dir, "w", "root"), filepath.Join(dir, "w", "root2"), filepath.Join(dir, "w", "other")
	mkTree(t, root, "sub/", "empty/")
	mkTree(t, root2, "f")
	mkTree(t, other, "f")
	mkTree(t, dir, "xm/", "lnk -> "+base)
	extMp := filepath.Join(dir, "xm", "mp")
	free := filepath.Join(dir, "free")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "taken", Root: root}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "ext", Root: root2, Mountpoint: extMp}); err != nil {
		t.Fatal(err)
	}
	nothingNew := func(what string) {
		t.Helper()
		for _, c := range []struct {
			dir  string
			want []string
		}{
			{filepath.Join(state, "sessions"), []string{"ext.events", "ext.json", "taken.events", "taken.json"}},
			{filepath.Join(state, "tmp"), []string{"ext", "taken"}},
			{base, []string{"@host", "taken"}},
			{filepath.Join(dir, "xm"), []string{"mp"}},
			{root, []string{"empty", "sub"}},
			{root + "/sub", nil},
			{root + "/empty", nil},
			{free, nil},
		} {
			if got := entries(t, c.dir); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%s: %s has %v, want %v", what, c.dir, got, c.want)
			}
		}
		if _, err := os.Lstat(free); !os.IsNotExist(err) {
			t.Fatalf("%s: %s exists (%v)", what, free, err)
		}
		want := []string{base + "/@host/ext", base + "/@host/taken", base + "/taken", extMp} // each session and its host view
		sort.Strings(want)
		if got := sortedMounts(t, dir); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: mounts %v, want %v", what, got, want)
		}
	}
	const (
		stateRule = "; a session may not reach the daemon's own files"
		baseRule  = stateRule
		mountRule = "; a session may not serve another session's mount"
		shadow    = "; the mount would shadow part of that session's project"
	)
	for _, tc := range []struct {
		name       string
		root, mp   string
		msg        string
		wantStatus int
	}{
		{"root is the state dir", state, free, `root "` + state + `" is the daemon's state directory ` + state + stateRule, 400},
		{"root inside the state dir", state + "/sessions", free, `root "` + state + `/sessions" is inside the daemon's state directory ` + state + stateRule, 400},
		{"root contains the state dir", dir + "/s", free, `root "` + dir + `/s" contains the daemon's state directory ` + state + stateRule, 400},
		{"root is the mount base", base, free, `root "` + base + `" is the daemon's mount base ` + base + baseRule, 400},
		{"root inside a mount in the mount base", base + "/taken/sub", free, `root "` + base + `/taken/sub" is inside the daemon's mount base ` + base + baseRule, 400},
		{"root contains the mount base", dir + "/m", free, `root "` + dir + `/m" contains the daemon's mount base ` + base + baseRule, 400},
		{"root links to the mount base", dir + "/lnk", free, `root "` + dir + `/lnk" (physical ` + base + `) is the daemon's mount base ` + base + baseRule, 400},
		{"root is another mountpoint", extMp, free, `root "` + extMp + `" is session "ext"'s mountpoint ` + extMp + mountRule, 400},
		{"root inside another mount", extMp + "/x", free, `root "` + extMp + `/x" is inside session "ext"'s mountpoint ` + extMp + mountRule, 400},
		{"root contains another mountpoint", dir + "/xm", free, `root "` + dir + `/xm" contains session "ext"'s mountpoint ` + extMp + mountRule, 400},
		{"mountpoint inside another root", other, root + "/empty", `mountpoint "` + root + `/empty" is inside session "taken"'s root ` + root + shadow, 400},
		{"missing mountpoint inside another root", other, root + "/sub/new", `mountpoint "` + root + `/sub/new" is inside session "taken"'s root ` + root + shadow, 400},
		{"mountpoint is another root", other, root2, `mountpoint "` + root2 + `" is inside session "ext"'s root ` + root2 + shadow, 400},
	} {
		_, err := d.c.Create(ctx, api.CreateRequest{ID: "n", Root: tc.root, Mountpoint: tc.mp})
		wantCode(t, tc.name, err, mounts.CodeInvalid)
		if want := `session "n": ` + tc.msg; err.Error() != want {
			t.Fatalf("%s: %q, want %q", tc.name, err.Error(), want)
		}
		nothingNew(tc.name)
	}
	body, _ := json.Marshal(api.CreateRequest{ID: "n", Root: state, Mountpoint: free})
	d.apiError(t, "POST", "/v1/sessions", string(body), 400, mounts.CodeInvalid,
		`session "n": root "`+state+`" is the daemon's state directory `+state+stateRule)
	nothingNew("api")

	// Overlapping project roots stay legitimate.
	for id, r := range map[string]string{"inside": root + "/sub", "same": root, "around": dir + "/w"} {
		if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: r}); err != nil {
			t.Fatalf("create %s on %s: %v", id, r, err)
		}
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	nothingNew("overlapping roots")
	for _, id := range []string{"taken", "ext"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
}

// An unreadable record (bad JSON, empty, another id) keeps its session at
// start, failed, with the reason; its id stays taken; DELETE removes its
// files and clears a dead mount on its default mountpoint.
func TestUnreadableRecordStaysFailed(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	for _, id := range []string{"garbage", "empty", "other"} {
		mkTree(t, filepath.Join(dir, id), "sub/")
		if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: filepath.Join(dir, id)}); err != nil {
			t.Fatal(err)
		}
	}
	// Killed, so that the mounts stay behind, dead. It was idle, so it
	// exits at once (nothing of it waits on its own mounts).
	d.kill()
	d.waitExit(t)
	sessDir := filepath.Join(d.stateDir, "sessions")
	other, err := os.ReadFile(filepath.Join(sessDir, "other.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"garbage.json": "{not json", "empty.json": "",
		"wrongid.json": string(other), "wrongid.events": "", "wrongid.pending": "{}",
	} {
		if err := os.WriteFile(filepath.Join(sessDir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(d.stateDir, "tmp", "wrongid"), 0o700); err != nil {
		t.Fatal(err)
	}

	d2 := startDaemon(t, dir)
	list, err := d2.c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.Session{}
	for _, s := range list {
		got[s.ID] = s
	}
	for id, why := range map[string]string{
		"garbage": "invalid JSON: invalid character 'n' looking for beginning of object key string",
		"empty":   "empty file",
		"wrongid": `id "other" does not match the file name`,
	} {
		s, ok := got[id]
		want := "record " + filepath.Join(sessDir, id+".json") + " is unreadable: " + why
		if !ok || s.State != mounts.StateFailed || s.Error != want || s.Root != "" || s.Mountpoint != "" {
			t.Fatalf("%s after restart: %+v (listed %v), want failed with %q", id, s, ok, want)
		}
	}
	if len(list) != 4 || got["other"].State != mounts.StateMounted {
		t.Fatalf("list: %+v, want the 3 failed and other mounted", list)
	}
	_, err = d2.c.Create(ctx, api.CreateRequest{ID: "garbage", Root: filepath.Join(dir, "garbage")})
	wantCode(t, "create over an unreadable record", err, mounts.CodeExists)
	if err.Error() != `session "garbage": already exists` {
		t.Fatalf("create over an unreadable record: %q", err.Error())
	}
	d2.apiError(t, "GET", "/v1/sessions/garbage/cwd", "", 409, mounts.CodeFailed,
		`session "garbage": not mounted: record `+filepath.Join(sessDir, "garbage.json")+` is unreadable: invalid JSON: invalid character 'n' looking for beginning of object key string`)
	if m, want := sortedMounts(t, dir), []string{d2.mountBase + "/@host/empty", d2.mountBase + "/@host/garbage", d2.mountBase + "/@host/other",
		d2.mountBase + "/empty", d2.mountBase + "/garbage", d2.mountBase + "/other"}; !reflect.DeepEqual(m, want) {
		t.Fatalf("mounts before delete: %v, want %v (two dead, one live)", m, want)
	}
	for _, id := range []string{"garbage", "empty", "wrongid"} {
		if status, body := d2.rawRequest(t, http.MethodDelete, "/v1/sessions/"+id, nil); status != 204 {
			t.Fatalf("delete %s: %d %s, want 204", id, status, body)
		}
	}
	if got := entries(t, sessDir); !reflect.DeepEqual(got, []string{"other.events", "other.json"}) {
		t.Fatalf("sessions after delete: %v, want only other's", got)
	}
	if got := entries(t, filepath.Join(d2.stateDir, "tmp")); !reflect.DeepEqual(got, []string{"other"}) {
		t.Fatalf("temp dirs after delete: %v, want [other]", got)
	}
	if got := entries(t, d2.mountBase); !reflect.DeepEqual(got, []string{"@host", "other"}) {
		t.Fatalf("mount base after delete: %v, want [@host other]", got)
	}
	if m := sortedMounts(t, dir); !reflect.DeepEqual(m, []string{d2.mountBase + "/@host/other", d2.mountBase + "/other"}) {
		t.Fatalf("mounts after delete: %v, want only other's", m)
	}
	if err := d2.c.Remove(ctx, "other", false); err != nil {
		t.Fatal(err)
	}
}

// DELETE of a session whose mount was unmounted from outside (and whose
// mountpoint directory was then removed) finishes: 204, nothing left.
func TestRemoveAfterOutsideUnmount(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	mkTree(t, dir, "ra/", "rb/")
	a, err := d.c.Create(ctx, api.CreateRequest{ID: "a", Root: filepath.Join(dir, "ra")})
	if err != nil {
		t.Fatal(err)
	}
	bm := filepath.Join(dir, "bm")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "b", Root: filepath.Join(dir, "rb"), Mountpoint: bm}); err != nil {
		t.Fatal(err)
	}
	for _, mp := range []string{a.Mountpoint, bm} {
		if out, err := exec.Command("umount", mp).CombinedOutput(); err != nil {
			t.Fatalf("umount %s: %v %s", mp, err, out)
		}
	}
	if err := os.Remove(bm); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if status, body := d.rawRequest(t, http.MethodDelete, "/v1/sessions/"+id, nil); status != 204 {
			t.Fatalf("delete %s after an outside unmount: %d %s, want 204", id, status, body)
		}
		_, err := d.c.Get(ctx, id)
		wantCode(t, "get "+id+" after delete", err, mounts.CodeNotFound)
	}
	for _, p := range []string{filepath.Join(d.stateDir, "sessions"), filepath.Join(d.stateDir, "tmp"), d.mountBase} {
		if got := entries(t, p); len(got) != 0 {
			t.Fatalf("%s after delete: %v, want empty", p, got)
		}
	}
	if _, err := os.Lstat(bm); !os.IsNotExist(err) {
		t.Fatalf("%s after delete: %v, want missing", bm, err)
	}
	if m := fuseMountsUnder(t, dir); len(m) != 0 {
		t.Fatalf("mounts after delete: %v", m)
	}
	if h, err := d.c.Health(ctx); err != nil || h.Sessions != 0 {
		t.Fatalf("health: %+v %v", h, err)
	}
}

// A body one byte over the limit is 413 even when the JSON value fits and
// only the byte after it is over; a null (or any non-object) body is 400,
// and a null policy leaves the policy in force.
func TestBodyLimitAndNull(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	mkTree(t, root, "sub/")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "taken", Root: root, Policy: &api.Policy{Mode: api.ModeReadOnly}}); err != nil {
		t.Fatal(err)
	}
	// A JSON value of n bytes, padded with spaces.
	value := func(n int) string {
		pre, post := `{"id":"n","root":"/nonexistent"`, `}`
		return pre + strings.Repeat(" ", n-len(pre)-len(post)) + post
	}
	tooLarge := fmt.Sprintf("request body: larger than %d bytes", mounts.MaxBodyBytes)
	d.apiError(t, "POST", "/v1/sessions", value(mounts.MaxBodyBytes)+"\n", 413, mounts.CodeTooLarge, tooLarge)
	d.apiError(t, "POST", "/v1/sessions", value(mounts.MaxBodyBytes+1), 413, mounts.CodeTooLarge, tooLarge)
	// At the limit: read, and refused for what it says.
	d.apiError(t, "POST", "/v1/sessions", value(mounts.MaxBodyBytes-1)+"\n", 400, mounts.CodeInvalid, `session "n": root "/nonexistent": no such directory`)

	for _, tc := range []struct{ method, path, body, kind string }{
		{"POST", "/v1/sessions", "null", "null"},
		{"PUT", "/v1/sessions/taken/policy", " null\n", "null"},
		{"PUT", "/v1/sessions/taken/policy", "[]", "an array"},
		{"PUT", "/v1/sessions/taken/policy", `"x"`, "a string"},
		{"POST", "/v1/sessions/taken/cwd", "null", "null"},
		{"POST", "/v1/sessions/taken/cwd", "1", "a number"},
	} {
		d.apiError(t, tc.method, tc.path, tc.body, 400, mounts.CodeInvalid, "request body: "+tc.kind+": a JSON object is required")
	}
	s, err := d.c.Get(ctx, "taken")
	if err != nil || s.Mode != api.ModeReadOnly || s.Policy.Mode != api.ModeReadOnly || s.Cwd != s.Mountpoint {
		t.Fatalf("taken after null bodies: %+v %v, want read-only policy, cwd at the root", s, err)
	}
	if got := entries(t, filepath.Join(d.stateDir, "sessions")); !reflect.DeepEqual(got, []string{"taken.events", "taken.json"}) {
		t.Fatalf("sessions: %v", got)
	}
	if err := d.c.Remove(ctx, "taken", false); err != nil {
		t.Fatal(err)
	}
}

// When the host replaces a session's root (mv root root.old, then a symlink
// or another directory at root), the mount still serves the old directory:
// cwd, cd and resolve refuse with 409 "root_changed" instead of walking the
// new object; once the directory is back, they work again.
func TestRootReplacedOnHost(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root, elsewhere := filepath.Join(dir, "root"), filepath.Join(dir, "elsewhere")
	mkTree(t, root, "sub/", "f")
	mkTree(t, elsewhere, "sub/", "f", "secret/")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "sw", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Chdir(ctx, "sw", "sub"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(root, root+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, root); err != nil {
		t.Fatal(err)
	}
	changed := func(what string) string {
		return `session "sw": root ` + root + ` is now ` + what + `, not the directory the mount serves (it was moved or replaced on the host); remove the session and create it again`
	}
	check := func(what string) {
		t.Helper()
		msg := changed(what)
		d.apiError(t, "GET", "/v1/sessions/sw/cwd", "", 409, mounts.CodeRootChanged, msg)
		d.apiError(t, "POST", "/v1/sessions/sw/cwd", `{"cd":"../secret"}`, 409, mounts.CodeRootChanged, msg)
		d.apiError(t, "GET", "/v1/sessions/sw/resolve?path=f", "", 409, mounts.CodeRootChanged, msg)
		if ev, err := d.c.Events(ctx, "sw"); err != nil || len(ev) != 1 {
			t.Fatalf("events: %+v %v, want the one cd", ev, err)
		}
	}
	check("a symlink")
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	mkTree(t, root, "sub/", "secret/")
	check("another directory")
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	// Back in place: the same directory again.
	if err := os.Rename(root+".old", root); err != nil {
		t.Fatal(err)
	}
	wd, err := d.c.Cwd(ctx, "sw")
	if err != nil || wd.Path != s.Mountpoint+"/sub" || wd.Physical != root+"/sub" {
		t.Fatalf("cwd with the root back: %+v %v", wd, err)
	}
	if status, body := d.rawRequest(t, http.MethodDelete, "/v1/sessions/sw", nil); status != 204 {
		t.Fatalf("delete: %d %s", status, body)
	}
}

// TestOwnPlacesOneRule: every path a request names — an additional root, a
// temp entry, allow_write, the mountpoint, the cwd, the root — is refused
// at, inside or (but the cwd) over the daemon's own places with one
// sentence, at create and in a live policy's PATCH and PUT; the session's
// own temp directory (in the state directory) stays its temp area.
func TestOwnPlacesOneRule(t *testing.T) {
	dir := canon(t, newDaemonDir(t))
	d := startDaemon(t, dir)
	state, base := filepath.Join(dir, "state"), filepath.Join(dir, "mnt")
	proj := filepath.Join(dir, "proj")
	mkTree(t, proj, "f")
	own := "; a session may not reach the daemon's own files"
	for _, tc := range []struct{ name, body, msg string }{
		{"additional root is the state dir", `"policy":{"additional":[{"path":"` + state + `","access":"read-write"}]}`,
			`additional[0].path "` + state + `" is the daemon's state directory ` + state + own},
		{"read-only additional root inside the state dir", `"policy":{"additional":[{"path":"` + state + `/sessions","access":"read-only"}]}`,
			`additional[0].path "` + state + `/sessions" is inside the daemon's state directory ` + state + own},
		{"additional root over the mount base", `"policy":{"additional":[{"path":"` + dir + `/mnt","access":"read-write"}]}`,
			`additional[0].path "` + base + `" is the daemon's mount base ` + base + own},
		{"temp entry is the state dir", `"policy":{"temp":["` + state + `"]}`,
			`temp[0] "` + state + `" is the daemon's state directory ` + state + own},
		{"temp entry inside the state dir", `"policy":{"temp":["` + state + `/tmp"]}`,
			`temp[0] "` + state + `/tmp" is inside the daemon's state directory ` + state + own},
		{"allow_write is the state dir", `"allow_write":["` + state + `"]`,
			`allow_write "` + state + `" is the daemon's state directory ` + state + own},
		{"mountpoint inside the state dir", `"mountpoint":"` + state + `/mp"`,
			`mountpoint "` + state + `/mp" is inside the daemon's state directory ` + state + own},
		{"mountpoint is the mount base", `"mountpoint":"` + base + `"`,
			`mountpoint "` + base + `" is the daemon's mount base ` + base + own},
		{"cwd inside the state dir", `"cwd":"` + state + `/sessions"`,
			`cwd (--cwd) "` + state + `/sessions" (physical ` + state + `/sessions) is inside the daemon's state directory ` + state + own + ` (rule hostview:hidden)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.apiError(t, "POST", "/v1/sessions", `{"id":"a","root":"`+proj+`",`+tc.body+`}`, 400, mounts.CodeInvalid, `session "a": `+tc.msg)
		})
	}
	// A live session: its own temp directory is its temp area; PATCH and
	// PUT naming an own place are refused and leave the policy in force.
	ctx := context.Background()
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "live", Root: proj})
	if err != nil || len(s.Policy.Temp) != 1 || !strings.HasPrefix(s.Policy.Temp[0], state+"/") {
		t.Fatalf("create live: %+v %v", s, err)
	}
	d.apiError(t, "PATCH", "/v1/sessions/live/policy", `{"additional":[{"path":"`+state+`","access":"read-write"}]}`, 400, mounts.CodeInvalid,
		`session "live": additional[0].path "`+state+`" is the daemon's state directory `+state+own)
	d.apiError(t, "PUT", "/v1/sessions/live/policy", `{"temp":["`+state+`/sessions"]}`, 400, mounts.CodeInvalid,
		`session "live": temp[0] "`+state+`/sessions" is inside the daemon's state directory `+state+own)
	if _, err := d.c.PatchPolicy(ctx, "live", api.PolicyPatch{Protected: []string{".env"}}); err != nil {
		t.Fatalf("a patch keeping the own temp directory: %v", err)
	}
	got, err := d.c.Get(ctx, "live")
	if err != nil || len(got.Policy.Additional) != 0 || fmt.Sprint(got.Policy.Temp) != fmt.Sprint(s.Policy.Temp) {
		t.Fatalf("after refused patches: %+v %v", got.Policy, err)
	}
}

// TestResolveNoMagicLinks: the daemon's cd and resolve never walk /proc's
// magic links (/proc/self/cwd would be the daemon's own directory): a
// path into a pseudo file system the host view does not enter is EACCES.
func TestResolveNoMagicLinks(t *testing.T) {
	dir := canon(t, newDaemonDir(t))
	d := startDaemon(t, dir)
	proj := filepath.Join(dir, "proj")
	mkTree(t, proj, "f")
	ctx := context.Background()
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "pm", Root: proj}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/proc/self/cwd", "/proc/1/root", "/sys/kernel"} {
		r := d.wsfs(t, "session", "resolve", "pm", p)
		if r.code != 1 || strings.Contains(r.stdout, dir) || !strings.Contains(r.stderr, "permission denied") {
			t.Errorf("session resolve %s: exit %d stdout %q stderr %q, want exit 1, permission denied", p, r.code, r.stdout, r.stderr)
		}
		_, err := d.c.Chdir(ctx, "pm", p)
		wantErrno(t, "cd "+p, err, syscall.EACCES)
	}
}

// TestPolicyLimits: a request over the policy's limits is a 400 naming the
// field and the limit, at create and at PATCH (100,000 protected subpaths,
// about 1 MB), and the policy in force stays.
func TestPolicyLimits(t *testing.T) {
	dir := canon(t, newDaemonDir(t))
	d := startDaemon(t, dir)
	proj := filepath.Join(dir, "proj")
	mkTree(t, proj, "f")
	if _, err := d.c.Create(context.Background(), api.CreateRequest{ID: "lim", Root: proj}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < 100000; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d"`, i)
	}
	d.apiError(t, "PATCH", "/v1/sessions/lim/policy", `{"protected":[`+b.String()+`]}`, 400, mounts.CodeInvalid,
		`session "lim": policy: protected: 100000 entries, at most 1024`)
	d.apiError(t, "POST", "/v1/sessions", `{"id":"lim3","root":"`+proj+`","policy":{"protected":[`+b.String()+`]}}`, 400, mounts.CodeInvalid,
		`session "lim3": policy: protected: 100000 entries, at most 1024`)
	d.apiError(t, "POST", "/v1/sessions", `{"id":"lim2","root":"`+proj+`","policy":{"temp":[`+strings.Repeat(`"/tmp",`, 64)+`"/tmp"]}}`, 400, mounts.CodeInvalid,
		`session "lim2": policy: temp: 65 entries, at most 64`)
	s, err := d.c.Get(context.Background(), "lim")
	if err != nil || len(s.Policy.Protected) != 0 {
		t.Fatalf("after a refused patch: %+v %v", s.Policy, err)
	}
}

package mounts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/policy"
)

// recordVersion is the version of the on-disk record format.
const recordVersion = 1

// record is a session's durable record, <state>/sessions/<id>.json. It holds
// everything needed to mount the session again; the working directory lives
// in the event log next to it.
type record struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Origin is the root as the client spelled it.
	Origin string `json:"origin"`
	// Root is the physical (canonical) root the mount serves.
	Root string `json:"root"`
	// Mountpoint is canonical.
	Mountpoint string `json:"mountpoint"`
	// MadeMountpoint is true when Create made the mountpoint directory (so
	// Remove deletes it, and Recover makes it again when missing).
	MadeMountpoint bool `json:"made_mountpoint"`
	// Policy is the policy spec in force, Primary set to Root.
	Policy   policy.Spec        `json:"policy"`
	Symlinks fusefs.SymlinkMode `json:"symlinks"`
	Parent   string             `json:"parent,omitempty"`
	// StartCwd is the working directory at creation, relative to the mount
	// root ("." for the root itself), or outside the root its absolute
	// physical path (shown through the host view).
	StartCwd string `json:"start_cwd"`
	// TmpDir is the session's private temp directory (mode 0700).
	TmpDir string `json:"tmpdir"`
	// AllowWrite are the jail's directly writable directories, canonical.
	AllowWrite []string `json:"allow_write,omitempty"`
	// Users are Spec.Users (after inheritance).
	Users   []uint32  `json:"users,omitempty"`
	Created time.Time `json:"created"`
	// Labels are Spec.Labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Layer is the session's layer directory (Spec.Layer), "" without.
	Layer string `json:"layer,omitempty"`
	// LayerOf is, for a sub-session of a layered session, the id of the
	// session whose layer its tree lies in (its parent, or the parent's
	// LayerOf): its mount serves that layer's merged tree below its root.
	// "" otherwise. Never changes.
	LayerOf string `json:"layer_of,omitempty"`
}

// pending is the intent file <state>/sessions/<id>.pending that Create writes
// before it touches the mountpoint and deletes once the record is durable.
// Recover uses it to undo a create that a crash interrupted: it unmounts the
// mountpoint and removes it when Existed is false.
type pending struct {
	Mountpoint string `json:"mountpoint"`
	Existed    bool   `json:"existed"`
	TmpDir     string `json:"tmpdir"`
}

// Event is one line of a session's working-directory log, as the API shows
// it too (api.Event): a change made by Chdir ("cd") or a recovery to the
// origin after the directory vanished ("recover"), numbered from 1, with the
// directories inside the mount it went from and to.
type Event = api.Event

// The event types.
const (
	EventCd      = api.EventCd
	EventRecover = api.EventRecover
)

// tmpInfix separates a file's name from the random suffix of its temp files
// (<name>+tmp-<digits>). '+' is outside the session id charset, so no
// session's own file (<id>.json, <id>.events, <id>.pending) can have this
// form, whatever its id; Recover deletes exactly the names isTempName
// accepts.
const tmpInfix = "+tmp-"

// tempName matches the names of writeFileAtomic's temp files for a record
// (<id>.json+tmp-<digits>), and those of wsfs versions before tmpInfix
// (<id>.json.tmp-<digits>): neither ends in .json, .events or .pending, so
// neither can be a session's file.
var tempName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}\.json(\+|\.)tmp-[0-9]+$`)

// isTempName reports whether name (in the sessions directory) is a leftover
// temp file of an interrupted record write.
func isTempName(name string) bool { return tempName.MatchString(name) }

// writeFileAtomic writes data to dir/name durably: a temp file in dir
// (name+tmpInfix+digits), fsync, rename over name, fsync dir. On error
// nothing but the old name (if any) is left.
func writeFileAtomic(dir, name string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(dir, name+tmpInfix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		if err = f.Chmod(perm); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeDurable removes path (a missing path is not an error) and fsyncs its
// directory.
func removeDurable(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// readRecord reads and checks a record file. Its errors say what is wrong
// with the file, without naming it ("empty file", "invalid JSON: ...").
func readRecord(path string) (record, error) {
	var r record
	data, err := os.ReadFile(path)
	if err != nil {
		return r, errors.New(identity.ErrnoText(err))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return r, errors.New("empty file")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return r, errors.New("invalid JSON: data after the record")
	}
	if r.Version != recordVersion {
		return r, fmt.Errorf("version %d, this wsfs reads version %d", r.Version, recordVersion)
	}
	if want := strings.TrimSuffix(filepath.Base(path), ".json"); r.ID != want {
		return r, fmt.Errorf("id %q does not match the file name", r.ID)
	}
	for _, f := range [][2]string{{"root", r.Root}, {"mountpoint", r.Mountpoint}} {
		if p := f[1]; !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return r, fmt.Errorf("%s %q: not an absolute clean path", f[0], p)
		}
	}
	return r, nil
}

// eventLog is a session's append-only working-directory log. Every append is
// fsynced before it returns, so an event whose call returned survives kill -9
// and power loss. The file is open only during an append (issue 22: an idle
// session holds no descriptor for it).
type eventLog struct {
	path string
	size int64
	seq  int // the last event's Seq
}

// openEventLog opens (creating when create) the log at path, reads its
// events, and truncates a torn last line (a crash in the middle of an
// append; its call never returned). It returns the log and its events.
func openEventLog(path string, create bool) (*eventLog, []Event, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, nil, err
	}
	events, good, err := readEvents(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("event log %s: %w", path, err)
	}
	st, err := f.Stat()
	if err == nil && st.Size() != good {
		if err = f.Truncate(good); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	l := &eventLog{path: path, size: good}
	if n := len(events); n > 0 {
		l.seq = events[n-1].Seq
	}
	return l, events, nil
}

// readEvents reads every complete line of r from its start. It returns the
// events and the byte length of the complete lines; an unterminated last
// line is a torn append and is not counted. A complete line that does not
// parse is an error.
func readEvents(r io.ReadSeeker) ([]Event, int64, error) {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	br := bufio.NewReader(r)
	var events []Event
	var good int64
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err == io.EOF {
			return events, good, nil // b, if any, is a torn line
		}
		if err != nil {
			return nil, 0, err
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, 0, fmt.Errorf("line %d: %w", line, err)
		}
		events = append(events, e)
		good += int64(len(b))
	}
}

// append writes e (its Seq set here) as one line and fsyncs. On error the
// log is truncated back, so a failed append leaves no trace.
func (l *eventLog) append(e Event) (Event, error) {
	e.Seq = l.seq + 1
	b, err := json.Marshal(e)
	if err != nil {
		return e, err
	}
	b = append(b, '\n')
	f, err := os.OpenFile(l.path, os.O_WRONLY, 0)
	if err != nil {
		return e, err
	}
	defer f.Close()
	if _, err = f.WriteAt(b, l.size); err == nil {
		err = f.Sync()
	}
	if err != nil {
		_ = f.Truncate(l.size)
		return e, err
	}
	l.size += int64(len(b))
	l.seq = e.Seq
	return e, nil
}

// close ends the use of the log (its file is open only during an append:
// nothing to close).
func (l *eventLog) close() error { return nil }

package mounts

// The journal of a layer's private directories (layerfd.go's stages): a
// commit or a discard makes one beside each object it puts in place, in a
// directory a session's user (or a host process) may write, so the user
// can rename it within that directory (never out of it: moving a
// directory to another one needs write access to it, and it is root's,
// mode 0700) while it is in use, and a crash leaves it. Each is recorded
// in <layer>/stages.jsonl before it is made and again with its identity
// (a file handle, which outlives the process and names no other object
// once it is gone, and dev/inode) once it is open; it is removed wherever
// it is in its directory when the verb is done with it, and what a verb
// left (renamed in a way the daemon lost, or by a crash) is removed at
// the next commit or discard and when the layer is opened again (a
// recovery). Nothing else of the project is ever removed: a directory
// found by name or inode number only is removed when it is the daemon's
// (mode 0700) and holds nothing but the stage's one object.

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// layerStages is the journal of the layer's private directories, under
// its directory.
const layerStages = "stages.jsonl"

// The trees a private directory is made in.
const (
	stageProject = "project" // the project (commit)
	stageMerged  = "merged"  // the merged overlay (discard)
)

// stageRec is one line of the stage journal, about the private directory
// N: made in the directory D (relative to the tree T's root), opened
// (HT/H its file handle, when the file system has them; Dev/Ino), or
// removed (Done).
type stageRec struct {
	N    string `json:"n"`
	T    string `json:"t,omitempty"`
	D    string `json:"d,omitempty"`
	HT   int32  `json:"ht,omitempty"`
	H    []byte `json:"h,omitempty"`
	Dev  uint64 `json:"dev,omitempty"`
	Ino  uint64 `json:"ino,omitempty"`
	U    uint32 `json:"u,omitempty"` // its owner (a session user's, or 0: the daemon's)
	Done bool   `json:"done,omitempty"`
}

// stageLog records the private directories of one verb in one tree; a nil
// *stageLog records nothing.
type stageLog struct {
	f    *os.File
	tree string
	dir  string // the directory being staged in, relative to the tree
}

// in returns sl for the stages made in dir (relative to the tree).
func (sl *stageLog) in(dir string) *stageLog {
	if sl == nil {
		return nil
	}
	c := *sl
	c.dir = dir
	return &c
}

// add appends r to the journal (not synced, as the baseline: it must
// outlive the daemon's process, not the machine).
func (sl *stageLog) add(r stageRec) {
	if sl == nil {
		return
	}
	b, _ := json.Marshal(r)
	sl.f.Write(append(b, '\n'))
}

// openStages removes what earlier verbs left (cleanStages) and opens the
// journal for a verb's stages in tree; close it with endStages.
func (l *Layer) openStages(tree string) (*stageLog, error) {
	l.cleanStages()
	f, err := os.OpenFile(filepath.Join(l.Dir, layerStages), os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return &stageLog{f: f, tree: tree}, nil
}

// endStages closes sl and removes what its verb left (a stage renamed in
// a way the verb lost).
func (l *Layer) endStages(sl *stageLog) {
	sl.f.Close()
	l.cleanStages()
}

// cleanStages removes every private directory the journal holds that was
// not removed, and then the records of the ones it removed or found gone.
// A merged-tree stage is left while the overlay is not mounted.
func (l *Layer) cleanStages() {
	p := filepath.Join(l.Dir, layerStages)
	f, err := os.Open(p)
	if err != nil {
		return
	}
	pending := map[string]*stageRec{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r stageRec
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.N == "" {
			continue // a line a crash cut short
		}
		have := pending[r.N]
		switch {
		case r.Done:
			delete(pending, r.N)
		case have == nil:
			pending[r.N] = &r
			order = append(order, r.N)
		default:
			have.HT, have.H, have.Dev, have.Ino, have.U = r.HT, r.H, r.Dev, r.Ino, r.U
		}
	}
	f.Close()
	var left []byte
	for _, n := range order {
		r := pending[n]
		if r == nil {
			continue
		}
		if !l.cleanStage(r) {
			b, _ := json.Marshal(r)
			left = append(append(left, b...), '\n')
		}
	}
	if len(left) == 0 {
		os.Remove(p)
		return
	}
	// The layer's directory is the daemon's alone: a plain rewrite.
	if os.WriteFile(p+".new", left, 0o600) == nil {
		os.Rename(p+".new", p)
	}
}

// cleanStage removes the private directory r records, wherever it is in
// its directory; it reports whether it is gone (removed now, or before).
func (l *Layer) cleanStage(r *stageRec) bool {
	var rootPath string
	switch r.T {
	case stageProject:
		rootPath = l.Lower
	case stageMerged:
		if !l.mounted() {
			return false
		}
		rootPath = l.Merged()
	default:
		return true // not ours to read
	}
	// O_RDONLY: open_by_handle_at(2) takes no O_PATH descriptor.
	root, err := unix.Open(rootPath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(root)
	if r.H != nil {
		// The handle names this directory alone, wherever it is.
		fd, err := unix.OpenByHandleAt(root, unix.NewFileHandle(r.HT, r.H), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err == unix.ESTALE || err == unix.ENOENT {
			return true
		}
		if err != nil {
			return false
		}
		defer unix.Close(fd)
		pd, err := unix.Openat(fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		defer unix.Close(pd)
		return removeStage(pd, fd, r.N)
	}
	pd, err := openAt(root, r.D, unix.O_PATH|unix.O_DIRECTORY)
	if err == unix.ENOENT {
		return true
	}
	if err != nil {
		return false
	}
	defer unix.Close(pd)
	name, err := findStage(pd, r.N, objID{r.Dev, r.Ino})
	if err == unix.ENOENT {
		return true
	}
	if err != nil {
		return false
	}
	fd, err := unix.Openat(pd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err == unix.ENOENT
	}
	defer unix.Close(fd)
	if !stageLike(fd, r.U) {
		return true // not a stage (any more): nothing of ours there
	}
	return removeStage(pd, fd, name)
}

// stageLike reports whether the directory open as fd may be one of the
// daemon's private directories: owned by uid (the daemon, or the session
// user it was made as), mode 0700 (the set-group-ID bit may come from its
// parent), holding nothing or only "o".
func stageLike(fd int, uid uint32) bool {
	st, err := fstatFd(fd)
	if err != nil || st.Uid != uid || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o5777 != 0o700 {
		return false
	}
	names, err := readNames(fd)
	return err == nil && (len(names) == 0 || len(names) == 1 && names[0] == "o")
}

// findStage returns the name in pd of the directory id (id zero: the
// daemon's directory at name, if it is one), looked for at name first,
// then among all of pd's entries (a rename within pd); unix.ENOENT when
// it is not there.
func findStage(pd int, name string, id objID) (string, error) {
	var st unix.Stat_t
	if unix.Fstatat(pd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		if id == (objID{}) {
			if strings.HasPrefix(name, stagePrefix) {
				return name, nil
			}
			return "", unix.ENOENT
		}
		if (objID{st.Dev, st.Ino}) == id {
			return name, nil
		}
	}
	if id == (objID{}) {
		return "", unix.ENOENT
	}
	names, err := readNames(pd)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if unix.Fstatat(pd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && (objID{st.Dev, st.Ino}) == id {
			return n, nil
		}
	}
	return "", unix.ENOENT
}

// removeStage empties the private directory open as fd (its one object
// "o") and removes it from pd, its directory, by whatever name it has
// there now (tried at name first); it reports whether it is gone (the
// descriptor's directory has no link left).
func removeStage(pd, fd int, name string) bool {
	unix.Unlinkat(fd, "o", 0)
	unix.Unlinkat(fd, "o", unix.AT_REMOVEDIR)
	for range stageTries {
		st, err := fstatFd(fd)
		if err != nil {
			return false
		}
		if st.Nlink == 0 {
			return true
		}
		n, err := findStage(pd, name, objID{st.Dev, st.Ino})
		if err != nil {
			// Not in pd: moved out of it (by root), or pd's own entry
			// is gone.
			return errors.Is(err, unix.ENOENT) && gone(fd)
		}
		// By name: a rename between the lookup and the removal makes the
		// removal miss (or take an empty directory whoever renamed could
		// remove too: write access to pd); the link count tells.
		unix.Unlinkat(pd, n, unix.AT_REMOVEDIR)
	}
	return gone(fd)
}

// gone reports whether the object open as fd has no link left.
func gone(fd int) bool {
	st, err := fstatFd(fd)
	return err == nil && st.Nlink == 0
}

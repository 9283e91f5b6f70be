package fusefs

// One daemon-wide index of the places sessions hide from each other
// (DESIGN.md, "Host view": every other session's roots, temp area and
// mountpoint), consulted by every host view instead of a copy per view, so
// that adding a session costs the same with ten sessions or ten thousand.

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/wsfs/wsfs/identity"
)

// PlaceIndex is a set of places, clean absolute physical paths, each held by
// one or more owners (opaque names: the daemon's session ids). A host view
// mounted with HostViewConfig.Shared set to it and Owner o treats every
// place held by an owner other than o, and everything below it, as hidden
// (a none root, EACCES), by the same most-specific-entry rule as
// HostViewConfig.Hidden. Lookups cost O(depth of the path), adding or
// removing an owner's places O(places), whatever the number of owners. Its
// methods are safe for concurrent use.
type PlaceIndex struct {
	mu sync.RWMutex
	// holders counts, per place, how many times each owner added it.
	holders map[string]map[string]int
	// below counts, per strict ancestor of a place, the (place, owner)
	// additions under it (hasUnder).
	below map[string]int
	// owned lists each owner's additions, repeats included.
	owned map[string][]string
	// byFirst has, for each first name of a path ("var" for /var/tmp/x),
	// the host views that decided a path under it (note): only their
	// kernel caches can hold an entry there, and only they are told of a
	// change there (forgetChanged).
	byFirst map[string]map[*hostView]struct{}
}

// NewPlaceIndex returns an empty index.
func NewPlaceIndex() *PlaceIndex {
	return &PlaceIndex{
		holders: map[string]map[string]int{},
		below:   map[string]int{},
		owned:   map[string][]string{},
		byFirst: map[string]map[*hostView]struct{}{},
	}
}

// Add records places as held by owner: from its return on, every host view
// of another owner refuses them (EACCES "hostview:hidden"), and the entries
// the kernel cached for them in those views (and the cached listings of
// their parents) are dropped. A relative path is refused, naming it, and
// nothing is added.
func (x *PlaceIndex) Add(owner string, places ...string) error {
	clean := make([]string, 0, len(places))
	for _, p := range places {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("hidden place %q: must be an absolute path", p)
		}
		clean = append(clean, filepath.Clean(p))
	}
	x.mu.Lock()
	for _, p := range clean {
		h := x.holders[p]
		if h == nil {
			h = map[string]int{}
			x.holders[p] = h
		}
		h[owner]++
		for a := p; a != "/"; {
			a = filepath.Dir(a)
			x.below[a]++
		}
	}
	x.owned[owner] = append(x.owned[owner], clean...)
	x.mu.Unlock()
	x.forgetChanged(owner, clean)
	return nil
}

// Remove drops every place owner holds: host views show them again (unless
// another owner holds them too), and the kernel's cached entries and
// listings there are dropped so the next access sees them. No-op for an
// owner holding none.
func (x *PlaceIndex) Remove(owner string) {
	x.mu.Lock()
	places := x.owned[owner]
	delete(x.owned, owner)
	for _, p := range places {
		if h := x.holders[p]; h != nil {
			if h[owner]--; h[owner] <= 0 {
				delete(h, owner)
			}
			if len(h) == 0 {
				delete(x.holders, p)
			}
		}
		for a := p; a != "/"; {
			a = filepath.Dir(a)
			if x.below[a]--; x.below[a] <= 0 {
				delete(x.below, a)
			}
		}
	}
	x.mu.Unlock()
	x.forgetChanged(owner, places)
}

// forgetChanged drops, in every view of an owner other than owner that
// ever decided a path under a place's first name (note), the kernel's
// entries for places and the cached listings of their parents: a view that
// never went there costs nothing. Called without x.mu: an invalidation may
// wait for a request of that view in progress, which may be consulting the
// index.
func (x *PlaceIndex) forgetChanged(owner string, places []string) {
	type job struct {
		root *node
		p    string
	}
	var jobs []job
	x.mu.RLock()
	for _, p := range places {
		for h := range x.byFirst[firstName(p)] {
			if n := h.root.Load(); n != nil && h.owner != owner {
				jobs = append(jobs, job{n, p})
			}
		}
	}
	x.mu.RUnlock()
	for _, j := range jobs {
		forgetEntry(j.root, "/", j.p, false)
	}
}

// firstName returns the first name of the clean absolute path p, "" for
// "/".
func firstName(p string) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return first
}

// note records that the host view h decides the path p (hostView.hiddenAt,
// which every lookup, listing and change of a host view goes through)
// before it reads the index, so a change made after that read is told to
// h (forgetChanged), and one made before is seen by the read.
func (x *PlaceIndex) note(h *hostView, p string) {
	first := firstName(p)
	if first == "" {
		return
	}
	if _, ok := h.seen.Load(first); ok {
		return
	}
	x.mu.Lock()
	views := x.byFirst[first]
	if views == nil {
		views = map[*hostView]struct{}{}
		x.byFirst[first] = views
	}
	views[h] = struct{}{}
	x.mu.Unlock()
	h.seen.Store(first, struct{}{})
}

// unregister drops a host view that is gone.
func (x *PlaceIndex) unregister(h *hostView) {
	x.mu.Lock()
	h.seen.Range(func(k, _ any) bool {
		if views := x.byFirst[k.(string)]; views != nil {
			delete(views, h)
			if len(views) == 0 {
				delete(x.byFirst, k.(string))
			}
		}
		return true
	})
	x.mu.Unlock()
}

// heldByOther reports whether place p has a holder other than except (x.mu
// held).
func (x *PlaceIndex) heldByOther(p, except string) bool {
	h := x.holders[p]
	return len(h) > 1 || (len(h) == 1 && h[except] == 0)
}

// innermostLen returns the length of the longest place at or above the
// clean absolute path p held by an owner other than except, -1 when none.
func (x *PlaceIndex) innermostLen(p, except string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.holders) == 0 {
		return -1
	}
	for q := p; ; q = filepath.Dir(q) {
		if x.heldByOther(q, except) {
			return len(q)
		}
		if q == "/" || q == "." {
			return -1
		}
	}
}

// hasUnder reports whether a place strictly below the clean absolute path
// dir is held by an owner other than except.
func (x *PlaceIndex) hasUnder(dir, except string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := x.below[dir]
	if n == 0 {
		return false
	}
	for _, p := range x.owned[except] {
		if p != dir && identity.Within(p, dir) {
			n--
		}
	}
	return n > 0
}

// Conflict returns a place held by an owner other than except that the
// clean absolute path p lies in (rel "lies in") or contains (rel
// "contains"), and one such owner (the first by name); ok is false when
// there is none. The innermost place p lies in is preferred; of the places
// p contains, the first by path.
func (x *PlaceIndex) Conflict(p, except string) (place, owner, rel string, ok bool) {
	if n := x.innermostLen(p, except); n >= 0 {
		place = p[:n] // a place at or above p is a prefix of it
		return place, x.otherOwner(place, except), "lies in", true
	}
	if !x.hasUnder(p, except) {
		return "", "", "", false
	}
	x.mu.RLock()
	var under []string
	for q := range x.holders {
		if q != p && identity.Within(q, p) && x.heldByOther(q, except) {
			under = append(under, q)
		}
	}
	x.mu.RUnlock()
	sort.Strings(under)
	return under[0], x.otherOwner(under[0], except), "contains", true
}

// otherOwner returns the first, by name, of place's holders other than
// except.
func (x *PlaceIndex) otherOwner(place, except string) string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var names []string
	for o := range x.holders[place] {
		if o != except {
			names = append(names, o)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

package fusefs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/identity"
)

// mangle escapes a path as the kernel does in mountinfo (fs/seq_file.c,
// seq_path/mangle_path with " \t\n\\"): each of those bytes as \ooo.
func mangle(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// TestParseMountinfoWhiteSpace: only space separates fields; a mountpoint
// with a byte strings.Fields would split on (\r, \v, a no-break space) is
// read whole.
func TestParseMountinfoWhiteSpace(t *testing.T) {
	for _, mp := range []string{"/a b", "/a\rb", "/a\vb", "/a\u00a0b", "/a\u0085b", "/tab\there", "/nl\nx", `/back\slash`} {
		line := "36 35 0:42 / " + mangle(mp) + " rw,nosuid shared:7 - fuse.wsfs wsfs rw,user_id=0"
		got := parseMountinfo("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n" + line + "\n")
		if e := got[mp]; e.FSType != "fuse.wsfs" || e.Dev != "0:42" {
			t.Errorf("mountpoint %q: got %+v in %q", mp, got, line)
		}
	}
}

// FuzzMountinfo: decoding undoes the kernel's escaping for every path, and
// a mountinfo line with any mountpoint is parsed into that mountpoint with
// its type; arbitrary text never panics and never grows when decoded.
func FuzzMountinfo(f *testing.F) {
	for _, s := range []string{"/", "/a b", `/x\y`, "/t\tn\n", `\040`, `/end\04`, `\777`, `\\\\`, "/a\rb", "/\u00a0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := identity.UnescapeMountinfo(s); len(got) > len(s) {
			t.Fatalf("unescapeMountinfo(%q) = %q: longer than its input", s, got)
		}
		if got := identity.UnescapeMountinfo(mangle(s)); got != s {
			t.Fatalf("unescapeMountinfo(mangle(%q)) = %q", s, got)
		}
		_ = parseMountinfo(s) // no panic on any text
		mp := "/" + s
		line := "36 35 0:42 / " + mangle(mp) + " rw,nosuid shared:7 - fuse.wsfs wsfs rw"
		if e := parseMountinfo(line)[mp]; e.FSType != "fuse.wsfs" || e.Dev != "0:42" {
			t.Fatalf("mountpoint %q: line %q parsed to %+v", mp, line, parseMountinfo(line))
		}
	})
}

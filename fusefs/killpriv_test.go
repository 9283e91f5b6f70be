package fusefs_test

import (
	"os"
	"testing"

	"github.com/wsfs/wsfs/policy"
)

// suidgidSetup makes, as root, files with set-user-ID and set-group-ID
// bits for suidgidMake: group root (0) unless named g65534 (the user's
// own group), each 0666 otherwise so that uid 65534 may write them.
const suidgidSetup = `set -e
for f in w-2666 w-4666 w-6666 w-2676 w-2666-g65534 w-2676-g65534 wv-2666 t-4666 t-2666 o-4666 o-2666 f-2666 c-2666 r-4666; do
  touch "$f"; m=${f#*-}; chmod "${m%%-*}" "$f"
done
chown 0:65534 w-2666-g65534 w-2676-g65534
printf abc > src
chmod 0777 .
`

// suidgidMake writes or truncates each file by one means: w- write(2),
// wv- pwritev(2), t- truncate(2), o- open(O_TRUNC), f- fallocate(2),
// c- copy_file_range(2) into it, and lists the modes (r-: root's, below).
const suidgidMake = `set -e
py=/usr/bin/python3
for f in w-*; do printf x >> "$f"; done
$py -c 'import os; fd = os.open("wv-2666", os.O_WRONLY); os.pwritev(fd, [b"a", b"b"], 0)'
for f in t-*; do truncate -s 1 "$f"; done
for f in o-*; do : > "$f"; done
$py -c 'import os; fd = os.open("f-2666", os.O_WRONLY); os.posix_fallocate(fd, 0, 4096)'
$py -c 'import os; s = os.open("src", os.O_RDONLY); d = os.open("c-2666", os.O_WRONLY); os.copy_file_range(s, d, 3)'
stat -c '%n %04a' [cfotw]-* wv-*
`

// TestKillSuidSgidOnWrite: a write, a truncate or an O_TRUNC open by a user
// without CAP_FSETID clears the set-user-ID bit, and the set-group-ID bit
// when the file is group-executable or the user is outside the file's
// group, as ext4 does (setattr_should_drop_suidgid). As uid 65534 on an
// --allow-other mount, compared with native ext4 (issue 20 item 16: the
// server did not negotiate FUSE_HANDLE_KILLPRIV_V2, so the kernel's
// fallback cleared set-group-ID only with group-execute set).
func TestKillSuidSgidOnWrite(t *testing.T) {
	need(t, "python3", "stat", "truncate")
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test writes as another user")
	}
	_, mnt, _ := mountT(t, withAllowOther(), withMode(policy.ModeFullAccess))
	openUpT(t, mnt)
	nat := canonT(t, t.TempDir())
	openUpT(t, nat)
	run := func(dir string) string {
		shOK(t, dir, suidgidSetup)
		out, errOut, code := shAs(t, asUser(nobody, nobody), dir, []string{userPath}, suidgidMake)
		if code != 0 {
			t.Fatalf("writing as 65534 in %s: exit %d\nstdout: %s\nstderr: %s", dir, code, out, errOut)
		}
		out += shOK(t, dir, `printf x >> r-4666; truncate -s 0 r-4666; stat -c '%n %04a' r-4666`)
		return out
	}
	native, mounted := run(nat), run(mnt)
	want := "c-2666 0666\nf-2666 0666\no-2666 0666\no-4666 0666\nt-2666 0666\nt-4666 0666\n" +
		"w-2666 0666\nw-2666-g65534 2666\nw-2676 0676\nw-2676-g65534 0676\nw-4666 0666\nw-6666 0666\nwv-2666 0666\nr-4666 4666\n"
	if native != want {
		t.Fatalf("native reference:\n%s\nwant:\n%s", native, want)
	}
	if mounted != native {
		t.Errorf("modes after writes through the mount differ from native:\nnative:\n%s\nwsfs:\n%s", native, mounted)
	}
}

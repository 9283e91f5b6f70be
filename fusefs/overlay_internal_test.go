package fusefs

import (
	"bytes"
	"testing"
)

// ovlOrigin reads the kernel's overlay handles (bytes as name_to_handle_at
// gave them on Linux 6.18 for a lower file, an upper-only file and the
// same lower file in the old unpadded format) and refuses what is not one.
func TestOvlOrigin(t *testing.T) {
	uuid := make([]byte, 16)
	fid := []byte{0x5f, 0xaa, 0x98, 0x00, 0xb8, 0x1f, 0x7b, 0xee}
	fb := func(flags byte) []byte {
		return append(append([]byte{0, ovlFhMagic, byte(ovlFbHeaderSize + len(fid)), flags, 0x01}, uuid...), fid...)
	}
	pad := []byte{0, 0, 0}
	for _, c := range []struct {
		name      string
		htype     int32
		h         []byte
		ftype     int32
		fid       []byte
		upper, ok bool
	}{
		{"lower v1", ovlFileIDV1, append(pad, fb(0)...), 1, fid, false, true},
		{"lower v1, any-endian flag", ovlFileIDV1, append(pad, fb(2)...), 1, fid, false, true},
		{"upper v1", ovlFileIDV1, append(pad, fb(ovlFhFlagUpper)...), 0, nil, true, true},
		{"lower v0", ovlFileIDV0, fb(0), 1, fid, false, true},
		{"ext4 handle", 1, fid, 0, nil, false, false},
		{"short", ovlFileIDV1, append(pad, fb(0)[:10]...), 0, nil, false, false},
		{"bad magic", ovlFileIDV1, append(pad, append([]byte{0, 0x00}, fb(0)[2:]...)...), 0, nil, false, false},
		{"bad version", ovlFileIDV1, append(pad, append([]byte{1}, fb(0)[1:]...)...), 0, nil, false, false},
		{"len past the end", ovlFileIDV1, append(pad, fb(0)[:ovlFbHeaderSize+4]...), 0, nil, false, false},
		{"len below the header", ovlFileIDV1, append(pad, append([]byte{0, ovlFhMagic, 3}, fb(0)[3:]...)...), 0, nil, false, false},
	} {
		ftype, got, upper, ok := ovlOrigin(c.htype, c.h)
		if ftype != c.ftype || !bytes.Equal(got, c.fid) || upper != c.upper || ok != c.ok {
			t.Errorf("%s: ovlOrigin = %d % x upper=%v ok=%v, want %d % x upper=%v ok=%v", c.name, ftype, got, upper, ok, c.ftype, c.fid, c.upper, c.ok)
		}
	}
}

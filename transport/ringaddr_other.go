//go:build !amd64

package transport

// ringAddrBase and ringAddrEnd bound the addresses of ring memory on
// 64-bit architectures other than x86-64 (ringmem.go): 144 TiB to 160 TiB,
// above 2^47, below which Go's runtime picks its random heap base
// (runtime/malloc.go: randHeapAddrBits is 47 there), in a user space of
// 256 TiB (48-bit virtual addresses, arm64's usual). With a smaller
// address space no ring memory can be mapped and mounts stay on /dev/fuse.
const (
	ringAddrBase = uintptr(0x9000_0000_0000)
	ringAddrEnd  = uintptr(0xA000_0000_0000)
)

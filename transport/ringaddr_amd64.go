package transport

// ringAddrBase and ringAddrEnd bound the addresses of ring memory on
// x86-64 (ringmem.go): 64 TiB to 80 TiB, above 2^46, below which Go's
// runtime picks its random heap base (runtime/malloc.go: randHeapAddrBits
// is 46 on amd64), in a user space of 128 TiB (4-level page tables), whose
// top the kernel's own placements start from.
const (
	ringAddrBase = uintptr(0x4000_0000_0000)
	ringAddrEnd  = uintptr(0x5000_0000_0000)
)

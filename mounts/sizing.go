package mounts

// DescriptorsPerSession is what one idle session costs its daemon in
// descriptors over /dev/fuse (issue 22; hack/measure-scale.sh prints the
// count by kind): the /dev/fuse descriptors of its mount and of its host
// view, and the O_PATH descriptor of its root. Every host view shares one
// descriptor of "/", the connections' state memfds are closed in the daemon
// once the descriptor store holds them (their mappings keep them), and the
// event log is opened for each append. A descriptor holder keeps what it
// holds in flight, not open (transport/park.go), so it needs about one
// descriptor per 32 connections. On top: one per inode the kernel keeps
// looked up through any mount, a jail's two jail views while it runs, and,
// over FUSE over io_uring, three per ring queue (the ring, its eventfd and
// a clone of /dev/fuse) on the mounts that get rings, at most
// transport.MaxRingThreads queues in all (3,072 descriptors).
const DescriptorsPerSession = 3

// DescriptorReserve is what a daemon holds besides its sessions: the API
// socket and its connections, epoll, inotify, the state directory's lock,
// log and a few more in flight during a create or a remove.
const DescriptorReserve = 64

// SessionsFor returns how many idle sessions fit in a daemon whose
// RLIMIT_NOFILE is limit: (limit - DescriptorReserve) /
// DescriptorsPerSession, 0 below the reserve.
func SessionsFor(limit uint64) uint64 {
	if limit <= DescriptorReserve {
		return 0
	}
	return (limit - DescriptorReserve) / DescriptorsPerSession
}

//go:build linux

package manifest

import (
	"io/fs"
	"syscall"
)

// openFlags opens a manifest file without blocking, so a FIFO named as one is refused
// ([ReadFile]) instead of waiting for a writer.
const openFlags = syscall.O_NONBLOCK

// fileStamp is what [Reader] compares to know a file unchanged: its size, mode, modification
// and status-change times (a process can set the first back, never the second), inode and
// device (an editor's save by rename is a new inode).
type fileStamp struct {
	size         int64
	mode         fs.FileMode
	mtime, ctime int64
	ino, dev     uint64
}

func stampOf(fi fs.FileInfo) fileStamp {
	s := fileStamp{size: fi.Size(), mode: fi.Mode(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
		s.ino, s.dev = st.Ino, uint64(st.Dev) //nolint:unconvert // Dev's type differs by architecture
	}
	return s
}

//go:build linux || darwin

package up

import (
	"io/fs"
	"syscall"
)

// ownerOf returns the uid owning the file of st (known: the platform says).
func ownerOf(st fs.FileInfo) (uid int, known bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(s.Uid), true
}

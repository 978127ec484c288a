//go:build !linux

package manifest

import "io/fs"

// openFlags: no non-blocking open here; [ReadFile] still refuses what is not a regular file
// once opened.
const openFlags = 0

// fileStamp is what [Reader] compares to know a file unchanged: its size, mode and
// modification time.
type fileStamp struct {
	size  int64
	mode  fs.FileMode
	mtime int64
}

func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{size: fi.Size(), mode: fi.Mode(), mtime: fi.ModTime().UnixNano()}
}

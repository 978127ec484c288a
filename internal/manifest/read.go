package manifest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// MaxFileBytes is the largest manifest file [Reader.Read] and [ReadFile] accept: 1 MiB. A
// LavaArchitecture's inline source may hold 256 KiB, so a file has room for several; a larger
// file is refused before it is read (its size is checked first, and no more than this is
// ever read from it).
const MaxFileBytes = 1 << 20

// ErrTooLarge is the error of a manifest file over [MaxFileBytes].
var ErrTooLarge = errors.New("larger than the 1 MiB limit of a manifest file (split it into several files)")

// racyWindow is how long after a file's modification time [Reader] keeps reading it at every
// call: a file written again within the granularity of the filesystem's timestamps, with the
// same size, would otherwise look unchanged (git's "racily clean" entries).
const racyWindow = 2 * time.Second

// settleTime is how long after its modification time a file [Reader] has read before is
// read again: a file being written in place (truncated, then written: os.WriteFile, a shell's
// `>`, many editors) is empty or cut short meanwhile, and reading it then deleted the objects
// it held. Until the file settles, what was read of it before stands.
const settleTime = time.Second

// ReadFile reads one manifest file, refusing anything but a regular file (a FIFO or a device
// is opened without blocking and refused) and a file over [MaxFileBytes] ([ErrTooLarge],
// before reading it, and never reading more than the limit and one byte).
func ReadFile(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	if st.Size() > MaxFileBytes {
		return nil, tooLarge(st.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, ErrTooLarge // it grew while read
	}
	return data, nil
}

func tooLarge(size int64) error { return fmt.Errorf("%w: %d bytes", ErrTooLarge, size) }

// Reader reads manifest files and keeps what it read of each: a file whose size, mode,
// modification time (and, where the platform has them, status-change time, inode and device)
// did not change since it was read is neither read nor parsed again, unless it was modified
// less than two seconds before that read (its timestamps could then hide a second write). A
// file read before and modified less than a second ago is not read yet: it may be half
// written, and what was read of it before stands until it settles. The
// zero Reader is ready; it is not safe for concurrent use. The manifests it returns are shared
// with its later calls: callers copy what they change.
type Reader struct {
	files map[string]readFile
	reads int
}

// readFile is what a [Reader] read of one file.
type readFile struct {
	stamp   fileStamp
	trusted bool // read racyWindow or more after the file's modification time
	ms      []Manifest
	err     error
}

// Reads is how many times the Reader read and parsed a file.
func (r *Reader) Reads() int { return r.reads }

// Read reads every LavaArchitecture document of the files paths expands to ([ListFiles]).
// Documents of another kind and empty documents are skipped. A file that cannot be read, is
// not a regular file, is over [MaxFileBytes], cannot be parsed, or holds a document that is
// not a valid LavaArchitecture (or two with the same namespace/name) gives a [FileError] and
// none of that file's manifests (so a half-saved file never deletes what it held). A
// namespace/name that documents of more than one file define is none of theirs: each of those
// documents gives a FileError with its Key, naming the others, and is not returned (so a new
// file never takes over what another file defines, whichever sorts first). The error is
// ListFiles'.
func (r *Reader) Read(paths []string) ([]Manifest, []*FileError, error) {
	files, err := ListFiles(paths)
	if err != nil {
		return nil, nil, err
	}
	if r.files == nil {
		r.files = map[string]readFile{}
	}
	seen := make(map[string]bool, len(files))
	var (
		clean [][]Manifest
		errs  []*FileError
		where = map[string][]Manifest{} // namespace/name -> its documents, in file order
	)
	for _, f := range files {
		seen[f] = true
		ms, err := r.file(f)
		if err != nil {
			errs = append(errs, &FileError{File: f, Err: err})
			continue
		}
		clean = append(clean, ms)
		for _, m := range ms {
			where[m.Key()] = append(where[m.Key()], m)
		}
	}
	for f := range r.files {
		if !seen[f] {
			delete(r.files, f)
		}
	}
	var out []Manifest
	for _, ms := range clean {
		for _, m := range ms {
			defs := where[m.Key()]
			if len(defs) == 1 {
				out = append(out, m)
				continue
			}
			var others []string
			for _, d := range defs {
				if d.File != m.File || d.Index != m.Index {
					others = append(others, fmt.Sprintf("%s:%d:%d", d.File, d.Line, d.Col))
				}
			}
			errs = append(errs, &FileError{File: m.File, Key: m.Key(), Err: &PosError{Line: m.Line, Col: m.Col,
				Msg: fmt.Sprintf("%s is also defined at %s: a namespace/name belongs to one document, so none of them is applied", m.Key(), strings.Join(others, ", "))}})
		}
	}
	return out, errs, nil
}

// file returns the manifests of the file name: what it read before when the file did not
// change since, else read and parsed now.
func (r *Reader) file(name string) ([]Manifest, error) {
	st, err := os.Stat(name)
	if err != nil {
		delete(r.files, name)
		return nil, err
	}
	stamp := stampOf(st)
	prev, ok := r.files[name]
	if ok && (prev.trusted && prev.stamp == stamp || time.Since(st.ModTime()) < settleTime) {
		return prev.ms, prev.err
	}
	c := readFile{stamp: stamp, trusted: time.Since(st.ModTime()) >= racyWindow}
	if st.Mode().IsRegular() && st.Size() > MaxFileBytes {
		c.err = tooLarge(st.Size())
	} else {
		r.reads++
		var data []byte
		if data, c.err = ReadFile(name); c.err == nil {
			c.ms, c.err = Parse(name, data)
			if c.err != nil {
				c.ms = nil
			}
		}
	}
	r.files[name] = c
	return c.ms, c.err
}

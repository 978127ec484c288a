package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// entry is one file or directory of a layer.
type entry struct {
	// path is where the entry is in the image: absolute and clean.
	path string
	dir  bool
	// src is the host file a regular file is copied from; data is its content when src is empty.
	src  string
	data []byte
	// mode holds the permission bits, and the sticky bit (0o1000) for /tmp.
	mode     int64
	uid, gid int
}

// tree is the content of one layer: entries by their path in the image.
type tree map[string]entry

// add puts e in the tree, with its parent directories (owned by root, mode 0755) when the tree
// has none yet. A file already in the tree with the same content is kept; with other content,
// or a file where a directory is (or the other way round), add fails.
func (t tree) add(e entry) error {
	if !path.IsAbs(e.path) || path.Clean(e.path) != e.path || e.path == "/" {
		return fmt.Errorf("layer path %q: not an absolute clean path below /", e.path)
	}
	for p := path.Dir(e.path); p != "/"; p = path.Dir(p) {
		if old, ok := t[p]; ok && !old.dir {
			return fmt.Errorf("layer path %s: a file, and also the parent of %s", p, e.path)
		}
		if _, ok := t[p]; !ok {
			t[p] = entry{path: p, dir: true, mode: 0o755}
		}
	}
	old, ok := t[e.path]
	if !ok {
		t[e.path] = e
		return nil
	}
	if old.dir != e.dir {
		return fmt.Errorf("layer path %s: both a file and a directory", e.path)
	}
	if e.dir {
		// An explicit directory (its mode and owner) wins over one add made as a parent.
		t[e.path] = e
		return nil
	}
	same, err := sameContent(old, e)
	if err != nil {
		return err
	}
	if !same || old.mode != e.mode {
		return fmt.Errorf("layer path %s: two different files (%s and %s)", e.path, describe(old), describe(e))
	}
	return nil
}

// addDir copies the host directory src into the tree under dst: its directories (mode 0755)
// and regular files (mode 0755 when the owner may execute them, else 0644), owned by root.
// A symbolic link to a file is copied as that file; one to a directory is refused.
func (t tree) addDir(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: not a directory", src)
	}
	if err := t.add(entry{path: dst, dir: true, mode: 0o755}); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		info, err := os.Stat(p) // follows a symbolic link
		if err != nil {
			return err
		}
		switch {
		case info.IsDir() && d.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s: a symbolic link to a directory (copy the directory instead)", p)
		case info.IsDir():
			return t.add(entry{path: target, dir: true, mode: 0o755})
		case info.Mode().IsRegular():
			mode := int64(0o644)
			if info.Mode()&0o100 != 0 {
				mode = 0o755
			}
			return t.add(entry{path: target, src: p, mode: mode})
		default:
			return fmt.Errorf("%s: not a regular file or directory (%s)", p, info.Mode().Type())
		}
	})
}

// writeTar writes the tree as an uncompressed layer to w: entries sorted by path (a directory
// before what it holds), every time mtime, no user or group names. A file whose content equals
// an earlier file's is written as a hard link to it, so a mirror that holds one provider binary
// under two registry hosts stores it once.
func (t tree) writeTar(w io.Writer, mtime time.Time) error {
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	tw := tar.NewWriter(w)
	seen := map[[sha256.Size]byte]string{}
	for _, p := range paths {
		e := t[p]
		hdr := &tar.Header{Name: p[1:], Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime}
		if e.dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		sum, size, err := digestContent(e)
		if err != nil {
			return err
		}
		if first, ok := seen[sum]; ok && t[first].mode == e.mode && t[first].uid == e.uid && t[first].gid == e.gid {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first[1:]
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		seen[sum] = p
		hdr.Typeflag, hdr.Size = tar.TypeReg, size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if err := copyContent(tw, e); err != nil {
			return err
		}
	}
	return tw.Close()
}

// layer writes the tree as a layer file in dir and returns it as a gzip-compressed layer whose
// compressed bytes are kept in memory once made (a layer several images share is compressed
// once).
func (t tree) layer(dir string, mtime time.Time) (v1.Layer, error) {
	f, err := os.CreateTemp(dir, "layer-*.tar")
	if err != nil {
		return nil, err
	}
	werr := t.writeTar(f, mtime)
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(f.Name(), tarball.WithCompressedCaching)
}

// open returns the content of the file entry e.
func open(e entry) (io.ReadCloser, error) {
	if e.src == "" {
		return io.NopCloser(bytes.NewReader(e.data)), nil
	}
	return os.Open(e.src)
}

// digestContent returns the SHA-256 and the size of the content of the file entry e.
func digestContent(e entry) ([sha256.Size]byte, int64, error) {
	var sum [sha256.Size]byte
	r, err := open(e)
	if err != nil {
		return sum, 0, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return sum, 0, fmt.Errorf("read %s: %w", describe(e), err)
	}
	copy(sum[:], h.Sum(nil))
	return sum, n, nil
}

// copyContent copies the content of the file entry e to w.
func copyContent(w io.Writer, e entry) error {
	r, err := open(e)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := io.Copy(w, r); err != nil {
		return fmt.Errorf("copy %s: %w", describe(e), err)
	}
	return nil
}

// sameContent reports whether the file entries a and b hold the same bytes.
func sameContent(a, b entry) (bool, error) {
	sa, na, err := digestContent(a)
	if err != nil {
		return false, err
	}
	sb, nb, err := digestContent(b)
	if err != nil {
		return false, err
	}
	return sa == sb && na == nb, nil
}

// describe names where the content of the file entry e comes from.
func describe(e entry) string {
	if e.src != "" {
		return e.src
	}
	return fmt.Sprintf("%d generated bytes", len(e.data))
}

package providers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/lava-operator/lava/internal/engine"
)

// fileSignature describes the files under dir (symbolic links followed): every file's name,
// size, inode, modification and status-change time and mode (the status-change time moves on any write, chmod or rename
// and cannot be set back by a process, and a new file adds a line); "" when it cannot.
func fileSignature(dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Through a symbolic link (a mirror may link its binaries, as the tests' merged
		// mirrors do): what a provider start runs is the target.
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return errors.ErrUnsupported
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\x00%d.%d\x00%d.%d\x00%o\n", p, info.Size(), st.Ino,
			st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, info.Mode())
		return nil
	})
	if err != nil {
		return ""
	}
	return b.String()
}

// HashCache is [PackageHash] per directory, computed again only when a file under the
// directory changed ([fileSignature]). The zero HashCache is ready; safe for concurrent use.
type HashCache struct {
	mu sync.Mutex
	m  map[string]cachedHash
}

type cachedHash struct{ sig, h1 string }

// Hash is [PackageHash] of dir ("h1:..."), from the cache while no file under dir changed.
func (c *HashCache) Hash(dir string) (string, error) {
	sig := fileSignature(dir)
	c.mu.Lock()
	if h, ok := c.m[dir]; ok && sig != "" && h.sig == sig {
		c.mu.Unlock()
		return h.h1, nil
	}
	c.mu.Unlock()
	h1, err := PackageHash(dir)
	if err != nil {
		return "", err
	}
	if sig != "" && sig == fileSignature(dir) {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]cachedHash{}
		}
		c.m[dir] = cachedHash{sig: sig, h1: h1}
		c.mu.Unlock()
	}
	return h1, nil
}

// Pins are the packages of a directory provider mirror (OpenTofu's unpacked layout,
// <mirror>/<host>/<namespace>/<type>/<version>/<os>_<arch>/) as an engine found them when it
// started: the mirror's own dependency lock, against which a package is checked before its
// first use by any object, so an executable planted in the mirror, or a package changed or
// added there after the engine started, never runs (docs/security.md, "Engines"). A mirror
// upgraded on purpose takes effect when the engine restarts. Safe for concurrent use.
type Pins struct {
	dir  string
	sigs map[string]string
}

// PinMirror records the file signature of every package directory of the mirror dir for this
// platform (a stat of each file; the hashes are computed at first use). An empty dir, or one
// that does not exist, pins nothing: every package found there later is refused.
func PinMirror(dir string) *Pins {
	p := &Pins{sigs: map[string]string{}}
	if dir == "" {
		return p
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return p
	}
	p.dir = abs
	pkgs, _ := filepath.Glob(filepath.Join(abs, "*", "*", "*", "*", runtime.GOOS+"_"+runtime.GOARCH))
	for _, pkg := range pkgs {
		if sig := fileSignature(pkg); sig != "" {
			p.sigs[pkg] = sig
		}
	}
	return p
}

// Holds reports whether the package directory pkg lies in the pinned mirror (whatever its
// state: [Pins.Verify] says whether it may run).
func (p *Pins) Holds(pkg string) bool {
	if p == nil || p.dir == "" {
		return false
	}
	abs, err := filepath.Abs(pkg)
	return err == nil && strings.HasPrefix(abs, p.dir+string(filepath.Separator))
}

// Verify checks the package directory pkg of provider addr at version before a process of it
// starts: a directory outside the mirror passes (the installer and the object's lock verify
// those); one inside must be a package the mirror held when the engine started, with every
// file as it was then. The error wraps [engine.ErrProviderChecksumMismatch].
func (p *Pins) Verify(addr, version, pkg string) error {
	if !p.Holds(pkg) {
		return nil
	}
	pkg, _ = filepath.Abs(pkg)
	want, ok := p.sigs[pkg]
	if !ok || fileSignature(pkg) != want {
		why := "its files changed since the engine started"
		if !ok {
			why = "it was not in the mirror when the engine started"
		}
		return &PinError{Addr: addr, Version: version, Dir: pkg, Why: why}
	}
	return nil
}

// PinError is a mirror package that is not as the engine found it at start ([Pins.Verify]):
// it was not started. It wraps [engine.ErrProviderChecksumMismatch].
type PinError struct {
	Addr, Version, Dir, Why string
}

func (e *PinError) Error() string {
	return fmt.Sprintf("provider %s %s in %s is not the package the provider mirror held when the engine started (%s): it was not started (restart the engine after upgrading the mirror on purpose)",
		e.Addr, e.Version, e.Dir, e.Why)
}

// Unwrap returns [engine.ErrProviderChecksumMismatch].
func (e *PinError) Unwrap() error { return engine.ErrProviderChecksumMismatch }

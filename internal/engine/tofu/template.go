package tofu

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lava-operator/lava/internal/engine/providers"
)

// Init templates: `init` only links the providers from the plugin cache into .terraform and
// records the backend configuration there, and its result depends only on the override file
// (provider requirements and backend; the backend addresses are in the environment). After a
// successful init the engine keeps a copy of .terraform and the dependency lock file in its
// private directory, keyed by the override file; later workspaces with the same override copy
// it (a few directories, symlinks and small files) instead of running init again. A template is
// only a cache in the engine's own directory: when it is missing, unusable or its lock file
// differs from a saved plan's, init runs.

// templateKey names the template of an override file.
func templateKey(override []byte) string {
	sum := sha256.Sum256(override)
	return hex.EncodeToString(sum[:12])
}

func (e *Engine) templateDir(key string) string { return filepath.Join(e.home, "init-"+key) }

// useTemplate fills the workspace's .terraform and lock file from the template, if there is a
// usable one whose lock file equals the saved plan's (ws.lock, when given) or selects the
// versions the object's lock pins (ws.pin). With a pin the workspace's lock file is the
// template's with the pinned providers' entries replaced by the object's, so the CLI checks
// the template's packages against the object's hashes on every command. It reports whether it did.
func (e *Engine) useTemplate(r *run, key string, ws *workspace) bool {
	dir := e.templateDir(key)
	lock, err := os.ReadFile(filepath.Join(dir, lockFile))
	if err != nil || (ws.lock != nil && !bytes.Equal(lock, ws.lock)) {
		return false
	}
	if ws.lock == nil && len(ws.pin) > 0 {
		tl, err := providers.ParseLock(lock)
		if err != nil {
			return false
		}
		for a, en := range ws.pin {
			if tl[a].Version != en.Version {
				return false
			}
			tl[a] = en
		}
		lock = tl.Write()
	}
	if err := copyTree(filepath.Join(dir, ".terraform"), filepath.Join(r.dir, ".terraform")); err != nil {
		_ = os.RemoveAll(filepath.Join(r.dir, ".terraform"))
		return false
	}
	if ws.lock == nil {
		if err := os.WriteFile(filepath.Join(r.dir, lockFile), lock, 0o600); err != nil {
			return false
		}
	}
	return true
}

// saveTemplate keeps the workspace's init result, unless a template exists already.
func (e *Engine) saveTemplate(r *run, key string) {
	dir := e.templateDir(key)
	if _, err := os.Stat(dir); err == nil {
		return
	}
	tmp, err := os.MkdirTemp(e.home, "init-tmp-")
	if err != nil {
		return
	}
	ok := copyTree(filepath.Join(r.dir, ".terraform"), filepath.Join(tmp, ".terraform")) == nil &&
		copyFile(filepath.Join(r.dir, lockFile), filepath.Join(tmp, lockFile)) == nil &&
		os.Rename(tmp, dir) == nil
	if !ok {
		_ = os.RemoveAll(tmp)
	}
}

// copyTree copies a directory of directories, small files and symlinks (recreated with the
// same target; a dangling one is an error, so a template whose plugin cache entry is gone is
// not used).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("dangling link %s: %w", p, err)
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			return copyFile(p, to)
		}
		return fmt.Errorf("unexpected file %s", p)
	})
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, fi.Mode().Perm())
}

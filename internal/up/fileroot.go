package up

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// privateDir names a directory lava up keeps private, for [ensurePrivateDir]'s errors.
type privateDir struct {
	// what names it in errors ("file root", "state dir").
	what string
	// fix says what the user can do about a refused one.
	fix string
	// tighten: an existing directory of this user whose mode lets group or others read or
	// search it, but not write, is narrowed to 0700 instead of refused (what they could read
	// before, they could not plant).
	tighten bool
	// runner, for a directory provider runners write in (lava up --provider-runner): a file
	// root is mode 0711, so the runner user can reach below it but not list it, and each
	// namespace's directory belongs to the runner user (uid) instead of this one.
	runner *runnerDir
}

// runnerDir is how [privateDir].runner departs from a private directory.
type runnerDir struct {
	mode fs.FileMode
	uid  int
	gid  int
}

// forRunner is k for a directory of provider runners: mode instead of 0700, owned by uid
// and gid when uid >= 0.
func (k privateDir) forRunner(mode fs.FileMode, uid, gid int) privateDir {
	k.runner = &runnerDir{mode: mode, uid: uid, gid: gid}
	return k
}

var (
	// fileRootDir is the built-in policy's file root and each namespace's below it.
	fileRootDir = privateDir{what: "file root", fix: "remove it, or give --file-root a directory of your own"}
	// stateDirDir is lava up's state directory: NATS seeds, keys, the RPC token, the store.
	stateDirDir = privateDir{what: "state dir", fix: "remove it, or give --state-dir a directory of your own", tighten: true}
)

// ensurePrivateDir makes dir a directory that only this process's user may use: it creates
// it with mode 0700 (its parent must exist), or accepts an existing one only when it is a
// directory itself (not a symbolic link), owned by this user, with no permission for group or
// others (k.tighten: none to write; the rest is removed). lava up's state directory and file
// roots are such directories, so another local user can neither plant a link that sends a
// tenant's writes elsewhere, nor plant seeds, keys or a token lava up would then use, nor
// read, change or delete what lava up and tenants write. The error names the directory, what
// is wrong and what to do.
func ensurePrivateDir(dir string, k privateDir) error {
	owner, mode := os.Getuid(), fs.FileMode(0o700)
	if k.runner != nil {
		mode = k.runner.mode
		if k.runner.uid >= 0 {
			owner = k.runner.uid
		}
	}
	if err := os.Mkdir(dir, 0o700); err == nil && k.runner != nil {
		if err := chownRunner(dir, k); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("up: %s: %w", k.what, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("up: %s: %w", k.what, err)
	}
	switch uid, known := ownerOf(st); {
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("up: %s %s is a symbolic link, which could send what lava up writes elsewhere: %s", k.what, dir, k.fix)
	case !st.IsDir():
		return fmt.Errorf("up: %s %s is not a directory: %s", k.what, dir, k.fix)
	case known && uid != owner && owner == os.Getuid():
		return fmt.Errorf("up: %s %s is owned by uid %d, not by this user (uid %d), who could change what lava up keeps there: %s", k.what, dir, uid, os.Getuid(), k.fix)
	case known && uid != owner:
		return fmt.Errorf("up: %s %s is owned by uid %d, not by the runner user (uid %d): %s", k.what, dir, uid, owner, k.fix)
	case k.tighten && st.Mode().Perm()&0o022 == 0 && st.Mode().Perm()&0o077 != 0:
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("up: %s: %w", k.what, err)
		}
	case st.Mode().Perm()&^mode != 0:
		return fmt.Errorf("up: %s %s has mode %04o, open to group or others (lava up needs %04o): %s, or chmod %o it once you checked what it holds", k.what, dir, st.Mode().Perm(), mode, k.fix, mode)
	case st.Mode().Perm() != mode:
		// A runner directory made private before: opened as far as runners need.
		if err := os.Chmod(dir, mode); err != nil {
			return fmt.Errorf("up: %s: %w", k.what, err)
		}
	}
	return nil
}

// chownRunner gives the new directory dir k's runner mode and owner.
func chownRunner(dir string, k privateDir) error {
	if k.runner.uid >= 0 {
		if err := os.Chown(dir, k.runner.uid, k.runner.gid); err != nil {
			return fmt.Errorf("up: %s: %w", k.what, err)
		}
	}
	if err := os.Chmod(dir, k.runner.mode); err != nil {
		return fmt.Errorf("up: %s: %w", k.what, err)
	}
	return nil
}

package up

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ensurePrivateDir makes dir a directory that only this process's user may use: it creates
// it with mode 0700 (its parent must exist), or accepts an existing one only when it is a
// directory itself (not a symbolic link), owned by this user, with no permission for group or
// others. lava up's file roots live below such a directory ([Options].FileRoot), so another
// local user can neither plant a link that sends a tenant's writes elsewhere nor read, change
// or delete what tenants write. The error names the directory, what is wrong and what to do.
func ensurePrivateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("up: file root: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("up: file root: %w", err)
	}
	const fix = "remove it, or give --file-root a directory of your own"
	switch uid, known := ownerOf(st); {
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("up: file root %s is a symbolic link, which could send tenants' writes elsewhere: %s", dir, fix)
	case !st.IsDir():
		return fmt.Errorf("up: file root %s is not a directory: %s", dir, fix)
	case known && uid != os.Getuid():
		return fmt.Errorf("up: file root %s is owned by uid %d, not by this user (uid %d), who could change what tenants write there: %s", dir, uid, os.Getuid(), fix)
	case st.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("up: file root %s has mode %04o, open to group or others (lava up needs 0700): %s, or chmod 700 it once you checked what it holds", dir, st.Mode().Perm(), fix)
	}
	return nil
}

//go:build linux || darwin

package up

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockStateDir takes the exclusive lock of stateDir: a non-blocking flock(2) on
// <stateDir>/[FileLock], which then holds this process's pid. It fails at once when another
// process holds the lock, naming that process's pid. The lock lasts until release is called
// (or the process exits).
func LockStateDir(stateDir string) (release func(), err error) {
	p := filepath.Join(stateDir, FileLock)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("up: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(p)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(pid); perr != nil {
				pid = "unknown"
			}
			return nil, fmt.Errorf("up: state dir %s is in use by another lava up (pid %s)", stateDir, pid)
		}
		return nil, fmt.Errorf("up: lock %s: %w", p, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

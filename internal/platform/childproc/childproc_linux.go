//go:build linux

package childproc

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the kernel send SIGKILL to cmd's process when the thread that started it
// exits, which for Go is the process exiting (the runtime does not end its threads, except one
// locked with runtime.LockOSThread whose goroutine returns: do not call cmd.Start from such a
// goroutine). Call it before cmd.Start; it keeps any SysProcAttr fields already set.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

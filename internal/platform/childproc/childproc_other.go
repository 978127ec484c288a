//go:build !linux

package childproc

import "os/exec"

// DieWithParent does nothing on this system: it has no parent-death signal. See the Linux
// version for what it does there.
func DieWithParent(cmd *exec.Cmd) {}

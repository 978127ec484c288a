//go:build linux

package up

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRunnerUIDInUse: a uid some process already runs as is refused for the runners, naming
// that process; an unused one is accepted. (An attack trial, as another process of the default
// runner user nobody, wrote a namespace's files, read a provider's /proc entries and signalled
// it.) The process is started as uid 61999 when the test runs as root, else the test's own uid
// stands for it.
func TestRunnerUIDInUse(t *testing.T) {
	uid := os.Getuid()
	if uid == 0 {
		uid = 61999
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	err := runnerUIDInUse(uid)
	if err == nil || !strings.Contains(err.Error(), "--runner-uid "+strconv.Itoa(uid)+" is the uid of process ") {
		t.Errorf("a uid in use: %v; want it refused, naming a process", err)
	}
	if err := runnerUIDInUse(61998); err != nil {
		t.Errorf("an unused uid: %v", err)
	}
}

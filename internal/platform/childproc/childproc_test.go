//go:build linux

package childproc_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/childproc"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
)

// parentEnv makes the test binary act as the parent of TestDieWithParent: it starts the child
// named by the variable's value ("tied" or "untied") and prints its pid.
const parentEnv = "LAVA_CHILDPROC_PARENT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(parentEnv); mode != "" {
		os.Exit(parent(mode))
	}
	os.Exit(m.Run())
}

func parent(mode string) int {
	cmd := exec.Command("sleep", "300")
	if mode == "tied" {
		childproc.DieWithParent(cmd)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("pid=%d\n", cmd.Process.Pid)
	select {} // until SIGKILLed
}

// A child started with DieWithParent dies when its parent is SIGKILLed; one started without it
// outlives the parent, which shows the test can tell the two apart.
func TestDieWithParent(t *testing.T) {
	for _, tc := range []struct {
		mode        string
		wantSurvive bool
	}{{"tied", false}, {"untied", true}} {
		t.Run(tc.mode, func(t *testing.T) {
			parent, child := proctest.StartParent(t, parentEnv+"="+tc.mode)
			if !proctest.Running(child) {
				t.Fatalf("child %d is not running before its parent is killed", child)
			}
			if err := parent.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = parent.Wait()
			if got := !proctest.GoneWithin(child, 3*time.Second); got != tc.wantSurvive {
				t.Errorf("child %d alive 3s after its parent's SIGKILL = %v, want %v", child, got, tc.wantSurvive)
			}
		})
	}
}

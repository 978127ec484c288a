//go:build integration && linux

package embedded

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine/runner"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// providerParentEnv makes the test binary act as a service that starts the provider at the
// path in the variable's value, prints its pid and waits to be SIGKILLed
// (TestProvider_diesWithItsService).
const providerParentEnv = "LAVA_TEST_PROVIDER_PARENT"

func TestMain(m *testing.M) {
	if exe := os.Getenv(providerParentEnv); exe != "" {
		os.Exit(providerParent(exe))
	}
	if os.Getenv(runnerChildEnv) == "1" {
		if err := runner.Main(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func providerParent(exe string) int {
	p, err := startProvider(exe, 30*time.Second, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("pid=%d\n", p.pid())
	select {}
}

// A provider process dies with the service that started it: an applier or drift scanner that is
// SIGKILLed (no deferred Kill runs) leaves no provider running, orphaned, with the object's
// credentials in its environment (docs/security.md, "Providers").
func TestProvider_diesWithItsService(t *testing.T) {
	tools := tofutest.Tofu(t)
	addr, err := ParseProviderSource("hashicorp/local")
	if err != nil {
		t.Fatal(err)
	}
	exe, _, err := Mirror{Dir: tools.Mirror}.Find(addr, "")
	if err != nil {
		t.Fatal(err)
	}
	svc, pid := proctest.StartParent(t, providerParentEnv+"="+exe)
	if !proctest.Running(pid) {
		t.Fatalf("provider %d is not running while its service is", pid)
	}
	if err := svc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = svc.Wait()
	if !proctest.GoneWithin(pid, 5*time.Second) {
		t.Errorf("provider %d (%s) still runs 5s after its service was SIGKILLed", pid, exe)
	}
}

//go:build integration

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/up"
)

// TestUp_providerRunner: `lava up --once --provider-runner` applies the local-files example
// with its providers in a runner as the default runner user (up.DefaultRunnerUID): it says so
// at start, the object is Applied, the files belong to that uid in the namespace's directory
// (owned by it, below a file root of mode 0711). lava up runs as root here; the runner is this test binary (TestMain).
func TestUp_providerRunner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("lava up --provider-runner switches users: run this test as root")
	}
	base, err := os.MkdirTemp("", "lava-up-runner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "files")
	b, err := os.ReadFile("../../examples/local-files.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifests := t.TempDir()
	if err := os.WriteFile(filepath.Join(manifests, "local-files.yaml"),
		[]byte(strings.ReplaceAll(string(b), "/tmp/lava-demo/demo", root+"/demo")), 0o644); err != nil {
		t.Fatal(err)
	}
	// An object of engine tofu: OpenTofu starts its providers itself, outside the runners, so
	// with runners it is not offered (an attack trial ran a kubernetes provider's exec plugin
	// as root through it and read the NATS admin seed and the signing key).
	tb, err := os.ReadFile("../../examples/tofu-files.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(manifests, "tofu-files.yaml"),
		[]byte(strings.ReplaceAll(string(tb), "/tmp/lava-demo/demo", root+"/demo")), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	out := upOnce(t, manifests, stateDir, "--file-root", root, "--provider-runner")
	if !strings.Contains(out, fmt.Sprintf("providers run in runners as uid %d (Landlock ABI v", up.DefaultRunnerUID)) ||
		!strings.Contains(out, "engines tofu and terraform are not offered") {
		t.Errorf("lava up did not say it runs providers in runners, and offers no tofu:\n%s", out)
	}
	if o, ok := object(t, stateDir, "demo", "tofu-greetings"); !ok || o.Status.Phase != v1alpha1.PhaseFailed ||
		!strings.Contains(meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady).Message, `engine "tofu" is not available`) {
		t.Errorf("demo/tofu-greetings: %+v, want Failed, engine tofu not available", o.Status)
	}
	if _, err := os.Stat(filepath.Join(root, "demo", "hello-from-tofu.txt")); !os.IsNotExist(err) {
		t.Errorf("hello-from-tofu.txt: %v, want none: OpenTofu applied outside the runners", err)
	}
	o, ok := object(t, stateDir, "demo", "greetings")
	if !ok || o.Status.Phase != v1alpha1.PhaseApplied {
		t.Fatalf("demo/greetings: %+v, want Applied", o.Status)
	}
	for p, uid := range map[string]uint32{filepath.Join(root, "demo"): up.DefaultRunnerUID, filepath.Join(root, "demo", "hello-ana.txt"): up.DefaultRunnerUID, root: 0} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Sys().(*syscall.Stat_t).Uid; got != uid {
			t.Errorf("%s belongs to uid %d, want %d", p, got, uid)
		}
	}
	if st, err := os.Stat(root); err != nil || st.Mode().Perm() != 0o711 {
		t.Errorf("the file root: %v, %v; want mode 0711", st.Mode(), err)
	}
}

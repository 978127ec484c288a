//go:build integration

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/up"
)

// TestUp_tamperedProvider is the tampered-provider attack through lava up (synth, the
// applier with the embedded engine, anomaly and attest, all real): an object applies with
// example/testkit, whose package hash the applier records; the provider binary in the mirror
// is then modified, and the object's next generation fails with reason
// ProviderChecksumMismatch before the provider runs (its file keeps the first content), and the
// failure is an anomaly on the anomaly stream (docs/security.md, "Engines").
func TestUp_tamperedProvider(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	mirror := t.TempDir()
	rel := filepath.Join("registry.opentofu.org", "example", "testkit")
	if err := os.CopyFS(filepath.Join(mirror, rel), os.DirFS(filepath.Join(tofuDir, "providers", rel))); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	manifests := t.TempDir()
	write := func(content string) {
		t.Helper()
		m := `apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: kit, namespace: demo}
spec:
  engine: embedded
  source:
    inline: |
      (deflava-architecture kit
        :providers ((testkit :source "example/testkit"))
        :resources ((testkit-file "k" :filename "` + filepath.Join(out, "k.txt") + `" :content "` + content + `")))
`
		if err := os.WriteFile(filepath.Join(manifests, "kit.yaml"), []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	pol := rootsPolicy(t, out)
	write("first")
	upOnce(t, manifests, stateDir, "--policy", pol, "--providers", mirror)
	if o, _ := object(t, stateDir, "demo", "kit"); o.Status.Phase != v1alpha1.PhaseApplied {
		t.Fatalf("first run: phase %s %+v, want Applied", o.Status.Phase, o.Status.Conditions)
	}

	exe := filepath.Join(mirror, rel, "0.1.0", runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-testkit_v0.1.0")
	f, err := os.OpenFile(exe, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("tampered"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	write("second")
	upOnce(t, manifests, stateDir, "--policy", pol, "--providers", mirror)
	o, _ := object(t, stateDir, "demo", "kit")
	var reasons []string
	for _, c := range o.Status.Conditions {
		reasons = append(reasons, c.Reason)
	}
	if o.Status.Phase != v1alpha1.PhaseFailed || !meta.IsStatusConditionFalse(o.Status.Conditions, v1alpha1.ConditionReady) ||
		!strings.Contains(strings.Join(reasons, ","), v1alpha1.ReasonProviderChecksumMismatch) {
		t.Errorf("after tampering: phase %s, reasons %v; want Failed with %s", o.Status.Phase, reasons, v1alpha1.ReasonProviderChecksumMismatch)
	}
	if got := readFile(t, filepath.Join(out, "k.txt")); got != "first" {
		t.Errorf("k.txt = %q: the tampered provider ran", got)
	}
	anomaly := false
	err = filepath.WalkDir(filepath.Join(stateDir, up.DirNATS), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, string(filepath.Separator)+"LAVA_ANOMALIES"+string(filepath.Separator)) {
			return err
		}
		b, err := os.ReadFile(p)
		anomaly = anomaly || bytes.Contains(b, []byte(v1alpha1.ReasonProviderChecksumMismatch))
		return err
	})
	if err != nil || !anomaly {
		t.Errorf("no anomaly naming %s on the anomaly stream (%v)", v1alpha1.ReasonProviderChecksumMismatch, err)
	}
}

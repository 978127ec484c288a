//go:build integration

package tofu_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/enginetest"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/engine/tofu"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestEngine_tamperedProvider is the attack of docs/security.md "Engines" on the tofu engine:
// the first plan records the provider tofu selected and verified (version and h1:, the same
// hash the embedded engine computes) in the object's dependency lock in the state store; every
// later operation hands that lock to tofu as the workspace's .terraform.lock.hcl, so after the
// binary in the mirror is modified tofu itself refuses it, and the plan fails with
// engine.ErrProviderChecksumMismatch (applier reason ProviderChecksumMismatch, an anomaly) on
// the replica that has an init template and on a fresh one that runs init. Another object,
// whose lock is its own, records the binary as it is now (on a replica whose init template
// was not made with the old binary).
func TestEngine_tamperedProvider(t *testing.T) {
	tools := newHarness(t, harnessOpts{}).tools
	mirror := t.TempDir()
	rel := filepath.Join("registry.opentofu.org", "example")
	if err := os.CopyFS(filepath.Join(mirror, rel), os.DirFS(filepath.Join(tools.Mirror, rel))); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{mirror: mirror})
	dir := t.TempDir()
	doc := func(name string) string {
		return fmt.Sprintf(`{"resource":{"testkit_file":{"k":{"filename":%q,"content":"kit"}}}}`, filepath.Join(dir, name))
	}
	h.apply(h.plan(doc("k.txt")))
	lock, _, err := providers.ReadLock(t.Context(), h.store, h.key)
	if err != nil {
		t.Fatal(err)
	}
	const addr = "registry.opentofu.org/example/testkit"
	pkgDir := filepath.Join(mirror, rel, "testkit", "0.1.0", runtime.GOOS+"_"+runtime.GOARCH)
	h1, err := providers.PackageHash(pkgDir)
	if err != nil {
		t.Fatal(err)
	}
	if e := lock[addr]; e.Version != "0.1.0" || !slices.Contains(e.Hashes, h1) {
		t.Fatalf("object lock %+v, want %s 0.1.0 with %s", lock, addr, h1)
	}
	if _, ok := lock["registry.opentofu.org/hashicorp/local"]; ok {
		t.Errorf("the lock records a provider the object does not use: %+v", lock)
	}

	exe := filepath.Join(pkgDir, "terraform-provider-testkit_v0.1.0")
	f, err := os.OpenFile(exe, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("tampered"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for name, eng := range map[string]*tofu.Engine{"with an init template": h.eng, "fresh replica": h.replica()} {
		_, err := eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(doc("k.txt"))})
		if !errors.Is(err, engine.ErrProviderChecksumMismatch) || !strings.Contains(err.Error(), "testkit") {
			t.Errorf("%s: plan with the tampered provider: %v, want ErrProviderChecksumMismatch naming testkit", name, err)
		}
	}
	after, _, err := providers.ReadLock(t.Context(), h.store, h.key)
	if err != nil || !slices.Equal(after[addr].Hashes, lock[addr].Hashes) {
		t.Errorf("the refused plan changed the lock: %+v, %v", after, err)
	}

	// On a replica without an init template (the template's own lock file pins what that
	// replica verified when it made it, for every object).
	h.key.Name = "other"
	h.eng = h.replica()
	h.plan(doc("other.txt"))
	other, _, err := providers.ReadLock(t.Context(), h.store, h.key)
	if err != nil || other[addr].Version != "0.1.0" || slices.Contains(other[addr].Hashes, h1) {
		t.Errorf("another object's lock %+v (%v), want the tampered binary's own hash", other, err)
	}
}

// TestEngine_plantedProvider is the planted-provider attack on the tofu engine
// (docs/security.md, "Engines"): an executable terraform-provider-testkit written into
// testkit's package directory of the mirror after the engine started, which OpenTofu's lookup
// picks before the real binary and, for an object with no lock yet, would record and run. The
// engine checks what init selected against the mirror's pins before any provider runs: the
// plan fails with engine.ErrProviderChecksumMismatch, the planted program never runs, and the
// object's lock records nothing.
func TestEngine_plantedProvider(t *testing.T) {
	tools := tofutest.Tofu(t)
	mirror := tofutest.TestkitMirror(t, tools)
	h := newHarness(t, harnessOpts{mirror: mirror})
	dir := t.TempDir()
	doc := func(name string) string {
		return fmt.Sprintf(`{"resource":{"testkit_file":{"k":{"filename":%q,"content":"kit"}}}}`, filepath.Join(dir, name))
	}
	h.apply(h.plan(doc("k.txt")))
	fresh := h.replica() // started before the plant, no init template yet
	marker := enginetest.PlantProvider(t, mirror)
	h.key = state.Key{Namespace: "tenant-b", Name: "other"}
	for _, r := range []struct {
		name string
		eng  *tofu.Engine
	}{{"a replica that runs init", fresh}, {"a replica with an init template", h.eng}} {
		name, eng := r.name, r.eng
		_, err := eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(doc("other.txt"))})
		if !errors.Is(err, engine.ErrProviderChecksumMismatch) || !strings.Contains(err.Error(), "example/testkit") {
			t.Errorf("%s: plan with a planted provider: %v, want ErrProviderChecksumMismatch naming example/testkit", name, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the planted provider ran", name)
		}
	}
	if body, _, err := h.store.ProviderLock(t.Context(), h.key); err != nil || body != nil {
		t.Errorf("the refused object's lock: %q, %v; want none recorded", body, err)
	}
}

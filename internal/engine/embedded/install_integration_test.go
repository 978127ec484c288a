//go:build integration

package embedded

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/platform/testutil/registrytest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestEngine_installsFromRegistry: with no directory mirror, the embedded engine installs
// example/testkit from a loopback registry (signed SHA256SUMS verified), applies with it, and
// records the version and hashes (h1: and zh:) in the resource's dependency lock; the lock then
// pins the version even after a newer release appears, while a resource without a lock
// selects the newest. Bad checksum, bad signature, unknown version and a registry that is
// down each fail the plan with their engine sentinel (the applier's Failed reason).
func TestEngine_installsFromRegistry(t *testing.T) {
	e := newEnv(t)
	bin := filepath.Join(tofutest.TestkitMirror(t, e.tools), "registry.opentofu.org/example/testkit", tofutest.TestkitVersion,
		"linux_amd64", "terraform-provider-testkit_v"+tofutest.TestkitVersion)
	reg := registrytest.Start(t, registrytest.Provider{Namespace: "example", Type: "testkit", Version: "0.2.0", Binary: bin})
	cache := t.TempDir()
	open := func() {
		in, err := providers.NewInstaller(providers.Options{CacheDir: cache, CAFile: reg.CAFile})
		if err != nil {
			t.Fatal(err)
		}
		e.eng = New(Options{Store: e.store, Artifacts: e.art, Installer: in})
		eng := e.eng
		t.Cleanup(func() { _ = eng.Close() })
	}
	open()
	source := reg.Host + "/example/testkit"
	dir := t.TempDir()
	doc := func(constraint string) string {
		return jsonDoc(t, map[string]any{
			"terraform": map[string]any{"required_providers": map[string]any{"testkit": map[string]any{"source": source, "version": constraint}}},
			"resource": map[string]any{"testkit_file": map[string]any{"k": map[string]any{
				"filename": filepath.Join(dir, e.key.Name+".txt"), "content": "kit"}}}})
	}
	plan := func(d string) (*engine.PlanRecord, error) {
		tgt := e.target(d)
		tgt.ProviderSources = map[string]string{"testkit": source}
		return e.eng.Plan(t.Context(), engine.PlanRequest{Target: tgt})
	}
	rec, err := plan(doc(">= 0.1"))
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if _, err := e.eng.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	addr := reg.Host + "/example/testkit"
	if v := rec.ProviderVersions[addr]; v != "0.2.0" {
		t.Errorf("provider versions %v, want %s 0.2.0", rec.ProviderVersions, addr)
	}
	lock, _, err := providers.ReadLock(t.Context(), e.store, e.key)
	if err != nil {
		t.Fatal(err)
	}
	entry := lock[addr]
	zh := "zh:" + reg.ArchiveSHA256(registrytest.Provider{Type: "testkit", Version: "0.2.0"})
	if entry.Version != "0.2.0" || entry.Constraints != ">= 0.1" || !slices.Contains(entry.Hashes, zh) ||
		!slices.ContainsFunc(entry.Hashes, func(h string) bool { return strings.HasPrefix(h, "h1:") }) {
		t.Fatalf("lock entry %+v, want 0.2.0 with an h1: and %s", entry, zh)
	}

	// A newer release: the locked resource stays on 0.2.0, a new resource selects 0.3.0.
	reg2 := registrytest.Start(t,
		registrytest.Provider{Namespace: "example", Type: "testkit", Version: "0.2.0", Binary: bin},
		registrytest.Provider{Namespace: "example", Type: "testkit", Version: tofutest.TestkitVersion, Binary: bin})
	reg.Close()
	source, addr = reg2.Host+"/example/testkit", reg2.Host+"/example/testkit"
	in2, err := providers.NewInstaller(providers.Options{CacheDir: cache, CAFile: reg2.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.eng.Close()
	e.eng = New(Options{Store: e.store, Artifacts: e.art, Installer: in2})
	t.Cleanup(func() { _ = e.eng.Close() })
	// The new registry has another host: pin 0.2.0 for its address in this resource's lock.
	if _, err := providers.UpdateLock(t.Context(), e.store, e.key, func(l providers.Lock) (bool, error) {
		l[addr] = providers.LockEntry{Version: "0.2.0"}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if rec, err = plan(doc(">= 0.1")); err != nil || rec.ProviderVersions[addr] != "0.2.0" {
		t.Fatalf("locked resource: %+v, %v; want %s 0.2.0", rec, err, addr)
	}
	e.key.Name = "fresh"
	if rec, err = plan(doc(">= 0.1")); err != nil || rec.ProviderVersions[addr] != tofutest.TestkitVersion {
		t.Fatalf("unlocked resource: %+v, %v; want %s %s", rec, err, addr, tofutest.TestkitVersion)
	}

	cases := []struct {
		name       string
		fault      registrytest.Fault
		constraint string
		down       bool
		want       error
	}{
		{name: "bad checksum", fault: registrytest.CorruptArchive, constraint: "0.2.0", want: engine.ErrProviderChecksumMismatch},
		{name: "bad signature", fault: registrytest.BadSignature, constraint: "0.2.0", want: engine.ErrProviderSignatureInvalid},
		{name: "unknown version", constraint: "9.9.9", want: engine.ErrProviderVersionNotFound},
		{name: "registry down", constraint: "0.2.0", down: true, want: engine.ErrProviderRegistryUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A fresh cache and resource, so the package must be fetched.
			in, err := providers.NewInstaller(providers.Options{CacheDir: t.TempDir(), CAFile: reg2.CAFile})
			if err != nil {
				t.Fatal(err)
			}
			eng := New(Options{Store: e.store, Artifacts: e.art, Installer: in})
			defer eng.Close()
			reg2.SetFault(tc.fault)
			defer reg2.SetFault(registrytest.NoFault)
			e.key.Name = strings.ReplaceAll(tc.name, " ", "-")
			d := doc(tc.constraint)
			tgt := e.target(d)
			tgt.ProviderSources = map[string]string{"testkit": source}
			if tc.down {
				down := registrytest.Start(t)
				down.Close()
				d = strings.ReplaceAll(d, reg2.Host, down.Host)
				tgt = e.target(d)
				tgt.ProviderSources = map[string]string{"testkit": down.Host + "/example/testkit"}
			}
			_, err = eng.Plan(t.Context(), engine.PlanRequest{Target: tgt})
			if !errors.Is(err, tc.want) {
				t.Fatalf("plan: %v, want %v", err, tc.want)
			}
			if eng.Pool().Starts() != 0 {
				t.Errorf("a provider was started")
			}
		})
	}
}

//go:build integration

package embedded

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/enginetest"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestEngine_tamperedProvider is the attack of docs/security.md "Engines": a provider binary
// changed in the mirror after the resource first used it is never started. The first plan and
// apply record the package's h1: hash in the resource's dependency lock (the
// .terraform.lock.hcl format); after the binary is modified the next plan fails with
// engine.ErrProviderChecksumMismatch (applier reason ProviderChecksumMismatch), while another
// resource, whose lock is its own, records the new hash.
func TestEngine_tamperedProvider(t *testing.T) {
	e := newEnv(t)
	mirror := t.TempDir()
	src := filepath.Join(e.tools.Mirror, "registry.opentofu.org", "example")
	if err := os.CopyFS(filepath.Join(mirror, "registry.opentofu.org", "example"), os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	open := func() {
		e.eng = New(Options{Store: e.store, Artifacts: e.art, ProviderDir: mirror})
		eng := e.eng
		t.Cleanup(func() { _ = eng.Close() })
	}
	open()
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{"k": map[string]any{
		"filename": filepath.Join(dir, "k.txt"), "content": "kit"}}}})
	if _, err := e.planApply(doc); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	body, _, err := e.store.ProviderLock(t.Context(), e.key)
	if err != nil || body == nil {
		t.Fatalf("no lock recorded: %v", err)
	}
	lock, err := providers.ParseLock(body)
	if err != nil {
		t.Fatalf("recorded lock does not parse: %v\n%s", err, body)
	}
	entry := lock["registry.opentofu.org/example/testkit"]
	if entry.Version != "0.1.0" || len(entry.Hashes) != 1 || !strings.HasPrefix(entry.Hashes[0], "h1:") {
		t.Fatalf("lock entry %+v, want version 0.1.0 and one h1: hash:\n%s", entry, body)
	}

	_ = e.eng.Close() // stop the warm provider process, so its binary can be written
	exe := filepath.Join(mirror, "registry.opentofu.org", "example", "testkit", "0.1.0", runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-testkit_v0.1.0")
	f, err := os.OpenFile(exe, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("tampered"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	open()
	starts := e.eng.Pool().Starts()
	_, err = e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	var mismatch *ChecksumMismatchError
	if !errors.Is(err, engine.ErrProviderChecksumMismatch) || !errors.As(err, &mismatch) || mismatch.Want[0] != entry.Hashes[0] {
		t.Fatalf("plan with the tampered provider: %v, want a checksum mismatch against %s", err, entry.Hashes[0])
	}
	if n := e.eng.Pool().Starts(); n != starts {
		t.Errorf("the tampered provider was started (%d starts, was %d)", n, starts)
	}
	// Another resource has its own lock: first use records the binary as it is now.
	e.key.Name = "other"
	if _, err := e.planApply(strings.ReplaceAll(doc, "k.txt", "other.txt")); err != nil {
		t.Fatalf("another resource: %v", err)
	}
}

// TestEngine_providerEnvironment is the attack of docs/security.md "Engines" on the applier's
// own environment: a provider process starts with PATH, a private TMPDIR/HOME and go-plugin's
// protocol variables only, in a private working directory, so none of the applier's variables
// (credentials, tokens) reaches provider code. It reads the running provider's /proc environ.
func TestEngine_providerEnvironment(t *testing.T) {
	const secret = "applier-own-credential-5d2f"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("LAVA_TEST_OWN_TOKEN", secret)
	e := newEnv(t)
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{"k": map[string]any{
		"filename": filepath.Join(dir, "k.txt"), "content": "kit"}}}})
	if _, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)}); err != nil {
		t.Fatal(err)
	}
	p := e.eng.Pool()
	p.mu.Lock()
	var procs []*process
	for _, en := range p.entries {
		if en.proc != nil {
			procs = append(procs, en.proc)
		}
	}
	p.mu.Unlock()
	if len(procs) == 0 {
		t.Fatal("no warm provider process to inspect")
	}
	wd, _ := os.Getwd()
	for _, pr := range procs {
		pid := pr.pid()
		environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			t.Fatalf("read the provider's environment: %v", err)
		}
		for _, kv := range strings.Split(string(environ), "\x00") {
			name, _, _ := strings.Cut(kv, "=")
			if strings.Contains(kv, secret) || (name != "" && !slices.Contains([]string{"PATH", "TMPDIR", "HOME"}, name) &&
				!strings.HasPrefix(name, "PLUGIN_") && name != magicCookieKey) {
				t.Errorf("provider pid %d has %q in its environment", pid, name)
			}
		}
		cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
		if err != nil || cwd == wd || cwd != pr.dir {
			t.Errorf("provider pid %d works in %q (%v), want its private directory %q", pid, cwd, err, pr.dir)
		}
	}
}

// TestEngine_plantedProvider is the planted-provider attack (docs/security.md,
// "Engines"): an executable terraform-provider-testkit written into testkit's package
// directory of the mirror after the engine started, which the lookup (FindExecutable) picks
// before the real binary. The package is checked against the mirror's pins before the object's
// lock records anything and before every process starts, so another object's first use (a new
// process: another provider configuration) is refused with engine.ErrProviderChecksumMismatch
// and the planted program never runs; nothing is recorded in that object's lock.
func TestEngine_plantedProvider(t *testing.T) {
	e := newEnv(t)
	mirror := tofutest.TestkitMirror(t, e.tools)
	e.eng = New(Options{Store: e.store, Artifacts: e.art, ProviderDir: mirror})
	t.Cleanup(func() { _ = e.eng.Close() })
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{"k": map[string]any{
		"filename": filepath.Join(dir, "k.txt"), "content": "kit"}}}})
	if _, err := e.planApply(doc); err != nil {
		t.Fatalf("first object: %v", err)
	}
	marker := enginetest.PlantProvider(t, mirror)
	starts := e.eng.Pool().Starts()
	e.key = state.Key{Namespace: "tenant-b", Name: "other"}
	other := jsonDoc(t, map[string]any{"provider": map[string]any{"testkit": map[string]any{}},
		"resource": map[string]any{"testkit_file": map[string]any{"o": map[string]any{"filename": filepath.Join(dir, "o.txt"), "content": "kit"}}}})
	_, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(other)})
	var pinErr *providers.PinError
	if !errors.Is(err, engine.ErrProviderChecksumMismatch) || !errors.As(err, &pinErr) {
		t.Errorf("plan with a planted provider: %v, want a PinError (ErrProviderChecksumMismatch)", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the planted provider ran")
	}
	if n := e.eng.Pool().Starts(); n != starts {
		t.Errorf("%d provider processes started after the plant, want none", n-starts)
	}
	if body, _, err := e.store.ProviderLock(t.Context(), e.key); err != nil || body != nil {
		t.Errorf("the refused object's lock: %q, %v; want none recorded", body, err)
	}
}

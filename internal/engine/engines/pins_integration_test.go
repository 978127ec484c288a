//go:build integration && terraform

package engines_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestEngines_providerPins: the three engines of one set (embedded, tofu, terraform 1.8.5) on
// one mirror holding the real example/testkit 0.1.0 (the tofu tools') and 0.4.0
// ($LAVA_TESTKIT_MIRROR) honor a version constraint the same way, whether it is the
// architecture's pin (Target.ProviderConstraints, from :providers :version) or the rendered
// JSON's own required_providers, or both (both must hold): a constraint the mirror meets
// selects the newest version meeting it, the one the plan records; one it cannot meet fails
// the plan with ErrProviderUnavailable, the same message on every engine, naming the
// constraint and the versions the mirror has; a pin moved past the version an object's lock
// records selects anew ([repinned]).
func TestEngines_providerPins(t *testing.T) {
	tools := tofutest.Tofu(t)
	tf := tofutest.Terraform(t)
	kit := os.Getenv(tofutest.EnvTestkitMirror)
	if _, err := os.Stat(filepath.Join(kit, "registry.opentofu.org/example/testkit", tofutest.TestkitVersion)); kit == "" || err != nil {
		t.Fatalf("$%s (%q) does not hold example/testkit %s: run `make tools-testkit`", tofutest.EnvTestkitMirror, kit, tofutest.TestkitVersion)
	}
	mirror := tofutest.MergeAllMirrors(t, tools.Mirror, kit)
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	set, err := engines.Open(t.Context(), js, engines.Options{Process: "applier", ProviderDir: mirror,
		TofuBin: tools.Bin, TerraformBin: tf, WorkDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	art, err := bus.NewArtifacts(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name     string
		required string // the rendered JSON's own constraint ("" for none)
		pin      string // the architecture's
		want     string // the version selected, or "" for ErrProviderUnavailable
		missing  string // the provider as the error names it
	}{
		{name: "no constraint", want: "0.4.0"},
		{name: "pinned to the older version", pin: "0.1.0", want: "0.1.0"},
		{name: "pinned to a range", pin: "~> 0.4", want: "0.4.0"},
		{name: "the rendered JSON's constraint", required: "< 0.4", want: "0.1.0"},
		{name: "both, met", required: ">= 0.1", pin: "< 0.4", want: "0.1.0"},
		{name: "a version the mirror lacks", pin: "0.2.0",
			missing: "example/testkit version 0.2.0 (the mirror has 0.1.0, 0.4.0)"},
		{name: "both, each met, never together", required: ">= 0.4", pin: "0.1.0",
			missing: "example/testkit version >= 0.4, 0.1.0 (the mirror has 0.1.0, 0.4.0)"},
	}
	for i, tt := range tests {
		req := `{"source":"example/testkit"}`
		if tt.required != "" {
			req = `{"source":"example/testkit","version":"` + tt.required + `"}`
		}
		doc := `{"terraform":{"required_providers":{"testkit":` + req + `}},
		  "resource":{"testkit_file":{"a":{"filename":"` + filepath.Join(dir, "a.txt") + `","content":"x"}}}}`
		digest, err := art.Put(t.Context(), strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		var pins map[string]string
		if tt.pin != "" {
			pins = map[string]string{"testkit": tt.pin}
		}
		msgs := map[string]string{}
		for _, name := range []string{"embedded", "tofu", "terraform"} {
			target := engine.Target{Key: state.Key{Namespace: "default", Name: name + "-" + string(rune('a'+i))}, RenderedDigest: digest,
				ProviderSources: map[string]string{"testkit": "example/testkit"}, ProviderConstraints: pins, Holder: "test"}
			p, err := set.Engines[name].Plan(t.Context(), engine.PlanRequest{Target: target})
			if tt.want == "" {
				if !errors.Is(err, engine.ErrProviderUnavailable) || !strings.Contains(err.Error(), tt.missing) {
					t.Errorf("%s: %s plan: %v, want ErrProviderUnavailable naming %q", tt.name, name, err, tt.missing)
				} else {
					msgs[name] = err.Error()
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %s plan: %v", tt.name, name, err)
				continue
			}
			got := ""
			for addr, v := range p.ProviderVersions {
				if strings.HasSuffix(addr, "/example/testkit") {
					got = v
				}
			}
			if got != tt.want {
				t.Errorf("%s: %s selected example/testkit %q (%v), want %s", tt.name, name, got, p.ProviderVersions, tt.want)
			}
		}
		if len(msgs) == 3 && (msgs["embedded"] != msgs["tofu"] || msgs["tofu"] != msgs["terraform"]) {
			t.Errorf("%s: the engines fail differently:\n%v", tt.name, msgs)
		}
		if msgs["embedded"] != "" {
			t.Logf("%s: %s", tt.name, msgs["embedded"])
		}
	}
	repinned(t, set, art, dir)
}

// repinned: an object applied with testkit pinned to 0.1.0 (its dependency lock records
// 0.1.0) and then planned with the pin moved to ~> 0.4 gets 0.4.0 on every engine: a locked
// version the constraint no longer admits is selected anew, not refused.
func repinned(t *testing.T, set *engines.Set, art *bus.Artifacts, dir string) {
	t.Helper()
	for _, name := range []string{"embedded", "tofu", "terraform"} {
		doc := `{"resource":{"testkit_file":{"a":{"filename":"` + filepath.Join(dir, name+"-repinned.txt") + `","content":"x"}}}}`
		digest, err := art.Put(t.Context(), strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		eng := set.Engines[name]
		target := func(pin string) engine.Target {
			return engine.Target{Key: state.Key{Namespace: "default", Name: name + "-repinned"}, RenderedDigest: digest,
				ProviderSources:     map[string]string{"testkit": "example/testkit"},
				ProviderConstraints: map[string]string{"testkit": pin}, Holder: "test"}
		}
		p, err := eng.Plan(t.Context(), engine.PlanRequest{Target: target("0.1.0")})
		if err != nil {
			t.Fatalf("%s: plan pinned to 0.1.0: %v", name, err)
		}
		if _, err := eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "test"}); err != nil {
			t.Fatalf("%s: apply pinned to 0.1.0: %v", name, err)
		}
		p, err = eng.Plan(t.Context(), engine.PlanRequest{Target: target("~> 0.4")})
		if err != nil {
			t.Errorf("%s: plan with the pin moved to ~> 0.4: %v", name, err)
			continue
		}
		for addr, v := range p.ProviderVersions {
			if strings.HasSuffix(addr, "/example/testkit") && v != "0.4.0" {
				t.Errorf("%s: the pin moved to ~> 0.4 selected %s %s, want 0.4.0", name, addr, v)
			}
		}
	}
}

//go:build integration

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/embedded"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// statefileConfig is the Terraform JSON applied: built-in terraform_data only (no provider to
// install), a counted resource and an output, so the file has index keys and outputs.
const statefileConfig = `{"resource":{"terraform_data":{"a":{"input":"hello"},"b":{"count":2,"input":"x"}}},` +
	`"output":{"greeting":{"value":"${terraform_data.a.output}"}}}`

// statefilePlan plans statefileConfig for key with the embedded engine on b's state, applies
// the plan when it changes anything, and returns it; any error fails t.
func statefilePlan(t *testing.T, b stateBus, key state.Key) *engine.PlanRecord {
	t.Helper()
	ctx := t.Context()
	eng := embedded.New(embedded.Options{Store: b.store, Artifacts: b.art})
	t.Cleanup(func() { _ = eng.Close() })
	rendered, err := b.art.Put(ctx, strings.NewReader(statefileConfig))
	if err != nil {
		t.Fatal(err)
	}
	p, err := eng.Plan(ctx, engine.PlanRequest{Target: engine.Target{Key: key, RenderedDigest: rendered}, BindingsDigest: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges {
		if _, err := eng.Apply(ctx, engine.ApplyRequest{Plan: p}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestStatePullPush_tofuReadsAndRestoreIsNoOp: an object applied by the embedded engine has
// its state pulled with `lava state pull`; the real `tofu show -json` reads the file and lists
// the resources and attribute values Lava's state holds; the file pushed with `lava state push`
// into a fresh NATS server (a lost bus restored from a backup) is the state a plan of the same
// configuration changes nothing against, and the record is marked pushed (the applier holds
// that plan for approval).
func TestStatePullPush_tofuReadsAndRestoreIsNoOp(t *testing.T) {
	tools := tofutest.Tofu(t)
	ctx := t.Context()
	key := state.Key{Namespace: "infra", Name: "web"}
	lava := func(b stateBus, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(ctx, append(args, "--nats-url", b.srv.URL()), strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("lava %s: exit %d, stderr %s", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String()
	}

	first := newStateBus(t)
	if p := statefilePlan(t, first, key); !p.HasChanges || p.Summary.Add != 3 {
		t.Fatalf("first plan: %+v, want 3 to add", p.Summary)
	}
	rec, body, err := first.store.Body(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "web.tfstate")
	lava(first, "state", "pull", "infra/web", "-o", file)
	pulled, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(pulled, body) {
		t.Fatalf("pulled file differs from the stored body (%v)", err)
	}

	// OpenTofu reads the file, and sees what Lava's state holds.
	show := exec.CommandContext(ctx, tools.Bin, "show", "-json", file)
	show.Dir = t.TempDir()
	show.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+tools.CLIConfig, "TF_IN_AUTOMATION=1")
	var stderr bytes.Buffer
	show.Stderr = &stderr
	out, err := show.Output()
	if err != nil {
		t.Fatalf("tofu show -json: %v\n%s", err, stderr.String())
	}
	var shown struct {
		Values struct {
			Outputs map[string]struct {
				Value any `json:"value"`
			} `json:"outputs"`
			RootModule struct {
				Resources []struct {
					Address string         `json:"address"`
					Values  map[string]any `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal(out, &shown); err != nil {
		t.Fatalf("tofu show -json output: %v\n%s", err, out)
	}
	st, err := embedded.ParseState(body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{}
	for _, r := range st.Resources {
		for _, in := range r.Instances {
			addr := r.Type + "." + r.Name
			if in.IndexKey != nil {
				ik, _ := json.Marshal(in.IndexKey)
				addr += "[" + string(ik) + "]"
			}
			var attrs map[string]any
			if err := json.Unmarshal(in.Attributes, &attrs); err != nil {
				t.Fatal(err)
			}
			for k, v := range attrs {
				// A dynamically typed attribute (terraform_data's input and output) is stored
				// with its type, {"value": ..., "type": ...}; tofu show prints the value.
				if m, ok := v.(map[string]any); ok && len(m) == 2 && m["type"] != nil {
					if val, ok := m["value"]; ok {
						attrs[k] = val
					}
				}
			}
			want[addr] = attrs
		}
	}
	got := map[string]map[string]any{}
	for _, r := range shown.Values.RootModule.Resources {
		got[r.Address] = r.Values
	}
	if len(want) != 3 || !reflect.DeepEqual(got, want) {
		t.Fatalf("tofu show lists\n%v\nLava's state holds\n%v", got, want)
	}
	if o := shown.Values.Outputs["greeting"].Value; o != "hello" {
		t.Errorf("tofu show: output greeting = %v, want hello", o)
	}

	// A fresh server (the bus lost): the file pushed back is the state, and re-planning the
	// same configuration changes nothing.
	fresh := newStateBus(t)
	if out := lava(fresh, "state", "push", "infra/web", file); !strings.Contains(out, fmt.Sprintf("pushed serial %d of lineage %s", rec.Serial, rec.Lineage)) {
		t.Fatalf("push: %s", out)
	}
	restored, err := fresh.store.Get(ctx, key)
	if err != nil || restored.Serial != rec.Serial || restored.Lineage != rec.Lineage || !restored.PushedUnapplied("") {
		t.Fatalf("record after the push: %+v %v; want serial %d of lineage %s marked pushed", restored, err, rec.Serial, rec.Lineage)
	}
	if p := statefilePlan(t, fresh, key); p.HasChanges {
		t.Fatalf("plan against the restored state: %+v, want no changes", p.Summary)
	}
}

//go:build integration

package embedded

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/lang/policy"
	lavarender "github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// TestEngine_bundledArchitecture: the bundled architecture modules-demo, rendered by synth's
// renderer with its module directories (modules/stamp and its nested ./tag) in the
// document's "//" and passed by the default tenant policy, is applied by one engine and
// planned as unchanged by the other, both ways (embedded and tofu), with tofu's state
// addresses and the module's output.
func TestEngine_bundledArchitecture(t *testing.T) {
	in := lavarender.Input{SourceKind: lavarender.SourceName, SourceName: "modules-demo",
		Bindings: tlisp.Bindings{Scalars: map[string]string{"name": "web"}}}
	out, ds := lavarender.Synthesize(in)
	if out == nil {
		t.Fatalf("synthesize: %v", ds)
	}
	if vs := lavarender.CheckPolicy(in, out, policy.Default()); len(vs) > 0 {
		t.Fatalf("the default policy refuses modules-demo: %v", vs)
	}
	e := newEnv(t)
	tf := e.tofuEngine()
	want := []string{"module.stamp.module.tag.terraform_data.tag", "module.stamp.terraform_data.stamp", "terraform_data.web-summary"}
	for _, order := range []struct {
		name         string
		first, check engine.Engine
	}{{"embedded then tofu", e.eng, tf}, {"tofu then embedded", tf, e.eng}} {
		t.Run(order.name, func(t *testing.T) {
			e.key = state.Key{Namespace: "demo", Name: "bundled-" + strings.ReplaceAll(order.name, " ", "-")}
			rec, err := order.first.Plan(t.Context(), engine.PlanRequest{Target: e.target(string(out.JSON))})
			if err != nil {
				t.Fatalf("%s plan: %v", order.first.Name(), err)
			}
			if _, err := order.first.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"}); err != nil {
				t.Fatalf("%s apply: %v", order.first.Name(), err)
			}
			if d := cmp.Diff(want, stateAddrs(e.state())); d != "" {
				t.Errorf("%s state addresses (-want +got):\n%s", order.first.Name(), d)
			}
			o, err := order.first.Outputs(t.Context(), e.key)
			if err != nil {
				t.Fatal(err)
			}
			var label string
			if err := json.Unmarshal(o.Values["label"], &label); err != nil || label != "tag-dev-web" {
				t.Errorf("%s output label %s (%v), want tag-dev-web", order.first.Name(), o.Values["label"], err)
			}
			rec, err = order.check.Plan(t.Context(), engine.PlanRequest{Target: e.target(string(out.Compact))})
			if err != nil {
				t.Fatalf("%s plan: %v", order.check.Name(), err)
			}
			if rec.HasChanges {
				t.Errorf("%s plans changes after %s: %+v %v", order.check.Name(), order.first.Name(), rec.Summary, actionsOf(rec))
			}
		})
	}
}

package embedded

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/lava-operator/lava/internal/engine"
)

// TestReviewStructures: after_unknown marks the unknown values of a planned object, and the
// schema's sensitive paths become before_sensitive/after_sensitive objects; a path through a
// list element marks the whole list attribute.
func TestReviewStructures(t *testing.T) {
	planned := cty.ObjectVal(map[string]cty.Value{
		"id":    cty.UnknownVal(cty.String),
		"name":  cty.StringVal("a"),
		"tags":  cty.MapVal(map[string]cty.Value{"k": cty.UnknownVal(cty.String), "j": cty.StringVal("v")}),
		"ports": cty.ListVal([]cty.Value{cty.NumberIntVal(1), cty.UnknownVal(cty.Number)}),
	})
	wantUnknown := map[string]any{"id": true, "tags": map[string]any{"k": true}, "ports": []any{false, true}}
	if diff := cmp.Diff(wantUnknown, unknownStructure(planned)); diff != "" {
		t.Errorf("after_unknown (-want +got):\n%s", diff)
	}
	sens := sensitiveStructure([]cty.Path{
		cty.GetAttrPath("password"),
		cty.GetAttrPath("conn").GetAttr("token"),
		cty.GetAttrPath("keys").Index(cty.NumberIntVal(0)).GetAttr("secret"),
		cty.GetAttrPath("labels").Index(cty.StringVal("api")),
	})
	want := map[string]any{"password": true, "conn": map[string]any{"token": true}, "keys": true, "labels": map[string]any{"api": true}}
	if diff := cmp.Diff(want, sens); diff != "" {
		t.Errorf("sensitive structure (-want +got):\n%s", diff)
	}
	v, err := reviewValue(planned)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := v.(map[string]any); !ok || m["id"] != nil || m["name"] != "a" {
		t.Errorf("review value %v: want unknowns as null", v)
	}
}

// TestReviewPlan_priorSensitive: an attribute the configuration made sensitive when it was
// applied (state's sensitive_attributes) stays hidden in the review body's before when the
// configuration no longer makes it sensitive, and when the resource is removed, as OpenTofu's
// before_sensitive has it (otherwise `lava plan show` of such a plan shows the value, e.g. an
// upper-cased Secret).
func TestReviewPlan_priorSensitive(t *testing.T) {
	t.Parallel()
	const derived = "S3CR3T-DERIVED"
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, `{"locals":{"pw":"${sensitive(\"s3cr3t-derived\")}"},"resource":{"terraform_data":{
		"h":{"input":"${upper(local.pw)}"},"g":{"input":"${format(\"k-%s\", upper(local.pw))}"},
		"m":{"input":"${zipmap([upper(local.pw)], [\"x\"])}"}}}}`, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(`{"resource":{"terraform_data":{"h":{"input":"plain"},"m":{"input":"plain"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.r.Plan(t.Context(), cfg, h.state, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := reviewPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	body, err := engine.ReviewBody(rp, nil)
	if err != nil {
		t.Fatal(err)
	}
	// terraform_data's computed output copies the input unmarked, in OpenTofu's plans too (the
	// threat model in docs/security.md): only what was sensitive is checked.
	rev, err := engine.ParseReviewBody(body)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, rc := range rev.ResourceChanges {
		before, _ := rc.Change.Before.(map[string]any)
		if before == nil {
			t.Fatalf("%s: no before: %s", rc.Address, body)
		}
		seen++
		if in := before["input"]; in != nil {
			t.Errorf("%s: before.input = %v, want it hidden (it was sensitive when applied)", rc.Address, in)
		}
		if bs, _ := rc.Change.BeforeSensitive.(map[string]any); bs["input"] != true {
			t.Errorf("%s: before_sensitive %v, want input", rc.Address, rc.Change.BeforeSensitive)
		}
	}
	if seen != 3 || !strings.Contains(string(body), `"plain"`) || !strings.Contains(string(body), derived) {
		t.Errorf("want the three changes, the new plain input and the computed output (the control that the body is read unmasked elsewhere):\n%s", body)
	}
}

package embedded

import (
	"encoding/json"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestRunner_configSensitiveInState: a value a sensitive variable (or sensitive()) puts in an
// attribute is recorded in state's sensitive_attributes, as tofu writes it; the same
// configuration then plans nothing; a state that lacks the mark (or has one the
// configuration no longer makes) plans an update, as tofu does (the corpus case
// testdata/corpus/variables_outputs.json).
func TestRunner_configSensitiveInState(t *testing.T) {
	t.Parallel()
	doc := `{"variable":{"token":{"type":"string","default":"s3cr3t","sensitive":true}},
	  "resource":{"terraform_data":{"tok":{"input":"${var.token}"},"fn":{"input":{"a":"${sensitive(\"x\")}","b":"y"}},"plain":{"input":"p"}}}}`
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, doc, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"terraform_data.tok":   `[[{"type":"get_attr","value":"input"}]]`,
		"terraform_data.fn":    `[[{"type":"get_attr","value":"input"},{"type":"get_attr","value":"a"}]]`,
		"terraform_data.plain": `[]`,
	}
	for _, r := range h.state.Resources {
		addr := r.Type + "." + r.Name
		if got := string(r.Instances[0].SensitiveAttributes); !jsonEqual([]byte(got), []byte(want[addr])) {
			t.Errorf("%s sensitive_attributes = %s, want %s", addr, got, want[addr])
		}
	}
	cfg, err := ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.r.Plan(t.Context(), cfg, h.state, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Errorf("the same configuration plans %v", actions(p))
	}
	// The state as an engine that drops the marks would have written it.
	for i := range h.state.Resources {
		h.state.Resources[i].Instances[0].SensitiveAttributes = json.RawMessage(`[]`)
	}
	p, err = h.r.Plan(t.Context(), cfg, h.state, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := actions(p)
	if got["terraform_data.tok"] != Update || got["terraform_data.fn"] != Update || got["terraform_data.plain"] != NoOp {
		t.Errorf("plan of a state without the marks = %v, want tok and fn updated, plain no-op", got)
	}
	if _, err := h.r.Apply(t.Context(), cfg, p, h.state, nil, h.persist, nil); err != nil {
		t.Fatal(err)
	}
	if p, err = h.r.Plan(t.Context(), cfg, h.state, nil, false, nil); err != nil || p.HasChanges() {
		t.Errorf("after the update: %v, err %v", actions(p), err)
	}
}

func TestSensitivePaths_roundTrip(t *testing.T) {
	t.Parallel()
	paths := []cty.Path{
		cty.GetAttrPath("input"),
		cty.GetAttrPath("tags").Index(cty.StringVal("k")),
		cty.GetAttrPath("rule").Index(cty.NumberIntVal(2)).GetAttr("port"),
	}
	back, err := unmarshalPaths(marshalPaths(paths))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(paths) {
		t.Fatalf("got %d paths, want %d", len(back), len(paths))
	}
	for i := range paths {
		if !back[i].Equals(paths[i]) {
			t.Errorf("path %d = %#v, want %#v", i, back[i], paths[i])
		}
	}
	// tofu writes the index step's value with its keys in another order; the sets agree.
	tofu := json.RawMessage(`[[{"type":"get_attr","value":"tags"},{"type":"index","value":{"value":"k","type":"string"}}]]`)
	if !sameSet(sensitivePathSet(tofu), sensitivePathSet(marshalPaths(paths[1:2]))) {
		t.Errorf("tofu's encoding %s and the engine's %s differ", tofu, marshalPaths(paths[1:2]))
	}
	if _, err := unmarshalPaths(json.RawMessage(`[[{"type":"splat"}]]`)); err == nil {
		t.Error("an unknown step type decodes")
	}
}

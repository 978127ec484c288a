package embedded

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"
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

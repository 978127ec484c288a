package engine_test

import (
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/lava-operator/lava/internal/engine"
)

// TestReviewBody_sensitiveMapKeys: a map keyed by a value derived from a Secret is sensitive as
// a whole; its keys appear neither in after_unknown nor in replace_paths of the review body
// (`lava plan show --json` prints both), while the structure outside it is kept.
func TestReviewBody_sensitiveMapKeys(t *testing.T) {
	const key = "HUNTER2-DERIVED"
	p := &tfjson.Plan{FormatVersion: "1.2", ResourceChanges: []*tfjson.ResourceChange{{
		Address: "terraform_data.b", Mode: "managed", Type: "terraform_data", Name: "b",
		Change: &tfjson.Change{
			Actions:         tfjson.Actions{tfjson.ActionUpdate},
			Before:          map[string]any{"input": map[string]any{key: "old"}, "plain": map[string]any{"k": "v"}},
			After:           map[string]any{"input": map[string]any{key: nil}, "plain": map[string]any{"k": nil}},
			AfterUnknown:    map[string]any{"id": true, "input": map[string]any{key: true}, "plain": map[string]any{"k": true}},
			BeforeSensitive: map[string]any{"input": true},
			AfterSensitive:  map[string]any{"input": true},
			ReplacePaths:    []any{[]any{"input", key}, []any{"input"}, []any{"plain", "k"}},
		},
	}}}
	b, err := engine.ReviewBody(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), key) {
		t.Errorf("the review body shows the sensitive map's key:\n%s", b)
	}
	for _, want := range []string{`"after_unknown":{"id":true,"input":true,"plain":{"k":true}}`, `"replace_paths":[["input"],["plain","k"]]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the review body lacks %s:\n%s", want, b)
		}
	}
}

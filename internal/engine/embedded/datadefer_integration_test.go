//go:build integration

package embedded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestRunner_dataSourceWaitsForPendingChange: a data source whose configuration is known at
// plan but which depends on a managed resource with a planned change (here: the file it
// reads is created or replaced in the same plan) is read during apply, as tofu does; with no
// change pending it is read at plan (the corpus case testdata/corpus/update_replace.json).
func TestRunner_dataSourceWaitsForPendingChange(t *testing.T) {
	tools := tofutest.Tofu(t)
	h := newMemHarness(t, tools.Mirror)
	dir := t.TempDir()
	doc := func(content, dependsOn string) string {
		return jsonDoc(t, map[string]any{
			"resource": map[string]any{
				"local_file":     map[string]any{"src": map[string]any{"filename": filepath.Join(dir, "src.txt"), "content": content}},
				"terraform_data": map[string]any{"copy": map[string]any{"input": "${data.local_file.back.content}"}},
			},
			"data": map[string]any{"local_file": map[string]any{
				"back":  map[string]any{"filename": "${local_file.src.filename}"},
				"other": map[string]any{"filename": filepath.Join(dir, "other.txt"), "depends_on": []any{dependsOn}},
			}},
		})
	}
	if err := os.WriteFile(filepath.Join(dir, "other.txt"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func(d string) *Plan {
		t.Helper()
		cfg, err := ParseConfig([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		p, err := h.r.Plan(t.Context(), cfg, h.state, nil, false, nil)
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		return p
	}
	for _, step := range []struct {
		name, content  string
		back, other    Action
		copy           Action
		wantCopyOutput string
	}{
		{"create", "one", Read, Read, Create, "one"},
		{"unchanged", "one", NoOp, NoOp, NoOp, "one"},
		{"replaced", "two", Read, Read, Update, "two"},
	} {
		p := plan(doc(step.content, "local_file.src"))
		got := actions(p)
		if got["data.local_file.back"] != step.back || got["data.local_file.other"] != step.other || got["terraform_data.copy"] != step.copy {
			t.Errorf("%s: actions %v, want back %s, other (depends_on) %s, copy %s", step.name, got, step.back, step.other, step.copy)
		}
		if _, err := h.apply(t, doc(step.content, "local_file.src"), nil); err != nil {
			t.Fatalf("%s: apply: %v", step.name, err)
		}
		if out := h.attr(t, "terraform_data.copy", "output"); !jsonEqual([]byte(out), []byte(`{"value":"`+step.wantCopyOutput+`","type":"string"}`)) {
			t.Errorf("%s: copy output %s, want %q", step.name, out, step.wantCopyOutput)
		}
	}
	// A depends_on target with no change pending does not defer the read.
	if got := actions(plan(doc("two", "terraform_data.copy"))); got["data.local_file.other"] != NoOp {
		t.Errorf("depends_on an unchanged resource: other is %s, want no-op (read at plan)", got["data.local_file.other"])
	}
}

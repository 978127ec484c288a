//go:build integration

package tofu_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// TestEngine_bindingIsData is the attack of docs/security.md "Rendering" through real OpenTofu:
// a binding holding ${file("/etc/hostname")} is applied as that literal text (the file written,
// the state and the output hold it). Without the escaping tofu evaluates the call and the
// applier's /etc/hostname lands in the state.
func TestEngine_bindingIsData(t *testing.T) {
	const attack = `${file("/etc/hostname")}`
	dir := t.TempDir()
	src := `(deflava-architecture data
  :inputs ((:v "") (:dir ""))
  :resources ((terraform-data "seed" :input "{v}")
              (local-file "out" :filename "{dir}/out.txt" :content "{v}"))
  :outputs (:seed (ref terraform-data "seed" output)))
`
	out, ds := render.Synthesize(render.Input{SourceKind: render.SourceInline, SourceText: []byte(src),
		Bindings: tlisp.Bindings{Scalars: map[string]string{"v": attack, "dir": dir}}})
	if out == nil {
		t.Fatalf("synthesize: %v", ds)
	}
	h := newHarness(t, harnessOpts{})
	h.apply(h.plan(string(out.JSON)))
	if got := fileContent(t, filepath.Join(dir, "out.txt")); got != attack {
		t.Errorf("file content %q, want the literal binding %q", got, attack)
	}
	o, err := h.eng.Outputs(t.Context(), h.key)
	if err != nil {
		t.Fatal(err)
	}
	var seed string
	if err := json.Unmarshal(o.Values["seed"], &seed); err != nil || seed != attack {
		t.Errorf("output seed %s (%v), want the literal binding %q", o.Values["seed"], err, attack)
	}
}

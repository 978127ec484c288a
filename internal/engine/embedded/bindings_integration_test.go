//go:build integration

package embedded

import (
	"encoding/json"
	"path/filepath"
	"testing"

	lavarender "github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// TestEngine_bindingIsData is the attack of docs/security.md "Rendering" through the embedded
// engine: a binding holding ${file("/etc/hostname")} is applied as that literal text (the file
// written and the output hold it), never as a call that reads the applier's filesystem.
func TestEngine_bindingIsData(t *testing.T) {
	const attack = `${file("/etc/hostname")}`
	dir := t.TempDir()
	src := `(deflava-architecture data
  :inputs ((:v "") (:dir "") (:w "") (:dollar "$"))
  :resources ((terraform-data "seed" :input "{v}")
              (terraform-data "joined" :input "{dollar}{w}")
              (local-file "out" :filename "{dir}/out.txt" :content "{v}"))
  :outputs (:seed (ref terraform-data "seed" output) :joined (ref terraform-data "joined" output)))
`
	out, ds := lavarender.Synthesize(lavarender.Input{SourceKind: lavarender.SourceInline, SourceText: []byte(src),
		Bindings: tlisp.Bindings{Scalars: map[string]string{"v": attack, "dir": dir, "w": "{path.cwd}"}}})
	if out == nil {
		t.Fatalf("synthesize: %v", ds)
	}
	e := newEnv(t)
	if _, err := e.planApply(string(out.JSON)); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, "out.txt")); got != attack {
		t.Errorf("file content %q, want the literal binding %q", got, attack)
	}
	o, err := e.eng.Outputs(t.Context(), e.key)
	if err != nil {
		t.Fatal(err)
	}
	var seed string
	if err := json.Unmarshal(o.Values["seed"], &seed); err != nil || seed != attack {
		t.Errorf("output seed %s (%v), want the literal binding %q", o.Values["seed"], err, attack)
	}
	// A "$" right before a binding that starts with "{" (here an input's default) stays literal
	// text, or "${path.cwd}" would be evaluated with the source's own "$".
	var joined string
	if err := json.Unmarshal(o.Values["joined"], &joined); err != nil || joined != "${path.cwd}" {
		t.Errorf("output joined %s (%v), want the literal text ${path.cwd}", o.Values["joined"], err)
	}
}

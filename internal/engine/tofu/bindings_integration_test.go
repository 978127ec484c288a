//go:build integration

package tofu_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
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

// TestEngine_scrubbedEnvironment is the attack of docs/security.md "Engines" on the applier's
// own environment through real OpenTofu: tofu (and every provider and provisioner it starts)
// runs with PATH, the operation's private HOME/TMPDIR and the TF_* variables Lava sets, never
// the applier's own variables. A local-exec provisioner (refused by the policy gate in synth;
// here the engine is driven directly) dumps the environment it got.
func TestEngine_scrubbedEnvironment(t *testing.T) {
	const secret = "applier-own-credential-81be"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("LAVA_TEST_OWN_TOKEN", secret)
	dir := t.TempDir()
	dump := filepath.Join(dir, "env.txt")
	h := newHarness(t, harnessOpts{})
	h.apply(h.plan(`{"resource":{"terraform_data":{"probe":{"input":"x",
	  "provisioner":{"local-exec":{"command":"env > ` + dump + `"}}}}}}`))
	env := fileContent(t, dump)
	if strings.Contains(env, secret) || strings.Contains(env, "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("tofu's environment holds the applier's own variables:\n%s", env)
	}
	if !strings.Contains(env, "PATH=") {
		t.Errorf("tofu's environment has no PATH:\n%s", env)
	}
}

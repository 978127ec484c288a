//go:build integration

package embedded

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/platform/credentials"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// corpusCase is one file of testdata/corpus: a sequence of configurations applied in turn.
type corpusCase struct {
	// About says what the case exercises.
	About string       `json:"about"`
	Steps []corpusStep `json:"steps"`
	name  string       // the file name without .json
}

// corpusStep is one configuration of a case and the plan both engines must make for it from
// the state the previous step left.
type corpusStep struct {
	About string `json:"about"`
	// Config is the Terraform JSON of the step. The harness adds `variable "dir"` (a string
	// whose default is the case's scratch directory), which files are written under.
	Config map[string]any `json:"config"`
	// Actions is every managed resource instance the plan lists, with its actions written as
	// [corpusActions] renders them: tofu's plan JSON actions joined by "," ("create",
	// "update", "delete,create", "create,delete", "delete", "no-op", "forget"), then
	// " import=ID" for an import and " from=ADDR" for a moved instance.
	Actions map[string]string `json:"actions"`
}

// loadCorpus reads every case of testdata/corpus.
func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus cases in testdata/corpus (%v)", err)
	}
	var out []corpusCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c corpusCase
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(c.Steps) == 0 {
			t.Fatalf("%s: no steps", f)
		}
		c.name = strings.TrimSuffix(filepath.Base(f), ".json")
		out = append(out, c)
	}
	return out
}

// stepDoc renders a step's configuration with `variable "dir"` defaulting to dir.
func stepDoc(t *testing.T, s corpusStep, dir string) []byte {
	t.Helper()
	cfg := map[string]any{}
	for k, v := range s.Config {
		cfg[k] = v
	}
	vars := map[string]any{}
	if v, ok := cfg["variable"].(map[string]any); ok {
		for k, x := range v {
			vars[k] = x
		}
	}
	vars["dir"] = map[string]any{"type": "string", "default": dir}
	cfg["variable"] = vars
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// corpusActions renders an embedded plan's managed instances as [corpusStep.Actions] does.
func corpusActions(p *Plan) map[string]string {
	from := map[string]string{}
	for _, m := range p.Moves {
		from[m.To] = m.From
	}
	out := map[string]string{}
	for _, c := range p.Changes {
		if c.Mode != "managed" || c.Deposed != "" || (c.Action == Forget && !c.Removed) {
			continue
		}
		var acts []string
		switch c.Action {
		case Replace:
			acts = []string{"delete", "create"}
			if c.CreateBeforeDestroy {
				acts = []string{"create", "delete"}
			}
		default:
			acts = []string{string(c.Action)}
		}
		s := strings.Join(acts, ",")
		if c.ImportID != "" {
			s += " import=" + c.ImportID
		}
		if f, ok := from[c.Res]; ok {
			s += " from=" + f + strings.TrimPrefix(c.Addr, c.Res)
		}
		out[c.Addr] = s
	}
	return out
}

// tofuPlanJSON is what the corpus reads of `tofu show -json PLANFILE`.
type tofuPlanJSON struct {
	ResourceChanges []struct {
		Address         string `json:"address"`
		PreviousAddress string `json:"previous_address"`
		Mode            string `json:"mode"`
		Deposed         string `json:"deposed"`
		Change          struct {
			Actions   []string `json:"actions"`
			Importing *struct {
				ID string `json:"id"`
			} `json:"importing"`
		} `json:"change"`
	} `json:"resource_changes"`
}

// tofuActions renders tofu's plan JSON as [corpusStep.Actions] does.
func tofuActions(t *testing.T, planJSON []byte) map[string]string {
	t.Helper()
	var pj tofuPlanJSON
	if err := json.Unmarshal(planJSON, &pj); err != nil {
		t.Fatalf("tofu plan JSON: %v", err)
	}
	out := map[string]string{}
	for _, rc := range pj.ResourceChanges {
		if rc.Mode != "managed" || rc.Deposed != "" {
			continue
		}
		s := strings.Join(rc.Change.Actions, ",")
		if rc.Change.Importing != nil {
			s += " import=" + rc.Change.Importing.ID
		}
		if rc.PreviousAddress != "" && rc.PreviousAddress != rc.Address {
			s += " from=" + rc.PreviousAddress
		}
		out[rc.Address] = s
	}
	return out
}

// tofuStateJSON is what the corpus reads of `tofu show -json` (the state).
type tofuStateJSON struct {
	Values *struct {
		Outputs map[string]struct {
			Sensitive bool            `json:"sensitive"`
			Value     json.RawMessage `json:"value"`
		} `json:"outputs"`
		RootModule struct {
			Resources []struct {
				Address string                     `json:"address"`
				Values  map[string]json.RawMessage `json:"values"`
			} `json:"resources"`
		} `json:"root_module"`
	} `json:"values"`
}

// stateValues decodes every current instance of the embedded state with its provider's
// schema and renders each top-level attribute as `tofu show -json` does (the value in JSON
// under its own type, so a dynamic attribute is its plain value), by instance address.
func (c *corpusChain) stateValues(cfg *Config, what string) map[string]map[string]json.RawMessage {
	t := c.t
	t.Helper()
	sess := newSession(c.h.r.pool, cfg, nil, Functions(), nil)
	defer sess.close(t.Context())
	out := map[string]map[string]json.RawMessage{}
	for _, r := range c.h.state.Resources {
		prefix := r.Type + "." + r.Name
		if r.Mode == "data" {
			prefix = "data." + prefix
		}
		client, _, err := sess.provider(withCredentials(t.Context(), c.creds), localFromStateProvider(r.Provider))
		if err != nil {
			t.Fatalf("%s: provider of %s: %v", what, prefix, err)
		}
		ps, err := client.Schema(t.Context())
		if err != nil {
			t.Fatalf("%s: schema of %s: %v", what, prefix, err)
		}
		schemaOf := resourceSchema
		if r.Mode == "data" {
			schemaOf = dataSchema
		}
		sch, err := schemaOf(ps, r.Type)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, in := range r.Instances {
			if in.Deposed != "" {
				continue
			}
			v, err := ctyjson.Unmarshal(in.Attributes, sch.Block.ImpliedType())
			if err != nil {
				t.Fatalf("%s: embedded state %s does not decode with its schema: %v", what, prefix, err)
			}
			attrs := map[string]json.RawMessage{}
			for k, av := range v.AsValueMap() {
				b, err := ctyjson.Marshal(av, av.Type())
				if err != nil {
					t.Fatalf("%s: %s.%s: %v", what, prefix, k, err)
				}
				attrs[k] = b
			}
			out[prefix+keyString(normalizeKey(in.IndexKey))] = attrs
		}
	}
	return out
}

// compareState reports every instance and top-level attribute, and every output, where the
// embedded state and tofu's reading of it (`tofu show -json`) differ.
func (c *corpusChain) compareState(what string, cfg *Config, showJSON []byte) {
	t := c.t
	t.Helper()
	st := c.h.state
	var sj tofuStateJSON
	if err := json.Unmarshal(showJSON, &sj); err != nil {
		t.Fatalf("%s: tofu show -json: %v", what, err)
	}
	tofuRes := map[string]map[string]json.RawMessage{}
	tofuOut := map[string]json.RawMessage{}
	tofuSens := map[string]bool{}
	if sj.Values != nil {
		for _, r := range sj.Values.RootModule.Resources {
			tofuRes[r.Address] = r.Values
		}
		for k, o := range sj.Values.Outputs {
			tofuOut[k], tofuSens[k] = o.Value, o.Sensitive
		}
	}
	embRes := c.stateValues(cfg, what)
	if a, b := sortedKeys(embRes), sortedKeys(tofuRes); !slices.Equal(a, b) {
		t.Errorf("%s: embedded state has instances %v, tofu shows %v", what, a, b)
	}
	for addr, emb := range embRes {
		tf, ok := tofuRes[addr]
		if !ok {
			continue
		}
		for _, k := range sortedKeys(union(emb, tf)) {
			if !jsonEqual(orNull(emb[k]), orNull(tf[k])) {
				t.Errorf("%s: %s.%s: embedded state %s, tofu shows %s", what, addr, k, orNull(emb[k]), orNull(tf[k]))
			}
		}
	}
	if a, b := sortedKeys(st.Outputs), sortedKeys(tofuOut); !slices.Equal(a, b) {
		t.Errorf("%s: embedded state has outputs %v, tofu shows %v", what, a, b)
	}
	for k, o := range st.Outputs {
		if tv, ok := tofuOut[k]; ok && (!jsonEqual(orNull(o.Value), orNull(tv)) || o.Sensitive != tofuSens[k]) {
			t.Errorf("%s: output %s: embedded %s (sensitive %v), tofu %s (sensitive %v)", what, k, o.Value, o.Sensitive, tv, tofuSens[k])
		}
	}
}

func union[V any](a, b map[string]V) map[string]V {
	out := map[string]V{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// compareActions reports where the embedded plan, tofu's plan and the case's recorded
// actions differ.
func compareActions(t *testing.T, what string, emb, tf, want map[string]string) {
	t.Helper()
	for _, k := range sortedKeys(union(union(emb, tf), want)) {
		e, eok := emb[k]
		f, fok := tf[k]
		w, wok := want[k]
		if e != f || eok != fok {
			t.Errorf("%s: %s: embedded plans %q, tofu plans %q", what, k, e, f)
		}
		if f != w || fok != wok {
			t.Errorf("%s: %s: tofu plans %q, the case records %q", what, k, f, w)
		}
	}
}

// corpusChain runs one case's steps in one scratch directory, one engine applying each step.
type corpusChain struct {
	t   *testing.T
	ws  *tofutest.Workspace
	h   *memHarness
	dir string
	// creds are the provider credentials the chain's providers start with (nil: none).
	creds *credentials.Provider
}

// newCorpusChain returns a chain whose workspace shares the initialized workspace warm
// (its .terraform directory, linked, and its lock file), so no step runs `tofu init`.
func newCorpusChain(t *testing.T, tools tofutest.Tools, mirror, cache string, warm *tofutest.Workspace) *corpusChain {
	return &corpusChain{t: t, ws: linkedWorkspace(t, tools, mirror, cache, warm), h: newMemHarness(t, mirror), dir: t.TempDir()}
}

// linkedWorkspace returns a new workspace of tools' binary sharing the initialized workspace
// warm: its .terraform directory, linked, and a copy of its lock file.
func linkedWorkspace(t *testing.T, tools tofutest.Tools, mirror, cache string, warm *tofutest.Workspace) *tofutest.Workspace {
	t.Helper()
	ws := tools.Workspace(t, "", mirror, cache)
	lock, err := os.ReadFile(filepath.Join(warm.Dir, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	ws.WriteFile(t, ".terraform.lock.hcl", lock)
	if err := os.Symlink(filepath.Join(warm.Dir, ".terraform"), filepath.Join(ws.Dir, ".terraform")); err != nil {
		t.Fatal(err)
	}
	return ws
}

// writeState writes the embedded state as the workspace's local state (or removes it).
func (c *corpusChain) writeState() {
	c.t.Helper()
	p := filepath.Join(c.ws.Dir, "terraform.tfstate")
	if c.h.state == nil {
		_ = os.Remove(p)
		return
	}
	b, err := c.h.state.Marshal()
	if err != nil {
		c.t.Fatal(err)
	}
	c.ws.WriteFile(c.t, "terraform.tfstate", b)
}

// readState makes the workspace's local state the embedded harness's state.
func (c *corpusChain) readState() {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.ws.Dir, "terraform.tfstate"))
	if err != nil {
		c.t.Fatal(err)
	}
	st, err := ParseState(b)
	if err != nil {
		c.t.Fatal(err)
	}
	c.h.state = st
}

// writeConfig writes the step's configuration and returns it parsed by the embedded engine.
func (c *corpusChain) writeConfig(s corpusStep) *Config {
	c.t.Helper()
	doc := stepDoc(c.t, s, c.dir)
	c.ws.WriteFile(c.t, "main.tf.json", doc)
	cfg, err := ParseConfig(doc)
	if err != nil {
		c.t.Fatalf("embedded parse: %v", err)
	}
	return cfg
}

// tofuPlan returns tofu's plan of the workspace (`plan -out`, then `show -json` of the plan
// file) as actions.
func (c *corpusChain) tofuPlan() map[string]string {
	c.t.Helper()
	c.ws.Run(c.t, nil, "plan", "-input=false", "-no-color", "-lock=false", "-out=plan.bin")
	pj, _ := c.ws.Run(c.t, nil, "show", "-json", "plan.bin")
	return tofuActions(c.t, pj)
}

// TestCorpus_tofuOracle runs every case of testdata/corpus (Terraform JSON exercising
// expressions, functions, for expressions, splats, conditionals, count and for_each,
// variables, locals, outputs, lifecycle, import, moved and removed, on the built-in
// terraform_data, hashicorp/local 1.4.0 (protocol 5) and example/testkit 0.4.0 (built on
// terraform-plugin-framework, protocol 6)) both ways against the real tofu CLI on local state:
//
//   - embedded applies each step: before, its plan's actions equal tofu's plan JSON of the
//     same state (and the case's record); after, `tofu plan -detailed-exitcode` exits 0 and
//     `tofu show -json` shows the embedded state's values, instance by instance and
//     attribute by attribute, and its outputs;
//   - tofu applies each step (`apply -auto-approve`): after, the embedded plan of tofu's
//     state is empty.
func TestCorpus_tofuOracle(t *testing.T) {
	tools := tofutest.Tofu(t)
	mirror := tofutest.TestkitMirror(t, tools)
	cache := t.TempDir()
	// One initialized workspace with every provider the corpus uses; the chains link its
	// .terraform directory (tofu's plugin cache is not safe for concurrent installs, and an
	// init per chain would cost as much as a step).
	warm := tools.Workspace(t, "", mirror, cache)
	warm.WriteFile(t, "main.tf.json", []byte(`{"terraform":{"required_providers":{"local":{"source":"hashicorp/local"},"testkit":{"source":"example/testkit"}}}}`))
	warm.Run(t, nil, "init", "-input=false", "-no-color")
	cases := loadCorpus(t)
	steps := 0
	for _, c := range cases {
		steps += len(c.Steps)
	}
	t.Logf("%d cases, %d steps", len(cases), steps)
	for _, cc := range cases {
		t.Run(cc.name, func(t *testing.T) {
			t.Parallel()
			t.Run("embedded applies", func(t *testing.T) {
				c := newCorpusChain(t, tools, mirror, cache, warm)
				for i, s := range cc.Steps {
					what := fmt.Sprintf("step %d (%s)", i+1, s.About)
					c.writeState()
					cfg := c.writeConfig(s)
					tofuActs := c.tofuPlan()
					p, err := c.h.r.Plan(t.Context(), cfg, c.h.state, nil, false, nil)
					if err != nil {
						t.Fatalf("%s: embedded plan: %v", what, err)
					}
					compareActions(t, what, corpusActions(p), tofuActs, s.Actions)
					if _, err := c.h.r.Apply(t.Context(), cfg, p, c.h.state, nil, c.h.persist, nil); err != nil {
						t.Fatalf("%s: embedded apply: %v", what, err)
					}
					c.writeState()
					out, code := c.ws.Run(t, []int{0, 2}, "plan", "-input=false", "-no-color", "-lock=false", "-detailed-exitcode")
					if code != 0 {
						t.Errorf("%s: tofu plans changes after the embedded apply:\n%s", what, out)
					}
					sj, _ := c.ws.Run(t, nil, "show", "-json")
					c.compareState(what, cfg, sj)
				}
			})
			t.Run("tofu applies", func(t *testing.T) {
				c := newCorpusChain(t, tools, mirror, cache, warm)
				for i, s := range cc.Steps {
					what := fmt.Sprintf("step %d (%s)", i+1, s.About)
					cfg := c.writeConfig(s)
					c.ws.Run(t, nil, "apply", "-input=false", "-no-color", "-lock=false", "-auto-approve")
					c.readState()
					p, err := c.h.r.Plan(t.Context(), cfg, c.h.state, nil, false, nil)
					if err != nil {
						t.Fatalf("%s: embedded plan after tofu's apply: %v", what, err)
					}
					if p.HasChanges() {
						t.Errorf("%s: the embedded engine plans changes after tofu's apply: %v (outputs changed: %v)", what, changed(p), p.OutputsChanged)
					}
				}
			})
		})
	}
}

// changed lists the plan's changes other than no-op and read.
func changed(p *Plan) []string {
	var out []string
	for _, c := range p.Changes {
		if c.Action != NoOp && c.Action != Read {
			out = append(out, c.Addr+": "+string(c.Action)+" "+c.Reason)
		}
	}
	return out
}

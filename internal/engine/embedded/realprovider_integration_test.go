//go:build integration && providers

package embedded

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/credentials"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// realMirror returns one mirror with the tofu tools' providers and those of the mirror
// directory $env, after checking that it holds each of bins (paths under a registry host)
// under registry.opentofu.org, where tofu and the embedded engine look first, and
// registry.terraform.io, terraform's host for the same source. A missing provider fails the
// test, naming the make target.
func realMirror(t testing.TB, tools tofutest.Tools, env, target string, bins ...string) string {
	t.Helper()
	dir := os.Getenv(env)
	for _, b := range bins {
		for _, host := range []string{"registry.opentofu.org", "registry.terraform.io"} {
			if _, err := os.Stat(filepath.Join(dir, host, b)); dir == "" || err != nil {
				t.Fatalf("$%s (%q) does not hold %s/%s: run `make %s` and export %s=OUTDIR", env, dir, host, b, target, env)
			}
		}
	}
	return tofutest.MergeMirrors(t, tools.Mirror, dir)
}

// realStep is one step of a real-provider conformance run ([runRealSteps]): what is done
// behind Lava's back first, then the configuration planned and applied.
type realStep struct {
	about  string
	behind func(t *testing.T, c *realChain)
	// config is the step's Terraform JSON.
	config func(c *realChain) map[string]any
	// destroy plans the destruction of everything instead.
	destroy bool
	// drift compares the drift findings of both engines before the plan; severity is the
	// highest severity they must have.
	drift    bool
	severity engine.Severity
	// want is the recorded actions, as [corpusStep.Actions].
	want func(c *realChain) map[string]string
}

// realChain is one run of the steps, one engine applying each, with its own names.
type realChain struct {
	*corpusChain
	prefix string
	// outside is the id of the object an import step created outside Lava.
	outside string
	// tf is the terraform binary's workspace: it gets the tofu workspace's configuration and
	// state before each terraform command ([realChain.syncTerraform]).
	tf *tofutest.Workspace
}

// syncTerraform copies the tofu workspace's configuration and state (or its absence) into the
// terraform workspace.
func (c *realChain) syncTerraform() {
	c.t.Helper()
	c.copyToTerraform("main.tf.json", "terraform.tfstate")
}

// copyToTerraform copies the files of the tofu workspace into the terraform workspace,
// removing there those the tofu workspace does not have.
func (c *realChain) copyToTerraform(files ...string) {
	c.t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(c.ws.Dir, f))
		if os.IsNotExist(err) {
			_ = os.Remove(filepath.Join(c.tf.Dir, f))
			continue
		}
		if err != nil {
			c.t.Fatal(err)
		}
		c.tf.WriteFile(c.t, f, b)
	}
}

// readStateFrom makes the local state of the workspace directory dir the embedded harness's
// state.
func (c *realChain) readStateFrom(dir string) {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		c.t.Fatal(err)
	}
	st, err := ParseState(b)
	if err != nil {
		c.t.Fatal(err)
	}
	c.h.state = st
}

// planJSON plans in ws (`plan -out`, with -destroy when destroy) and returns `show -json` of
// the plan file.
func (c *realChain) planJSON(ws *tofutest.Workspace, destroy bool) []byte {
	c.t.Helper()
	args := []string{"plan", "-input=false", "-no-color", "-lock=false", "-out=plan.bin"}
	if destroy {
		args = append(args, "-destroy")
	}
	ws.Run(c.t, nil, args...)
	pj, _ := ws.Run(c.t, nil, "show", "-json", "plan.bin")
	return pj
}

// id returns the id attribute of the instance at addr in the embedded harness's state.
func (c *realChain) id(addr string) string {
	c.t.Helper()
	for _, r := range c.h.state.Resources {
		if r.Type+"."+r.Name != addr || len(r.Instances) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(r.Instances[0].Attributes, &m); err != nil {
			c.t.Fatal(err)
		}
		if s, _ := m["id"].(string); s != "" {
			return s
		}
	}
	c.t.Fatalf("no %s in state", addr)
	return ""
}

// tofuPlanJSON plans the tofu workspace ([realChain.planJSON]).
func (c *realChain) tofuPlanJSON(destroy bool) []byte {
	c.t.Helper()
	return c.planJSON(c.ws, destroy)
}

// noSecret fails the test when one of secrets shows in what (state, findings, an error).
func noSecret(t *testing.T, where, what string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(what, s) {
			t.Errorf("%s holds a provider credential", where)
		}
	}
}

// findingsJSON renders drift findings ordered as a drift report orders them, one a line, and
// their highest severity.
func findingsJSON(t *testing.T, fs []engine.Finding) (string, engine.Severity) {
	t.Helper()
	rep := &engine.DriftReport{Findings: fs}
	rep.Finish()
	var lines []string
	for _, f := range rep.Findings {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	return strings.Join(lines, "\n"), rep.MaxSeverity
}

// realRun is a conformance run of real providers on both engines, OpenTofu being the oracle.
type realRun struct {
	tools  tofutest.Tools
	mirror string
	// required is terraform.required_providers of every step, for the one `tofu init`.
	required map[string]any
	// creds reach the providers of both engines through their environment only.
	creds *credentials.Provider
	// secrets are the credential values that must show in no state, finding or error.
	secrets []string
	steps   []realStep
	// afterEmbedded checks the service after the embedded engine ran every step.
	afterEmbedded func(t *testing.T, c *realChain)
}

// run runs the steps three ways:
//
//   - embedded applies each step: before, its plan's actions equal tofu's plan JSON of the same
//     state (and the recorded ones), and so do terraform's; at the drift steps its drift
//     findings equal those the tofu engine derives from tofu's plan, and from terraform's, and
//     have the recorded highest severity; after, `tofu plan -detailed-exitcode` and `terraform
//     plan -detailed-exitcode` exit 0, and `tofu show -json` and `terraform show -json` show
//     the embedded state's values attribute by attribute;
//   - tofu applies each step: after, the embedded plan of tofu's state is empty;
//   - terraform applies each step: after, the embedded plan of terraform's state is empty.
//
// Terraform reads the embedded engine's state as it is, whose providers are named on
// registry.opentofu.org: its workspaces have those installed too ([realRun.terraformWarm]).
func (r realRun) run(t *testing.T) {
	var env []string
	for n, v := range r.creds.Env {
		env = append(env, n+"="+v)
	}
	slices.Sort(env)
	cache := t.TempDir()
	warm := r.tools.Workspace(t, "", r.mirror, cache)
	r.init(t, warm, r.required)
	tfTools, tfCache, tfWarm := r.terraformWarm(t)
	newChain := func(t *testing.T, prefix string) *realChain {
		c := &realChain{corpusChain: newCorpusChain(t, r.tools, r.mirror, cache, warm), prefix: prefix,
			tf: linkedWorkspace(t, tfTools, r.mirror, tfCache, tfWarm)}
		c.ws.AddEnv(env...)
		c.tf.AddEnv(env...)
		c.creds = r.creds
		return c
	}

	t.Run("embedded applies", func(t *testing.T) {
		c := newChain(t, "emb")
		for i, s := range r.steps {
			r.embeddedStep(t, c, fmt.Sprintf("step %d (%s)", i+1, s.about), s)
		}
		if r.afterEmbedded != nil {
			r.afterEmbedded(t, c)
		}
	})
	t.Run("tofu applies", func(t *testing.T) {
		r.cliApplies(t, newChain(t, "tofu"), func(c *realChain) *tofutest.Workspace { return c.ws })
	})
	t.Run("terraform applies", func(t *testing.T) {
		r.cliApplies(t, newChain(t, "tf"), func(c *realChain) *tofutest.Workspace {
			c.copyToTerraform("main.tf.json")
			return c.tf
		})
	})
}

// init writes required as a workspace's configuration and runs init there.
func (r realRun) init(t *testing.T, ws *tofutest.Workspace, required map[string]any) {
	t.Helper()
	req, err := json.Marshal(map[string]any{"terraform": map[string]any{"required_providers": required}})
	if err != nil {
		t.Fatal(err)
	}
	ws.WriteFile(t, "main.tf.json", req)
	ws.Run(t, nil, "init", "-input=false", "-no-color")
}

// terraformWarm returns the tool directory with the terraform binary ($LAVA_TERRAFORM_BIN), a
// plugin cache of its own and a workspace initialized with the run's providers twice: as
// required (registry.terraform.io, terraform's default host) and on registry.opentofu.org,
// the host the embedded engine's and tofu's states name, which terraform must then load
// from the same mirror to read them.
func (r realRun) terraformWarm(t *testing.T) (tofutest.Tools, string, *tofutest.Workspace) {
	t.Helper()
	tools := r.tools
	tools.Bin = tofutest.Terraform(t)
	cache := t.TempDir()
	warm := tools.Workspace(t, "", r.mirror, cache)
	both := map[string]any{}
	for name, req := range r.required {
		both[name] = req
		m, _ := req.(map[string]any)
		src, _ := m["source"].(string)
		if strings.Count(src, "/") != 1 {
			t.Fatalf("required_providers.%s: source %q, want NAMESPACE/TYPE", name, src)
		}
		both[name+"-opentofu"] = map[string]any{"source": "registry.opentofu.org/" + src, "version": m["version"]}
	}
	r.init(t, warm, both)
	return tools, cache, warm
}

// embeddedStep runs one step applied by the embedded engine, checked against tofu and
// terraform as [realRun.run] says.
func (r realRun) embeddedStep(t *testing.T, c *realChain, what string, s realStep) {
	t.Helper()
	ctx := withCredentials(t.Context(), r.creds)
	start := time.Now()
	if s.behind != nil {
		s.behind(t, c)
	}
	c.writeState()
	cfg := c.writeConfig(corpusStep{Config: s.config(c)})
	c.syncTerraform()
	pj := c.tofuPlanJSON(s.destroy)
	tj := c.planJSON(c.tf, s.destroy)
	p, err := c.h.r.Plan(ctx, cfg, c.h.state, nil, s.destroy, nil)
	if err != nil {
		noSecret(t, what+": the embedded plan's error", err.Error(), r.secrets)
		t.Fatalf("%s: embedded plan: %v", what, err)
	}
	want := s.want(c)
	compareActions(t, what, corpusActions(p), tofuActions(t, pj), want)
	compareActions(t, what+" (terraform)", tofuActions(t, tj), tofuActions(t, pj), want)
	if s.drift {
		r.compareDrift(t, what, s, p, pj, tj)
	}
	if _, err := c.h.r.Apply(ctx, cfg, p, c.h.state, nil, c.h.persist, nil); err != nil {
		noSecret(t, what+": the embedded apply's error", err.Error(), r.secrets)
		t.Fatalf("%s: embedded apply: %v", what, err)
	}
	c.writeState()
	c.syncTerraform()
	if b, err := c.h.state.Marshal(); err == nil {
		noSecret(t, what+": the embedded state", string(b), r.secrets)
	}
	for _, cli := range []struct {
		name string
		ws   *tofutest.Workspace
	}{{"tofu", c.ws}, {"terraform", c.tf}} {
		if !s.destroy {
			out, code := cli.ws.Run(t, []int{0, 2}, "plan", "-input=false", "-no-color", "-lock=false", "-detailed-exitcode")
			if code != 0 {
				t.Errorf("%s: %s plans changes after the embedded apply:\n%s", what, cli.name, out)
			}
		}
		sj, _ := cli.ws.Run(t, nil, "show", "-json")
		c.compareState(what+" ("+cli.name+" show)", cfg, sj)
	}
	t.Logf("%s: %s", what, time.Since(start).Round(100*time.Millisecond))
}

// compareDrift checks a drift step: the embedded engine's findings equal those the tofu engine
// derives from tofu's plan JSON pj and from terraform's tj, and have the step's severity.
func (r realRun) compareDrift(t *testing.T, what string, s realStep, p *Plan, pj, tj []byte) {
	t.Helper()
	prefixes := engine.DefaultCosmeticPrefixes()
	fs, err := driftFindings(p, prefixes)
	if err != nil {
		t.Fatalf("%s: embedded drift findings: %v", what, err)
	}
	emb, sev := findingsJSON(t, fs)
	for _, cli := range []struct {
		name string
		pj   []byte
	}{{"tofu", pj}, {"terraform", tj}} {
		var tp tfjson.Plan
		if err := json.Unmarshal(cli.pj, &tp); err != nil {
			t.Fatalf("%s: %s plan JSON: %v", what, cli.name, err)
		}
		got, _ := findingsJSON(t, engine.PlanFindings(&tp, prefixes))
		if emb != got {
			t.Errorf("%s: drift findings differ\nembedded:\n%s\n%s:\n%s", what, emb, cli.name, got)
		}
	}
	if emb == "" {
		t.Errorf("%s: no drift found", what)
	}
	if sev != s.severity {
		t.Errorf("%s: drift severity %q, want %q:\n%s", what, sev, s.severity, emb)
	}
	noSecret(t, what+": the drift findings", emb, r.secrets)
	t.Logf("%s: drift findings:\n%s", what, emb)
}

// cliApplies applies each step with the CLI of the workspace ws returns (after the step's
// configuration is written to the tofu workspace) and checks the embedded plan of the state it
// wrote is empty.
func (r realRun) cliApplies(t *testing.T, c *realChain, ws func(c *realChain) *tofutest.Workspace) {
	t.Helper()
	ctx := withCredentials(t.Context(), r.creds)
	for i, s := range r.steps {
		what := fmt.Sprintf("step %d (%s)", i+1, s.about)
		if s.behind != nil {
			s.behind(t, c)
		}
		cfg := c.writeConfig(corpusStep{Config: s.config(c)})
		w := ws(c)
		if s.destroy {
			w.Run(t, nil, "destroy", "-input=false", "-no-color", "-lock=false", "-auto-approve")
		} else {
			w.Run(t, nil, "apply", "-input=false", "-no-color", "-lock=false", "-auto-approve")
		}
		c.readStateFrom(w.Dir)
		p, err := c.h.r.Plan(ctx, cfg, c.h.state, nil, s.destroy, nil)
		if err != nil {
			t.Fatalf("%s: embedded plan after the CLI's apply: %v", what, err)
		}
		if p.HasChanges() {
			t.Errorf("%s: the embedded engine plans changes after the CLI's apply: %v", what, changed(p))
		}
	}
	if n := len(c.h.state.Resources); n != 0 {
		t.Errorf("the CLI's destroy left %d resources in state", n)
	}
}

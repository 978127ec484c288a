//go:build integration && providers

package embedded

import (
	"encoding/json"
	"fmt"
	"os"
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
// directory $env, after checking that it holds each of bins (paths under
// registry.opentofu.org/). A missing provider fails the test, naming the make target.
func realMirror(t *testing.T, tools tofutest.Tools, env, target string, bins ...string) string {
	t.Helper()
	dir := os.Getenv(env)
	for _, b := range bins {
		if _, err := os.Stat(dir + "/registry.opentofu.org/" + b); dir == "" || err != nil {
			t.Fatalf("$%s (%q) does not hold %s: run `make %s` and export %s=OUTDIR", env, dir, b, target, env)
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

// tofuPlanJSON plans the workspace (`plan -out`, with -destroy when destroy) and returns
// `show -json` of the plan file.
func (c *realChain) tofuPlanJSON(destroy bool) []byte {
	c.t.Helper()
	args := []string{"plan", "-input=false", "-no-color", "-lock=false", "-out=plan.bin"}
	if destroy {
		args = append(args, "-destroy")
	}
	c.ws.Run(c.t, nil, args...)
	pj, _ := c.ws.Run(c.t, nil, "show", "-json", "plan.bin")
	return pj
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

// run runs the steps both ways:
//
//   - embedded applies each step: before, its plan's actions equal tofu's plan JSON of the same
//     state (and the recorded ones), and at the drift steps its drift findings equal those
//     the tofu engine derives from tofu's plan and have the recorded highest severity; after,
//     `tofu plan -detailed-exitcode` exits 0 and `tofu show -json` shows the embedded state's
//     values attribute by attribute;
//   - tofu applies each step: after, the embedded plan of tofu's state is empty.
func (r realRun) run(t *testing.T) {
	var env []string
	for n, v := range r.creds.Env {
		env = append(env, n+"="+v)
	}
	slices.Sort(env)
	cache := t.TempDir()
	warm := r.tools.Workspace(t, "", r.mirror, cache)
	req, err := json.Marshal(map[string]any{"terraform": map[string]any{"required_providers": r.required}})
	if err != nil {
		t.Fatal(err)
	}
	warm.WriteFile(t, "main.tf.json", req)
	warm.Run(t, nil, "init", "-input=false", "-no-color")
	newChain := func(t *testing.T, prefix string) *realChain {
		c := &realChain{corpusChain: newCorpusChain(t, r.tools, r.mirror, cache, warm), prefix: prefix}
		c.ws.AddEnv(env...)
		c.creds = r.creds
		return c
	}

	t.Run("embedded applies", func(t *testing.T) {
		c := newChain(t, "emb")
		ctx := withCredentials(t.Context(), r.creds)
		for i, s := range r.steps {
			what := fmt.Sprintf("step %d (%s)", i+1, s.about)
			start := time.Now()
			if s.behind != nil {
				s.behind(t, c)
			}
			c.writeState()
			cfg := c.writeConfig(corpusStep{Config: s.config(c)})
			pj := c.tofuPlanJSON(s.destroy)
			p, err := c.h.r.Plan(ctx, cfg, c.h.state, nil, s.destroy, nil)
			if err != nil {
				noSecret(t, what+": the embedded plan's error", err.Error(), r.secrets)
				t.Fatalf("%s: embedded plan: %v", what, err)
			}
			compareActions(t, what, corpusActions(p), tofuActions(t, pj), s.want(c))
			if s.drift {
				var tp tfjson.Plan
				if err := json.Unmarshal(pj, &tp); err != nil {
					t.Fatalf("%s: tofu plan JSON: %v", what, err)
				}
				prefixes := engine.DefaultCosmeticPrefixes()
				fs, err := driftFindings(p, prefixes)
				if err != nil {
					t.Fatalf("%s: embedded drift findings: %v", what, err)
				}
				emb, sev := findingsJSON(t, fs)
				tf, _ := findingsJSON(t, engine.PlanFindings(&tp, prefixes))
				if emb != tf {
					t.Errorf("%s: drift findings differ\nembedded:\n%s\ntofu:\n%s", what, emb, tf)
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
			if _, err := c.h.r.Apply(ctx, cfg, p, c.h.state, nil, c.h.persist, nil); err != nil {
				noSecret(t, what+": the embedded apply's error", err.Error(), r.secrets)
				t.Fatalf("%s: embedded apply: %v", what, err)
			}
			c.writeState()
			if b, err := c.h.state.Marshal(); err == nil {
				noSecret(t, what+": the embedded state", string(b), r.secrets)
			}
			if !s.destroy {
				out, code := c.ws.Run(t, []int{0, 2}, "plan", "-input=false", "-no-color", "-lock=false", "-detailed-exitcode")
				if code != 0 {
					t.Errorf("%s: tofu plans changes after the embedded apply:\n%s", what, out)
				}
			}
			sj, _ := c.ws.Run(t, nil, "show", "-json")
			c.compareState(what, cfg, sj)
			t.Logf("%s: %s", what, time.Since(start).Round(100*time.Millisecond))
		}
		if r.afterEmbedded != nil {
			r.afterEmbedded(t, c)
		}
	})

	t.Run("tofu applies", func(t *testing.T) {
		c := newChain(t, "tofu")
		ctx := withCredentials(t.Context(), r.creds)
		for i, s := range r.steps {
			what := fmt.Sprintf("step %d (%s)", i+1, s.about)
			if s.behind != nil {
				s.behind(t, c)
			}
			cfg := c.writeConfig(corpusStep{Config: s.config(c)})
			if s.destroy {
				c.ws.Run(t, nil, "destroy", "-input=false", "-no-color", "-lock=false", "-auto-approve")
			} else {
				c.ws.Run(t, nil, "apply", "-input=false", "-no-color", "-lock=false", "-auto-approve")
			}
			c.readState()
			p, err := c.h.r.Plan(ctx, cfg, c.h.state, nil, s.destroy, nil)
			if err != nil {
				t.Fatalf("%s: embedded plan after tofu's apply: %v", what, err)
			}
			if p.HasChanges() {
				t.Errorf("%s: the embedded engine plans changes after tofu's apply: %v", what, changed(p))
			}
		}
		if n := len(c.h.state.Resources); n != 0 {
			t.Errorf("tofu's destroy left %d resources in state", n)
		}
	})
}

//go:build integration && providers

package embedded

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/credentials"
	"github.com/lava-operator/lava/internal/platform/testutil/keystonetest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// OpenStackVersion is the version of terraform-provider-openstack/openstack that
// hack/tools/build-openstack-provider.sh builds (`make tools-openstack`).
const OpenStackVersion = "3.4.0"

// EnvOpenStackMirror names the filesystem mirror holding the OpenStack provider.
const EnvOpenStackMirror = "LAVA_OPENSTACK_MIRROR"

// openstackMirror returns one mirror with the tofu tools' providers and the OpenStack provider
// of $LAVA_OPENSTACK_MIRROR. A missing provider fails the test, naming the make target.
func openstackMirror(t *testing.T, tools tofutest.Tools) string {
	t.Helper()
	dir := os.Getenv(EnvOpenStackMirror)
	bin := dir + "/registry.opentofu.org/terraform-provider-openstack/openstack/" + OpenStackVersion +
		"/linux_amd64/terraform-provider-openstack_v" + OpenStackVersion
	if _, err := os.Stat(bin); dir == "" || err != nil {
		t.Fatalf("$%s (%q) does not hold terraform-provider-openstack/openstack %s: run `make tools-openstack` and export %s=OUTDIR",
			EnvOpenStackMirror, dir, OpenStackVersion, EnvOpenStackMirror)
	}
	return tofutest.MergeMirrors(t, tools.Mirror, dir)
}

// osConfig is the Terraform JSON of one step: a project, a user whose default project it is,
// and a role assignment of the user on the project, the role looked up by name. The provider
// block is empty: the credentials come from the environment, as a tenant's
// spec.providerEnvFrom gives them.
type osConfig struct {
	prefix          string
	description     string
	role            string
	imported        string // the id of a project created outside Lava to import, "" for none
	importedDescrip string
}

func (c osConfig) doc() map[string]any {
	res := map[string]any{
		"openstack_identity_project_v3": map[string]any{
			"p": map[string]any{"name": c.prefix + "-p", "description": "project " + c.description},
		},
		"openstack_identity_user_v3": map[string]any{
			"u": map[string]any{"name": c.prefix + "-u", "description": "user " + c.description,
				"default_project_id": "${openstack_identity_project_v3.p.id}"},
		},
		"openstack_identity_role_assignment_v3": map[string]any{
			"a": map[string]any{"project_id": "${openstack_identity_project_v3.p.id}",
				"user_id": "${openstack_identity_user_v3.u.id}",
				"role_id": "${data.openstack_identity_role_v3." + c.role + ".id}"},
		},
	}
	doc := map[string]any{
		"terraform": map[string]any{"required_providers": map[string]any{"openstack": map[string]any{
			"source": "terraform-provider-openstack/openstack", "version": OpenStackVersion}}},
		"provider": map[string]any{"openstack": map[string]any{}},
		"data": map[string]any{"openstack_identity_role_v3": map[string]any{
			"member": map[string]any{"name": "member"},
			"reader": map[string]any{"name": "reader"},
		}},
		"resource": res,
	}
	if c.imported != "" {
		res["openstack_identity_project_v3"].(map[string]any)["outside"] = map[string]any{
			"name": c.prefix + "-outside", "description": c.importedDescrip}
		doc["import"] = []any{map[string]any{"to": "openstack_identity_project_v3.outside", "id": c.imported}}
	}
	return doc
}

// osStep is one step of [TestOpenStack_tofuOracle]: what is done behind Lava's back first
// (through the identity API), then the configuration planned and applied.
type osStep struct {
	about  string
	behind func(t *testing.T, c *osChain)
	config func(c *osChain) osConfig
	// destroy plans the destruction of everything instead.
	destroy bool
	// drift compares the drift findings of both engines before the plan.
	drift bool
	// want is the recorded actions, as [corpusStep.Actions].
	want func(c *osChain) map[string]string
}

// osChain is one run of the steps against one Keystone, with its own names.
type osChain struct {
	*corpusChain
	k      *keystonetest.Keystone
	prefix string
	// outside is the id of the project created outside Lava by the import step.
	outside string
}

// id returns the id attribute of the instance at addr in the embedded harness's state.
func (c *osChain) id(addr string) string {
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

func (c *osChain) api(method, path string, body any, want int) []byte {
	c.t.Helper()
	code, out := c.k.Do(c.t, method, path, body)
	if code != want {
		c.t.Fatalf("keystone %s %s: %d (want %d): %s", method, path, code, want, out)
	}
	return out
}

func osSteps() []osStep {
	base := func(desc, role string) func(c *osChain) osConfig {
		return func(c *osChain) osConfig { return osConfig{prefix: c.prefix, description: desc, role: role} }
	}
	all := func(act string) func(*osChain) map[string]string {
		return func(*osChain) map[string]string {
			return map[string]string{"openstack_identity_project_v3.p": act, "openstack_identity_user_v3.u": act,
				"openstack_identity_role_assignment_v3.a": act}
		}
	}
	return []osStep{
		{about: "create", config: base("one", "member"), want: all("create")},
		{about: "no change", config: base("one", "member"), want: all("no-op")},
		{about: "in-place update of both descriptions", config: base("two", "member"),
			want: func(*osChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "update", "openstack_identity_user_v3.u": "update",
					"openstack_identity_role_assignment_v3.a": "no-op"}
			}},
		{about: "another role replaces the assignment", config: base("two", "reader"),
			want: func(*osChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "no-op", "openstack_identity_user_v3.u": "no-op",
					"openstack_identity_role_assignment_v3.a": "delete,create"}
			}},
		{about: "the project's description changed behind Lava's back", drift: true, config: base("two", "reader"),
			behind: func(t *testing.T, c *osChain) {
				c.api(http.MethodPatch, "/projects/"+c.id("openstack_identity_project_v3.p"),
					map[string]any{"project": map[string]any{"description": "changed behind Lava's back", "enabled": false}}, http.StatusOK)
			},
			want: func(*osChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "update", "openstack_identity_user_v3.u": "no-op",
					"openstack_identity_role_assignment_v3.a": "no-op"}
			}},
		{about: "the user deleted behind Lava's back", drift: true, config: base("two", "reader"),
			behind: func(t *testing.T, c *osChain) {
				c.api(http.MethodDelete, "/users/"+c.id("openstack_identity_user_v3.u"), nil, http.StatusNoContent)
			},
			want: func(*osChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "no-op", "openstack_identity_user_v3.u": "create",
					"openstack_identity_role_assignment_v3.a": "create"}
			}},
		{about: "import of a project created outside Lava",
			behind: func(t *testing.T, c *osChain) {
				out := c.api(http.MethodPost, "/projects", map[string]any{"project": map[string]any{
					"name": c.prefix + "-outside", "description": "made outside", "domain_id": "default"}}, http.StatusCreated)
				var p struct {
					Project struct {
						ID string `json:"id"`
					} `json:"project"`
				}
				if err := json.Unmarshal(out, &p); err != nil || p.Project.ID == "" {
					t.Fatalf("create project: %v %s", err, out)
				}
				c.outside = p.Project.ID
			},
			config: func(c *osChain) osConfig {
				return osConfig{prefix: c.prefix, description: "two", role: "reader", imported: c.outside, importedDescrip: "made outside"}
			},
			want: func(c *osChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "no-op", "openstack_identity_user_v3.u": "no-op",
					"openstack_identity_role_assignment_v3.a": "no-op", "openstack_identity_project_v3.outside": "no-op import=" + c.outside}
			}},
		{about: "destroy", destroy: true,
			config: func(c *osChain) osConfig {
				return osConfig{prefix: c.prefix, description: "two", role: "reader", imported: c.outside, importedDescrip: "made outside"}
			},
			want: func(c *osChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "delete", "openstack_identity_user_v3.u": "delete",
					"openstack_identity_role_assignment_v3.a": "delete", "openstack_identity_project_v3.outside": "delete"}
			}},
	}
}

// writeOSConfig writes the step's configuration into the workspace and returns it parsed.
func (c *osChain) writeOSConfig(s osStep) *Config {
	c.t.Helper()
	return c.writeConfig(corpusStep{Config: s.config(c).doc()})
}

// tofuPlanJSON plans the workspace (`plan -out`, with -destroy when destroy) and returns
// `show -json` of the plan file.
func (c *osChain) tofuPlanJSON(destroy bool) []byte {
	c.t.Helper()
	args := []string{"plan", "-input=false", "-no-color", "-lock=false", "-out=plan.bin"}
	if destroy {
		args = append(args, "-destroy")
	}
	c.ws.Run(c.t, nil, args...)
	pj, _ := c.ws.Run(c.t, nil, "show", "-json", "plan.bin")
	return pj
}

// findingsJSON renders drift findings ordered as a drift report orders them, one a line.
func findingsJSON(t *testing.T, fs []engine.Finding) string {
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
	return strings.Join(lines, "\n")
}

// TestOpenStack_tofuOracle runs the OpenStack provider (terraform-provider-openstack/openstack
// 3.4.0, SDKv2, protocol 5) against a real Keystone on PostgreSQL on both engines, OpenTofu
// being the oracle, with a project, a user and a role assignment: create, no change, an
// in-place update, a replacement, a change made behind Lava's back through the identity API,
// a deletion behind its back, the import of a project created outside, destroy.
//
//   - embedded applies each step: before, its plan's actions equal tofu's plan JSON of the same
//     state (and the recorded ones), and at the drift steps its drift findings equal those
//     the tofu engine derives from tofu's plan; after, `tofu plan -detailed-exitcode` exits 0
//     and `tofu show -json` shows the embedded state's values attribute by attribute;
//   - tofu applies each step: after, the embedded plan of tofu's state is empty.
//
// The admin's credentials reach the provider only through its environment (the OS_*
// variables of the embedded engine's provider credentials, tofu's environment), as a
// tenant's spec.providerEnvFrom gives them.
func TestOpenStack_tofuOracle(t *testing.T) {
	tools := tofutest.Tofu(t)
	mirror := openstackMirror(t, tools)
	k := keystonetest.Start(t)
	var env []string
	for n, v := range k.Env() {
		env = append(env, n+"="+v)
	}
	creds := &credentials.Provider{Identity: "test", Env: k.Env()}
	cache := t.TempDir()
	warm := tools.Workspace(t, "", mirror, cache)
	warm.WriteFile(t, "main.tf.json", []byte(`{"terraform":{"required_providers":{"openstack":{"source":"terraform-provider-openstack/openstack","version":"`+OpenStackVersion+`"}}}}`))
	warm.Run(t, nil, "init", "-input=false", "-no-color")
	newChain := func(t *testing.T, prefix string) *osChain {
		c := &osChain{corpusChain: newCorpusChain(t, tools, mirror, cache, warm), k: k, prefix: prefix}
		c.ws.AddEnv(env...)
		c.creds = creds
		return c
	}

	t.Run("embedded applies", func(t *testing.T) {
		c := newChain(t, "emb")
		ctx := withCredentials(t.Context(), creds)
		for i, s := range osSteps() {
			what := fmt.Sprintf("step %d (%s)", i+1, s.about)
			start := time.Now()
			if s.behind != nil {
				s.behind(t, c)
			}
			c.writeState()
			cfg := c.writeOSConfig(s)
			pj := c.tofuPlanJSON(s.destroy)
			p, err := c.h.r.Plan(ctx, cfg, c.h.state, nil, s.destroy, nil)
			if err != nil {
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
				emb, tf := findingsJSON(t, fs), findingsJSON(t, engine.PlanFindings(&tp, prefixes))
				if emb != tf {
					t.Errorf("%s: drift findings differ\nembedded:\n%s\ntofu:\n%s", what, emb, tf)
				}
				if emb == "" {
					t.Errorf("%s: no drift found", what)
				}
				t.Logf("%s: drift findings:\n%s", what, emb)
			}
			if _, err := c.h.r.Apply(ctx, cfg, p, c.h.state, nil, c.h.persist, nil); err != nil {
				t.Fatalf("%s: embedded apply: %v", what, err)
			}
			c.writeState()
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
		// The destroy removed every object from Keystone.
		if code, _ := k.Do(t, http.MethodGet, "/projects/"+c.outside, nil); code != http.StatusNotFound {
			t.Errorf("the imported project is still there after the destroy: GET %d", code)
		}
	})

	t.Run("tofu applies", func(t *testing.T) {
		c := newChain(t, "tofu")
		ctx := withCredentials(t.Context(), creds)
		for i, s := range osSteps() {
			what := fmt.Sprintf("step %d (%s)", i+1, s.about)
			if s.behind != nil {
				s.behind(t, c)
			}
			cfg := c.writeOSConfig(s)
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

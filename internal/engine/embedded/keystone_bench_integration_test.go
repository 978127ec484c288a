//go:build integration && providers

package embedded

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/credentials"
	"github.com/lava-operator/lava/internal/platform/testutil/keystonetest"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// keystoneObjects is how many projects, users and role assignments BenchmarkKeystone50 makes
// each an iteration (150 resources and one data source).
const keystoneObjects = 50

// keystoneDoc is the Terraform JSON of n projects, n users (each with its project as default
// project) and n role assignments of the member role (a user on its project), every name
// starting with prefix; the provider's credentials come from the environment.
func keystoneDoc(tb testing.TB, n int, prefix string) string {
	projects, users, assignments := map[string]any{}, map[string]any{}, map[string]any{}
	for i := range n {
		p, u := fmt.Sprintf("p%d", i), fmt.Sprintf("u%d", i)
		projects[p] = map[string]any{"name": prefix + "-" + p, "description": "bench project"}
		users[u] = map[string]any{"name": prefix + "-" + u, "description": "bench user",
			"default_project_id": "${openstack_identity_project_v3." + p + ".id}"}
		assignments[fmt.Sprintf("a%d", i)] = map[string]any{
			"project_id": "${openstack_identity_project_v3." + p + ".id}",
			"user_id":    "${openstack_identity_user_v3." + u + ".id}",
			"role_id":    "${data.openstack_identity_role_v3.member.id}"}
	}
	return jsonDoc(tb, map[string]any{
		"terraform": map[string]any{"required_providers": map[string]any{"openstack": map[string]any{
			"source": "terraform-provider-openstack/openstack", "version": OpenStackVersion}}},
		"provider": map[string]any{"openstack": map[string]any{}},
		"data": map[string]any{"openstack_identity_role_v3": map[string]any{
			"member": map[string]any{"name": "member"}}},
		"resource": map[string]any{
			"openstack_identity_project_v3":         projects,
			"openstack_identity_user_v3":            users,
			"openstack_identity_role_assignment_v3": assignments,
		},
	})
}

// Guards of BenchmarkKeystone50, asserted in every run (-benchtime=1x in make bench-smoke).
// Keystone does most of the work of a create and of a no-op plan (every object is read back
// on both sides), so the engine cannot be many times faster than the script, and the wall-time
// ratios follow Keystone's own latency: on the 2-core machine the create measured 0.56x to 1.32x
// and the no-op plan 0.70x to 1.44x over the runs of 2026-12-07, while Keystone's
// CPU for the same 150 creates went from 19.5 to 36.4 s and the script's create alone from 38.6
// to 62.3 s; Lava's CPU stayed 6% to 9% of Keystone's (bench/README.md). So the wall-time guards
// fail only a regression that makes Lava's side twice as slow as the script's, and the steady
// guard is Lava's own CPU, at most a quarter of Keystone's.
const (
	guardKeystoneCreate = 0.5  // the script's create time / the embedded create time, at least
	guardKeystoneNoop   = 0.5  // the script's no-op plan / the embedded no-op plan, at least
	guardLavaCPUShare   = 0.25 // Lava's CPU / Keystone's CPU during the embedded create, at most
)

// cpuNames are the processes whose CPU time BenchmarkKeystone50 splits an embedded create
// into (their command names, as [proctest.CPUByName] keys them).
var cpuNames = []struct{ comm, metric string }{
	{"keystone-wsgi-p", "keystone"},
	{"postgres", "postgres"},
	{"terraform-provi", "provider"},
}

// BenchmarkKeystone50 creates 50 Keystone projects, 50 users and 50 role assignments with
// the OpenStack provider (terraform-provider-openstack/openstack 3.4.0) against a real
// Keystone on PostgreSQL (keystonetest), side by side through the shell script running tofu
// on the same JSON (tofutest.ByHandScript, credentials in its environment, providers from the
// same mirror) and the embedded engine (state in JetStream, credentials as a tenant's
// spec.providerEnvFrom gives them): the create and the no-op plan after it. Each iteration
// runs one round of each, on objects of its own names (nothing is destroyed: Keystone and its
// database are removed at the end). An untimed round of one object on each side runs first,
// so the plugin cache and the embedded engine's provider process are warm, as in a running
// operator.
//
// It reports both sides' phases in ms, the ratios (script over embedded) and where the
// embedded create's time goes: the CPU time of this process (the engine and its in-process
// NATS), of the provider process, of Keystone and of PostgreSQL, in ms per create. A ratio
// under its guard, or Lava's CPU over its share of Keystone's, fails the run.
func BenchmarkKeystone50(b *testing.B) {
	tools := tofutest.Tofu(b)
	bin := "terraform-provider-openstack/openstack/" + OpenStackVersion + "/linux_amd64/terraform-provider-openstack_v" + OpenStackVersion
	mirror := realMirror(b, tools, EnvOpenStackMirror, "tools-openstack", bin)
	// The script's tofu installs from the same merged mirror as the engine.
	tools.CLIConfig, tools.Mirror = tools.MirrorConfig(b, mirror), mirror
	k := keystonetest.Start(b)
	e := newEnvMirror(b, slog.LevelInfo, mirror)
	creds := &credentials.Provider{Identity: "bench", Env: k.Env()}
	var env []string
	for n, v := range creds.Env {
		env = append(env, n+"="+v)
	}
	slices.Sort(env)
	cache := filepath.Join(b.TempDir(), "script-plugins")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		b.Fatal(err)
	}
	kb := keystoneBench{b: b, k: k, e: e, tools: tools, creds: creds, env: env, cache: cache}
	kb.script("warm-s", 1)
	kb.embedded("warm-e", 1)

	var shCreate, shNoop, embCreate, embNoop time.Duration
	cpu := map[string]time.Duration{}
	for i := 0; b.Loop(); i++ {
		c, n := kb.script(fmt.Sprintf("s%d", i), keystoneObjects)
		shCreate, shNoop = shCreate+c, shNoop+n
		c, n, split := kb.embedded(fmt.Sprintf("e%d", i), keystoneObjects)
		embCreate, embNoop = embCreate+c, embNoop+n
		for m, d := range split {
			cpu[m] += d
		}
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / n }
	b.ReportMetric(ms(shCreate), "script-create-ms")
	b.ReportMetric(ms(shNoop), "script-noop-plan-ms")
	b.ReportMetric(ms(embCreate), "embedded-create-ms")
	b.ReportMetric(ms(embNoop), "embedded-noop-plan-ms")
	var split []string
	for _, m := range slices.Sorted(maps.Keys(cpu)) {
		b.ReportMetric(ms(cpu[m]), m+"-cpu-ms")
		split = append(split, fmt.Sprintf("%s %.0f ms", m, ms(cpu[m])))
	}
	createX := float64(shCreate) / float64(embCreate)
	noopX := float64(shNoop) / float64(embNoop)
	share := float64(cpu["lava"]) / float64(max(cpu["keystone"], 1))
	b.ReportMetric(createX, "embedded-create-x")
	b.ReportMetric(noopX, "embedded-noop-x")
	b.ReportMetric(share, "lava-keystone-cpu-ratio")
	b.Logf("script: create %.0f ms, no-op plan %.0f ms; embedded: create %.0f ms (%.2fx faster), no-op plan %.0f ms (%.2fx faster)",
		ms(shCreate), ms(shNoop), ms(embCreate), createX, ms(embNoop), noopX)
	b.Logf("CPU during the embedded create: %s (Lava %.2f of Keystone)", strings.Join(split, ", "), share)
	if createX < guardKeystoneCreate {
		b.Errorf("embedded create is %.2fx faster than the script, want >= %.2fx", createX, guardKeystoneCreate)
	}
	if noopX < guardKeystoneNoop {
		b.Errorf("embedded no-op plan is %.2fx faster than the script, want >= %.2fx", noopX, guardKeystoneNoop)
	}
	if share > guardLavaCPUShare {
		b.Errorf("Lava's CPU during the embedded create is %.2f of Keystone's, want <= %.2f", share, guardLavaCPUShare)
	}
}

// keystoneBench is BenchmarkKeystone50's two sides over one Keystone.
type keystoneBench struct {
	b     *testing.B
	k     *keystonetest.Keystone
	e     *env
	tools tofutest.Tools
	creds *credentials.Provider
	env   []string
	cache string
}

// script runs the script's create and no-op plan of n objects of each kind named prefix-*
// and checks that Keystone has them.
func (kb keystoneBench) script(prefix string, n int) (create, noop time.Duration) {
	b := kb.b
	b.Helper()
	ws := b.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "main.tf.json"), []byte(keystoneDoc(b, n, prefix)), 0o644); err != nil {
		b.Fatal(err)
	}
	create = kb.tools.ByHand(b, "create", ws, kb.cache, kb.env...)
	kb.wantProjects(prefix, n)
	return create, kb.tools.ByHand(b, "noop", ws, kb.cache, kb.env...)
}

// embedded runs the embedded engine's create (plan and apply) and no-op plan of n objects of
// each kind named prefix-* and checks that Keystone has them. split is the CPU time of the
// processes of cpuNames and of this process ("lava") during the create.
func (kb keystoneBench) embedded(prefix string, n int) (create, noop time.Duration, split map[string]time.Duration) {
	b := kb.b
	b.Helper()
	kb.e.key = state.Key{Namespace: "bench", Name: prefix}
	tg := kb.e.target(keystoneDoc(b, n, prefix))
	tg.ProviderSources = map[string]string{"openstack": "terraform-provider-openstack/openstack"}
	tg.Credentials = kb.creds
	before, selfBefore := proctest.CPUByName(b), proctest.SelfCPU(b)
	start := time.Now()
	rec, err := kb.e.eng.Plan(b.Context(), engine.PlanRequest{Target: tg})
	if err != nil {
		b.Fatalf("embedded plan: %v", err)
	}
	if _, err := kb.e.eng.Apply(b.Context(), engine.ApplyRequest{Plan: rec, Holder: "bench", Credentials: kb.creds}); err != nil {
		b.Fatalf("embedded apply: %v", err)
	}
	create = time.Since(start)
	after, selfAfter := proctest.CPUByName(b), proctest.SelfCPU(b)
	if want := (engine.Summary{Add: 3 * n}); rec.Summary != want {
		b.Fatalf("embedded planned %+v, want %+v", rec.Summary, want)
	}
	split = map[string]time.Duration{"lava": selfAfter - selfBefore}
	for _, c := range cpuNames {
		split[c.metric] = after[c.comm] - before[c.comm]
	}
	kb.wantProjects(prefix, n)
	start = time.Now()
	rec, err = kb.e.eng.Plan(b.Context(), engine.PlanRequest{Target: tg})
	if err != nil || rec.HasChanges {
		b.Fatalf("embedded no-op plan: %v (changes %v)", err, rec != nil && rec.HasChanges)
	}
	return create, time.Since(start), split
}

// wantProjects fails the benchmark unless Keystone has the first and the last of n projects
// named prefix-p0 to prefix-p(n-1).
func (kb keystoneBench) wantProjects(prefix string, n int) {
	kb.b.Helper()
	for _, i := range []int{0, n - 1} {
		name := fmt.Sprintf("%s-p%d", prefix, i)
		code, out := kb.k.Do(kb.b, http.MethodGet, "/projects?name="+url.QueryEscape(name), nil)
		var list struct {
			Projects []struct {
				Name string `json:"name"`
			} `json:"projects"`
		}
		if code != http.StatusOK {
			kb.b.Fatalf("keystone: GET project %s: %d: %s", name, code, out)
		}
		if err := json.Unmarshal(out, &list); err != nil {
			kb.b.Fatalf("keystone: GET project %s: %v: %s", name, err, out)
		}
		if len(list.Projects) != 1 || list.Projects[0].Name != name {
			kb.b.Fatalf("keystone: project %s not found after the create: %s", name, out)
		}
	}
}

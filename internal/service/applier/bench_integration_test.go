//go:build integration

package applier_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// twentyResources renders 10 local_file, 5 testkit_file and 5 terraform_data under dir (the
// same configuration as engine/tofu's BenchmarkCreate20).
func twentyResources(dir string) string {
	res := map[string]map[string]any{"local_file": {}, "testkit_file": {}, "terraform_data": {}}
	for i := range 10 {
		res["local_file"][fmt.Sprintf("f%d", i)] = map[string]any{"filename": filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), "content": fmt.Sprintf("file %d\n", i)}
	}
	for i := range 5 {
		res["testkit_file"][fmt.Sprintf("k%d", i)] = map[string]any{"filename": filepath.Join(dir, fmt.Sprintf("k%d.txt", i)), "content": fmt.Sprintf("kit %d\n", i)}
		res["terraform_data"][fmt.Sprintf("d%d", i)] = map[string]any{"input": fmt.Sprintf("d%d", i)}
	}
	b, _ := json.MarshalIndent(map[string]any{"resource": res}, "", "  ")
	return string(b)
}

// byHand is what an operator would type: init, plan -out, show -json, apply the plan (local
// state, the same CLI config, a plugin cache of its own).
const byHand = `set -euo pipefail
cd "$1"
tofu init -input=false -no-color >/dev/null
tofu plan -input=false -no-color -out=plan.bin >/dev/null
tofu show -json plan.bin >/dev/null
tofu apply -input=false -no-color plan.bin >/dev/null
`

// BenchmarkApplierCreate20 creates the same 20-resource Terraform JSON through the applier
// with the tofu engine (Synthesized published, Planned and Applied awaited: events, lease,
// watermark, the JetStream state backend and artifact store included) and through a shell
// script running the same tofu commands by hand, side by side in each iteration, after one
// untimed warm-up of each (plugin caches filled). It reports both and their ratio (target
// <= 1.2).
func BenchmarkApplierCreate20(b *testing.B) {
	h := newHarness(b)
	h.startApplier(applierOpts{})
	cache := filepath.Join(b.TempDir(), "shell-plugins")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		b.Fatal(err)
	}
	testkit := &lavav1.ProviderRequirement{Name: "testkit", Source: "example/testkit"}
	n := 0
	throughApplier := func() time.Duration {
		n++
		name := fmt.Sprintf("bench-%d", n)
		dir := b.TempDir()
		start := time.Now()
		h.publishSynthesized("bench", name, 1, twentyResources(dir), lavav1.Engine_ENGINE_TOFU, testkit)
		applied := await(h, "bench", name, 5*time.Minute, gen[*lavav1.Applied](1))
		d := time.Since(start)
		if applied.GetSummary().GetAdd() != 20 {
			b.Fatalf("applied %v", applied.GetSummary())
		}
		return d
	}
	byShell := func() time.Duration {
		ws, files := b.TempDir(), b.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "main.tf.json"), []byte(twentyResources(files)), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "providers.tf.json"),
			[]byte(`{"terraform":{"required_providers":{"local":{"source":"hashicorp/local"},"testkit":{"source":"example/testkit"}}}}`), 0o644); err != nil {
			b.Fatal(err)
		}
		cmd := exec.CommandContext(b.Context(), "bash", "-c", byHand, "byhand", ws)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(h.tools.Bin)+":"+os.Getenv("PATH"),
			"TF_CLI_CONFIG_FILE="+h.tools.CLIConfig, "TF_PLUGIN_CACHE_DIR="+cache, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("by hand: %v\n%s", err, out)
		}
		d := time.Since(start)
		if _, err := os.Stat(filepath.Join(files, "k4.txt")); err != nil {
			b.Fatalf("by hand created nothing: %v", err)
		}
		return d
	}
	warmApplier, warmShell := throughApplier(), byShell()
	b.Logf("warm-up (cold caches): applier %.3fs, by hand %.3fs", warmApplier.Seconds(), warmShell.Seconds())
	var applierTotal, shellTotal time.Duration
	iters := 0
	for b.Loop() {
		applierTotal += throughApplier()
		shellTotal += byShell()
		iters++
	}
	a, s := applierTotal.Seconds()/float64(iters), shellTotal.Seconds()/float64(iters)
	b.ReportMetric(a, "applier-s/op")
	b.ReportMetric(s, "shell-s/op")
	b.ReportMetric(a/s, "ratio")
	b.Logf("create of 20 resources over %d iteration(s): applier (tofu engine) %.3fs, by hand %.3fs, ratio %.2f (target <= 1.2)", iters, a, s, a/s)
}

//go:build integration

package tofu_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

// twentyResources renders 10 local_file, 5 testkit_file and 5 terraform_data under dir.
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
// state, the same CLI config and plugin cache).
const byHand = `set -euo pipefail
cd "$1"
tofu init -input=false -no-color >/dev/null
tofu plan -input=false -no-color -out=plan.bin >/dev/null
tofu show -json plan.bin >/dev/null
tofu apply -input=false -no-color plan.bin >/dev/null
`

// BenchmarkCreate20 creates the same 20-resource Terraform JSON through the engine (plan, then
// apply of the recorded plan; state in JetStream through the http backend) and through a shell
// script running the same tofu commands by hand, side by side in each iteration, and reports
// both and their ratio (target <= 1.2).
func BenchmarkCreate20(b *testing.B) {
	h := newHarness(b, harnessOpts{})
	cache := filepath.Join(b.TempDir(), "shell-plugins")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		b.Fatal(err)
	}
	var engineTotal, shellTotal time.Duration
	for i := 0; b.Loop(); i++ {
		// Engine.
		dir := b.TempDir()
		h.key = state.Key{Namespace: "bench", Name: fmt.Sprintf("r%d", i)}
		start := time.Now()
		p, err := h.eng.Plan(b.Context(), engine.PlanRequest{Target: h.target(twentyResources(dir))})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.eng.Apply(b.Context(), engine.ApplyRequest{Plan: p}); err != nil {
			b.Fatal(err)
		}
		engineTotal += time.Since(start)
		if p.Summary.Add != 20 {
			b.Fatalf("engine planned %+v", p.Summary)
		}

		// By hand.
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
		start = time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("by hand: %v\n%s", err, out)
		}
		shellTotal += time.Since(start)
		if _, err := os.Stat(filepath.Join(files, "k4.txt")); err != nil {
			b.Fatalf("by hand created nothing: %v", err)
		}
	}
	n := float64(b.N)
	eng, sh := engineTotal.Seconds()/n, shellTotal.Seconds()/n
	b.ReportMetric(eng, "engine-s/op")
	b.ReportMetric(sh, "shell-s/op")
	b.ReportMetric(eng/sh, "ratio")
	b.Logf("create of 20 resources: engine %.3fs, by hand %.3fs, ratio %.2f (target <= 1.2)", eng, sh, eng/sh)
}

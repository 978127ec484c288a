//go:build integration

package drift_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
	"github.com/lava-operator/lava/internal/service/drift"
)

// twentyDoc renders 10 terraform_data and 10 local_file (each file reading a terraform_data's
// id) under dir.
func twentyDoc(dir string) []byte {
	data, files := map[string]any{}, map[string]any{}
	for i := range 10 {
		data[fmt.Sprintf("d%d", i)] = map[string]any{"input": fmt.Sprintf("d%d", i)}
		files[fmt.Sprintf("f%d", i)] = map[string]any{"filename": filepath.Join(dir, fmt.Sprintf("f%d.txt", i)),
			"content": fmt.Sprintf("file %d after ${terraform_data.d%d.id}\n", i, i)}
	}
	b, _ := json.Marshal(map[string]any{"resource": map[string]any{"terraform_data": data, "local_file": files}})
	return b
}

const (
	// scaleObjects is how many applied objects of 20 resources BenchmarkScaleDrift scans.
	scaleObjects = 1000
	// scaleScriptSample is how many of them the script checks by hand (tofu plan
	// -refresh-only each): its cost per object is steady, and 1,000 runs would take minutes.
	scaleScriptSample = 10
	// guardScanCPU bounds the drift service's CPU per scan over a `tofu plan -refresh-only`'s
	// (both with their providers), asserted in every run.
	guardScanCPU = 0.15
)

// BenchmarkScaleDrift is drift at scale: 1,000 objects of 20 resources (10 terraform_data, 10
// local_file), applied by the embedded engine, all due at once and scanned by one drift service
// (its default work lease held around each scan) over real JetStream until each has its
// DriftScanned; against the same check by hand, `tofu plan -refresh-only` in each object's own
// directory (local state, the tool directory's CLI config and a plugin cache), on a sample. It
// reports scans per second sustained, the seconds for the 1,000, and the CPU per scan of the
// test process and its children (the service, the engine, hashicorp/local, nats-server) against
// the CPU per refresh-only plan of the script (bash, tofu, hashicorp/local); every run asserts
// that a scan costs at most guardScanCPU of the script's CPU. A clean scan writes nothing to the
// API server: the drift service only reads from it (an object's provider credentials), and the
// watcher folds a clean scan of a
// clean resource into no status change (TestReduce_cleanScanOfCleanResourceChangesNothing,
// internal/pipeline, keeps that).
func BenchmarkScaleDrift(b *testing.B) {
	tools := tofutest.Tofu(b)
	w := newWorldWith(b, engines.Options{ProviderDir: tools.Mirror})
	files := b.TempDir()
	entries := make([]*drift.Entry, 0, scaleObjects)
	for i := range scaleObjects {
		name := fmt.Sprintf("r%04d", i)
		dir := filepath.Join(files, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		ev := w.apply("bench", name, twentyDoc(dir))
		entries = append(entries, &drift.Entry{Namespace: "bench", Name: name, UID: "uid-" + name, Generation: 1,
			Engine: string(v1alpha1.EngineEmbedded), PlanID: ev.GetPlanId(), TerraformJSONDigest: ev.GetTerraformJsonDigest(),
			ArtifactDigest: ev.GetArtifactDigest(), Interval: time.Hour})
	}
	// The script's objects, created untimed, so only the refresh-only plans are measured.
	cache := filepath.Join(b.TempDir(), "script-plugins")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		b.Fatal(err)
	}
	var workspaces []string
	for i := range scaleScriptSample {
		ws, dir := b.TempDir(), b.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "main.tf.json"), twentyDoc(dir), 0o644); err != nil {
			b.Fatal(err)
		}
		tools.ByHand(b, "create", ws, cache)
		if i == 0 {
			tools.ByHand(b, "refresh", ws, cache) // warm, untimed
		}
		workspaces = append(workspaces, ws)
	}
	scanAll(b, w, entries, "bench-warm", true) // the provider processes started, untimed

	var wall, cpu, scriptCPU, scriptWall time.Duration
	for i := 0; b.Loop(); i++ {
		before := proctest.TreeCPU(b)
		wall += scanAll(b, w, entries, fmt.Sprintf("bench-%d", i), true)
		cpu += proctest.TreeCPU(b) - before
		for _, ws := range workspaces {
			before := proctest.TreeCPU(b)
			scriptWall += tools.ByHand(b, "refresh", ws, cache)
			scriptCPU += proctest.TreeCPU(b) - before
		}
	}
	n := float64(b.N)
	scanCPU := cpu.Seconds() * 1000 / n / scaleObjects
	byHandCPU := scriptCPU.Seconds() * 1000 / n / scaleScriptSample
	byHandWall := scriptWall.Seconds() * 1000 / n / scaleScriptSample
	rate := scaleObjects * n / wall.Seconds()
	b.ReportMetric(rate, "scans/s")
	b.ReportMetric(wall.Seconds()/n, "s/1000scans")
	b.ReportMetric(scanCPU, "cpu-ms/scan")
	b.ReportMetric(byHandCPU, "script-cpu-ms/object")
	b.Logf("%d objects of 20 resources: %.0f scans/s sustained (%.1f s for all), %.2f ms of CPU per scan; "+
		"tofu plan -refresh-only by hand: %.0f ms wall, %.0f ms of CPU per object; a scan costs %.3f of it (guard <= %.2f)",
		scaleObjects, rate, wall.Seconds()/n, scanCPU, byHandWall, byHandCPU, scanCPU/byHandCPU, guardScanCPU)
	if scanCPU/byHandCPU > guardScanCPU {
		b.Errorf("a drift scan costs %.2f ms of CPU, %.2f of a refresh-only plan by hand (%.0f ms); want at most %.2f",
			scanCPU, scanCPU/byHandCPU, byHandCPU, guardScanCPU)
	}
}

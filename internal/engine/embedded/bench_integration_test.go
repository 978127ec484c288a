//go:build integration

package embedded

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

// twenty renders 10 terraform_data and 10 local_file resources under dir; version changes
// every input (terraform_data updates in place, local_file's content forces replacement).
func twenty(b testing.TB, dir string, version int) string {
	res := map[string]map[string]any{"terraform_data": {}, "local_file": {}}
	for i := range 10 {
		res["terraform_data"][fmt.Sprintf("d%d", i)] = map[string]any{"input": fmt.Sprintf("d%d v%d", i, version)}
		res["local_file"][fmt.Sprintf("f%d", i)] = map[string]any{
			"filename": filepath.Join(dir, fmt.Sprintf("f%d.txt", i)),
			"content":  fmt.Sprintf("file %d v%d after ${terraform_data.d%d.id}\n", i, version, i),
		}
	}
	return jsonDoc(b, map[string]any{"resource": res})
}

// phases runs create, no-op plan, update and destroy of the 20-resource architecture with
// eng and returns each phase's wall time.
func phases(b *testing.B, e *env, eng engine.Engine, key state.Key) [4]time.Duration {
	b.Helper()
	e.key = key
	dir := b.TempDir()
	var d [4]time.Duration
	planApply := func(doc string, want engine.Summary) time.Duration {
		start := time.Now()
		rec, err := eng.Plan(b.Context(), engine.PlanRequest{Target: e.target(doc)})
		if err != nil {
			b.Fatalf("%s plan: %v", eng.Name(), err)
		}
		if _, err := eng.Apply(b.Context(), engine.ApplyRequest{Plan: rec, Holder: "bench"}); err != nil {
			b.Fatalf("%s apply: %v", eng.Name(), err)
		}
		if rec.Summary != want {
			b.Fatalf("%s planned %+v, want %+v", eng.Name(), rec.Summary, want)
		}
		return time.Since(start)
	}
	d[0] = planApply(twenty(b, dir, 1), engine.Summary{Add: 20})
	start := time.Now()
	rec, err := eng.Plan(b.Context(), engine.PlanRequest{Target: e.target(twenty(b, dir, 1))})
	if err != nil || rec.HasChanges {
		b.Fatalf("%s no-op plan: %v (changes %v)", eng.Name(), err, rec != nil && rec.HasChanges)
	}
	d[1] = time.Since(start)
	d[2] = planApply(twenty(b, dir, 2), engine.Summary{Add: 10, Change: 10, Destroy: 10})
	start = time.Now()
	res, err := eng.Destroy(b.Context(), engine.DestroyRequest{Target: e.target(twenty(b, dir, 2))})
	if err != nil || res.Destroyed != 20 {
		b.Fatalf("%s destroy: %v (%+v)", eng.Name(), err, res)
	}
	d[3] = time.Since(start)
	return d
}

// BenchmarkEngines20 runs the same 20-resource architecture (10 terraform_data, 10
// local_file) through the embedded engine and the tofu engine, side by side in every
// iteration: create, no-op plan, update (10 in place, 10 replacements), destroy; state in
// JetStream for both. It reports each phase per engine and the end-to-end speed-up (target:
// embedded at least 10 times faster).
func BenchmarkEngines20(b *testing.B) {
	e := newEnv(b)
	tf := e.tofuEngine()
	names := [4]string{"create", "noop-plan", "update", "destroy"}
	var emb, tof [4]time.Duration
	for i := 0; b.Loop(); i++ {
		de := phases(b, e, e.eng, state.Key{Namespace: "bench", Name: fmt.Sprintf("embedded-%d", i)})
		dt := phases(b, e, tf, state.Key{Namespace: "bench", Name: fmt.Sprintf("tofu-%d", i)})
		for p := range 4 {
			emb[p] += de[p]
			tof[p] += dt[p]
		}
	}
	n := float64(b.N)
	var embTotal, tofTotal float64
	for p := range 4 {
		es, ts := emb[p].Seconds()/n, tof[p].Seconds()/n
		embTotal += es
		tofTotal += ts
		b.ReportMetric(es*1000, "embedded-"+names[p]+"-ms")
		b.ReportMetric(ts*1000, "tofu-"+names[p]+"-ms")
		b.Logf("%-10s embedded %8.1f ms   tofu %8.1f ms   x%.1f", names[p], es*1000, ts*1000, ts/es)
	}
	b.ReportMetric(tofTotal/embTotal, "speedup")
	b.Logf("end to end embedded %.3fs, tofu %.3fs: embedded is %.1fx faster (target >= 10x)", embTotal, tofTotal, tofTotal/embTotal)
}

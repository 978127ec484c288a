//go:build integration

package embedded

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

func BenchmarkZZNoop(b *testing.B) {
	e := newEnv(b)
	e.key = state.Key{Namespace: "bench", Name: "noop"}
	dir := b.TempDir()
	if _, err := e.planApply(twenty(b, dir, 1)); err != nil {
		b.Fatal(err)
	}
	tg := e.target(twenty(b, dir, 1))
	var tot, tcfg, tst, trun, tput time.Duration
	ctx := b.Context()
	for range 200 {
		t0 := time.Now()
		cfg, err := e.eng.loadConfig(ctx, tg.RenderedDigest)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		prior, _, _, err := e.eng.loadStateIntents(ctx, tg.Key)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		p, err := e.eng.runner.Plan(withProviderLock(ctx, e.eng.opts.Store, tg.Key), cfg, prior, tg.ProviderSources, false, map[string]bool{})
		if err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		body, err := marshalPlan(p, tg.RenderedDigest, prior.Serial, prior.Lineage)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.eng.opts.Artifacts.Put(ctx, bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		tcfg += t1.Sub(t0)
		tst += t2.Sub(t1)
		trun += t3.Sub(t2)
		tput += t4.Sub(t3)
	}
	b.Logf("per plan: config %v state %v runner.Plan %v marshal+put %v", tcfg/200, tst/200, trun/200, tput/200)
	for b.Loop() {
		start := time.Now()
		rec, err := e.eng.Plan(b.Context(), engine.PlanRequest{Target: tg})
		if err != nil || rec.HasChanges {
			b.Fatal(err)
		}
		tot += time.Since(start)
	}
	b.ReportMetric(tot.Seconds()*1000/float64(b.N), "ms/plan")
}

func BenchmarkZZCreate(b *testing.B) {
	e := newEnv(b)
	var tp, ta time.Duration
	i := 0
	for b.Loop() {
		i++
		e.key = state.Key{Namespace: "bench", Name: fmt.Sprintf("c%d", i)}
		dir := b.TempDir()
		tg := e.target(twenty(b, dir, 1))
		t0 := time.Now()
		rec, err := e.eng.Plan(b.Context(), engine.PlanRequest{Target: tg})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := e.eng.Apply(b.Context(), engine.ApplyRequest{Plan: rec, Holder: "bench"}); err != nil {
			b.Fatal(err)
		}
		tp += t1.Sub(t0)
		ta += time.Since(t1)
	}
	b.ReportMetric(tp.Seconds()*1000/float64(b.N), "plan-ms")
	b.ReportMetric(ta.Seconds()*1000/float64(b.N), "apply-ms")
}

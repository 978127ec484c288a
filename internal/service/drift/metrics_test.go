package drift_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/service/drift"
)

func TestMetrics_lint(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	reg := prometheus.NewRegistry()
	if _, err := drift.New(t.Context(), drift.Config{JS: w.js, Engines: map[string]engine.Engine{string(v1alpha1.EngineEmbedded): w.engines[string(v1alpha1.EngineEmbedded)]},
		Holder: "lint", Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	if n, err := testutil.GatherAndCount(reg, "lava_drift_scans_total"); err != nil || n != 4 {
		t.Errorf("lava_drift_scans_total series: %d (%v), want one per result", n, err)
	}
}

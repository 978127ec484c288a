package viggy_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/viggy"
)

func TestMetrics_lint(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	if err := bus.EnsureTopology(t.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := viggy.New(t.Context(), viggy.Config{JS: srv.JetStream(), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	if _, err := viggy.New(t.Context(), viggy.Config{JS: srv.JetStream(), Registerer: reg}); err == nil {
		t.Error("registering the metrics twice on one registry did not fail")
	}
}

package anomaly

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics_lint(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.events.WithLabelValues(eventFailed, "anomaly").Inc()
	m.sightings.WithLabelValues(string(KindApplyFailure), string(SeverityCritical), "opened").Inc()
	m.deliveries.WithLabelValues(SinkBus, "ok").Inc()
	m.retries.WithLabelValues("ops").Inc()
	m.deliveryTimes.WithLabelValues(SinkBus).Observe(0.01)
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n != 5 {
		t.Fatalf("gathered %d series, %v; want 5", n, err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering twice succeeded")
	}
}

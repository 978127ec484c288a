package attest_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/service/attest"
)

type registry struct {
	reg     *prometheus.Registry
	metrics *attest.Metrics
}

func newRegistry(t testing.TB) registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := attest.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return registry{reg: reg, metrics: m}
}

// counter sums every series of a counter family.
func (r registry) counter(t testing.TB, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestMetrics: the metrics pass promlint, count appends by kind, duplicates and
// verifications, and cannot be registered twice on one registry.
func TestMetrics(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	r := newRegistry(t)
	store := attest.NewStore(srv.JetStream(), attest.StoreOptions{Metrics: r.metrics})
	for i := range 3 {
		if _, err := store.Append(t.Context(), request("m", "x", lavav1.Phase_PHASE_PENDING, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Append(t.Context(), request("m", "x", lavav1.Phase_PHASE_PENDING, 0)); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP lava_attest_duplicate_events_total Events that were already recorded in their chain and were not appended again.
# TYPE lava_attest_duplicate_events_total counter
lava_attest_duplicate_events_total 1
# HELP lava_attest_receipts_appended_total Receipts appended to resource chains, by receipt kind.
# TYPE lava_attest_receipts_appended_total counter
lava_attest_receipts_appended_total{kind="lava.outcome"} 3
`
	if err := testutil.GatherAndCompare(r.reg, strings.NewReader(want),
		"lava_attest_receipts_appended_total", "lava_attest_duplicate_events_total"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(r.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if _, err := attest.NewMetrics(r.reg); err == nil {
		t.Fatal("registering the metrics twice succeeded")
	}
}

package viggy

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

type metrics struct {
	passes   *prometheus.CounterVec
	actions  *prometheus.CounterVec
	retries  *prometheus.CounterVec
	duration prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "lava", Subsystem: "viggy", Name: "passes_total",
			Help: "Viggy passes by final phase (applied, drifted, reconverging, failed)."}, []string{"final_phase"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "lava", Subsystem: "viggy", Name: "actions_total",
			Help: "Act beats by remediation action (NoOp, Alert, AutoCorrect, RequireApproval, Escalate)."}, []string{"action"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "lava", Subsystem: "viggy", Name: "retries_total",
			Help: "Retries of failed stages by result (scheduled, published, stalled)."}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "lava", Subsystem: "viggy", Name: "pass_duration_seconds",
			Help: "Duration of one viggy pass (seven beats).", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.passes, m.actions, m.retries, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("viggy: register metrics: %w", err)
		}
	}
	return m, nil
}

func phaseLabel(p lavav1.Phase) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "PHASE_"))
}

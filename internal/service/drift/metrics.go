package drift

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Scan results (label result of lava_drift_scans_total).
const (
	resultClean     = "clean"
	resultDrifted   = "drifted"
	resultError     = "error"
	resultPostponed = "postponed"
)

type metrics struct {
	scans     *prometheus.CounterVec
	findings  *prometheus.CounterVec
	duration  prometheus.Histogram
	scheduled prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "lava", Subsystem: "drift", Name: "scans_total",
			Help: "Drift scans by result (clean, drifted, error, postponed)."}, []string{"result"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "lava", Subsystem: "drift", Name: "findings_total",
			Help: "Drift findings reported, by severity."}, []string{"severity"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "lava", Subsystem: "drift", Name: "scan_duration_seconds",
			Help: "Duration of one drift scan, claim to publish.", Buckets: prometheus.ExponentialBuckets(0.005, 4, 9)}),
		scheduled: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "lava", Subsystem: "drift", Name: "scheduled_resources",
			Help: "Resources in lava-drift-schedule as this replica sees them."}),
	}
	for _, r := range []string{resultClean, resultDrifted, resultError, resultPostponed} {
		m.scans.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.scans, m.findings, m.duration, m.scheduled} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("drift: register metrics: %w", err)
		}
	}
	return m, nil
}

package attest

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lava-operator/lava/internal/readmodel"
)

// Values of the "result" label of lava_attest_verifications_total.
const (
	VerifyResultOK     = "ok"
	VerifyResultFailed = "failed"
)

// Metrics are attest's Prometheus metrics; a nil *Metrics records nothing. Labels are closed
// sets (kind, result), never a resource.
type Metrics struct {
	receipts       *prometheus.CounterVec
	conflicts      prometheus.Counter
	duplicates     prometheus.Counter
	appendDuration prometheus.Histogram
	verifications  *prometheus.CounterVec
	verifyFailures prometheus.Counter
	foreignMsgs    prometheus.Counter
}

// NewMetrics creates attest's metrics and registers them on reg:
//
//   - lava_attest_receipts_appended_total{kind}: receipts appended, kind "lava.outcome" or
//     "lava.anomaly";
//   - lava_attest_append_conflicts_total: appends that lost the chain's tail to another
//     appender and were retried;
//   - lava_attest_duplicate_events_total: events found already recorded (redeliveries);
//   - lava_attest_append_duration_seconds: time from reading the tail to the stored receipt;
//   - lava_attest_verifications_total{result}: chain verifications, result "ok" or "failed";
//   - lava_attest_verify_failures_total: failures found by those verifications;
//   - lava_attest_foreign_messages_total: messages on receipt subjects that attest did not
//     append, skipped when a chain's tail was read (each is also reported as an anomaly).
//
// It fails if reg already holds metrics of these names.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		receipts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "attest", Name: "receipts_appended_total",
			Help: "Receipts appended to resource chains, by receipt kind.",
		}, []string{"kind"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "attest", Name: "append_conflicts_total",
			Help: "Appends that found the chain tail moved by another appender and were retried.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "attest", Name: "duplicate_events_total",
			Help: "Events that were already recorded in their chain and were not appended again.",
		}),
		appendDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "lava", Subsystem: "attest", Name: "append_duration_seconds",
			Help:    "Time to append one receipt, from reading the tail to the stored receipt.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "attest", Name: "verifications_total",
			Help: "Chain verifications served, by result (ok, failed).",
		}, []string{"result"}),
		verifyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "attest", Name: "verify_failures_total",
			Help: "Violations found by chain verifications.",
		}),
		foreignMsgs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "attest", Name: "foreign_messages_total",
			Help: "Messages on receipt subjects that attest did not append, skipped when a chain's tail was read.",
		}),
	}
	for _, c := range []prometheus.Collector{m.receipts, m.conflicts, m.duplicates, m.appendDuration, m.verifications, m.verifyFailures, m.foreignMsgs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("attest: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) appended(kind string, d time.Duration) {
	if m != nil {
		m.receipts.WithLabelValues(kind).Inc()
		m.appendDuration.Observe(d.Seconds())
	}
}

func (m *Metrics) conflict() {
	if m != nil {
		m.conflicts.Inc()
	}
}

func (m *Metrics) foreign() {
	if m != nil {
		m.foreignMsgs.Inc()
	}
}

func (m *Metrics) duplicate() {
	if m != nil {
		m.duplicates.Inc()
	}
}

func (m *Metrics) verified(res readmodel.Result) {
	if m != nil {
		result := VerifyResultOK
		if !res.OK() {
			result = VerifyResultFailed
		}
		m.verifications.WithLabelValues(result).Inc()
		m.verifyFailures.Add(float64(len(res.Failures)))
	}
}

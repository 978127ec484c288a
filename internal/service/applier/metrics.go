package applier

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Operations, the values of the "operation" label.
const (
	OpPlan    = "plan"
	OpApply   = "apply"
	OpDestroy = "destroy"
)

// Results, the values of the "result" label.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

type metrics struct {
	ops       *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	contended prometheus.Counter
	awaiting  prometheus.Counter
	collected prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "lava", Subsystem: "applier", Name: "operations_total",
			Help: "Engine operations by operation (plan, apply, destroy) and result (success, failure)."}, []string{"operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "lava", Subsystem: "applier", Name: "operation_duration_seconds",
			Help: "Engine operation run time.", Buckets: prometheus.ExponentialBuckets(0.05, 2.5, 10)}, []string{"operation"}),
		contended: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lava", Subsystem: "applier", Name: "lease_contended_total",
			Help: "Messages naked because another replica held the resource's lease."}),
		awaiting: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lava", Subsystem: "applier", Name: "plans_held_total",
			Help: "Plans held for approval (approvePlan manual or another plan id)."}),
		collected: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lava", Subsystem: "applier", Name: "artifacts_collected_total",
			Help: "Superseded artifacts deleted from lava-artifacts (old plans, renders and state bodies)."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.ops, m.duration, m.contended, m.awaiting, m.collected} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("applier: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

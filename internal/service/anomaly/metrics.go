package anomaly

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the "event" label of lava_anomaly_events_total.
const (
	eventFailed       = "failed"
	eventDriftScanned = "drift_scanned"
	eventPhaseChanged = "phase_changed"
	eventTickReported = "tick_reported"
	eventDetected     = "anomaly_detected"
	eventOther        = "other"
)

// Metrics are the anomaly service's Prometheus metrics. Labels are closed sets: event, result,
// kind (the nine kinds), severity, and sink (the configured sink names).
type Metrics struct {
	events        *prometheus.CounterVec
	sightings     *prometheus.CounterVec
	deliveries    *prometheus.CounterVec
	retries       *prometheus.CounterVec
	deliveryTimes *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them on reg:
//
//   - lava_anomaly_events_total{event,result}: consumed events by type and outcome
//     (result "anomaly": it is one; "ignored": it is none; "own": an anomaly this service
//     published itself);
//   - lava_anomaly_sightings_total{kind,severity,result}: anomalies by de-duplication outcome
//     (result "opened": routed as a new window; "repeated": counted in an open window;
//     "redelivered");
//   - lava_anomaly_deliveries_total{sink,result}: deliveries by sink and result ("ok",
//     "failed": will be retried by redelivery; "permanent": given up);
//   - lava_anomaly_delivery_retries_total{sink}: HTTP attempts retried within a delivery;
//   - lava_anomaly_delivery_duration_seconds{sink}: time of one delivery, retries included.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "anomaly", Name: "events_total",
			Help: "Consumed events by type and outcome (anomaly, ignored, own).",
		}, []string{"event", "result"}),
		sightings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "anomaly", Name: "sightings_total",
			Help: "Anomalies by kind, severity and de-duplication outcome (opened, repeated, redelivered).",
		}, []string{"kind", "severity", "result"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "anomaly", Name: "deliveries_total",
			Help: "Anomaly deliveries by sink and result (ok, failed, permanent).",
		}, []string{"sink", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "anomaly", Name: "delivery_retries_total",
			Help: "HTTP attempts retried within one delivery, by sink.",
		}, []string{"sink"}),
		deliveryTimes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "lava", Subsystem: "anomaly", Name: "delivery_duration_seconds",
			Help:    "Time of one delivery to a sink, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"sink"}),
	}
	for _, c := range []prometheus.Collector{m.events, m.sightings, m.deliveries, m.retries, m.deliveryTimes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("anomaly: register metrics: %w", err)
		}
	}
	return m, nil
}

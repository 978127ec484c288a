package bus

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of a consumed message, the values of the "result" label of
// lava_bus_messages_total.
const (
	ResultAck               = "ack"
	ResultNak               = "nak"
	ResultDrained           = "drained"
	ResultTermPermanent     = "term_permanent"
	ResultTermUndecodable   = "term_undecodable"
	ResultTermMaxDeliveries = "term_max_deliveries"
	// ResultTermSubjectMismatch: terminated because the payload names another resource than
	// its subject ([PoisonSubjectMismatch]).
	ResultTermSubjectMismatch = "term_subject_mismatch"
	// ResultTermHandlerTimeout: terminated because its handler ran past its deadline and
	// grace without returning ([PoisonHandlerTimeout]).
	ResultTermHandlerTimeout = "term_handler_timeout"
	// ResultMaxDeliveriesExpired: the last allowed delivery expired unacked (reported from
	// the server's advisory).
	ResultMaxDeliveriesExpired = "max_deliveries_expired"
	// ResultSuperseded: acked unhandled, replaced while it waited for a worker by a later
	// message of its subject ([ConsumeOptions].Coalesce).
	ResultSuperseded = "superseded"
)

// Metrics are the bus's Prometheus metrics. One Metrics may be shared by every consumer and
// lease helper of a process; a nil *Metrics records nothing. Labels are closed sets: stream,
// consumer (a service name) and result, never a resource or subject.
type Metrics struct {
	messages        *prometheus.CounterVec
	handlerDuration *prometheus.HistogramVec
	leaseAcquired   prometheus.Counter
	leaseContended  prometheus.Counter
	leaseLost       prometheus.Counter
	leaseReleased   prometheus.Counter
	leasesHeld      prometheus.Gauge
	staleDropped    prometheus.Counter
	pending         *prometheus.GaugeVec
}

// NewMetrics creates the bus metrics and registers them on reg:
//
//   - lava_bus_messages_total{stream,consumer,result}: consumed messages by outcome (the
//     Result constants);
//   - lava_bus_handler_duration_seconds{stream,consumer}: handler run time;
//   - lava_bus_lease_acquired_total, lava_bus_lease_contended_total (an acquire that found the
//     lease held by another holder), lava_bus_lease_lost_total (a renewal that found the lease
//     gone or taken), lava_bus_lease_released_total, and the gauge lava_bus_leases_held;
//   - lava_bus_watermark_stale_total: events older than the resource's watermark;
//   - lava_bus_consumer_pending{stream,consumer}: the consumer's lag, the stream's messages
//     not yet delivered to it, as of the last delivery (the message metadata's num_pending).
//
// It fails if reg already holds metrics of these names.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "bus", Name: "messages_total",
			Help: "Consumed messages by stream, consumer and result (ack, nak, drained, term_*).",
		}, []string{"stream", "consumer", "result"}),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "lava", Subsystem: "bus", Name: "handler_duration_seconds",
			Help:    "Time a handler took for one message.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"stream", "consumer"}),
		leaseAcquired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "bus", Name: "lease_acquired_total",
			Help: "Per-resource leases acquired.",
		}),
		leaseContended: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "bus", Name: "lease_contended_total",
			Help: "Lease acquisitions refused because another holder held the lease.",
		}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "bus", Name: "lease_lost_total",
			Help: "Leases found expired or taken over at renewal or release.",
		}),
		leaseReleased: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "bus", Name: "lease_released_total",
			Help: "Leases released by their holder.",
		}),
		leasesHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "lava", Subsystem: "bus", Name: "leases_held",
			Help: "Leases this process holds now.",
		}),
		staleDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lava", Subsystem: "bus", Name: "watermark_stale_total",
			Help: "Events older than the newest generation seen for their resource.",
		}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "lava", Subsystem: "bus", Name: "consumer_pending",
			Help: "Messages of the stream not yet delivered to the consumer, as of its last delivery.",
		}, []string{"stream", "consumer"}),
	}
	for _, c := range []prometheus.Collector{m.messages, m.handlerDuration, m.leaseAcquired, m.leaseContended,
		m.leaseLost, m.leaseReleased, m.leasesHeld, m.staleDropped, m.pending} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("bus: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) message(stream, consumer, result string) {
	if m != nil {
		m.messages.WithLabelValues(stream, consumer, result).Inc()
	}
}

func (m *Metrics) lag(stream, consumer string, pending uint64) {
	if m != nil {
		m.pending.WithLabelValues(stream, consumer).Set(float64(pending))
	}
}

func (m *Metrics) handled(stream, consumer string, seconds float64) {
	if m != nil {
		m.handlerDuration.WithLabelValues(stream, consumer).Observe(seconds)
	}
}

func (m *Metrics) inc(c func(*Metrics) prometheus.Counter) {
	if m != nil {
		c(m).Inc()
	}
}

func (m *Metrics) held(delta float64) {
	if m != nil {
		m.leasesHeld.Add(delta)
	}
}

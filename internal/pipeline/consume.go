package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// Consumer is the one way a Lava service consumes the bus: its durable consumer on one or more
// streams, with the bus.ConsumeOptions every service shares built in one place ([Consumer.Options]):
// poison messages reported as anomalies ([PoisonReporter]), the service's logger and bus
// metrics, and the concurrency, drain timeout and redelivery schedule of the service's own
// flags; and, for a service whose every event is about one resource, the envelope guard
// ([Consumer.Resource]). A service fills it from its configuration (the JetStream context,
// logger and bus metrics of its svc.Base) and runs [Consumer.Consume] from its Run.
type Consumer struct {
	// JS is the service's JetStream context. Required.
	JS jetstream.JetStream
	// Service is the service's name (a bus.Service* name): the durable consumer's name unless
	// Durable is set, and the service the poison anomalies name. Required.
	Service string
	// Durable names the durable consumer when it is not Service (the watcher's
	// --phase-consumer). Default Service.
	Durable string
	// Concurrency bounds the handlers running at once per stream (the service's
	// --concurrency). 0: bus.ConsumeOptions' default (8).
	Concurrency int
	// DrainTimeout is how long in-flight handlers may run after ctx ends. 0: the bus's default
	// (30s).
	DrainTimeout time.Duration
	// NakBackoff is the redelivery delay after a transient error. Zero: the bus's default (1s
	// doubling to 1m, ±20%).
	NakBackoff bus.Backoff
	// Resource, when set, is the envelope guard: a message whose envelope names no resource
	// (namespace, name and uid) never reaches the handler; it is a permanent error, "SERVICE:
	// SCHEMA without resource" (bus.Permanent: terminated and reported as poison). The
	// applier, drift and viggy set it.
	Resource bool
	// ShareNamespaces shares the handlers between namespaces (bus.ConsumeOptions.FairKey
	// bus.NamespaceKey): at most MaxPerNamespace of one namespace run at once, and the next
	// namespace in turn gets a free worker. Not with OrderKey.
	ShareNamespaces bool
	// MaxPerNamespace is the handlers one namespace may hold with ShareNamespaces (the
	// service's --max-concurrency-per-namespace). 0: bus.DefaultMaxPerKey of the concurrency.
	MaxPerNamespace int
	// Coalesce, with ShareNamespaces, names the subjects whose newest message supersedes an
	// older one waiting for a worker (bus.ConsumeOptions.Coalesce; the applier: bus.IsSynthesized;
	// synth: bus.IsObserved).
	Coalesce func(subject string) bool
	// OrderKey, if set, keeps the messages of one key in stream order in this process
	// (bus.ConsumeOptions.OrderKey).
	OrderKey func(subject string) string
	// Logger is the service's logger (nil: discarded).
	Logger *slog.Logger
	// Metrics are the service's bus metrics (nil: not counted).
	Metrics *bus.Metrics
	// Publisher publishes the poison anomalies. Nil: bus.NewPublisher(JS).
	Publisher *bus.Publisher
	// OnPoison, if set, is called for each terminated message after its anomaly was published
	// (a caller's own callback; see [PoisonReporter]).
	OnPoison func(ctx context.Context, r bus.PoisonReport)
}

// Options returns the bus.ConsumeOptions of c's durable consumer on stream: Consumer Durable
// (or Service), OnPoison the [PoisonReporter] of Service (chained with c.OnPoison), FairKey
// bus.NamespaceKey with ShareNamespaces, and c's
// concurrency, drain timeout, redelivery schedule, order key, logger and metrics.
func (c Consumer) Options(stream string) bus.ConsumeOptions {
	durable := c.Durable
	if durable == "" {
		durable = c.Service
	}
	pub := c.Publisher
	if pub == nil {
		pub = bus.NewPublisher(c.JS)
	}
	var fair func(string) string
	if c.ShareNamespaces {
		fair = bus.NamespaceKey
	}
	return bus.ConsumeOptions{
		Stream: stream, Consumer: durable, Concurrency: c.Concurrency, FairKey: fair, MaxPerKey: c.MaxPerNamespace, Coalesce: c.Coalesce,
		DrainTimeout: c.DrainTimeout, NakBackoff: c.NakBackoff, OrderKey: c.OrderKey,
		Logger: c.Logger, Metrics: c.Metrics,
		OnPoison: PoisonReporter(pub, c.Service, c.Logger, c.OnPoison),
	}
}

// Consume runs h on c's durable consumer on each of streams ([bus.Consume] with
// [Consumer.Options]; behind the envelope guard when c.Resource) until ctx ends, then drains
// them and returns nil. When one stream's bus.Consume fails (its consumer is missing, the
// connection closed) the others drain and Consume returns that error.
func (c Consumer) Consume(ctx context.Context, h bus.Handler, streams ...string) error {
	h = c.Handler(h)
	g, gctx := errgroup.WithContext(ctx)
	for _, stream := range streams {
		g.Go(func() error { return bus.Consume(gctx, c.JS, c.Options(stream), h) })
	}
	return g.Wait()
}

// Handler returns h behind c's envelope guard ([Consumer.Resource]); h itself when
// c.Resource is not set.
func (c Consumer) Handler(h bus.Handler) bus.Handler {
	if !c.Resource {
		return h
	}
	return func(ctx context.Context, m *bus.Message) error {
		if res := m.Envelope.GetResource(); res.GetNamespace() == "" || res.GetName() == "" || res.GetUid() == "" {
			return bus.Permanent(fmt.Errorf("%s: %s without resource", c.Service, m.Schema))
		}
		return h(ctx, m)
	}
}

package anomaly

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/client-go/kubernetes"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
)

// Config configures a [Service]. JS is required.
type Config struct {
	// JS reaches JetStream; the topology must exist (bus.EnsureTopology).
	JS jetstream.JetStream
	// Routing holds the window, cluster name, sinks and rules; nil is the zero routing (bus
	// only, default window).
	Routing *Routing
	// Kube creates Kubernetes Events; required when Routing has a kubernetesEvents sink.
	Kube kubernetes.Interface
	// Instance is the reportingInstance of Kubernetes Events (the pod name).
	Instance string
	// Replicas is ignored: the buckets and consumers are declared with the topology
	// (bus.EnsureTopology), replicas included.
	//
	// Deprecated: set bus.TopologyOptions.Replicas.
	Replicas int
	// Concurrency bounds handlers per consumer (default 8).
	Concurrency int
	// Logger receives Info logs per routed anomaly; default discard.
	Logger *slog.Logger
	// Registerer, if set, receives the service's metrics ([NewMetrics]).
	Registerer prometheus.Registerer
	// BusMetrics, if set, counts consumed messages.
	BusMetrics *bus.Metrics
	// OnPoison, if set, is called for terminated messages.
	OnPoison func(ctx context.Context, r bus.PoisonReport)
	// Router decides the routed action; default [PolicyRouter].
	Router Router
	// Now is the clock of sightings; default time.Now.
	Now func() time.Time
	// ScanInterval is how often resources in a working phase are checked against the
	// routing's stuckAfter deadline; default 30s.
	ScanInterval time.Duration
}

// Service is the anomaly service ([doc] of this package).
type Service struct {
	cfg      Config
	routing  *Routing
	windows  *Windows
	bus      *BusSink
	sinks    map[string]Sink
	metrics  *Metrics
	progress *progress
}

// New opens the windows and progress buckets, checks that the service's consumers exist (all
// declared by bus.EnsureTopology, which must have run: New fails, naming it, otherwise),
// builds the sinks (reading webhook key files) and returns the service. A windows bucket TTL
// shorter than bus.AnomalyWindowsTTL of the routing's window (a topology ensured with another
// bus.TopologyOptions.AnomalyWindow) is logged as a warning: windows may then close early.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.JS == nil {
		return nil, errors.New("anomaly: no JetStream")
	}
	if cfg.Routing == nil {
		cfg.Routing = &Routing{}
	}
	if err := cfg.Routing.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Router == nil {
		cfg.Router = PolicyRouter{}
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = 30 * time.Second
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	win, err := OpenWindows(ctx, cfg.JS, cfg.Routing.Window.Duration)
	if err != nil {
		return nil, err
	}
	if ttl, err := win.TTL(ctx); err == nil && ttl < bus.AnomalyWindowsTTL(cfg.Routing.Window.Duration) {
		cfg.Logger.Warn("anomaly: windows bucket TTL is shorter than twice the window; run bus.EnsureTopology with the same AnomalyWindow",
			"bucket", BucketWindows, "ttl", ttl.String(), "window", cfg.Routing.Window.Duration.String())
	}
	prog, err := openProgress(ctx, cfg.JS)
	if err != nil {
		return nil, err
	}
	for _, stream := range []string{bus.StreamPhases, bus.StreamAnomalies} {
		if _, err := cfg.JS.Consumer(ctx, stream, bus.ServiceAnomaly); err != nil {
			return nil, fmt.Errorf("anomaly: consumer %s on %s (create it with bus.EnsureTopology): %w", bus.ServiceAnomaly, stream, err)
		}
	}
	s := &Service{cfg: cfg, routing: cfg.Routing, windows: win, bus: NewBusSink(bus.NewPublisher(cfg.JS)),
		sinks: map[string]Sink{}, metrics: m, progress: prog}
	for _, sc := range cfg.Routing.Sinks {
		retry := func(string) { m.retries.WithLabelValues(sc.Name).Inc() }
		switch sc.Type {
		case SinkWebhook:
			var key []byte
			if sc.SecretFile != "" {
				if key, err = ReadKeyFile(sc.SecretFile); err != nil {
					return nil, fmt.Errorf("anomaly: sink %s: %w", sc.Name, err)
				}
			}
			s.sinks[sc.Name] = NewWebhookSink(sc, key, retry)
		case SinkAlertmanager:
			s.sinks[sc.Name] = NewAlertmanagerSink(sc, retry)
		case SinkKubernetesEvents:
			if cfg.Kube == nil {
				return nil, fmt.Errorf("%w: sink %s needs Kubernetes access", ErrConfig, sc.Name)
			}
			s.sinks[sc.Name] = NewKubeEventsSink(sc, cfg.Kube, cfg.Instance)
		}
	}
	return s, nil
}

// Run consumes LAVA_PHASES and LAVA_ANOMALIES with the durable "anomaly" and, unless both
// stuckAfter and approvalAfter are negative, checks resources in a working phase or awaiting
// approval every ScanInterval, until ctx is cancelled; then it drains and returns nil.
func (s *Service) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	if s.routing.StuckAfter.Duration > 0 || s.routing.ApprovalAfter.Duration > 0 {
		g.Go(func() error {
			t := time.NewTicker(s.cfg.ScanInterval)
			defer t.Stop()
			for {
				select {
				case <-gctx.Done():
					return nil
				case <-t.C:
					if err := s.scanProgress(gctx); err != nil && gctx.Err() == nil {
						s.cfg.Logger.Warn("anomaly: progress scan", "error", err)
					}
				}
			}
		})
	}
	g.Go(func() error {
		return pipeline.Consumer{JS: s.cfg.JS, Service: bus.ServiceAnomaly, Concurrency: s.cfg.Concurrency,
			Logger: s.cfg.Logger, Metrics: s.cfg.BusMetrics, Publisher: s.bus.pub, OnPoison: s.cfg.OnPoison,
		}.Consume(gctx, s.Handle, bus.StreamPhases, bus.StreamAnomalies)
	})
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("anomaly: consume: %w", err)
	}
	return nil
}

// Handle is the bus.Handler of both consumers: it builds the anomaly of the event (if it is
// one) and [Service.Process]es it. An undecodable foreign anomaly is permanent.
func (s *Service) Handle(ctx context.Context, m *bus.Message) error {
	now := s.cfg.Now()
	cluster := s.routing.Cluster
	var (
		a       LavaAnomaly
		ok      bool
		event   string
		foreign *lavav1.AnomalyDetected
	)
	switch ev := m.Event.(type) {
	case *lavav1.Failed:
		event = eventFailed
		a, ok = FromFailed(ev, cluster, now)
	case *lavav1.DriftScanned:
		event = eventDriftScanned
		a, ok = FromDriftScanned(ev, cluster, now)
	case *lavav1.PhaseChanged:
		event = eventPhaseChanged
		if err := s.progress.track(ctx, ev, now); err != nil {
			return err
		}
		a, ok = FromPhaseChanged(ev, cluster, now)
	case *lavav1.TickReported:
		event = eventTickReported
	case *lavav1.AnomalyDetected:
		event = eventDetected
		// The service's own anomalies went to every sink already; its poison-message reports
		// (pipeline.PoisonReporter) were published directly and are routed like a foreign one.
		if ev.GetEnvelope().GetSource() == bus.ServiceAnomaly && ev.GetExtensionKind() != pipeline.ExtensionPoisonMessage {
			s.metrics.events.WithLabelValues(event, "own").Inc()
			return nil
		}
		var err error
		if a, err = FromDetected(ev, now); err != nil {
			s.metrics.events.WithLabelValues(event, "ignored").Inc()
			return bus.Permanent(err)
		}
		ok, foreign = true, ev
	default:
		event = eventOther
	}
	if !ok {
		s.metrics.events.WithLabelValues(event, "ignored").Inc()
		return nil
	}
	s.metrics.events.WithLabelValues(event, "anomaly").Inc()
	return s.Process(ctx, a, m.Envelope, foreign)
}

// resource reads the labels and the effective remediation policy of a's resource from its
// newest ResourceObserved (LAVA_RESOURCES); none (default policy) when there is none or it
// is about another object of the same name.
func (s *Service) resource(ctx context.Context, src Source) (map[string]string, *lavav1.RemediationPolicy, error) {
	st, err := s.cfg.JS.Stream(ctx, bus.StreamResources)
	if err != nil {
		return nil, nil, fmt.Errorf("anomaly: stream %s: %w", bus.StreamResources, err)
	}
	ro := &lavav1.ResourceObserved{}
	found, err := bus.LastEvent(ctx, st, bus.ResourceSubject(src.Namespace, src.Name, bus.EventObserved), ro)
	if errors.Is(err, bus.ErrUndecodable) || (err == nil && !found) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("anomaly: read ResourceObserved: %w", err)
	}
	if uid := ro.GetEnvelope().GetResource().GetUid(); src.UID != "" && uid != src.UID {
		return nil, nil, nil
	}
	return ro.GetLabels(), ro.GetRemediation(), nil
}

// WindowKey is the [Windows] key of a: its fingerprint, or "<fingerprint>.escalation.<tier>"
// for a foreign anomaly carrying metadata escalation_tier (each tier is its own alert).
func WindowKey(a LavaAnomaly, foreign bool) string {
	if t := a.Metadata["escalation_tier"]; foreign && t != "" {
		if _, err := strconv.ParseUint(t, 10, 32); err == nil {
			return a.Fingerprint + ".escalation." + t
		}
	}
	return a.Fingerprint
}

// Process de-duplicates a (caused by the event of envelope cause) and routes it when it opens
// a window: to the bus sink (not for a foreign anomaly, which is on the bus already) and to the
// sinks the rules pick. Each sink that got the alert is recorded in the window, so a failure
// (returned, for redelivery) retries only the sinks that lack it; a permanent failure is
// logged and not retried.
func (s *Service) Process(ctx context.Context, a LavaAnomaly, cause *lavav1.Envelope, foreign *lavav1.AnomalyDetected) error {
	var policy *lavav1.RemediationPolicy
	if foreign == nil || len(a.Labels) == 0 {
		labels, p, err := s.resource(ctx, a.Source)
		if err != nil {
			return err
		}
		a.Labels, policy = labels, p
	}
	key := WindowKey(a, foreign != nil)
	id := cause.GetEventId()
	win, verdict, err := s.windows.Observe(ctx, key, id, s.cfg.Now())
	if err != nil {
		return err
	}
	kindLabel, sevLabel := string(a.Kind), string(a.Severity)
	switch verdict {
	case Repeated:
		s.metrics.sightings.WithLabelValues(kindLabel, sevLabel, "repeated").Inc()
		s.cfg.Logger.Debug("anomaly: repeat within the window", "fingerprint", a.Fingerprint, "count", win.Count,
			logattr.Resource(a.Source.Namespace, a.Source.Name))
		return nil
	case Redelivered:
		s.metrics.sightings.WithLabelValues(kindLabel, sevLabel, "redelivered").Inc()
		if win.OpenedBy != id {
			return nil
		}
	default:
		s.metrics.sightings.WithLabelValues(kindLabel, sevLabel, "opened").Inc()
	}
	msg := s.message(a, win, cause, policy, foreign)
	var targets []Sink
	if foreign == nil {
		targets = append(targets, s.bus)
	}
	for _, name := range s.routing.Route(a) {
		targets = append(targets, s.sinks[name])
	}
	var errs []error
	for _, sink := range targets {
		if slices.Contains(win.Delivered, sink.Name()) {
			continue
		}
		start := time.Now()
		err := sink.Send(ctx, msg)
		s.metrics.deliveryTimes.WithLabelValues(sink.Name()).Observe(time.Since(start).Seconds())
		switch {
		case err == nil:
			s.metrics.deliveries.WithLabelValues(sink.Name(), "ok").Inc()
		case errors.Is(err, ErrPermanent):
			s.metrics.deliveries.WithLabelValues(sink.Name(), "permanent").Inc()
			s.cfg.Logger.Warn("anomaly: sink rejected the anomaly; not retried", "sink", sink.Name(),
				"fingerprint", a.Fingerprint, "error", err)
		default:
			s.metrics.deliveries.WithLabelValues(sink.Name(), "failed").Inc()
			errs = append(errs, err)
			continue
		}
		if err := s.windows.MarkDelivered(ctx, key, win.Ordinal, sink.Name()); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		s.cfg.Logger.Info("anomaly: routed", "kind", a.Kind, "severity", a.Severity, "fingerprint", a.Fingerprint,
			logattr.Resource(a.Source.Namespace, a.Source.Name))
	}
	return errors.Join(errs...)
}

// message is the AnomalyDetected of a window's alert. For the service's own anomaly: a's
// fields, count and sightings from the window, the routed action, and an envelope whose
// trigger is "anomaly:<fingerprint>:<window ordinal>" (each window's alert is a new event;
// every replica computes the same id, so JetStream stores one). A foreign
// anomaly goes out as it came, sanitized, with the window's count and sightings (and the
// resource's labels when it carried none).
func (s *Service) message(a LavaAnomaly, win *Window, cause *lavav1.Envelope, policy *lavav1.RemediationPolicy,
	foreign *lavav1.AnomalyDetected) *lavav1.AnomalyDetected {
	if foreign != nil {
		out := proto.CloneOf(foreign)
		out.Message, out.Metadata, out.Labels = a.Message, a.Metadata, a.Labels
		out.Count = win.Count
		out.FirstSeen, out.LastSeen = timestamppb.New(win.FirstSeen), timestamppb.New(win.LastSeen)
		return out
	}
	out := a.Proto()
	out.Count = win.Count
	out.FirstSeen, out.LastSeen = timestamppb.New(win.FirstSeen), timestamppb.New(win.LastSeen)
	d, err := s.cfg.Router.Route(a, policy)
	if err != nil {
		s.cfg.Logger.Debug("anomaly: policy", "error", err, logattr.Resource(a.Source.Namespace, a.Source.Name))
	}
	out.Action = d.Action
	trigger := eventid.AnomalyTrigger(a.Fingerprint, win.Ordinal)
	res := cause.GetResource()
	if res.GetName() == "" {
		res = out.GetSource()
	}
	out.Envelope = &lavav1.Envelope{
		EventId:       eventid.ID(res.GetUid(), cause.GetGeneration(), eventid.Type(out), trigger),
		OccurredAt:    timestamppb.New(s.cfg.Now().UTC()),
		Source:        bus.ServiceAnomaly,
		Resource:      proto.CloneOf(res),
		Generation:    cause.GetGeneration(),
		CorrelationId: cause.GetCorrelationId(),
		Trigger:       trigger,
	}
	return out
}

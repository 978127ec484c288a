package synth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/pipeline/synthesis"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/telemetry/logattr"
)

// maxMessageBytes bounds a Failed message.
const maxMessageBytes = 8 << 10

// Config configures a [Service]. JS and BindingsKey are required.
type Config struct {
	// JS is the JetStream context; the topology must exist (bus.EnsureTopology).
	JS jetstream.JetStream
	// Kube reads the ConfigMaps and Secrets of spec.bindingsFrom (get only, in the resource's
	// namespace) with synth's own identity, when Identities is nil, after confirming the
	// object (get lavaarchitectures; confirmObject, always with synth's own identity). Nil: a
	// resource with bindingsFrom fails with SynthesisFailed.
	Kube client.Reader
	// Identities, when set, gives the identity bindingsFrom is read with: the object's
	// ServiceAccount impersonated (spec.serviceAccountName, else the default), so the tenant's
	// RBAC decides (docs/security.md, "Kubernetes RBAC").
	Identities *identity.Clients
	// BindingsKey is the installation's 32-byte key for secret values in bindingsDigest
	// (render.BindingsKeySize).
	BindingsKey []byte
	// Logger receives one line per handled event (default: discard). Never a binding value.
	Logger *slog.Logger
	// Registerer receives the service metrics (nil: not registered).
	Registerer prometheus.Registerer
	// BusMetrics counts consumed messages and watermark drops (may be nil).
	BusMetrics *bus.Metrics
	// Concurrency bounds handlers running at once per consumer (default 8).
	Concurrency int
	// MaxPerNamespace is how many of the Concurrency handlers one namespace may hold at once
	// (--max-concurrency-per-namespace); the others go to other namespaces' messages in turn
	// (bus.ConsumeOptions.FairKey). 0: half of Concurrency, rounded up (bus.DefaultMaxPerKey).
	MaxPerNamespace int
	// DrainTimeout bounds in-flight work after shutdown starts (default 30s).
	DrainTimeout time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// Artifacts fetches and caches the artifacts of spec.sourceRef (Flux sources); nil: such
	// a resource fails with SourceFetchFailed.
	Artifacts *synthesis.ArtifactCache
	// ArtifactQuota bounds the bytes of renders each namespace stores in lava-artifacts
	// (nil: no quota); a render over it fails ArtifactQuotaExceeded, retryable.
	ArtifactQuota *bus.ArtifactQuota
	// Policy is the admin's tenant policy document (the lava-policy ConfigMap mounted as a
	// file; docs/design/0010-tenant-policy.md), checked after every render and before Synthesized
	// is published. Nil or a zero File: the built-in policy ([policy.Default]).
	Policy *policy.File
}

// Service is the synth service. Create it with [New] and run it with [Service.Run].
type Service struct {
	cfg     Config
	pub     *bus.Publisher
	art     *bus.Artifacts
	wm      *bus.Watermarks
	metrics *metrics
}

type metrics struct {
	results  *prometheus.CounterVec
	duration prometheus.Histogram
}

// New binds the artifact store and the synth watermarks and registers the metrics
// lava_synth_results_total{result="synthesized|failed|quota_exceeded|stale|suspended"} and
// lava_synth_duration_seconds.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.JS == nil {
		return nil, errors.New("synth: no JetStream")
	}
	if len(cfg.BindingsKey) != render.BindingsKeySize {
		return nil, fmt.Errorf("synth: bindings key is %d bytes, want %d", len(cfg.BindingsKey), render.BindingsKeySize)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	art, err := bus.NewArtifacts(ctx, cfg.JS)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	wm, err := bus.NewWatermarks(ctx, cfg.JS, bus.ServiceSynth, cfg.BusMetrics)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	m := &metrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "lava", Subsystem: "synth", Name: "results_total",
			Help: "Handled ResourceObserved and retries by result (synthesized, failed, quota_exceeded, stale, suspended)."}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "lava", Subsystem: "synth", Name: "duration_seconds",
			Help: "Time to gather bindings, gate, render and store one generation.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{m.results, m.duration} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("synth: register metrics: %w", err)
			}
		}
	}
	return &Service{cfg: cfg, pub: bus.NewPublisher(cfg.JS), art: art, wm: wm, metrics: m}, nil
}

// Run consumes ResourceObserved (LAVA_RESOURCES) and synth-stage RetryRequested
// (LAVA_COMMANDS) with the durable consumer "synth" until ctx is cancelled, then drains. The
// handlers are shared between namespaces (Config.MaxPerNamespace), and a resource's newest
// ResourceObserved replaces an older one still waiting for a handler (bus.IsObserved).
func (s *Service) Run(ctx context.Context) error {
	return pipeline.Consumer{JS: s.cfg.JS, Service: bus.ServiceSynth, Concurrency: s.cfg.Concurrency,
		ShareNamespaces: true, MaxPerNamespace: s.cfg.MaxPerNamespace, Coalesce: bus.IsObserved, DrainTimeout: s.cfg.DrainTimeout, Logger: s.cfg.Logger, Metrics: s.cfg.BusMetrics,
	}.Consume(ctx, s.Handle, bus.StreamResources, bus.StreamCommands)
}

// Handle handles one delivery: a ResourceObserved, or a RetryRequested for stage SYNTH (the
// spec is read back from the newest ResourceObserved of the resource). Other messages are
// permanent errors. A nil return means the outcome (Synthesized or Failed) is published.
func (s *Service) Handle(ctx context.Context, m *bus.Message) error {
	switch ev := m.Event.(type) {
	case *lavav1.ResourceObserved:
		return s.process(ctx, ev, ev.GetEnvelope(), 1)
	case *lavav1.RetryRequested:
		if ev.GetTarget() != lavav1.Stage_STAGE_SYNTH {
			return bus.Permanent(fmt.Errorf("synth: retry of stage %v is not synth's", ev.GetTarget()))
		}
		res := ev.GetEnvelope().GetResource()
		obs, err := lastObserved(ctx, s.cfg.JS, res.GetNamespace(), res.GetName())
		if err != nil {
			return err
		}
		if obs == nil || obs.GetEnvelope().GetResource().GetUid() != res.GetUid() {
			return bus.Permanent(fmt.Errorf("synth: retry for %s/%s: no ResourceObserved of that object", res.GetNamespace(), res.GetName()))
		}
		if obs.GetEnvelope().GetGeneration() != ev.GetEnvelope().GetGeneration() {
			// A newer generation has its own pass; the retry is obsolete.
			s.metrics.results.WithLabelValues("stale").Inc()
			return nil
		}
		return s.process(ctx, obs, ev.GetEnvelope(), max(ev.GetAttempt(), 2))
	}
	return bus.Permanent(fmt.Errorf("synth: unexpected %s", m.Schema))
}

// lastObserved reads the newest ResourceObserved of a resource from LAVA_RESOURCES, nil when
// there is none.
func lastObserved(ctx context.Context, js jetstream.JetStream, namespace, name string) (*lavav1.ResourceObserved, error) {
	st, err := js.Stream(ctx, bus.StreamResources)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	raw, err := st.GetLastMsgForSubject(ctx, bus.ResourceSubject(namespace, name, bus.EventObserved))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("synth: read ResourceObserved of %s/%s: %w", namespace, name, err)
	}
	obs := &lavav1.ResourceObserved{}
	if err := proto.Unmarshal(raw.Data, obs); err != nil {
		return nil, bus.Permanent(fmt.Errorf("synth: decode ResourceObserved of %s/%s: %w", namespace, name, err))
	}
	return obs, nil
}

// renderer is the service's [Renderer], from its Config.
func (s *Service) renderer() synthesis.Renderer {
	return synthesis.Renderer{Kube: s.cfg.Kube, Identities: s.cfg.Identities, BindingsKey: s.cfg.BindingsKey, Artifacts: s.cfg.Artifacts, Policy: s.cfg.Policy}
}

// process synthesizes obs's generation; cause is the envelope of the event being handled
// (the ResourceObserved itself, or a RetryRequested).
func (s *Service) process(ctx context.Context, obs *lavav1.ResourceObserved, cause *lavav1.Envelope, attempt int32) error {
	env := obs.GetEnvelope()
	res := env.GetResource()
	if res.GetNamespace() == "" || res.GetName() == "" || res.GetUid() == "" || env.GetGeneration() < 1 {
		return bus.Permanent(errors.New("synth: ResourceObserved without resource or generation"))
	}
	if obs.GetSpec() == nil {
		return bus.Permanent(fmt.Errorf("synth: ResourceObserved of %s/%s has no spec", res.GetNamespace(), res.GetName()))
	}
	log := s.cfg.Logger.With(logattr.Service(bus.ServiceSynth), logattr.Resource(res.GetNamespace(), res.GetName()),
		logattr.Generation(env.GetGeneration()), logattr.EventID(cause.GetEventId()))
	current, err := s.wm.Advance(ctx, res.GetNamespace(), res.GetName(), env.GetGeneration())
	if err != nil {
		return err
	}
	if !current {
		s.metrics.results.WithLabelValues("stale").Inc()
		log.Debug("stale generation dropped")
		return nil
	}
	if obs.GetSpec().GetSuspend() {
		// The watcher publishes a suspended generation so drift and viggy stop; it starts no
		// pass. Its watermark is taken: passes of older generations are dropped too.
		s.metrics.results.WithLabelValues("suspended").Inc()
		log.Info("suspended generation: no pass")
		return nil
	}
	start := s.cfg.Now()
	defer func() { s.metrics.duration.Observe(s.cfg.Now().Sub(start).Seconds()) }()

	if ok, err := s.confirmObject(ctx, obs); err != nil || !ok {
		if err == nil {
			log.Debug("stale generation: the API server has a newer one")
		}
		return err
	}
	rd, fail, err := s.renderer().Render(ctx, obs.GetSpec(), res.GetNamespace())
	if err != nil {
		return err
	}
	red := engine.NewRedactor(rd.Secrets...)
	log.Debug("bindings read", "redacted_values", len(rd.Secrets))
	if fail != nil {
		return s.fail(ctx, log, cause, env.GetGeneration(), attempt, fail, red)
	}
	return s.publishSynthesized(ctx, log, obs, cause, attempt, rd, red)
}

// publishSynthesized stores the Terraform JSON of a successful render rd as an artifact
// ([Renderer.Store]) and publishes
// Synthesized for obs's generation, with the gate verdict's warnings redacted by red.
func (s *Service) publishSynthesized(ctx context.Context, log *slog.Logger, obs *lavav1.ResourceObserved, cause *lavav1.Envelope, attempt int32,
	rd synthesis.Rendered, red *engine.Redactor) error {
	env := obs.GetEnvelope()
	in, out, diags := rd.In, rd.Out, rd.Diags
	if err := s.cfg.ArtifactQuota.Charge(env.GetResource().GetNamespace(), bus.Digest(out.JSON), int64(len(out.JSON))); err != nil {
		s.metrics.results.WithLabelValues("quota_exceeded").Inc()
		return s.fail(ctx, log, cause, env.GetGeneration(), attempt, &pipeline.Failure{Kind: pipeline.FailureRetryable,
			Reason: v1alpha1.ReasonArtifactQuotaExceeded, Message: err.Error(), Err: err}, red)
	}
	digest, err := s.renderer().Store(ctx, s.art, rd)
	if err != nil {
		return err
	}
	rec := RecordProto(out.Record)
	if fs := obs.GetSpec().GetSource().GetFlux(); fs != nil {
		rec.SourceKind = lavav1.SourceKind_SOURCE_KIND_SOURCE_REF
		rec.SourceRevision = fs.GetArtifact().GetRevision()
	}
	rec.RenderedAt = timestamppb.New(s.cfg.Now().UTC())
	rec.ObservedGeneration = env.GetGeneration()
	verdict := Verdict(in, diags)
	for i, w := range verdict.Warnings {
		verdict.Warnings[i] = red.Redact(w)
	}
	ev := &lavav1.Synthesized{
		Envelope:          s.envelope(cause, env.GetGeneration(), "lava.v1.Synthesized"),
		Render:            rec,
		Gate:              verdict,
		ArtifactDigest:    digest,
		ArtifactSizeBytes: int64(len(out.JSON)),
		Providers:         rd.Providers(),
		Engine:            obs.GetSpec().GetEngine(),
		ApprovePlan:       obs.GetSpec().GetApprovePlan(),
	}
	if ev.Engine == lavav1.Engine_ENGINE_UNSPECIFIED {
		ev.Engine = lavav1.Engine_ENGINE_EMBEDDED
	}
	if ev.ApprovePlan == "" {
		ev.ApprovePlan = "auto"
	}
	if _, err := s.pub.PublishEvent(ctx, ev); err != nil {
		if big := (*bus.PayloadTooLargeError)(nil); errors.As(err, &big) {
			// Publishing it again fails again: the object fails instead of the message being
			// delivered again to MaxDeliver with no outcome.
			return s.fail(ctx, log, cause, env.GetGeneration(), attempt, synthesizedTooLarge(ev, big), red)
		}
		return err
	}
	s.metrics.results.WithLabelValues("synthesized").Inc()
	log.Info("synthesized", "artifact_digest", digest, "terraform_json_digest", rec.GetTerraformJsonDigest(),
		"resources", rec.GetResourceCount(), "warnings", len(verdict.Warnings))
	return nil
}

// synthesizedTooLarge is the failure of a render whose Synthesized event is larger than the
// bus takes (not retried: the same generation renders the same event), naming the sizes of the
// event and of its largest parts.
func synthesizedTooLarge(ev *lavav1.Synthesized, big *bus.PayloadTooLargeError) *pipeline.Failure {
	size := func(ss []string) (n int) {
		for _, s := range ss {
			n += len(s)
		}
		return n
	}
	return &pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed, Message: fmt.Sprintf(
		"rendered, but the Synthesized event is %d bytes, more than the bus's maximum message size of %d bytes (the NATS server's max_payload); "+
			"its gate verdict holds %d warning(s) of %d bytes and %d error(s) of %d bytes, and it names %d provider(s): "+
			"make the source smaller (fewer inputs or providers, shorter names)",
		big.Size, big.Max, len(ev.GetGate().GetWarnings()), size(ev.GetGate().GetWarnings()),
		len(ev.GetGate().GetErrors()), size(ev.GetGate().GetErrors()), len(ev.GetProviders()))}
}

func truncate(s string) string {
	if len(s) <= maxMessageBytes {
		return s
	}
	return s[:maxMessageBytes] + "…"
}

// fail publishes Failed for the SYNTH stage.
func (s *Service) fail(ctx context.Context, log *slog.Logger, cause *lavav1.Envelope, generation int64, attempt int32, f *pipeline.Failure, red *engine.Redactor) error {
	// Redacted before it is cut: a secret that straddled the cut would keep a fragment no
	// form matches.
	msg := truncate(red.Redact(f.Message))
	ev := &lavav1.Failed{
		Envelope:  s.envelope(cause, generation, "lava.v1.Failed"),
		Stage:     lavav1.Stage_STAGE_SYNTH,
		Reason:    f.Reason,
		Message:   msg,
		Retryable: f.Retryable(),
		Attempt:   attempt,
	}
	if _, err := s.pub.PublishEvent(ctx, ev); err != nil {
		return err
	}
	s.metrics.results.WithLabelValues("failed").Inc()
	log.Info("synthesis failed", "reason", f.Reason, "message", msg, "retryable", f.Retryable())
	return nil
}

// envelope builds the envelope of an event caused by cause, about generation.
func (s *Service) envelope(cause *lavav1.Envelope, generation int64, eventType string) *lavav1.Envelope {
	corr := cause.GetCorrelationId()
	if corr == "" {
		corr = cause.GetEventId()
	}
	trig := eventid.CauseTrigger(cause.GetEventId())
	res := proto.CloneOf(cause.GetResource())
	return &lavav1.Envelope{
		EventId:       eventid.ID(res.GetUid(), generation, eventType, trig),
		OccurredAt:    timestamppb.New(s.cfg.Now().UTC()),
		Source:        bus.ServiceSynth,
		Resource:      res,
		Generation:    generation,
		CorrelationId: corr,
		Trigger:       trig,
	}
}

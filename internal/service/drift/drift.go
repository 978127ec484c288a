package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// Defaults of [Config].
const (
	DefaultInterval    = 5 * time.Minute
	DefaultMinInterval = 30 * time.Second
	DefaultJitter      = 0.1
	DefaultTick        = time.Second
	DefaultConcurrency = 4
	DefaultClaimTTL    = 10 * time.Minute
	DefaultScanTimeout = 5 * time.Minute
)

// Config configures a [Service]. JS, Engines and Holder are required.
type Config struct {
	// JS is the JetStream context; the topology must exist (bus.EnsureTopology).
	JS jetstream.JetStream
	// Engines maps an engine name to the engine that scans resources applied with it. A
	// resource whose engine is absent is not scanned (logged, retried after the interval).
	Engines map[string]engine.Engine
	// Holder names this replica in schedule claims and leases (unique per process).
	Holder string
	// CosmeticPrefixes are the attribute prefixes whose updates are cosmetic
	// (nil: engine.DefaultCosmeticPrefixes).
	CosmeticPrefixes []string
	// DefaultInterval is the interval of a resource whose ResourceObserved was not seen
	// (default 5m); MinInterval floors every interval (default 30s).
	DefaultInterval, MinInterval time.Duration
	// Jitter is the relative jitter of the next due time, in [0, 1) (default 0.1: ±10%).
	Jitter float64
	// Tick is how often the schedule is checked for due entries (default 1s).
	Tick time.Duration
	// Concurrency bounds scans running at once in this process (default 4) and handlers per
	// consumer.
	Concurrency int
	// MaxPerNamespace is how many of the Concurrency scans one namespace may run at once
	// (--max-concurrency-per-namespace): a due entry of a namespace at its share waits for
	// the next tick while other namespaces' due entries start. 0: half of Concurrency,
	// rounded up (svc.MaxPerNamespace).
	MaxPerNamespace int
	// ClaimTTL is how long a claim keeps other replicas off an entry (default 10m); a scan
	// is cancelled when it runs out.
	ClaimTTL time.Duration
	// ScanTimeout bounds one scan (default 5m, at most ClaimTTL).
	ScanTimeout time.Duration
	// Leases, when set, is held around each scan (the resource's work lease in lava-leases),
	// so a scan never overlaps an apply; a held lease postpones the scan by RetryDelay.
	Leases *bus.Leases
	// RetryDelay is the delay after a failed or postponed scan, doubling per consecutive
	// failure up to the interval (default 5s).
	RetryDelay time.Duration
	// Logger receives one line per scan outcome (default: discard). Never a secret.
	Logger *slog.Logger
	// Registerer receives the drift metrics (nil: not registered).
	Registerer prometheus.Registerer
	// BusMetrics counts consumed messages (may be nil).
	BusMetrics *bus.Metrics
	// Now is the clock (time.Now).
	Now func() time.Time
	// Kube is drift's own Kubernetes client (nil: none; a resource with spec.providerEnvFrom
	// then fails its scans). Identities and Credentials as the applier's: each scan's providers
	// get the resource's credentials, built as the applier builds them (identity.Resolver.For;
	// docs/security.md, "Engines").
	Kube        client.Client
	Identities  *identity.Clients
	Credentials *identity.Credentials
}

// Service is the drift service. Create it with [New] and run it with [Service.Run].
type Service struct {
	cfg     Config
	kv      jetstream.KeyValue
	pub     *bus.Publisher
	metrics *metrics
	// running marks keys this process is scanning (a local guard on top of the claim).
	mu      sync.Mutex
	running map[string]bool
	// perNamespace counts the scans running per namespace (Config.MaxPerNamespace).
	perNamespace map[string]int
}

// New binds lava-drift-schedule and registers the metrics lava_drift_scans_total{result},
// lava_drift_scan_duration_seconds, lava_drift_findings_total{severity} and
// lava_drift_scheduled_resources.
func New(ctx context.Context, cfg Config) (*Service, error) {
	switch {
	case cfg.JS == nil:
		return nil, errors.New("drift: no JetStream")
	case len(cfg.Engines) == 0:
		return nil, errors.New("drift: no engine")
	case cfg.Holder == "":
		return nil, errors.New("drift: no holder name")
	}
	if cfg.CosmeticPrefixes == nil {
		cfg.CosmeticPrefixes = engine.DefaultCosmeticPrefixes()
	}
	if cfg.DefaultInterval <= 0 {
		cfg.DefaultInterval = DefaultInterval
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	if cfg.Jitter < 0 || cfg.Jitter >= 1 {
		return nil, fmt.Errorf("drift: jitter %v outside [0, 1)", cfg.Jitter)
	}
	if cfg.Jitter == 0 {
		cfg.Jitter = DefaultJitter
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	cfg.MaxPerNamespace = svc.MaxPerNamespace(cfg.MaxPerNamespace, cfg.Concurrency)
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = DefaultClaimTTL
	}
	if cfg.ScanTimeout <= 0 || cfg.ScanTimeout > cfg.ClaimTTL {
		cfg.ScanTimeout = min(DefaultScanTimeout, cfg.ClaimTTL)
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	kv, err := cfg.JS.KeyValue(ctx, bus.BucketDriftSchedule)
	if err != nil {
		return nil, fmt.Errorf("drift: bind %s: %w", bus.BucketDriftSchedule, err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, kv: kv, pub: bus.NewPublisher(cfg.JS), metrics: m, running: map[string]bool{},
		perNamespace: map[string]int{}}, nil
}

// Run consumes ResourceObserved (LAVA_RESOURCES) and Applied, Destroyed and PhaseChanged
// (LAVA_PHASES) with the durable consumer "drift", and runs the scheduler, until ctx is
// cancelled.
func (s *Service) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return pipeline.Consumer{JS: s.cfg.JS, Service: bus.ServiceDrift, Resource: true, Concurrency: s.cfg.Concurrency,
			Logger: s.cfg.Logger, Metrics: s.cfg.BusMetrics,
		}.Consume(gctx, s.Handle, bus.StreamResources, bus.StreamPhases)
	})
	g.Go(func() error { return s.schedule(gctx) })
	return g.Wait()
}

// Handle updates the schedule from one event: ResourceObserved (interval, suspend, newest
// generation), Applied (what to scan; the next scan one interval later), Destroyed (removes
// the entry) and PhaseChanged to Finalizing (stops scans). Other events are acked unchanged.
// m names a resource (the consumer's envelope guard, pipeline.Consumer.Resource, admits no
// other).
func (s *Service) Handle(ctx context.Context, m *bus.Message) error {
	res := m.Envelope.GetResource()
	key := bus.ResourceKey(res.GetNamespace(), res.GetName())
	gen := m.Envelope.GetGeneration()
	now := s.cfg.Now().UTC()
	// fresh returns the entry to change for this object: a new one when there is none or it
	// belonged to an earlier object of the same name.
	fresh := func(cur *Entry) *Entry {
		if cur == nil || cur.UID != res.GetUid() {
			return &Entry{Namespace: res.GetNamespace(), Name: res.GetName(), UID: res.GetUid()}
		}
		c := *cur
		return &c
	}
	var err error
	switch ev := m.Event.(type) {
	case *lavav1.ResourceObserved:
		_, err = update(ctx, s.kv, key, func(cur *Entry) (*Entry, error) {
			e := fresh(cur)
			if gen < e.ObservedGeneration {
				return nil, errSkip
			}
			e.ObservedGeneration = gen
			e.Suspended = ev.GetSpec().GetSuspend()
			e.Interval = ev.GetSpec().GetDriftInterval().AsDuration()
			e.ServiceAccountName = ev.GetSpec().GetServiceAccountName()
			e.ProviderEnvFrom = nil
			for _, r := range ev.GetSpec().GetProviderEnvFrom() {
				e.ProviderEnvFrom = append(e.ProviderEnvFrom, identity.SecretKeyRef{Name: r.GetName(), Key: r.GetKey()})
			}
			e.BindsSecrets = false
			for _, ref := range ev.GetSpec().GetBindingsFrom() {
				if ref.GetSecretRef() != nil {
					e.BindsSecrets = true
				}
			}
			if e.Scannable() {
				// The interval may have shrunk: never wait longer than the new one.
				if d := s.nextDue(e, e.LastScanOr(now)); d.Before(e.Due) {
					e.Due = d
				}
			}
			return e, nil
		})
	case *lavav1.Applied:
		_, err = update(ctx, s.kv, key, func(cur *Entry) (*Entry, error) {
			e := fresh(cur)
			if gen < e.Generation || (cur != nil && cur.AppliedEventID == m.Envelope.GetEventId()) {
				return nil, errSkip
			}
			e.Generation = gen
			e.Engine = pipeline.EngineName(ev.GetEngine())
			e.PlanID = ev.GetPlanId()
			e.TerraformJSONDigest = ev.GetTerraformJsonDigest()
			e.ArtifactDigest = ev.GetArtifactDigest()
			e.Providers = e.Providers[:0]
			for _, p := range ev.GetProviders() {
				e.Providers = append(e.Providers, engine.ProviderRequirement{Name: p.GetName(), Source: p.GetSource(), Version: p.GetVersion()})
			}
			e.AppliedEventID = m.Envelope.GetEventId()
			e.Finalizing = false
			e.Failures = 0
			e.LastScan = now
			e.Due = s.nextDue(e, now)
			return e, nil
		})
	case *lavav1.Destroyed:
		_, err = update(ctx, s.kv, key, func(cur *Entry) (*Entry, error) {
			if cur == nil || cur.UID != res.GetUid() {
				return nil, errSkip
			}
			return nil, nil
		})
	case *lavav1.PhaseChanged:
		if ev.GetTo() != lavav1.Phase_PHASE_FINALIZING {
			return nil
		}
		_, err = update(ctx, s.kv, key, func(cur *Entry) (*Entry, error) {
			if cur == nil || cur.UID != res.GetUid() || cur.Finalizing {
				return nil, errSkip
			}
			e := *cur
			e.Finalizing = true
			return &e, nil
		})
	default:
		return nil
	}
	return err
}

// LastScanOr is the last scan time, or t when there was none.
func (e *Entry) LastScanOr(t time.Time) time.Time {
	if e.LastScan.IsZero() {
		return t
	}
	return e.LastScan
}

// interval is e's interval, defaulted and floored.
func (s *Service) interval(e *Entry) time.Duration {
	d := e.Interval
	if d <= 0 {
		d = s.cfg.DefaultInterval
	}
	return max(d, s.cfg.MinInterval)
}

func (s *Service) nextDue(e *Entry, base time.Time) time.Time {
	return NextDue(base, s.interval(e), s.cfg.Jitter).UTC()
}

// schedule watches the bucket and starts a scan for every due entry, at most Concurrency at
// once.
func (s *Service) schedule(ctx context.Context) error {
	w, err := s.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("drift: watch %s: %w", bus.BucketDriftSchedule, err)
	}
	defer func() { _ = w.Stop() }()
	entries := map[string]*Entry{}
	sem := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(s.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case kve, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil // the watch ends with ctx, which select may see second
				}
				return errors.New("drift: schedule watch ended")
			}
			if kve == nil {
				continue // end of the initial values
			}
			if kve.Operation() != jetstream.KeyValuePut {
				delete(entries, kve.Key())
				continue
			}
			e := &Entry{}
			if err := json.Unmarshal(kve.Value(), e); err != nil {
				s.cfg.Logger.Warn("drift: undecodable schedule entry", "key", kve.Key(), "error", err)
				delete(entries, kve.Key())
				continue
			}
			entries[kve.Key()] = e
			s.metrics.scheduled.Set(float64(len(entries)))
		case <-tick.C:
			now := s.cfg.Now().UTC()
			for key, e := range entries {
				// A namespace at its share waits for a later tick: one tenant's slow scans
				// never hold every slot.
				if !e.DueAt(now) || s.isRunning(key) || s.nsRunning(e.Namespace) >= s.cfg.MaxPerNamespace {
					continue
				}
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return nil
				}
				ns := e.Namespace
				s.setRunning(key, ns, true)
				wg.Go(func() {
					defer func() { <-sem; s.setRunning(key, ns, false) }()
					s.scanKey(ctx, key)
				})
			}
		}
	}
}

func (s *Service) isRunning(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[key]
}

// nsRunning is how many scans of namespace ns this process runs.
func (s *Service) nsRunning(ns string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perNamespace[ns]
}

// setRunning marks key, an entry of namespace ns, as scanned (on) or no longer.
func (s *Service) setRunning(key, ns string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.running[key] = true
		s.perNamespace[ns]++
		return
	}
	delete(s.running, key)
	if s.perNamespace[ns]--; s.perNamespace[ns] <= 0 {
		delete(s.perNamespace, ns)
	}
}

// scanKey claims the entry, scans it and records the outcome. Errors are logged and counted:
// the entry is due again after RetryDelay (doubling per consecutive failure).
func (s *Service) scanKey(ctx context.Context, key string) {
	now := s.cfg.Now().UTC()
	claimed, err := update(ctx, s.kv, key, func(cur *Entry) (*Entry, error) {
		if cur == nil || !cur.DueAt(now) {
			return nil, errSkip
		}
		e := *cur
		e.ClaimedBy, e.ClaimUntil = s.cfg.Holder, now.Add(s.cfg.ClaimTTL)
		return &e, nil
	})
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("drift: claim failed", "key", key, "error", err)
		}
		return
	}
	if claimed == nil || claimed.ClaimedBy != s.cfg.Holder || !claimed.ClaimUntil.Equal(now.Add(s.cfg.ClaimTTL)) {
		return // another replica has it, or it is no longer due
	}
	log := s.cfg.Logger.With("resource", claimed.Namespace+"/"+claimed.Name,
		"generation", claimed.Generation)
	start := s.cfg.Now()
	ev, err := s.scanClaimed(ctx, claimed)
	s.metrics.duration.Observe(s.cfg.Now().Sub(start).Seconds())
	result := resultClean
	switch {
	case errors.Is(err, bus.ErrLeaseHeld):
		result = resultPostponed
	case err != nil:
		result = resultError
	case len(ev.GetFindings()) > 0:
		result = resultDrifted
	}
	s.metrics.scans.WithLabelValues(result).Inc()
	done := s.cfg.Now().UTC()
	_, uerr := update(context.WithoutCancel(ctx), s.kv, key, func(cur *Entry) (*Entry, error) {
		if cur == nil || cur.UID != claimed.UID || cur.ClaimedBy != s.cfg.Holder {
			return nil, errSkip
		}
		e := *cur
		e.ClaimedBy, e.ClaimUntil = "", time.Time{}
		switch {
		case err == nil:
			e.Failures = 0
			e.LastScan = done
			if !cur.Due.After(claimed.Due) { // an Applied during the scan set its own due time
				e.Due = s.nextDue(&e, done)
			}
		case result == resultPostponed:
			e.Due = done.Add(s.cfg.RetryDelay)
		default:
			e.Failures++
			delay := s.cfg.RetryDelay
			for i := 1; i < e.Failures && delay < s.interval(&e); i++ {
				delay *= 2
			}
			e.Due = done.Add(min(delay, s.interval(&e)))
		}
		return &e, nil
	})
	switch {
	case err != nil && result == resultPostponed:
		log.Debug("drift: scan postponed: the resource's lease is held")
	case err != nil && ctx.Err() != nil:
		log.Debug("drift: scan cancelled by shutdown", "error", err)
	case err != nil:
		log.Warn("drift: scan failed", "error", err)
	default:
		log.Info("drift: scanned", "findings", len(ev.GetFindings()), "max_severity", ev.GetMaxSeverity().String(),
			"event_id", ev.GetEnvelope().GetEventId())
	}
	if uerr != nil && ctx.Err() == nil {
		log.Warn("drift: record scan", "error", uerr)
	}
}

// scanClaimed scans a claimed entry (under the resource's lease when configured) and
// publishes DriftScanned. The lease rides in the context to [Service.Scan], which names the
// state locks it takes after it.
func (s *Service) scanClaimed(ctx context.Context, e *Entry) (*lavav1.DriftScanned, error) {
	ctx, cancel := bus.CancelAfter(ctx, s.cfg.ScanTimeout)
	defer cancel()
	if s.cfg.Leases == nil {
		return s.Scan(ctx, e)
	}
	lease, err := s.cfg.Leases.Acquire(ctx, e.Namespace, e.Name)
	if err != nil {
		return nil, err
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = lease.Release(rctx)
		rcancel()
	}()
	return s.Scan(context.WithValue(ctx, leaseKey{}, lease), e)
}

// Scan scans one entry with its engine, its providers holding the resource's provider
// credentials (identity.Resolver.For, as the applier's), and publishes the DriftScanned it
// returns. Findings are classified with the configured cosmetic prefixes; sensitive values
// are redacted by the engine and flagged. Errors: no engine for the entry, the credentials
// (wrapping identity.ErrNoServiceAccount, ErrProviderEnvForbidden or ErrProviderEnvInvalid;
// names only, never a value), the engine's scan error, the publish.
func (s *Service) Scan(ctx context.Context, e *Entry) (*lavav1.DriftScanned, error) {
	eng := s.cfg.Engines[e.Engine]
	if eng == nil {
		return nil, fmt.Errorf("drift: engine %q is not available here", e.Engine)
	}
	src, pins := engine.SourcesAndConstraints(e.Providers)
	holder := s.cfg.Holder
	if l := leaseOf(ctx); l != nil {
		// The scan runs under the resource's lease: a state lock it leaves behind when this
		// replica dies is taken over as soon as the lease is gone (bus.Lease.LockHolder).
		holder = l.LockHolder()
	}
	creds, err := identity.Resolver{Own: s.cfg.Kube, Service: "drift", Identities: s.cfg.Identities, Credentials: s.cfg.Credentials}.
		For(ctx, e.Namespace, e.ServiceAccountName, e.ProviderEnvFrom)
	if err != nil {
		return nil, fmt.Errorf("drift: scan %s/%s: %w", e.Namespace, e.Name, err)
	}
	rep, err := eng.ScanDrift(ctx, engine.DriftRequest{
		Target: engine.Target{Key: state.Key{Namespace: e.Namespace, Name: e.Name}, RenderedDigest: e.ArtifactDigest,
			ProviderSources: src, ProviderConstraints: pins, Holder: holder, Credentials: creds, Redact: creds.Secrets()},
		CosmeticPrefixes: s.cfg.CosmeticPrefixes,
	})
	if err != nil {
		return nil, fmt.Errorf("drift: scan %s/%s: %w", e.Namespace, e.Name, err)
	}
	ev := Event(e, rep, s.cfg.CosmeticPrefixes)
	for _, f := range ev.GetFindings() {
		s.metrics.findings.WithLabelValues(pipeline.SeverityName(f.GetSeverity(), "none")).Inc()
	}
	if _, err := s.pub.PublishEvent(ctx, ev); err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	return ev, nil
}

// Event builds the DriftScanned of a scan of e: findings re-classified with prefixes
// (docs/dialect.md section 6.1) and sorted by address then attribute, the maximum severity, the engine,
// plan id and Terraform JSON digest scanned against. Values the engine marked sensitive, and
// every value of a resource that binds Secrets ([Entry].BindsSecrets), are "(sensitive)" with
// the finding's sensitive flag set. event_id is BLAKE3 of (uid, generation,
// "lava.v1.DriftScanned", "drift:<scanned at>"); the scan starts a new pass, so
// correlation_id is the event's own id.
func Event(e *Entry, rep *engine.DriftReport, prefixes []string) *lavav1.DriftScanned {
	scanned := rep.ScannedAt.UTC()
	id := eventid.ID(e.UID, e.Generation, "lava.v1.DriftScanned", eventid.DriftTrigger(scanned))
	ev := &lavav1.DriftScanned{
		Envelope: &lavav1.Envelope{EventId: id, OccurredAt: timestamppb.New(scanned), Source: bus.ServiceDrift,
			Resource:   &lavav1.ResourceRef{Namespace: e.Namespace, Name: e.Name, Uid: e.UID},
			Generation: e.Generation, CorrelationId: id, Trigger: eventid.DriftTrigger(scanned)},
		ScannedAt:           timestamppb.New(scanned),
		Engine:              pipeline.EngineProto(v1alpha1.Engine(e.Engine)),
		PlanId:              e.PlanID,
		TerraformJsonDigest: e.TerraformJSONDigest,
	}
	r := engine.DriftReport{ScannedAt: scanned, Findings: Classify(rep.Findings, prefixes)}
	r.Finish()
	for _, f := range r.Findings {
		p := findingProto(f)
		if e.BindsSecrets && (p.Observed != "" || p.Declared != "") {
			p.Observed, p.Declared, p.Sensitive = engine.Redacted, engine.Redacted, true
		}
		ev.Findings = append(ev.Findings, p)
	}
	ev.MaxSeverity = pipeline.SeverityProto(r.MaxSeverity)
	return ev
}

// Classify drops no-op and read findings and (re)classifies the others (docs/dialect.md section 6.1):
// delete and replace critical, create functional, update cosmetic when the attribute starts
// with one of prefixes, otherwise functional.
func Classify(findings []engine.Finding, prefixes []string) []engine.Finding {
	out := make([]engine.Finding, 0, len(findings))
	for _, f := range findings {
		sev := engine.Classify(f.Change, f.Attribute, prefixes)
		if sev == "" {
			continue
		}
		f.Severity = sev
		out = append(out, f)
	}
	return out
}

func findingProto(f engine.Finding) *lavav1.DriftFinding {
	// An attribute path holds map keys the configuration chose (a key of 500 KB, changed at
	// every scan, was in each DriftScanned, its anomaly's metadata and that anomaly's receipt):
	// cut like the values, as is the address (instance keys).
	p := &lavav1.DriftFinding{Address: engine.Cut(f.Address), Attribute: engine.Cut(f.Attribute), Change: pipeline.ChangeKind(f.Change),
		Severity: pipeline.SeverityProto(f.Severity)}
	// The engine redacted the values; each is cut to what an alert shows (a provider's
	// object, a stored file read back, may be megabytes, once per finding).
	if f.Observed != nil {
		p.Observed = engine.Cut(*f.Observed)
	}
	if f.Declared != nil {
		p.Declared = engine.Cut(*f.Declared)
	}
	if p.Observed == engine.Redacted || p.Declared == engine.Redacted {
		p.Sensitive = true
		p.Observed, p.Declared = engine.Redacted, engine.Redacted
	}
	return p
}

// leaseKey is the context key of the lease a scan runs under.
type leaseKey struct{}

// leaseOf is the lease of a scan's context (nil without one).
func leaseOf(ctx context.Context) *bus.Lease {
	l, _ := ctx.Value(leaseKey{}).(*bus.Lease)
	return l
}

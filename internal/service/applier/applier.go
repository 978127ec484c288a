package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/readmodel"
)

// Operation is one engine operation, reported to [Config].Observe when it ends.
type Operation struct {
	// Op is OpPlan, OpApply or OpDestroy.
	Op string
	// Namespace and Name are the resource.
	Namespace, Name string
	// Holder is the replica ([Config].Holder).
	Holder string
	// Start and End bound the engine call.
	Start, End time.Time
	// Err is the engine's error (nil on success).
	Err error
}

// DefaultConcurrency is the handlers running at once per consumer when [Config].Concurrency
// is not set (--concurrency).
const DefaultConcurrency = 4

// DefaultMaxOrphanedStates is how many orphaned states one namespace keeps when not
// configured ([Config].MaxOrphanedStates, --max-orphaned-states-per-namespace): each is kept
// for good, up to the state store's largest body.
const DefaultMaxOrphanedStates = 16

// Config configures a [Service]. JS, Store, Engines and Holder are required.
type Config struct {
	// JS is the JetStream context; the topology must exist (bus.EnsureTopology).
	JS jetstream.JetStream
	// Store is the state store every engine uses (lava-state and lava-artifacts).
	Store *state.Store
	// Engines maps an engine name (string(v1alpha1.EngineEmbedded), string(v1alpha1.EngineTofu), string(v1alpha1.EngineTerraform)) to the engine;
	// a resource naming an absent engine fails with reason EngineUnavailable.
	Engines map[string]engine.Engine
	// Holder names this replica in leases and state locks; unique per process (e.g. the pod
	// name and a random suffix).
	Holder string
	// Kube writes the Secret "<name>-lava-outputs" (get, create, update) with the applier's
	// own identity, when Identities is nil, and confirms a DeletionRequested with the API
	// server (get lavaarchitectures; confirmDeletion). Nil: sensitive outputs are not stored
	// (logged as a warning, values never) and deletions are not confirmed.
	Kube client.Client
	// Identities, when set, gives the identity the outputs Secret is written (and bound
	// Secrets are read for redaction) with: the object's ServiceAccount impersonated
	// (docs/security.md, "Kubernetes RBAC").
	Identities *identity.Clients
	// Credentials, when set, gives each object's providers its ServiceAccount's token (with the
	// workload-identity variables its annotations call for); spec.providerEnvFrom is read with
	// the object's identity either way (docs/security.md, "Engines").
	Credentials *identity.Credentials
	// Policy is the tenant policy document whose planRules every plan is held to before it is
	// applied (internal/lang/planpolicy; docs/design/0037-plan-policies.md): the one the
	// engines read (--policy-file). Nil: the built-in rules (planpolicy.Default).
	Policy *policy.File
	// Logger receives one line per outcome (default: discard). Never a secret.
	Logger *slog.Logger
	// Registerer receives the applier metrics (nil: not registered).
	Registerer prometheus.Registerer
	// BusMetrics counts consumed messages, leases and watermark drops (may be nil).
	BusMetrics *bus.Metrics
	// Concurrency bounds handlers per consumer (default [DefaultConcurrency]).
	Concurrency int
	// MaxPerNamespace is how many of the Concurrency handlers one namespace may hold at once
	// (--max-concurrency-per-namespace); the others go to other namespaces' messages in turn
	// (bus.ConsumeOptions.FairKey). 0: half of Concurrency, rounded up (svc.MaxPerNamespace).
	MaxPerNamespace int
	// DrainTimeout bounds in-flight work after shutdown starts (default 30s); after it the
	// work's context is cancelled and the message naked for another replica.
	DrainTimeout time.Duration
	// NakBackoff is the redelivery delay after a transient error or a contended lease
	// (default 1s doubling to 1m).
	NakBackoff bus.Backoff
	// CollectInterval is how often superseded artifacts are deleted from lava-artifacts
	// (CollectArtifacts; default bus.DefaultCollectInterval); CollectMinAge keeps anything put
	// within that long (default bus.DefaultCollectMinAge).
	CollectInterval, CollectMinAge time.Duration
	// MaxOrphanedStates is how many orphaned states (deletionPolicy Orphan, kept for good) one
	// namespace may keep; past it an Orphan deletion waits (OrphanLimitReached). Default
	// DefaultMaxOrphanedStates.
	MaxOrphanedStates int
	// Observe, when set, is called after every engine operation (metrics and tests).
	Observe func(Operation)
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Service is the applier. Create it with [New] and run it with [Service.Run].
type Service struct {
	cfg     Config
	pub     *bus.Publisher
	leases  *bus.Leases
	wm      *bus.Watermarks
	wmKV    jetstream.KeyValue
	recs    records
	metrics *metrics
}

// New binds the buckets the applier uses and registers its metrics:
// lava_applier_operations_total{operation,result}, lava_applier_operation_duration_seconds,
// lava_applier_lease_contended_total, lava_applier_plans_held_total and
// lava_applier_artifacts_collected_total.
func New(ctx context.Context, cfg Config) (*Service, error) {
	switch {
	case cfg.JS == nil:
		return nil, errors.New("applier: no JetStream")
	case cfg.Store == nil:
		return nil, errors.New("applier: no state store")
	case len(cfg.Engines) == 0:
		return nil, errors.New("applier: no engine")
	case cfg.Holder == "":
		return nil, errors.New("applier: no holder name")
	}
	// The policy document's plan rules compile now, or the applier does not start (as synth
	// refuses to start without its policy): a rule an admin got wrong is never found first
	// by a tenant's plan.
	if _, err := cfg.Policy.Load(); err != nil {
		return nil, fmt.Errorf("applier: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	cfg.MaxPerNamespace = svc.MaxPerNamespace(cfg.MaxPerNamespace, cfg.Concurrency)
	if cfg.CollectInterval <= 0 {
		cfg.CollectInterval = bus.DefaultCollectInterval
	}
	if cfg.CollectMinAge <= 0 {
		cfg.CollectMinAge = bus.DefaultCollectMinAge
	}
	if cfg.MaxOrphanedStates <= 0 {
		cfg.MaxOrphanedStates = DefaultMaxOrphanedStates
	}
	leases, err := bus.NewLeases(ctx, cfg.JS, cfg.Holder, cfg.BusMetrics)
	if err != nil {
		return nil, fmt.Errorf("applier: %w", err)
	}
	wm, err := bus.NewWatermarks(ctx, cfg.JS, bus.ServiceApplier, cfg.BusMetrics)
	if err != nil {
		return nil, fmt.Errorf("applier: %w", err)
	}
	wmKV, err := cfg.JS.KeyValue(ctx, bus.BucketWatermarks)
	if err != nil {
		return nil, fmt.Errorf("applier: bind %s: %w", bus.BucketWatermarks, err)
	}
	kv, err := cfg.JS.KeyValue(ctx, bus.BucketState)
	if err != nil {
		return nil, fmt.Errorf("applier: bind %s: %w", bus.BucketState, err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, pub: bus.NewPublisher(cfg.JS), leases: leases, wm: wm, wmKV: wmKV,
		recs: records{kv: kv}, metrics: m}, nil
}

// Run consumes Synthesized (LAVA_PHASES), DeletionRequested (LAVA_RESOURCES) and the plan,
// apply and destroy commands (LAVA_COMMANDS) with the durable consumer "applier" until ctx is
// cancelled, then drains; it collects superseded artifacts every CollectInterval meanwhile.
func (s *Service) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.collectLoop(gctx) })
	g.Go(func() error {
		return pipeline.Consumer{JS: s.cfg.JS, Service: bus.ServiceApplier, Resource: true, Concurrency: s.cfg.Concurrency,
			ShareNamespaces: true, MaxPerNamespace: s.cfg.MaxPerNamespace, Coalesce: bus.IsSynthesized, DrainTimeout: s.cfg.DrainTimeout, NakBackoff: s.cfg.NakBackoff, Logger: s.cfg.Logger, Metrics: s.cfg.BusMetrics,
		}.Consume(gctx, s.Handle, bus.StreamPhases, bus.StreamResources, bus.StreamCommands)
	})
	return g.Wait()
}

// Handle handles one delivery under the resource's lease; m names a resource (the consumer's
// envelope guard, pipeline.Consumer.Resource, admits no other). nil means the outcome is
// published (or the message is stale or already handled); a contended lease or an
// infrastructure error naks; a malformed message is permanent.
func (s *Service) Handle(ctx context.Context, m *bus.Message) error {
	env := m.Envelope
	res := env.GetResource()
	ns, name := res.GetNamespace(), res.GetName()
	return s.withLease(ctx, ns, name, func(ctx context.Context, lease *bus.Lease) error {
		rec, revision, err := s.recs.load(ctx, ns, name)
		if err != nil {
			return err
		}
		if rec.UID != "" && rec.UID != res.GetUid() {
			// The object was deleted and created again under the same name: start afresh
			// (its watermark belonged to the old object). The state stays.
			if err := s.wmKV.Delete(ctx, bus.WatermarkKey(bus.ServiceApplier, ns, name)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				return fmt.Errorf("applier: reset watermark: %w", err)
			}
			*rec = readmodel.Record{Last: rec.Last}
		}
		rec.UID = res.GetUid()
		if slices.Contains(rec.Handled, env.GetEventId()) || rec.Deleted {
			return nil
		}
		current, err := s.wm.Advance(ctx, ns, name, env.GetGeneration())
		if err != nil {
			return err
		}
		if !current {
			return nil
		}
		w := &work{s: s, rec: rec, ns: ns, name: name, cause: env, holder: lease.LockHolder()}
		w.log = s.cfg.Logger.With("resource", ns+"/"+name,
			"generation", env.GetGeneration(), "event_id", env.GetEventId())
		switch ev := m.Event.(type) {
		case *lavav1.Synthesized:
			// A newer generation was observed: this one's configuration is no longer the
			// object's, and the newer one's Synthesized follows. Planning it anyway let
			// spec edits queue one slow apply per superseded generation.
			if newer := w.observed(ctx).GetEnvelope().GetGeneration(); newer > env.GetGeneration() {
				w.log.Info("superseded by a newer generation; not planned", "observed_generation", newer)
				break
			}
			err = w.synthesized(ctx, ev, 1)
		case *lavav1.ReapplyRequested:
			err = w.reapply(ctx, ev)
		case *lavav1.RetryRequested:
			err = w.retry(ctx, ev)
		case *lavav1.DeletionRequested:
			if err = s.confirmDeletion(ctx, env.GetResource()); err == nil {
				err = w.deletion(ctx, ev.GetDeletionPolicy(), ev.GetEngine(), 1)
			}
		default:
			return bus.Permanent(fmt.Errorf("applier: unexpected %s", m.Schema))
		}
		if err != nil {
			return err
		}
		rec.Handled = push(rec.Handled, env.GetEventId(), maxHandled)
		return s.recs.save(ctx, ns, name, rec, revision)
	})
}

// lastEvent reads the newest message on subject of stream (a resource's Synthesized,
// ResourceObserved or DeletionRequested) into m; false when there is none.
func lastEvent(ctx context.Context, js jetstream.JetStream, stream, subject string, m proto.Message) (bool, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return false, fmt.Errorf("applier: %w", err)
	}
	found, err := bus.LastEvent(ctx, st, subject, m)
	if err != nil {
		return false, fmt.Errorf("applier: %w", err)
	}
	return found, nil
}

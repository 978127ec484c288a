package watcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-logr/logr"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
)

// sourceGroupVersion is the API group and version of the Flux sources spec.sourceRef names.
var sourceGroupVersion = sourcev1.GroupVersion

// Defaults of [Config].
const (
	// DefaultControllerName names the controller (the "controller" label of
	// controller_runtime_reconcile_total).
	DefaultControllerName = "lavaarchitecture"
	// DefaultLeaderElectionID is the name of the coordination.k8s.io Lease of leader election.
	DefaultLeaderElectionID = "lava-watcher"
	// DefaultLeaseDuration, DefaultRenewDeadline and DefaultRetryPeriod are the flags'
	// leader election timings: the Flux controllers' (fluxcd/pkg/runtime/leaderelection), longer
	// than controller-runtime's 15s/10s/2s so that a leader whose API calls are slow on a loaded
	// node keeps its Lease instead of exiting.
	DefaultLeaseDuration = 35 * time.Second
	DefaultRenewDeadline = 30 * time.Second
	DefaultRetryPeriod   = 5 * time.Second
	// DefaultDeletionWait is [Config].DeletionWait: room for a consumer's own destroy, short
	// enough that a producer whose consumer is not deleted is not held for long.
	DefaultDeletionWait = 10 * time.Minute
	// EventRecorderName is the reportingController of the Kubernetes Events the watcher
	// records.
	EventRecorderName = "lava-watcher"
	// DefaultPhaseConcurrency is [Options].PhaseConcurrency: phase events wait for the
	// coalesced status write of their object before they are acked, so many are in flight at
	// once (bounded by the consumer's MaxAckPending on the server, 1000 by default); at most
	// three quarters of them wait out a Hold ([CoreConfig].MaxHeld).
	DefaultPhaseConcurrency = 1000
	// DefaultMaxConcurrentReconciles is [Options].MaxConcurrentReconciles: a reconcile waits on
	// a few API and NATS round trips (finalizer, Observed status, the last ResourceObserved,
	// the publish), so a burst of creates needs many at once; bench/pipeline measured 2 as the
	// pipeline's bottleneck (create to ResourceObserved p50 2.6 s for 100 objects).
	DefaultMaxConcurrentReconciles = 16
)

// Config configures [New]. RESTConfig, Scheme and JetStream are required.
type Config struct {
	// RESTConfig reaches the API server.
	RESTConfig *rest.Config
	// Scheme must know lava.pleme.io/v1alpha1 and the client-go types (events, leases).
	Scheme *runtime.Scheme
	// JetStream is the bus; the topology ([bus.EnsureTopology]) must exist.
	JetStream jetstream.JetStream
	// Logger receives the watcher's logs and, through logr, controller-runtime's. Default:
	// discard.
	Logger *slog.Logger
	// Registry receives the watcher's and the bus consumer's metrics. Default: a private
	// registry. controller-runtime's own metrics (controller_runtime_reconcile_total, the work
	// queue, leader election) stay in its registry
	// sigs.k8s.io/controller-runtime/pkg/metrics.Registry; [Run] serves both (svc.Setup.Gatherer).
	Registry prometheus.Registerer
	// BusMetrics, if set, counts the phase consumer's messages (svc.Base.BusMetrics, already
	// on Registry); nil registers new ones on Registry.
	BusMetrics *bus.Metrics
	// Namespaces limits the watch to these namespaces; empty watches all. Phase events of
	// other namespaces are acked and ignored, so run one watcher per set of namespaces with
	// its own PhaseConsumer.
	Namespaces []string
	// ClusterName is this cluster's name in LavaArchitectureDependency references; edges to
	// another cluster are reported as not observable. Default "" (only unqualified
	// references are local).
	ClusterName string
	// NoCrossNamespaceRefs refuses every reference to another namespace (spec.dependsOn,
	// spec.sourceRef, LavaArchitectureDependency from/to): the object's DependenciesReady is
	// False with reason CrossNamespaceRefRefused, the target is never read and nothing is
	// published for it (docs/security.md). [Run] sets it unless the flags allow such
	// references ([Lockdown]: refused by default); a Config built directly must set it.
	NoCrossNamespaceRefs bool
	// WatchSecrets watches the Secrets of spec.bindingsFrom (and the outputs Secrets of
	// outputsRef producers) like ConfigMaps. It needs get, list and watch on secrets, which
	// Kubernetes RBAC cannot limit to metadata, so it is off by default (chart value
	// watcher.watchSecrets): then a bound Secret neither enters the bindings digest nor is
	// checked for existence (synth reports a missing one when it renders).
	WatchSecrets bool
	// ReadSecrets, without WatchSecrets, reads each bound Secret (spec.bindingsFrom secretRef,
	// and the outputs Secret of an outputsRef producer) with `get` at every reconcile, as the
	// object's identity (Identities), so a changed Secret starts a new render without a
	// cluster-wide Secret watch: an object that binds one is reconciled again every
	// SecretRecheck. A Secret its identity may not read (Forbidden, or no ServiceAccount to act
	// as) contributes a fixed marker and holds nothing: synth reports it when it renders. [Run]
	// sets it from --read-secrets (default on, chart value watcher.readSecrets); a Config built
	// directly has it off (docs/design/0036-secret-bindings-rechecked.md).
	ReadSecrets bool
	// Identities gives the identity bound Secrets are read with under ReadSecrets: the
	// object's ServiceAccount, impersonated ([identity.Clients.For]). Nil: the watcher's own
	// identity (impersonation off; it then needs `get` on secrets).
	Identities *identity.Clients
	// SecretRecheck is how often an object that binds a Secret is reconciled under
	// ReadSecrets. Zero: the object's spec.driftInterval (default 5m, at least 30s).
	SecretRecheck time.Duration
	// SecretReadsPerSecond bounds the bound Secrets read (WatchSecrets or ReadSecrets) per
	// namespace, with bursts of SecretReadBurst: a reconcile that would read more is put off
	// until its namespace has them, so one namespace's rechecks never hold the workers every
	// namespace shares. Zero: [DefaultSecretReadsPerSecond] and [DefaultSecretReadBurst];
	// negative: no bound.
	SecretReadsPerSecond float64
	SecretReadBurst      int
	// DeletionWait is how long a deleted object's destroy waits for the objects that consume it
	// (spec.dependsOn, spec.bindingsFrom outputsRef, LavaArchitectureDependency) to be
	// destroyed first, from its deletionTimestamp; then it proceeds and says so (condition
	// DeletionBlocked). Default [DefaultDeletionWait]; negative: no wait.
	DeletionWait time.Duration
	// BindingsKey is the installation's bindings key (synth's --bindings-key-file): the BLAKE3
	// key of the Secret data in the bindings digest of the ResourceObserved trigger. Empty:
	// Secrets contribute their resourceVersion (a metadata-only change then starts a render
	// too).
	BindingsKey []byte
	// ControllerName names the controller. Default [DefaultControllerName].
	ControllerName string
	// PhaseConsumer is the durable consumer on LAVA_PHASES. Default "watcher" (declared by
	// [bus.Declare]); another name must be created by the caller.
	PhaseConsumer string
	// PhaseConcurrency bounds phase events folded, or waiting for the status write that holds
	// them, at once. Default [DefaultPhaseConcurrency].
	PhaseConcurrency int
	// StatusWindow and StatusHold are the coalescing of status writes ([CoreConfig].Window and
	// Hold). Defaults [DefaultStatusWindow] and [DefaultStatusHold]; a negative StatusWindow
	// writes every fold at once.
	StatusWindow, StatusHold time.Duration
	// MaxConcurrentReconciles bounds concurrent reconciles. Default
	// [DefaultMaxConcurrentReconciles].
	MaxConcurrentReconciles int
	// LeaderElection enables leader election (production: true). Only the leader reconciles
	// and consumes phase events; other replicas keep their caches warm.
	LeaderElection bool
	// LeaderElectionID is the Lease name. Default [DefaultLeaderElectionID].
	LeaderElectionID string
	// LeaderElectionNamespace is the Lease's namespace; required with LeaderElection when not
	// running in a pod.
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election; zero means
	// controller-runtime's defaults (15s, 10s, 2s). The watcher's flags default to
	// [DefaultLeaseDuration], [DefaultRenewDeadline] and [DefaultRetryPeriod].
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Clock stamps the events the watcher produces itself. Default time.Now.
	Clock func() time.Time
}

// Watcher is the watcher service: a controller-runtime manager running the LavaArchitecture
// controller and, on the leader, the phase consumer.
type Watcher struct {
	mgr     manager.Manager
	metrics *Metrics
	js      jetstream.JetStream
	// rc and access: the identity the manager acts with, and the list and watch requests its
	// informers will make ([watchedAccess]), checked before the manager starts.
	rc     *rest.Config
	access []authorizationv1.ResourceAttributes
	// stopped is closed when the context of [Watcher.Start] is done ([stopSafeCache]).
	stopped chan struct{}
}

// New builds the watcher: the manager (metrics and health servers disabled: serve them with
// [Run]: svc.Base and [Watcher.Ready]), field indexes, the controller and its watches, and the
// phase consumer. It does not start anything.
func New(ctx context.Context, o Config) (*Watcher, error) {
	if o.RESTConfig == nil || o.Scheme == nil || o.JetStream == nil {
		return nil, errors.New("watcher: RESTConfig, Scheme and JetStream are required")
	}
	o.setDefaults()
	metrics, err := NewMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	busMetrics := o.BusMetrics
	if busMetrics == nil {
		if busMetrics, err = bus.NewMetrics(o.Registry); err != nil {
			return nil, fmt.Errorf("watcher: %w", err)
		}
	}
	mo := o.managerOptions()
	stopped := make(chan struct{})
	mo.NewCache = func(rc *rest.Config, opts cache.Options) (cache.Cache, error) {
		c, err := cache.New(rc, opts)
		return stopSafeCache{Cache: c, stopped: stopped}, err
	}
	mgr, err := ctrl.NewManager(o.RESTConfig, mo)
	if err != nil {
		return nil, fmt.Errorf("watcher: new manager: %w", err)
	}
	if err := indexes(ctx, mgr.GetFieldIndexer(), o.ClusterName); err != nil {
		return nil, err
	}
	r, err := newReconciler(ctx, mgr, o, metrics)
	if err != nil {
		return nil, err
	}
	if err := discoverFluxSources(mgr, r, o.Logger); err != nil {
		return nil, err
	}
	if err := buildController(mgr, r, o); err != nil {
		return nil, err
	}
	pc := &phaseConsumer{
		js: o.JetStream, consumer: o.PhaseConsumer, concurrency: o.PhaseConcurrency, core: r.core,
		busMetrics: busMetrics, log: o.Logger.With(slog.String("component", "phases")),
	}
	if err := mgr.Add(pc); err != nil {
		return nil, fmt.Errorf("watcher: add phase consumer: %w", err)
	}
	access, err := watchedAccess(mgr, r, o)
	if err != nil {
		return nil, err
	}
	return &Watcher{mgr: mgr, metrics: metrics, js: o.JetStream, rc: o.RESTConfig, access: access, stopped: stopped}, nil
}

// watchedAccess lists the list and watch requests the controller's informers make: every kind
// buildController watches, in each of o.Namespaces (in every namespace when none is set; a
// cluster-scoped kind cluster-wide).
func watchedAccess(mgr manager.Manager, r *reconciler, o Config) ([]authorizationv1.ResourceAttributes, error) {
	objs := []client.Object{&v1alpha1.LavaArchitecture{}, &v1alpha1.RemediationPolicy{}, &v1alpha1.LavaArchitectureDependency{}, &corev1.ConfigMap{}}
	if o.WatchSecrets {
		objs = append(objs, &corev1.Secret{})
	}
	for _, kind := range fluxSourceKinds {
		if r.sourceKinds[kind] {
			objs = append(objs, newFluxSource(kind))
		}
	}
	scopes := o.Namespaces
	if len(scopes) == 0 {
		scopes = []string{""}
	}
	var attrs []authorizationv1.ResourceAttributes
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, o.Scheme)
		if err != nil {
			return nil, fmt.Errorf("watcher: %w", err)
		}
		m, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("watcher: map %s: %w", gvk.Kind, err)
		}
		nss := scopes
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			nss = []string{""}
		}
		for _, ns := range nss {
			for _, verb := range []string{"list", "watch"} {
				attrs = append(attrs, authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: m.Resource.Group, Resource: m.Resource.Resource})
			}
		}
	}
	return attrs, nil
}

// stopSafeCache is the manager's cache, except that WaitForCacheSync also returns, reporting
// true, once the watcher is stopped. controller-runtime v0.25's manager waits for its caches'
// first sync (with a context of its own, which the manager's end does not cancel) in a loop
// that does not end when the manager's context is done first (runnableGroup.Start in
// pkg/manager/runnable_group.go keeps selecting the closed Done channel): a watcher stopped
// before its caches synced (the API server unreachable, or a list refused) would never stop,
// spinning a CPU. Reporting true lets that loop end; the manager then sees its context done
// and stops.
type stopSafeCache struct {
	cache.Cache
	stopped <-chan struct{}
}

// WaitForCacheSync is the cache's, ended early (reporting true) when the watcher stopped.
func (c stopSafeCache) WaitForCacheSync(ctx context.Context) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	synced := c.Cache.WaitForCacheSync(ctx)
	select {
	case <-c.stopped:
		return true
	default:
		return synced
	}
}

// setDefaults fills in the defaults of the fields documented on [Config].
func (o *Config) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.ControllerName == "" {
		o.ControllerName = DefaultControllerName
	}
	if o.PhaseConsumer == "" {
		o.PhaseConsumer = bus.ServiceWatcher
	}
	if o.PhaseConcurrency <= 0 {
		o.PhaseConcurrency = DefaultPhaseConcurrency
	}
	switch {
	case o.StatusWindow < 0:
		o.StatusWindow, o.StatusHold = 0, 0
	case o.StatusWindow == 0:
		o.StatusWindow = DefaultStatusWindow
		if o.StatusHold == 0 {
			o.StatusHold = DefaultStatusHold
		}
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if o.DeletionWait == 0 {
		o.DeletionWait = DefaultDeletionWait
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = DefaultLeaderElectionID
	}
}

// managerOptions are the controller-runtime manager's options: no metrics or health server of
// its own, leader election as configured, and a cache limited to o.Namespaces (all when empty)
// that drops managedFields.
func (o *Config) managerOptions() ctrl.Options {
	mo := ctrl.Options{
		Scheme:                        o.Scheme,
		Logger:                        logr.FromSlogHandler(o.Logger.Handler()),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	}
	if o.LeaseDuration > 0 {
		mo.LeaseDuration = ptr.To(o.LeaseDuration)
	}
	if o.RenewDeadline > 0 {
		mo.RenewDeadline = ptr.To(o.RenewDeadline)
	}
	if o.RetryPeriod > 0 {
		mo.RetryPeriod = ptr.To(o.RetryPeriod)
	}
	// The cache keeps every watched object; their managedFields are read by nothing here
	// (merge patches diff only what the reconciler changed), so they are dropped before an
	// object is stored (controller-runtime's cache.TransformStripManagedFields).
	mo.Cache.DefaultTransform = cache.TransformStripManagedFields()
	if len(o.Namespaces) > 0 {
		mo.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			mo.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return mo
}

// newReconciler builds the status core (limited to o.Namespaces when set) and the reconciler
// that uses it, on mgr's clients and event recorder.
func newReconciler(ctx context.Context, mgr manager.Manager, o Config, metrics *Metrics) (*reconciler, error) {
	resources, err := o.JetStream.Stream(ctx, bus.StreamResources)
	if err != nil {
		return nil, fmt.Errorf("watcher: stream %s: %w", bus.StreamResources, err)
	}
	pub := bus.NewPublisher(o.JetStream)
	rec := mgr.GetEventRecorder(EventRecorderName)
	core, err := NewCore(CoreConfig{
		Store:     NewAPIStore(mgr.GetClient(), mgr.GetAPIReader(), o.Logger.With(slog.String("component", "status"))),
		Publisher: pub, Recorder: rec, Metrics: metrics, Logger: o.Logger.With(slog.String("component", "status")),
		Window: o.StatusWindow, Hold: o.StatusHold, MaxHeld: o.PhaseConcurrency * 3 / 4,
	})
	if err != nil {
		return nil, err
	}
	if len(o.Namespaces) > 0 {
		watched := map[string]bool{}
		for _, ns := range o.Namespaces {
			watched[ns] = true
		}
		core.cfg.Namespaces = func(ns string) bool { return watched[ns] }
	}
	return &reconciler{
		c: mgr.GetClient(), reader: mgr.GetAPIReader(), bindingsKey: o.BindingsKey, watchSecrets: o.WatchSecrets,
		readSecrets: o.ReadSecrets && !o.WatchSecrets, ids: o.Identities, secretRecheck: o.SecretRecheck,
		secretBudget: newSecretBudget(o.SecretReadsPerSecond, o.SecretReadBurst),
		deletionWait: max(o.DeletionWait, 0),
		core:         core, rec: rec, resources: resources,
		deps:        resolver{c: mgr.GetClient(), cluster: o.ClusterName, noCrossNamespace: o.NoCrossNamespaceRefs},
		sourceKinds: map[string]bool{},
		clock:       o.Clock, metrics: metrics, log: o.Logger.With(slog.String("component", "reconciler")),
	}, nil
}

// discoverFluxSources records in r.sourceKinds the Flux source kinds the API server serves.
// Flux sources are watched only where the API server serves them: a cluster without Flux
// runs the watcher as before, and a spec.sourceRef there is held with SourceNotFound. An
// error other than "no match" from the REST mapper is returned.
func discoverFluxSources(mgr manager.Manager, r *reconciler, log *slog.Logger) error {
	for _, kind := range fluxSourceKinds {
		_, merr := mgr.GetRESTMapper().RESTMapping(sourceGroupVersion.WithKind(kind).GroupKind(), sourceGroupVersion.Version)
		switch {
		case merr == nil:
			r.sourceKinds[kind] = true
		case meta.IsNoMatchError(merr):
			log.Info("watcher: the API server serves no Flux "+kind+"; spec.sourceRef to one is held (SourceNotFound)", slog.String("group", sourceGroupVersion.String()))
		default:
			return fmt.Errorf("watcher: discover Flux %s: %w", kind, merr)
		}
	}
	return nil
}

// buildController registers r with mgr as the LavaArchitecture controller, with its watches:
// the served Flux sources, dependencies, remediation policies, dependency edges and the
// ConfigMaps (and, with o.WatchSecrets, Secrets) of spec.bindingsFrom.
func buildController(mgr manager.Manager, r *reconciler, o Config) error {
	b := ctrl.NewControllerManagedBy(mgr)
	for _, kind := range fluxSourceKinds {
		if r.sourceKinds[kind] {
			b = b.Watches(newFluxSource(kind), handler.EnqueueRequestsFromMapFunc(r.sourceUsers(kind)), builder.WithPredicates(sourceChanged()))
		}
	}
	b = b.
		Named(o.ControllerName).
		For(&v1alpha1.LavaArchitecture{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, forcedPass(), deletionStarted()))).
		Watches(&v1alpha1.LavaArchitecture{}, handler.EnqueueRequestsFromMapFunc(r.dependentsOf),
			builder.WithPredicates(dependencyChanged())).
		Watches(&v1alpha1.LavaArchitecture{}, handler.EnqueueRequestsFromMapFunc(r.targetsOf),
			builder.WithPredicates(consumersGone())).
		Watches(&v1alpha1.RemediationPolicy{}, handler.EnqueueRequestsFromMapFunc(r.policyUsers)).
		Watches(&v1alpha1.LavaArchitectureDependency{}, handler.EnqueueRequestsFromMapFunc(r.edgeDependent)).
		// The ConfigMaps and Secrets of spec.bindingsFrom: metadata only (no Secret value in the
		// cache); a change of one enqueues the objects that bind it (IndexBindingRef).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.bindingUsers(bindingKindConfigMap)),
			builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
	if o.WatchSecrets {
		b = b.Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.bindingUsers(bindingKindSecret)),
			builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
	}
	err := b.WithOptions(controller.Options{
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		SkipNameValidation:      ptr.To(true),
		ReconciliationTimeout:   time.Minute,
	}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("watcher: build controller: %w", err)
	}
	return nil
}

// Start runs the manager until ctx is done: caches on every replica; after winning the
// election (or at once without leader election) the controller and the phase consumer. It
// returns after a graceful stop (in-flight phase events finish or are naked).
func (w *Watcher) Start(ctx context.Context) error {
	if err := identity.CheckAccess(ctx, w.rc, w.access); err != nil {
		return fmt.Errorf("watcher: %w: the watcher lists and watches LavaArchitectures, RemediationPolicies, LavaArchitectureDependencies, "+
			"ConfigMaps, Secrets (with Secret bindings watched) and the served Flux sources where it runs", err)
	}
	return w.run(ctx)
}

// run starts the manager until ctx is done, and closes w.stopped then ([stopSafeCache]).
func (w *Watcher) run(ctx context.Context) error {
	defer context.AfterFunc(ctx, func() { close(w.stopped) })()
	if err := w.mgr.Start(ctx); err != nil {
		return fmt.Errorf("watcher: manager: %w", err)
	}
	return nil
}

// Ready is the /readyz check: the NATS connection is up and the caches have synced.
func (w *Watcher) Ready(ctx context.Context) error {
	if nc := w.js.Conn(); nc != nil && nc.Status() != nats.CONNECTED {
		return fmt.Errorf("watcher: nats connection %s", nc.Status())
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	c := w.mgr.GetCache()
	if s, ok := c.(stopSafeCache); ok {
		c = s.Cache // its own answer: the wrapper reports true once the watcher stopped
	}
	if !c.WaitForCacheSync(cctx) {
		return errors.New("watcher: caches not synced")
	}
	return nil
}

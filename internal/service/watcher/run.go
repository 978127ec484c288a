package watcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lava-operator/lava/internal/lang/bindingskey"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// Options is the watcher service's configuration: the common service options and the
// watcher's own, from flags or LAVA_* variables (svc.Command; services/watcher/README.md lists
// them with their defaults; `lava up` and tests set them directly).
type Options struct {
	svc.Common
	// Kubeconfig is a kubeconfig file; empty means in-cluster, else $KUBECONFIG or
	// ~/.kube/config.
	Kubeconfig string
	// Namespaces to watch; empty means all.
	Namespaces []string
	// PhaseConsumer is the durable consumer on LAVA_PHASES; empty means "watcher". Another
	// name is created (or updated) at start, filtered to Namespaces, so watchers of disjoint
	// namespace sets can share one NATS.
	PhaseConsumer string
	// LeaderElect enables leader election.
	LeaderElect bool
	// LeaderElectionID and LeaderElectionNamespace locate the Lease.
	LeaderElectionID, LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod are [Config].LeaseDuration, RenewDeadline
	// and RetryPeriod (defaults [DefaultLeaseDuration], [DefaultRenewDeadline] and
	// [DefaultRetryPeriod]).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ClusterName is this cluster's name in LavaArchitectureDependency references.
	ClusterName string
	// KubeAPI is the API client's rate limit (zero: svc.DefaultKubeAPIQPS and Burst).
	KubeAPI svc.KubeAPI
	// StatusWindow and StatusHold are [Config].StatusWindow and StatusHold.
	StatusWindow, StatusHold time.Duration
	// MaxConcurrentReconciles is [Config].MaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// Lockdown is the watcher's refusal of references to another namespace
	// (--allow-cross-namespace-refs; [Config].NoCrossNamespaceRefs is its opposite).
	Lockdown
	// WatchSecrets is [Config].WatchSecrets (--watch-secrets).
	WatchSecrets bool
	// ReadSecrets is [Config].ReadSecrets (--read-secrets, default on).
	ReadSecrets bool
	// SecretReadsPerSecond and SecretReadBurst are [Config].SecretReadsPerSecond and
	// SecretReadBurst (--secret-reads-per-second, --secret-read-burst).
	SecretReadsPerSecond float64
	SecretReadBurst      int
	// Identity chooses who bound Secrets are read as under ReadSecrets ([Config].Identities):
	// the flags synth and the applier share (--impersonate, --default-service-account,
	// --allow-own-identity).
	Identity identity.Options
	// DeletionWait is [Config].DeletionWait (--deletion-wait).
	DeletionWait time.Duration
	// BindingsKeyFile holds the installation's bindings key (synth's file; [Config].BindingsKey);
	// empty: none.
	BindingsKeyFile string
}

// Flags defines the watcher's own flags on fs, and --stream-replicas, the deprecated name of
// the common --replicas.
func (o *Options) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
	fs.StringSliceVar(&o.Namespaces, "namespaces", nil, "namespaces to watch, comma-separated (default: all)")
	fs.StringVar(&o.PhaseConsumer, "phase-consumer", bus.ServiceWatcher, "durable consumer on LAVA_PHASES; another name is created filtered to --namespaces")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader among replicas (only the leader reconciles and consumes phase events)")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", DefaultLeaderElectionID, "name of the leader election Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", DefaultLeaseDuration, "how long standbys wait after the leader's last renewal before they take the Lease")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", DefaultRenewDeadline, "how long the leader keeps retrying a failed renewal before it gives up leadership (and exits)")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", DefaultRetryPeriod, "how often every replica tries to acquire or renew the Lease")
	fs.StringVar(&o.ClusterName, "cluster-name", "", "this cluster's name in LavaArchitectureDependency references")
	o.Lockdown.Register(fs)
	fs.BoolVar(&o.WatchSecrets, "watch-secrets", false, "watch the Secrets of spec.bindingsFrom too (needs get, list and watch on secrets)")
	fs.BoolVar(&o.ReadSecrets, "read-secrets", true, "without --watch-secrets: read each bound Secret with get as the object's identity at every reconcile, and reconcile an object that binds one every spec.driftInterval, so a changed Secret renders again")
	fs.Float64Var(&o.SecretReadsPerSecond, "secret-reads-per-second", DefaultSecretReadsPerSecond, "bound Secrets read per second per namespace (bursts of --secret-read-burst); a reconcile that would read more is put off (negative: no bound)")
	fs.IntVar(&o.SecretReadBurst, "secret-read-burst", DefaultSecretReadBurst, "bound Secrets a namespace may read at once")
	o.Identity.Register(fs)
	fs.DurationVar(&o.DeletionWait, "deletion-wait", DefaultDeletionWait, "how long a deleted object's destroy waits for the objects that consume it (dependsOn, outputsRef) to be destroyed first (negative: no wait)")
	fs.StringVar(&o.BindingsKeyFile, "bindings-key-file", "", "file with the installation's bindings key (synth's), the BLAKE3 key of Secret data in the bindings digest (default: none, Secrets contribute their resourceVersion)")
	o.KubeAPI.Register(fs)
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", DefaultMaxConcurrentReconciles, "LavaArchitectures reconciled at once")
	fs.DurationVar(&o.StatusWindow, "status-window", DefaultStatusWindow, "how long a settled status waits for more phase events of its object before it is written (negative: write every event)")
	fs.DurationVar(&o.StatusHold, "status-hold", DefaultStatusHold, "longest an intermediate phase (Synthesized, Planned, ...) waits for its successor before it is written")
	fs.IntVar(&o.Replicas, "stream-replicas", 1, "deprecated name of --replicas")
	_ = fs.MarkDeprecated("stream-replicas", "use --replicas (LAVA_REPLICAS)")
}

// Lockdown is whether the watcher lets an object reach into another namespace: a spec.dependsOn
// entry, spec.sourceRef or a LavaArchitectureDependency that crosses one is refused unless
// AllowCrossNamespaceRefs (docs/security.md, "Kubernetes RBAC"). The watcher and `lava up
// --kubeconfig` register its one flag with [Lockdown.Register], so both declare it, and its
// default (refused, as the chart's tenancy.allowCrossNamespaceRefs), once
// (docs/design/0026-lava-up-lockdown.md). The zero Lockdown refuses.
type Lockdown struct {
	// AllowCrossNamespaceRefs lets references cross namespaces (--allow-cross-namespace-refs):
	// a tenant may then read another namespace's Flux source through spec.sourceRef and learn
	// whether another namespace's objects exist and their phase through spec.dependsOn.
	AllowCrossNamespaceRefs bool
}

// Register adds --allow-cross-namespace-refs to fs.
func (l *Lockdown) Register(fs *pflag.FlagSet) {
	fs.BoolVar(&l.AllowCrossNamespaceRefs, "allow-cross-namespace-refs", false, "let spec.dependsOn, spec.sourceRef and LavaArchitectureDependency objects name another namespace (default: refused, DependenciesReady False with reason CrossNamespaceRefRefused; a tenant could otherwise use another namespace's Flux source and learn which objects exist there)")
}

// Run runs the watcher service until ctx is done: it loads the API server configuration,
// starts (svc.Start: NATS, topology, metrics with controller-runtime's registry, health),
// ensures the phase consumer and runs [Watcher.Start]. It sets controller-runtime's
// process-wide logger to the service's handler (controller-runtime has no other way to
// receive it).
func Run(ctx context.Context, o Options) error {
	rc, err := kube.Config(o.Kubeconfig)
	if err != nil {
		return err
	}
	o.KubeAPI.Apply(rc)
	var key []byte
	if o.BindingsKeyFile != "" {
		if key, err = bindingskey.Read(o.BindingsKeyFile); err != nil {
			return err
		}
	}
	scheme, err := kube.NewScheme()
	if err != nil {
		return err
	}
	var ids *identity.Clients
	if o.ReadSecrets && !o.WatchSecrets {
		if ids, err = o.Identity.Clients(rc); err != nil {
			return err
		}
	}
	base, err := svc.Start(ctx, bus.ServiceWatcher, o.Common, svc.Setup{Gatherer: crmetrics.Registry})
	if err != nil {
		return err
	}
	defer base.Close()
	log := base.Log
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	if err := ensurePhaseConsumer(ctx, base.JS, o); err != nil {
		return err
	}
	w, err := New(ctx, Config{
		RESTConfig: rc, Scheme: scheme, JetStream: base.JS, Logger: log, Registry: base.Registry, BusMetrics: base.BusMetrics,
		Namespaces: o.Namespaces, ClusterName: o.ClusterName, PhaseConsumer: o.PhaseConsumer,
		NoCrossNamespaceRefs: !o.AllowCrossNamespaceRefs, BindingsKey: key, WatchSecrets: o.WatchSecrets, DeletionWait: o.DeletionWait,
		ReadSecrets: o.ReadSecrets, Identities: ids, SecretReadsPerSecond: o.SecretReadsPerSecond, SecretReadBurst: o.SecretReadBurst,
		LeaderElection: o.LeaderElect, LeaderElectionID: o.LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		LeaseDuration:           o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		StatusWindow: o.StatusWindow, StatusHold: o.StatusHold,
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
	})
	if err != nil {
		return err
	}
	base.Health.AddReadyCheck("watcher", w.Ready)
	log.Info("watcher: started", "namespaces", o.Namespaces, "leader_election", o.LeaderElect)
	return base.Serve(ctx, w.Start)
}

// ensurePhaseConsumer creates cfg.PhaseConsumer when it is not the declared "watcher" consumer:
// the watcher consumer's configuration, filtered to the phase subjects of cfg.Namespaces.
func ensurePhaseConsumer(ctx context.Context, js jetstream.JetStream, cfg Options) error {
	if cfg.PhaseConsumer == "" || cfg.PhaseConsumer == bus.ServiceWatcher {
		return nil
	}
	spec, ok := bus.Declare(bus.TopologyOptions{Replicas: cfg.Replicas}).Consumer(bus.StreamPhases, bus.ServiceWatcher)
	if !ok {
		return errors.New("watcher: bus.Declare has no watcher consumer")
	}
	c := spec.Config
	c.Durable, c.Name = cfg.PhaseConsumer, cfg.PhaseConsumer
	if len(cfg.Namespaces) > 0 {
		c.FilterSubjects = nil
		for _, ns := range cfg.Namespaces {
			c.FilterSubjects = append(c.FilterSubjects, bus.PrefixPhase+bus.EscapeToken(ns)+".>")
		}
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, bus.StreamPhases, c); err != nil {
		return fmt.Errorf("watcher: ensure consumer %s: %w", cfg.PhaseConsumer, err)
	}
	return nil
}

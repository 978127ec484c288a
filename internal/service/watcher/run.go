package watcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/telemetry"
)

// Config is the watcher service's configuration, from flags or LAVA_* variables
// (services/watcher/README.md lists them with their defaults).
type Config struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster, else $KUBECONFIG or
	// ~/.kube/config.
	Kubeconfig string
	// Namespaces to watch; empty means all.
	Namespaces []string
	// NATSURL is the NATS server URL (nats://host:4222).
	NATSURL string
	// NATSCreds is an optional NATS credentials file (JWT and NKey seed).
	NATSCreds string
	// PhaseConsumer is the durable consumer on LAVA_PHASES; empty means "watcher". Another
	// name is created (or updated) at start, filtered to Namespaces, so watchers of disjoint
	// namespace sets can share one NATS.
	PhaseConsumer string
	// StreamReplicas is the replica count of the streams and buckets the watcher ensures.
	StreamReplicas int
	// LeaderElect enables leader election.
	LeaderElect bool
	// LeaderElectionID and LeaderElectionNamespace locate the Lease.
	LeaderElectionID, LeaderElectionNamespace string
	// MetricsAddr serves /metrics; HealthAddr serves /healthz and /readyz. Empty disables.
	MetricsAddr, HealthAddr string
	// LogFormat is json or text; LogLevel debug, info, warn or error.
	LogFormat, LogLevel string
	// ClusterName is this cluster's name in LavaArchitectureDependency references.
	ClusterName string
	// NoCrossNamespaceRefs is Options.NoCrossNamespaceRefs (--no-cross-namespace-refs).
	NoCrossNamespaceRefs bool
}

// Gatherer gathers reg (the watcher's and the bus's metrics) together with controller-runtime's
// registry sigs.k8s.io/controller-runtime/pkg/metrics.Registry, which holds
// controller_runtime_reconcile_total, the work queue, leader election and client-go request
// metrics, and already the Go and process collectors: reg must not hold those again (build it
// with prometheus.NewRegistry, not telemetry.NewRegistry).
func Gatherer(reg prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.Gatherers{reg, crmetrics.Registry}
}

// RESTConfig loads the API server configuration: the kubeconfig file when given, else the
// in-cluster configuration, else $KUBECONFIG or ~/.kube/config.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("watcher: kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("watcher: no in-cluster configuration and no kubeconfig: %w", err)
	}
	return cfg, nil
}

// Connect opens the NATS connection: reconnecting forever, with the credentials file when
// given.
func Connect(url, creds string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("lava-watcher"), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second)}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("watcher: connect to nats %s: %w", url, err)
	}
	return nc, nil
}

// Run runs the watcher service until ctx is done: logs to stderr, loads the API server
// configuration, connects to NATS, ensures the JetStream topology, serves /metrics, /healthz
// and /readyz, and runs [Watcher.Start]. It sets controller-runtime's process-wide logger to
// the same handler (controller-runtime has no other way to receive it).
func Run(ctx context.Context, cfg Config, stderr io.Writer) error {
	log, err := telemetry.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	rc, err := RESTConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	nc, err := Connect(cfg.NATSURL, cfg.NATSCreds)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("watcher: jetstream: %w", err)
	}
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{Replicas: cfg.StreamReplicas}); err != nil {
		return err
	}
	if err := ensurePhaseConsumer(ctx, js, cfg); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	w, err := New(ctx, Options{
		RESTConfig: rc, Scheme: scheme, JetStream: js, Logger: log, Registry: reg,
		Namespaces: cfg.Namespaces, ClusterName: cfg.ClusterName, PhaseConsumer: cfg.PhaseConsumer,
		NoCrossNamespaceRefs: cfg.NoCrossNamespaceRefs,
		LeaderElection:       cfg.LeaderElect, LeaderElectionID: cfg.LeaderElectionID,
		LeaderElectionNamespace: cfg.LeaderElectionNamespace,
	})
	if err != nil {
		return err
	}
	health := &telemetry.Health{}
	health.AddReadyCheck("watcher", w.Ready)

	g, gctx := errgroup.WithContext(ctx)
	serve := func(addr string, h http.Handler) {
		if addr == "" {
			return
		}
		ln, err := telemetry.Listen(addr)
		if err != nil {
			g.Go(func() error { return err })
			return
		}
		g.Go(func() error { return telemetry.ServeListener(gctx, ln, h) })
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(Gatherer(reg), promhttp.HandlerOpts{}))
	serve(cfg.MetricsAddr, metricsMux)
	serve(cfg.HealthAddr, health.Handler())
	g.Go(func() error { return w.Start(gctx) })
	log.Info("watcher: started", "namespaces", cfg.Namespaces, "leader_election", cfg.LeaderElect)
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// ensurePhaseConsumer creates cfg.PhaseConsumer when it is not the declared "watcher" consumer:
// the watcher consumer's configuration, filtered to the phase subjects of cfg.Namespaces.
func ensurePhaseConsumer(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	if cfg.PhaseConsumer == "" || cfg.PhaseConsumer == bus.ServiceWatcher {
		return nil
	}
	spec, ok := bus.Declare(bus.TopologyOptions{Replicas: cfg.StreamReplicas}).Consumer(bus.StreamPhases, bus.ServiceWatcher)
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

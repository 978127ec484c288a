package anomaly

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// Options is the anomaly service's process configuration, one type: the common service options
// and the anomaly service's own (flags and LAVA_* variables, svc.Command; `lava up` sets them
// directly).
type Options struct {
	svc.Common
	// Config holds the anomaly service's settings, bound by its flags (--concurrency,
	// --instance: the reportingInstance of Kubernetes Events, default the host name) and its
	// routing (Complete loads ConfigFile into Config.Routing unless it is set); [Run] sets its
	// dependencies (JS, Kube, Logger, Registerer, BusMetrics).
	Config Config
	// ConfigFile is the routing configuration (YAML or JSON, [LoadRouting]); empty: bus only.
	ConfigFile string
	// Cluster, if set, overrides the configuration's cluster name.
	Cluster string
	// NoKube (--no-kube) runs without Kubernetes access; Complete then leaves Kube nil.
	NoKube bool
	// KubeAPI is the Kubernetes API client's rate limit (--kube-api-qps, --kube-api-burst),
	// set on Kube by Complete.
	KubeAPI svc.KubeAPI
	// Kube reaches the Kubernetes API for the kubernetesEvents sinks (nil: none allowed).
	Kube *rest.Config
}

// Flags defines the anomaly service's own flags on fs.
func (o *Options) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", "", "routing configuration (YAML or JSON: window, cluster, sinks, rules); empty publishes on the bus only")
	fs.StringVar(&o.Cluster, "cluster", "", "cluster name in every anomaly (overrides the configuration's)")
	svc.RegisterConcurrency(fs, &o.Config.Concurrency, 8)
	fs.StringVar(&o.Config.Instance, "instance", "", "reportingInstance of Kubernetes Events (default the host name, the pod name in a cluster)")
	fs.BoolVar(&o.NoKube, "no-kube", false, "run without Kubernetes access (kubernetesEvents sinks are then refused)")
	o.KubeAPI.Register(fs)
}

// Complete loads the routing configuration (an invalid one, [ErrConfig], is a svc.UsageError) and the
// Kubernetes configuration unless --no-kube (kube.Optional).
func (o *Options) Complete() error {
	routing, err := LoadRouting(o.ConfigFile)
	if err != nil {
		return usage(err)
	}
	o.Config.Routing = routing
	o.Kube, err = kube.Optional(o.NoKube)
	o.KubeAPI.Apply(o.Kube)
	return err
}

// Run runs the anomaly service until ctx is cancelled (svc.Start: NATS, the topology with the
// routing's window, metrics and health; then the consumers). An invalid routing is a
// svc.UsageError wrapping [ErrConfig]. It returns nil after a graceful shutdown.
func Run(ctx context.Context, o Options) error {
	cfg := o.Config
	routing := cfg.Routing
	if routing == nil {
		var err error
		if routing, err = LoadRouting(o.ConfigFile); err != nil {
			return usage(err)
		}
	}
	if o.Cluster != "" {
		routing.Cluster = o.Cluster
	}
	if cfg.Instance == "" {
		cfg.Instance, _ = os.Hostname()
	}
	base, err := svc.Start(ctx, bus.ServiceAnomaly, o.Common, svc.Setup{Topology: bus.TopologyOptions{AnomalyWindow: routing.Window.Duration}})
	if err != nil {
		return err
	}
	defer base.Close()
	log := base.Log
	if o.Kube != nil {
		if cfg.Kube, err = kubernetes.NewForConfig(o.Kube); err != nil {
			return fmt.Errorf("anomaly: kubernetes client: %w", err)
		}
	}
	cfg.JS, cfg.Routing, cfg.Logger, cfg.Registerer, cfg.BusMetrics = base.JS, routing, log, base.Registry, base.BusMetrics
	s, err := New(ctx, cfg)
	if err != nil {
		return usage(err)
	}
	log.Info("anomaly started", "nats", o.NATS.URL, "sinks", len(routing.Sinks), "rules", len(routing.Rules),
		"window", routing.Window.Duration.String())
	err = base.Serve(ctx, s.Run)
	if ctx.Err() != nil && err == nil {
		log.Info("anomaly stopped")
	}
	return err
}

// usage marks an [ErrConfig] error as a svc.UsageError (exit 2); other errors are returned
// as they are.
func usage(err error) error {
	if errors.Is(err, ErrConfig) {
		return svc.BadUsage(err)
	}
	return err
}

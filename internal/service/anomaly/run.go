package anomaly

import (
	"context"
	"fmt"
	"io"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// Options is the anomaly service's process configuration (flags and LAVA_* variables, parsed
// by services/anomaly).
type Options struct {
	// NATSURL and NATSCreds reach JetStream (LAVA_NATS_URL, LAVA_NATS_CREDS).
	NATSURL, NATSCreds string
	// ConfigFile is the routing configuration (YAML or JSON, [LoadRouting]); empty: bus only.
	ConfigFile string
	// Cluster, if set, overrides the configuration's cluster name.
	Cluster string
	// MetricsAddr serves /metrics (":9090"), HealthAddr /healthz and /readyz (":9091").
	MetricsAddr, HealthAddr string
	// LogFormat ("json" or "text") and LogLevel.
	LogFormat, LogLevel string
	// Replicas is the JetStream replica count of what this process ensures.
	Replicas int
	// Concurrency bounds handlers per consumer.
	Concurrency int
	// Kube reaches the Kubernetes API for the kubernetesEvents sinks (nil: none allowed).
	Kube *rest.Config
	// Instance is the reportingInstance of Kubernetes Events (default the host name).
	Instance string
	// Stderr receives the logs (default os.Stderr).
	Stderr io.Writer
}

// RunService runs the anomaly service until ctx is cancelled: it loads the routing
// configuration, connects to NATS, ensures the topology, serves metrics and health, and
// consumes. It returns nil after a graceful shutdown.
func RunService(ctx context.Context, o Options) error {
	log, err := svc.NewLogger(o.Stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	routing, err := LoadRouting(o.ConfigFile)
	if err != nil {
		return err
	}
	if o.Cluster != "" {
		routing.Cluster = o.Cluster
	}
	if o.Instance == "" {
		o.Instance, _ = os.Hostname()
	}
	nc, js, err := bus.Connect(bus.ConnectOptions{URL: o.NATSURL, CredsFile: o.NATSCreds, Name: "lava-anomaly"})
	if err != nil {
		return err
	}
	defer nc.Close()
	base, err := svc.NewBase(ctx, nc, js, bus.TopologyOptions{Replicas: o.Replicas, AnomalyWindow: routing.Window.Duration})
	if err != nil {
		return err
	}
	var kube kubernetes.Interface
	if o.Kube != nil {
		if kube, err = kubernetes.NewForConfig(o.Kube); err != nil {
			return fmt.Errorf("anomaly: kubernetes client: %w", err)
		}
	}
	s, err := New(ctx, Config{JS: js, Routing: routing, Kube: kube, Instance: o.Instance,
		Concurrency: o.Concurrency, Logger: log, Registerer: base.Registry, BusMetrics: base.BusMetrics})
	if err != nil {
		return err
	}
	log.Info("anomaly started", "nats", o.NATSURL, "sinks", len(routing.Sinks), "rules", len(routing.Rules),
		"window", routing.Window.Duration.String())
	err = base.Serve(ctx, o.MetricsAddr, o.HealthAddr, s.Run)
	if ctx.Err() != nil && err == nil {
		log.Info("anomaly stopped")
	}
	return err
}

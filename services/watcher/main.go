package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/watcher"
)

func main() { svc.Main(run) }

// run is the service (svc.Run, exit codes svc.Exit*).
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	var cfg watcher.Config
	fs := pflag.NewFlagSet("watcher", pflag.ContinueOnError)
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
	fs.StringSliceVar(&cfg.Namespaces, "namespaces", nil, "namespaces to watch, comma-separated (default: all)")
	fs.StringVar(&cfg.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&cfg.NATSCreds, "nats-creds", "", "NATS credentials file (optional)")
	fs.StringVar(&cfg.PhaseConsumer, "phase-consumer", "watcher", "durable consumer on LAVA_PHASES; another name is created filtered to --namespaces")
	fs.IntVar(&cfg.StreamReplicas, "stream-replicas", 1, "replicas of the JetStream streams and buckets the watcher ensures (3 on a NATS cluster)")
	fs.BoolVar(&cfg.LeaderElect, "leader-elect", true, "elect a leader among replicas (only the leader reconciles and consumes phase events)")
	fs.StringVar(&cfg.LeaderElectionID, "leader-election-id", watcher.DefaultLeaderElectionID, "name of the leader election Lease")
	fs.StringVar(&cfg.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", ":9090", "address serving /metrics (empty disables)")
	fs.StringVar(&cfg.HealthAddr, "health-addr", ":9091", "address serving /healthz and /readyz (empty disables)")
	fs.StringVar(&cfg.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&cfg.ClusterName, "cluster-name", "", "this cluster's name in LavaArchitectureDependency references")
	fs.BoolVar(&cfg.NoCrossNamespaceRefs, "no-cross-namespace-refs", false, "refuse every dependsOn and LavaArchitectureDependency reference to another namespace (lockdown)")
	if code, stop := svc.Parse(fs, args, lookup, stdout, stderr, &cfg.LogFormat, &cfg.LogLevel); stop {
		return code
	}
	if err := watcher.Run(ctx, cfg, stderr); err != nil {
		fmt.Fprintln(stderr, "watcher:", err)
		return 1
	}
	return 0
}

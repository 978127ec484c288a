package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/anomaly"
)

func main() { svc.Main(run) }

// run is the service (svc.Run, exit codes svc.Exit*).
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	o, code, stop := parse(args, lookup, stdout, stderr)
	if stop {
		return code
	}
	o.Stderr = stderr
	if err := anomaly.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "anomaly:", err)
		if errors.Is(err, anomaly.ErrConfig) {
			return 2
		}
		return 1
	}
	return 0
}

// parse reads the options from args, the LAVA_* variables and the Kubernetes configuration,
// and reports whether run must stop with code (see run).
func parse(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) (o anomaly.Options, code int, stop bool) {
	fs := pflag.NewFlagSet("anomaly", pflag.ContinueOnError)
	noKube := false
	var kubeAPI svc.KubeAPI
	svc.Common{NATSURL: &o.NATSURL, NATSCreds: &o.NATSCreds, MetricsAddr: &o.MetricsAddr, HealthAddr: &o.HealthAddr,
		LogFormat: &o.LogFormat, LogLevel: &o.LogLevel, Replicas: &o.Replicas}.Register(fs)
	fs.StringVar(&o.ConfigFile, "config", "", "routing configuration (YAML or JSON: window, cluster, sinks, rules); empty publishes on the bus only")
	fs.StringVar(&o.Cluster, "cluster", "", "cluster name in every anomaly (overrides the configuration's)")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "handlers running at once per consumer")
	fs.StringVar(&o.Instance, "instance", "", "reportingInstance of Kubernetes Events (default the host name, the pod name in a cluster)")
	fs.BoolVar(&noKube, "no-kube", false, "run without Kubernetes access (kubernetesEvents sinks are then refused)")
	kubeAPI.Register(fs)
	if code, stop := svc.Parse(fs, args, lookup, stdout, stderr, &o.LogFormat, &o.LogLevel); stop {
		return o, code, true
	}
	if !noKube {
		cfg, err := ctrlconfig.GetConfig()
		if err != nil {
			fmt.Fprintf(stderr, "anomaly: kubernetes config (use --no-kube to run without): %v\n", err)
			return o, 1, true
		}
		o.Kube = kubeAPI.Apply(cfg)
	}
	return o, 0, false
}

package svc

import (
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
)

// The client-side rate limit of a service's Kubernetes API client, as the Flux controllers
// default theirs (--kube-api-qps, --kube-api-burst). client-go's own default (5/10) bounds a
// busy operator's status writes long before the API server does.
const (
	// DefaultKubeAPIQPS is the sustained requests per second.
	DefaultKubeAPIQPS = 50
	// DefaultKubeAPIBurst is the requests allowed at once above the sustained rate.
	DefaultKubeAPIBurst = 100
)

// KubeAPI is the rate limit of the Kubernetes API client of a service that talks to the API
// server (watcher, synth, applier, anomaly, lava up --kubeconfig).
type KubeAPI struct {
	// QPS is the sustained requests per second; a negative value disables client-side rate
	// limiting (the API server's priority and fairness still applies).
	QPS float32
	// Burst is the requests allowed at once above QPS.
	Burst int
}

// Register defines --kube-api-qps and --kube-api-burst on fs with the defaults
// [DefaultKubeAPIQPS] and [DefaultKubeAPIBurst] (LAVA_KUBE_API_QPS, LAVA_KUBE_API_BURST through
// [Parse]).
func (k *KubeAPI) Register(fs *pflag.FlagSet) {
	fs.Float32Var(&k.QPS, "kube-api-qps", DefaultKubeAPIQPS, "Kubernetes API client requests per second (negative: no client-side limit)")
	fs.IntVar(&k.Burst, "kube-api-burst", DefaultKubeAPIBurst, "Kubernetes API client burst above --kube-api-qps")
}

// Apply sets the rate limit on cfg (nil is left alone) and returns it. A zero KubeAPI sets
// the defaults.
func (k KubeAPI) Apply(cfg *rest.Config) *rest.Config {
	if cfg == nil {
		return nil
	}
	if k.QPS == 0 {
		k.QPS = DefaultKubeAPIQPS
	}
	if k.Burst <= 0 {
		k.Burst = DefaultKubeAPIBurst
	}
	cfg.QPS, cfg.Burst = k.QPS, k.Burst
	cfg.RateLimiter = nil
	return cfg
}

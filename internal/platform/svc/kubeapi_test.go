package svc

import (
	"io"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
)

// TestKubeAPI: the flags default to the Flux controllers' 50/100, LAVA_KUBE_API_QPS and
// LAVA_KUBE_API_BURST fill them through Parse, a flag wins, and Apply sets the rest.Config
// (a negative QPS, client-go's "no client-side limit", is kept).
func TestKubeAPI(t *testing.T) {
	t.Parallel()
	parse := func(args []string, env map[string]string) KubeAPI {
		t.Helper()
		var k KubeAPI
		format, level := "json", "info"
		fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
		k.Register(fs)
		lookup := func(key string) (string, bool) { v, ok := env[key]; return v, ok }
		if code, stop := Parse(fs, args, lookup, io.Discard, io.Discard, &format, &level); stop {
			t.Fatalf("Parse(%v, %v) stopped with %d", args, env, code)
		}
		return k
	}
	if k := parse(nil, nil); k.QPS != 50 || k.Burst != 100 {
		t.Errorf("defaults %+v, want 50/100", k)
	}
	if k := parse(nil, map[string]string{"LAVA_KUBE_API_QPS": "-1", "LAVA_KUBE_API_BURST": "7"}); k.QPS != -1 || k.Burst != 7 {
		t.Errorf("from the environment %+v, want -1/7", k)
	}
	if k := parse([]string{"--kube-api-qps", "200"}, map[string]string{"LAVA_KUBE_API_QPS": "-1"}); k.QPS != 200 || k.Burst != 100 {
		t.Errorf("flag over environment %+v, want 200/100", k)
	}
	cfg := KubeAPI{QPS: -1, Burst: 5}.Apply(&rest.Config{QPS: 5, Burst: 10})
	if cfg.QPS != -1 || cfg.Burst != 5 {
		t.Errorf("Apply: QPS %v burst %d, want -1/5", cfg.QPS, cfg.Burst)
	}
	if cfg := (KubeAPI{}).Apply(&rest.Config{}); cfg.QPS != DefaultKubeAPIQPS || cfg.Burst != DefaultKubeAPIBurst {
		t.Errorf("zero KubeAPI: QPS %v burst %d, want the defaults", cfg.QPS, cfg.Burst)
	}
	if (KubeAPI{}).Apply(nil) != nil {
		t.Error("Apply(nil) is not nil")
	}
}

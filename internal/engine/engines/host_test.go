package engines_test

import (
	"regexp"
	"testing"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// TestHost_Register: the one flag set of the applier and drift, with the names and defaults
// both services declared (their --help, the chart's LAVA_* variables and the docs name them).
func TestHost_Register(t *testing.T) {
	t.Parallel()
	var h engines.Host
	fs := pflag.NewFlagSet("host", pflag.ContinueOnError)
	h.Register(fs)
	want := map[string]string{
		"holder": "", "provider-dir": "/var/lib/lava/providers", "policy-file": "", "tofu-bin": "", "terraform-bin": "",
		"provider-cache-dir": "", "provider-network-mirror": "", "provider-ca-file": "", "cli-config-file": "", "cli-max-memory-bytes": "4294967296", "cli-max-cpu-seconds": "120", "work-dir": "",
		"max-provider-processes": "32", "no-kube": "false", "kube-api-qps": "50", "kube-api-burst": "100",
		"impersonate": "true", "default-service-account": "", "allow-own-identity": "false",
		"provider-token-audience": "", "provider-token-expiry": "1h0m0s", "gcp-workload-identity-provider": "", "azure-tenant-id": "",
	}
	got := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) { got[f.Name] = f.DefValue })
	if len(got) != len(want) {
		t.Errorf("%d flags %v, want %d", len(got), got, len(want))
	}
	for name, def := range want {
		if d, ok := got[name]; !ok || d != def {
			t.Errorf("--%s: default %q (defined %v), want %q", name, d, ok, def)
		}
	}
	if err := fs.Parse([]string{"--holder", "r1", "--policy-file", "/etc/lava/policy.yaml", "--no-kube"}); err != nil {
		t.Fatal(err)
	}
	if h.Holder != "r1" || h.Engines.Policy == nil || h.Engines.Policy.Path != "/etc/lava/policy.yaml" || !h.NoKube {
		t.Errorf("parsed %+v", h)
	}
	if err := h.Complete(); err != nil || h.Kube != nil {
		t.Errorf("Complete with --no-kube: kube %v, error %v", h.Kube, err)
	}
}

// TestHost_Deps: beside the engines, a holder name unique per process (the replica's name and
// a random suffix), and no Kubernetes client, identities or credentials without Kubernetes
// access.
func TestHost_Deps(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	h := engines.Host{Holder: "r1"}
	var holders []string
	for range 2 {
		set, err := engines.Open(t.Context(), js, engines.Options{Process: bus.ServiceDrift}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := h.Deps(set)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if d.Set != set || d.Kube != nil || d.Identities != nil || d.Credentials != nil {
			t.Errorf("deps %+v", d)
		}
		holders = append(holders, d.Holder)
	}
	re := regexp.MustCompile(`^r1/[A-Z2-7]{8}$`)
	if !re.MatchString(holders[0]) || !re.MatchString(holders[1]) || holders[0] == holders[1] {
		t.Errorf("holders %q, want r1/<8 random characters>, distinct", holders)
	}
}

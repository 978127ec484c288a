//go:build integration

package watcher_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// testRun runs the service entry point (kubeconfig file, NATS URL, leader election, the HTTP
// endpoints) the way services/watcher's main does, with the defaults of the watcher's flags:
// the Lease it holds has the leader election timings of the flags (35s, the Flux controllers').
func (e *env) testRun(t *testing.T) {
	ns := e.kube.Namespace(t)
	metricsAddr, healthAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	var o watcher.Options
	fs := pflag.NewFlagSet("watcher", pflag.ContinueOnError)
	o.Flags(fs)
	if err := fs.Parse([]string{"--leader-election-id=lava-run", "--leader-election-namespace=" + leaseNamespace, "--phase-consumer=watcher-run"}); err != nil {
		t.Fatal(err)
	}
	o.Common = svc.Common{NATS: bus.ConnectOptions{URL: e.nats.URL()}, MetricsAddr: metricsAddr, HealthAddr: healthAddr,
		LogFormat: "text", LogLevel: "error", Stderr: testOutput(t)}
	o.Kubeconfig, o.Namespaces = writeKubeconfig(t, e.kube.Config), []string{ns}
	done := make(chan error, 1)
	go func() { done <- watcher.Run(ctx, o) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("watcher.Run: %v", err)
			}
		}
	}
	t.Cleanup(stop)

	get := func(addr, path string) (int, string, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b), err
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		eventually(t, 60*time.Second, func() error {
			code, body, err := get(healthAddr, path)
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("%s: %d %q %v", path, code, body, err)
			}
			return nil
		})
	}
	eventually(t, 60*time.Second, func() error {
		var lease coordinationv1.Lease
		if err := e.kube.Client.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: "lava-run"}, &lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || lease.Spec.LeaseDurationSeconds == nil {
			return fmt.Errorf("lease lava-run has no holder yet: %+v", lease.Spec)
		}
		if got, want := time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second, watcher.DefaultLeaseDuration; got != want {
			t.Errorf("lease lava-run: leaseDurationSeconds %v, want the flag's default %v", got, want)
		}
		return nil
	})
	e.create(t, newArch(ns, "run", nil))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "run", bus.EventObserved), 1)
	eventually(t, 10*time.Second, func() error {
		code, body, err := get(metricsAddr, "/metrics")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("/metrics: %d %v: %.3000s", code, err, body)
		}
		for _, want := range []string{
			`lava_watcher_published_total{event="resource_observed"} 1`,
			`controller_runtime_reconcile_total{controller="lavaarchitecture",result="success"}`,
			`lava_watcher_status_patches_total`,
			`go_goroutines`,
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("/metrics has no %s", want)
			}
		}
		return nil
	})
	stop()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// writeKubeconfig writes a kubeconfig file for cfg (envtest's admin client certificate).
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}

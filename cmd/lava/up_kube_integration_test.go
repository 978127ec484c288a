//go:build integration

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/manifest"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/up"
)

// TestUp_kubeconfig runs `lava up --kubeconfig` against a real API server: the watcher takes
// the file source's place, a LavaArchitecture created with the API reaches Applied (status
// patched by the watcher), and a deleted one is destroyed and its finalizer released.
func TestUp_kubeconfig(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	kubeconfig := writeUpKubeconfig(t, env.Config)
	out := t.TempDir()
	ms, err := manifest.Parse("local-files.yaml", []byte(strings.ReplaceAll(readFile(t, "../../examples/local-files.yaml"), "/tmp/lava-demo/demo", out)))
	if err != nil || len(ms) != 1 {
		t.Fatalf("examples/local-files.yaml: %v (%d documents)", err, len(ms))
	}
	obj := ms[0].Object
	obj.Namespace = ns
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	pol := rootsPolicy(t, out)
	upKube := func() string {
		t.Helper()
		code, stdout, stderr := runLava(t, "", "up", "--once", "--kubeconfig", kubeconfig, "--namespaces", ns, "--state-dir", stateDir,
			"--providers", filepath.Join(tofuDir, "providers"), "--timeout", "3m", "--policy", pol)
		if code != exitOK {
			t.Fatalf("lava up --once --kubeconfig: exit %d\nstdout:\n%s\nstderr:\n%s\nlog:\n%s", code, stdout, stderr, readFile(t, filepath.Join(stateDir, up.FileLog)))
		}
		return stdout
	}
	stdout := upKube()
	got := &v1alpha1.LavaArchitecture{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1alpha1.PhaseApplied || got.Status.ObservedGeneration != got.Generation {
		t.Fatalf("phase %s observedGeneration %d generation %d, want Applied", got.Status.Phase, got.Status.ObservedGeneration, got.Generation)
	}
	if !strings.Contains(stdout, ns+"/greetings") || !strings.Contains(stdout, "Applied") {
		t.Errorf("final table lacks the resource:\n%s", stdout)
	}
	for _, f := range []string{"hello-ana.txt", "hello-bo.txt"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("applied file: %v", err)
		}
	}

	if err := env.Client.Delete(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	upKube()
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), got); !apierrors.IsNotFound(err) {
		t.Errorf("after deletion: %v (finalizers %v), want NotFound", err, got.Finalizers)
	}
	if _, err := os.Stat(filepath.Join(out, "hello-ana.txt")); !os.IsNotExist(err) {
		t.Errorf("hello-ana.txt after deletion: %v, want destroyed", err)
	}
}

// writeUpKubeconfig writes a kubeconfig file for cfg (envtest's admin client certificate).
func writeUpKubeconfig(t *testing.T, cfg *rest.Config) string {
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
	return path
}

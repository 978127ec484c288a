package kube_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/kube"
)

func TestNewScheme_knowsLavaFluxAndCore(t *testing.T) {
	t.Parallel()
	s, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, gv := range []schema.GroupVersion{v1alpha1.GroupVersion, sourcev1.GroupVersion, corev1.SchemeGroupVersion} {
		if !s.IsVersionRegistered(gv) {
			t.Errorf("scheme lacks %s", gv)
		}
	}
}

func TestConfig_explicitFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	const kc = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := kube.Config(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("host %q from the file's current context", cfg.Host)
	}
	if _, err := kube.Config(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing file: %v, want an error naming it", err)
	}
}

func TestOptional_noKube(t *testing.T) {
	t.Parallel()
	cfg, err := kube.Optional(true)
	if cfg != nil || err != nil {
		t.Errorf("Optional(true) = %v, %v; want nil, nil", cfg, err)
	}
}

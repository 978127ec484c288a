package kubetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lava-operator/lava/api/v1alpha1"
)

func TestAssets_missingBinariesNameTheMakeTarget(t *testing.T) {
	empty := t.TempDir()
	notExec := t.TempDir()
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if err := os.WriteFile(filepath.Join(notExec, b), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, dir, want string
	}{
		{"unset", "", "KUBEBUILDER_ASSETS is not set"},
		{"empty directory", empty, "kube-apiserver missing"},
		{"not executable", notExec, "not an executable file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(AssetsEnv, tt.dir)
			_, err := Assets()
			if err == nil {
				t.Fatal("Assets() succeeded without binaries")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "make tools-kube") {
				t.Errorf("error %q should contain %q and name `make tools-kube`", err, tt.want)
			}
		})
	}
}

func TestCRDs_decodesTheEmbeddedCRDs(t *testing.T) {
	t.Parallel()
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 3 {
		t.Fatalf("%d CRDs, want 3", len(crds))
	}
	for _, c := range crds {
		if c.Spec.Group != "lava.pleme.io" {
			t.Errorf("%s: group %s", c.Name, c.Spec.Group)
		}
	}
}

func TestNewScheme_knowsLavaKinds(t *testing.T) {
	t.Parallel()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"LavaArchitecture", "RemediationPolicy", "LavaArchitectureDependency", "LavaArchitectureList"} {
		if !s.Recognizes(schemaGVK(k)) {
			t.Errorf("scheme does not recognize %s", k)
		}
	}
}

func schemaGVK(kind string) schema.GroupVersionKind {
	return v1alpha1.GroupVersion.WithKind(kind)
}

package crd

import (
	"bytes"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func TestAll_threeCRDsWithSchemas(t *testing.T) {
	t.Parallel()
	docs := All()
	if len(docs) != 3 {
		t.Fatalf("All() = %d documents, want 3", len(docs))
	}
	want := map[string]bool{
		"lavaarchitectures.lava.pleme.io":            false,
		"lavaarchitecturedependencies.lava.pleme.io": false,
		"remediationpolicies.lava.pleme.io":          false,
	}
	for i, d := range docs {
		if bytes.HasPrefix(d, []byte("---")) {
			t.Errorf("document %d starts with a separator", i)
		}
		var c apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(d, &c); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if _, ok := want[c.Name]; !ok {
			t.Errorf("unexpected CRD %q", c.Name)
		}
		want[c.Name] = true
		for _, v := range c.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Errorf("%s %s: no openAPIV3Schema", c.Name, v.Name)
			}
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("missing CRD %s", name)
		}
	}
}

func TestLavaArchitecture_isTheLavaArchitectureCRD(t *testing.T) {
	t.Parallel()
	var c apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(LavaArchitecture(), &c); err != nil {
		t.Fatal(err)
	}
	if c.Name != "lavaarchitectures.lava.pleme.io" {
		t.Errorf("name = %q", c.Name)
	}
}

func TestJoin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		docs [][]byte
		want string
	}{
		{"none", nil, ""},
		{"one", [][]byte{[]byte("a: 1\n")}, "a: 1\n"},
		{"adds newline", [][]byte{[]byte("a: 1"), []byte("b: 2")}, "a: 1\n---\nb: 2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := string(Join(tt.docs)); got != tt.want {
				t.Errorf("Join = %q, want %q", got, tt.want)
			}
		})
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// runCRDs runs lava with args and returns the exit code, stdout and stderr.
func runCRDs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// parseCRDs splits a "---"-separated stream and decodes each document strictly.
func parseCRDs(t *testing.T, stream string) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var out []apiextensionsv1.CustomResourceDefinition
	for i, doc := range strings.Split(stream, "\n---\n") {
		var c apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		out = append(out, c)
	}
	return out
}

func TestCRDsCmd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		wantNames []string
	}{
		{
			name: "crds prints all three",
			args: []string{"crds"},
			wantNames: []string{
				"lavaarchitecturedependencies.lava.pleme.io",
				"lavaarchitectures.lava.pleme.io",
				"remediationpolicies.lava.pleme.io",
			},
		},
		{
			name:      "crd prints LavaArchitecture alone",
			args:      []string{"crd"},
			wantNames: []string{"lavaarchitectures.lava.pleme.io"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCRDs(t, tt.args...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			for _, s := range []string{"apiVersion: apiextensions.k8s.io/v1", "kind: CustomResourceDefinition", "lavaarchitectures.lava.pleme.io", "group: lava.pleme.io", "name: v1alpha1", "openAPIV3Schema:"} {
				if !strings.Contains(stdout, s) {
					t.Errorf("output lacks %q", s)
				}
			}
			if got := strings.Count(stdout, "kind: CustomResourceDefinition\n"); got != len(tt.wantNames) {
				t.Errorf("%d CRD documents, want %d", got, len(tt.wantNames))
			}
			if strings.HasPrefix(stdout, "---") || !strings.HasSuffix(stdout, "\n") {
				t.Errorf("stream must not start with a separator and must end in a newline")
			}
			crds := parseCRDs(t, stdout)
			if len(crds) != len(tt.wantNames) {
				t.Fatalf("%d documents, want exactly %d", len(crds), len(tt.wantNames))
			}
			for i, c := range crds {
				if c.APIVersion != "apiextensions.k8s.io/v1" || c.Kind != "CustomResourceDefinition" {
					t.Errorf("document %d is %s %s", i, c.APIVersion, c.Kind)
				}
				if c.Name != tt.wantNames[i] {
					t.Errorf("document %d is %s, want %s", i, c.Name, tt.wantNames[i])
				}
				if c.Spec.Group != "lava.pleme.io" || len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Name != "v1alpha1" {
					t.Errorf("%s: group %s versions %d", c.Name, c.Spec.Group, len(c.Spec.Versions))
				}
				for _, v := range c.Spec.Versions {
					if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil || len(v.Schema.OpenAPIV3Schema.Properties) == 0 {
						t.Errorf("%s %s: no openAPIV3Schema", c.Name, v.Name)
					}
				}
			}
		})
	}
}

func TestCRDCmd_lavaArchitectureShape(t *testing.T) {
	t.Parallel()
	_, stdout, _ := runCRDs(t, "crd")
	c := parseCRDs(t, stdout)[0]
	if c.Spec.Scope != apiextensionsv1.NamespaceScoped || len(c.Spec.Names.ShortNames) != 1 || c.Spec.Names.ShortNames[0] != "lava" {
		t.Errorf("scope %s short names %v", c.Spec.Scope, c.Spec.Names.ShortNames)
	}
	v := c.Spec.Versions[0]
	if !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("served %v storage %v status subresource %v", v.Served, v.Storage, v.Subresources)
	}
	var cols []string
	for _, col := range v.AdditionalPrinterColumns {
		cols = append(cols, col.Name)
	}
	if got := strings.Join(cols, ","); got != "Ready,Phase,Engine,Resources,Age,Message" {
		t.Errorf("printer columns %s, want Ready,Phase,Engine,Resources,Age,Message", got)
	}
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if len(spec.Properties["source"].XValidations) == 0 {
		t.Errorf("spec.source has no CEL rules")
	}
	if e := spec.Properties["engine"]; string(e.Default.Raw) != `"embedded"` || len(e.Enum) != 3 {
		t.Errorf("spec.engine default %s enum %d", e.Default.Raw, len(e.Enum))
	}
}

func TestCRDsCmd_rejectsArguments(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"crds", "crd"} {
		if code, _, _ := runCRDs(t, cmd, "extra"); code != exitUsage {
			t.Errorf("lava %s extra: exit %d, want %d", cmd, code, exitUsage)
		}
	}
}

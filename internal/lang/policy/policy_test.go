package policy

import (
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
)

func TestProviderAddress(t *testing.T) {
	for src, want := range map[string]string{
		"local":                                 "registry.opentofu.org/hashicorp/local",
		"example/testkit":                       "registry.opentofu.org/example/testkit",
		"registry.terraform.io/hashicorp/aws":   "registry.terraform.io/hashicorp/aws",
		"Registry.OpenTofu.org/HashiCorp/Local": "registry.opentofu.org/hashicorp/local",
	} {
		h, ns, typ, err := ProviderAddress(src)
		if err != nil || h+"/"+ns+"/"+typ != want {
			t.Errorf("ProviderAddress(%q) = %s/%s/%s, %v; want %s", src, h, ns, typ, err, want)
		}
	}
	for _, src := range []string{"..", "../x", "../../tmp/evil", "hashicorp/..", "a/b/c/d", "hashicorp/a\\b",
		"host/ns/a.b", "./local", "hashicorp/", "-/aws", "", "ns/ty pe", "..example.com/ns/t"} {
		if _, _, _, err := ProviderAddress(src); err == nil {
			t.Errorf("ProviderAddress(%q) passed, want an error", src)
		}
	}
}

func TestCheck_moduleAndTerraformBlocks(t *testing.T) {
	a := &arch.Architecture{Pos: arch.Pos{File: "m.tlisp", Line: 1, Col: 1}}
	rendered := []byte(`{"module":{"remote":{"source":"git::https://example.com/x.git"},"local":{"source":"../../../etc"}},"terraform":{"backend":{"s3":{}}}}`)
	got := joined(Check(a, rendered, Default()))
	for _, w := range []string{
		`m.tlisp:1:1: policy: module remote: the remote source "git::https://example.com/x.git" is not allowed`,
		`module local: the local source "../../../etc" is not allowed`,
		"a terraform block is not allowed",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("violations lack %q:\n%s", w, got)
		}
	}
	relaxed := Default()
	relaxed.AllowRemoteModules = true
	if got := joined(Check(a, []byte(`{"module":{"remote":{"source":"hashicorp/consul/aws"}}}`), relaxed)); got != "" {
		t.Errorf("allowRemoteModules still refuses: %s", got)
	}
}

func TestCheck_mapKeysAreTemplates(t *testing.T) {
	m := &arch.Map{}
	m.Set(`${file("/etc/passwd")}`, arch.String("v"))
	a := &arch.Architecture{Resources: []arch.Resource{{Type: "terraform_data", Name: "r",
		Attributes: arch.Map{}, Pos: arch.Pos{Line: 4, Col: 2}}}}
	a.Resources[0].Attributes.Set("input", arch.MapValue(m))
	if got := joined(Check(a, nil, Default())); !strings.Contains(got, "4:2: policy: resource terraform_data.r attribute input: the function file is not allowed") {
		t.Errorf("a denied function in a map key passed: %q", got)
	}
}

func TestParse(t *testing.T) {
	c, err := Parse([]byte("cluster: {deniedFunctions: []}\nnamespaces: {t: {deniedFunctions: [file], maxResources: 2}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.For("x"); len(p.DeniedFunctions) != 0 || p.MaxResources != DefaultMaxResources || len(p.DeniedDataSources) != len(DefaultDeniedDataSources) {
		t.Errorf("cluster policy %+v", p)
	}
	if p := c.For("t"); len(p.DeniedFunctions) != 1 || p.MaxResources != 2 {
		t.Errorf("namespace policy %+v", p)
	}
	if c, err := Parse(nil); err != nil || len(c.For("x").DeniedFunctions) != len(DefaultDeniedFunctions) {
		t.Errorf("empty document: %+v, %v", c, err)
	}
	for doc, want := range map[string]string{
		"cluster: {maxResource: 1}":                  "unknown field",
		"cluster: {maxResources: -1}":                "cluster.maxResources is -1",
		"namespaces: {a: {allowedProviders: ['[']}}": `namespaces.a: pattern "["`,
		"cluster: {allowProvisioners: 'yes please'}": "cannot unmarshal",
	} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", doc, err, want)
		}
	}
}

func joined(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString(v.String() + "\n")
	}
	return strings.TrimSpace(b.String())
}

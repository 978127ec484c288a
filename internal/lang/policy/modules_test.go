package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// moduleDoc is a rendered document: the module call stamp (./modules/stamp) in the root,
// with mods bundled under "//" (bundle.Key).
func moduleDoc(t *testing.T, root map[string]any, mods map[string]any) []byte {
	t.Helper()
	doc := map[string]any{"module": map[string]any{"stamp": map[string]any{"source": "./modules/stamp", "name": "x"}}}
	for k, v := range root {
		doc[k] = v
	}
	if mods != nil {
		doc["//"] = map[string]any{"lava_modules": mods}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheck_bundledModuleAttacks is the attack test of the bundled-modules rule
// (docs/security.md, "Engines"): a module body is held to the root's rules, so what the
// policy refuses in the root cannot be smuggled through a module (a local-exec provisioner,
// a refused function, a denied data source in a check block, a file write outside
// fileWriteRoots, a provider configured in the module, an uncountable count), and a local
// source passes only when it resolves inside the bundle. Each violation is reported at the
// :modules call (in.tlisp:3:4).
func TestCheck_bundledModuleAttacks(t *testing.T) {
	t.Parallel()
	call := arch.Pos{File: "in.tlisp", Line: 3, Col: 4}
	a := &arch.Architecture{Pos: arch.Pos{File: "in.tlisp", Line: 1, Col: 1},
		Modules: []arch.ModuleCall{{Name: "stamp", Source: "./modules/stamp", Pos: call}}}
	body := func(res map[string]any) map[string]any { return map[string]any{"resource": res} }
	tests := []struct {
		name   string
		root   map[string]any
		mods   map[string]any
		policy func(*Policy)
		want   string
	}{
		{name: "local-exec provisioner in a module",
			mods: map[string]any{"modules/stamp": body(map[string]any{"terraform_data": map[string]any{"x": map[string]any{
				"provisioner": []any{map[string]any{"local-exec": map[string]any{"command": "touch /tmp/pwned"}}}}}})},
			want: "in.tlisp:3:4: policy: bundled module modules/stamp: resource terraform_data.x: a provisioner block is not allowed"},
		{name: "provisioner in an array-form body",
			mods: map[string]any{"modules/stamp": body(map[string]any{"terraform_data": map[string]any{"x": []any{map[string]any{
				"connection": map[string]any{"host": "h"}}}}})},
			want: "resource terraform_data.x: a connection block is not allowed"},
		{name: "file() in a nested module",
			mods: map[string]any{
				"modules/stamp":      map[string]any{"module": map[string]any{"leaf": map[string]any{"source": "./leaf"}}},
				"modules/stamp/leaf": map[string]any{"output": map[string]any{"o": map[string]any{"value": `${file("/var/run/secrets/kubernetes.io/serviceaccount/token")}`}}},
			},
			want: "in.tlisp:3:4: policy: rendered JSON bundled module modules/stamp/leaf $.output.o.value: the function file is not allowed"},
		{name: "provider function in a module local",
			mods: map[string]any{"modules/stamp": map[string]any{"locals": map[string]any{"x": `${provider::evil::run("id")}`}}},
			want: "the function provider::evil::run is not allowed"},
		{name: "denied data source in a check block",
			mods: map[string]any{"modules/stamp": map[string]any{"check": map[string]any{"c": map[string]any{
				"data": map[string]any{"external": map[string]any{"run": map[string]any{"program": []any{"sh", "-c", "id"}}}}}}}},
			want: "bundled module modules/stamp check c: data source external.run: the external data source is not allowed"},
		{name: "denied resource type",
			mods:   map[string]any{"modules/stamp": body(map[string]any{"aws_iam_user": map[string]any{"u": map[string]any{"name": "x"}}})},
			policy: func(p *Policy) { p.DeniedResources = []string{"aws_iam_user"} },
			want:   "bundled module modules/stamp: resource aws_iam_user.u: the aws_iam_user resource is not allowed (deniedResources)"},
		{name: "file write outside fileWriteRoots",
			mods: map[string]any{"modules/stamp": body(map[string]any{"local_file": map[string]any{"f": map[string]any{
				"filename": "/var/lib/lava/signing.pub", "content": "x"}}})},
			policy: func(p *Policy) { p.FileWriteRoots = []string{"/tmp/lava-demo"} },
			want:   `resource local_file.f attribute filename: the path "/var/lib/lava/signing.pub" is outside the allowed directories`},
		{name: "provider outside the allow-list through required_providers",
			mods: map[string]any{"modules/stamp": map[string]any{"terraform": map[string]any{"required_providers": map[string]any{
				"evil": map[string]any{"source": "evil.example.com/x/evil"}}}}},
			policy: func(p *Policy) { p.AllowedProviders = []string{"registry.opentofu.org/hashicorp/*"} },
			want:   "provider evil (required by bundled module modules/stamp): source evil.example.com/x/evil is not in the allowed providers"},
		{name: "provider implied by a module resource",
			mods:   map[string]any{"modules/stamp": body(map[string]any{"evil_thing": map[string]any{"x": map[string]any{}}})},
			policy: func(p *Policy) { p.AllowedProviders = []string{"registry.opentofu.org/hashicorp/terraform*"} },
			want:   "bundled module modules/stamp: resource evil_thing.x implies provider evil"},
		{name: "provider block in a module",
			mods: map[string]any{"modules/stamp": map[string]any{"provider": map[string]any{"aws": map[string]any{"region": "x"}}}},
			want: "bundled module modules/stamp: a provider block is not allowed in a module"},
		{name: "moved block in a module",
			mods: map[string]any{"modules/stamp": map[string]any{"moved": []any{map[string]any{"from": "terraform_data.a", "to": "terraform_data.b"}}}},
			want: "bundled module modules/stamp: a moved block is not allowed in a module"},
		{name: "removed block in a module",
			mods: map[string]any{"modules/stamp": map[string]any{"removed": []any{map[string]any{"from": "terraform_data.a",
				"lifecycle": map[string]any{"destroy": false}}}}},
			want: "bundled module modules/stamp: a removed block is not allowed in a module"},
		{name: "import block in a module",
			mods: map[string]any{"modules/stamp": map[string]any{"import": []any{map[string]any{"to": "terraform_data.a", "id": "x"}}}},
			want: "bundled module modules/stamp: a import block is not allowed in a module"},
		{name: "count the policy cannot count",
			mods: map[string]any{"modules/stamp": body(map[string]any{"terraform_data": map[string]any{"x": map[string]any{"count": "${var.n}"}}})},
			want: "resource terraform_data.x: count must be a literal non-negative number in a bundled module"},
		{name: "module instances count toward maxResources",
			mods: map[string]any{
				"modules/stamp":      map[string]any{"module": map[string]any{"leaf": map[string]any{"source": "./leaf", "count": 30}}},
				"modules/stamp/leaf": body(map[string]any{"terraform_data": map[string]any{"x": map[string]any{"count": 10}}}),
			},
			policy: func(p *Policy) { p.MaxResources = 100 },
			want:   "the architecture has 300 resource and data source instances"},
		{name: "source leaving the configuration",
			root: map[string]any{"module": map[string]any{"stamp": map[string]any{"source": "../../etc"}}},
			mods: map[string]any{"modules/stamp": map[string]any{}},
			want: `in.tlisp:3:4: policy: module stamp: the local source "../../etc" is not allowed (source "../../etc" leaves the configuration)`},
		{name: "nested source leaving the bundle",
			mods: map[string]any{"modules/stamp": map[string]any{"module": map[string]any{"up": map[string]any{"source": "../../../x"}}}},
			want: `bundled module modules/stamp: module up: the local source "../../../x" is not allowed (source "../../../x" leaves the configuration)`},
		{name: "source into a dot directory",
			root: map[string]any{"module": map[string]any{"stamp": map[string]any{"source": "./.terraform/providers"}}},
			want: `module stamp: the local source "./.terraform/providers" is not allowed`},
		{name: "source not bundled (the applier's own directory)",
			root: map[string]any{"module": map[string]any{"stamp": map[string]any{"source": "./modules/other"}}},
			mods: map[string]any{"modules/stamp": map[string]any{}},
			want: `module stamp: the local source "./modules/other" names modules/other, which is not bundled in the rendered document`},
		{name: "no bundle at all (an inline source's local module)",
			want: `module stamp: the local source "./modules/stamp" names modules/stamp, which is not bundled in the rendered document`},
		{name: "a bundle key leaving the configuration",
			mods: map[string]any{"modules/stamp": map[string]any{}, "../evil": map[string]any{}},
			want: `the bundled modules cannot be checked: "//".lava_modules: module directory "../evil"`},
		{name: "a module calling itself",
			mods: map[string]any{"modules/stamp": map[string]any{"module": map[string]any{"again": map[string]any{"source": "./"}}}},
			want: "module again: module modules/stamp calls itself"},
		{name: "unreached bundled module is checked too",
			mods: map[string]any{"modules/stamp": map[string]any{},
				"modules/spare": body(map[string]any{"terraform_data": map[string]any{"x": map[string]any{"provisioner": map[string]any{"local-exec": map[string]any{"command": "id"}}}}})},
			want: "in.tlisp:1:1: policy: bundled module modules/spare: resource terraform_data.x: a provisioner block is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Default()
			if tt.policy != nil {
				tt.policy(&p)
			}
			got := joined(Check(a, moduleDoc(t, tt.root, tt.mods), p))
			if !strings.Contains(got, tt.want) {
				t.Errorf("violations lack %q:\n%s", tt.want, got)
			}
		})
	}
}

// TestCheck_bundledModulePasses: a clean bundle with a nested module passes the default
// policy, and its resources count toward maxResources (3 here: one in the root's module, two
// in the nested one).
func TestCheck_bundledModulePasses(t *testing.T) {
	t.Parallel()
	a := &arch.Architecture{Pos: arch.Pos{File: "in.tlisp", Line: 1, Col: 1}}
	doc := moduleDoc(t, nil, map[string]any{
		"modules/stamp": map[string]any{
			"variable": map[string]any{"name": map[string]any{"type": "string"}},
			"resource": map[string]any{"terraform_data": map[string]any{"x": map[string]any{"input": "${var.name}"}}},
			"module":   map[string]any{"leaf": map[string]any{"source": "./leaf", "v": "${terraform_data.x.output}"}},
			"output":   map[string]any{"o": map[string]any{"value": "${module.leaf.o}"}},
		},
		"modules/stamp/leaf": map[string]any{
			"variable":  map[string]any{"v": map[string]any{"type": "string"}},
			"resource":  map[string]any{"terraform_data": map[string]any{"l": map[string]any{"for_each": map[string]any{"a": 1, "b": 2}, "input": "${var.v}"}}},
			"output":    map[string]any{"o": map[string]any{"value": "${terraform_data.l[\"a\"].output}"}},
			"terraform": map[string]any{"required_providers": map[string]any{"random": map[string]any{"source": "hashicorp/random"}}},
		},
	})
	if got := joined(Check(a, doc, Default())); got != "" {
		t.Errorf("a clean bundle is refused:\n%s", got)
	}
	p := Default()
	p.MaxResources = 2
	if got := joined(Check(a, doc, p)); !strings.Contains(got, "has 3 resource and data source instances") {
		t.Errorf("the bundled modules' instances are not counted:\n%s", got)
	}
}

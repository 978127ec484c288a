package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const twoDocs = `apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: a}
spec:
  source: {name: dns-record-set}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: b, namespace: infra}
spec:
  source: {inline: "(deflava-architecture b :resources ())"}
  engine: tofu
`

func TestParse(t *testing.T) {
	t.Parallel()
	const hdr = "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\n"
	tests := []struct {
		name    string
		data    string
		keys    []string
		wantErr string
	}{
		{name: "multi-document, other kinds skipped, namespace defaulted", data: twoDocs, keys: []string{"default/a", "infra/b"}},
		{name: "empty", data: "", keys: nil},
		{name: "no name", data: hdr + "spec: {source: {name: x}}\n", wantErr: "1:1: metadata.name: required"},
		{name: "two sources", data: hdr + "metadata: {name: a}\nspec: {source: {name: x, inline: y}}\n", wantErr: "4:8: spec.source: exactly one of spec.source.inline, spec.source.name or spec.sourceRef must be set (2 set)"},
		{name: "sourceRef without path", data: hdr + "metadata: {name: a}\nspec: {sourceRef: {kind: GitRepository, name: g}}\n", wantErr: "spec.path: required with spec.sourceRef"},
		{name: "path without sourceRef", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, path: a.tlisp}\n", wantErr: "spec.path: only valid with spec.sourceRef"},
		{name: "unknown engine", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, engine: pulumi}\n", wantErr: `4:27: spec.engine: unsupported value "pulumi": want embedded, tofu or terraform`},
		{name: "engine warp", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  engine: warp\n", wantErr: `6:3: spec.engine: unsupported value "warp"`},
		{name: "empty bindingsFrom entry", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  bindingsFrom:\n  - {}\n", wantErr: "7:5: spec.bindingsFrom[0]: exactly one of configMapRef, secretRef or outputsRef must be set"},
		{name: "outputsRef binding", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  bindingsFrom:\n  - outputsRef: {name: producer}\n", keys: []string{"default/a"}},
		{name: "outputsRef without a name", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  bindingsFrom:\n  - outputsRef: {key: k}\n", wantErr: "7:5: spec.bindingsFrom[0].outputsRef.name: required"},
		{name: "bindingsFrom without a name", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  bindingsFrom:\n  - secretRef: {key: k}\n", wantErr: "7:5: spec.bindingsFrom[0].secretRef.name: required"},
		{name: "invalid names", data: hdr + "metadata: {name: \"Bad Name!\", namespace: UPPER}\nspec: {source: {name: x}}\n", wantErr: `3:12: metadata.name: "Bad Name!" is not a DNS-1123 subdomain`},
		{name: "invalid namespace", data: hdr + "metadata: {name: a, namespace: UPPER}\nspec: {source: {name: x}}\n", wantErr: `3:21: metadata.namespace: "UPPER" is not a DNS-1123 label`},
		{name: "short driftInterval", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, driftInterval: 10s}\n", wantErr: "4:27: spec.driftInterval: must be at least 30s (got 10s)"},
		{name: "bad approvePlan", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, approvePlan: \"-x y\"}\n", wantErr: `4:27: spec.approvePlan: "-x y" must match`},
		{name: "bad deletionPolicy", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, deletionPolicy: Keep}\n", wantErr: `4:27: spec.deletionPolicy: unsupported value "Keep"`},
		{name: "remediation and a policy", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, remediation: {critical: Alert}, remediationPolicyRef: {name: p}}\n", wantErr: "4:59: spec.remediationPolicyRef: spec.remediation and spec.remediationPolicyRef are mutually exclusive"},
		{name: "duplicate in one file", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}}\n---\n" + hdr + "metadata: {name: a}\nspec: {source: {name: y}}\n", wantErr: "8:12: default/a is already defined at f.yaml:3:12"},
		{name: "unknown field", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, bindingz: {}}\n", wantErr: "bindingz"},
		{name: "other version", data: "apiVersion: lava.pleme.io/v2\nkind: LavaArchitecture\nmetadata: {name: a}\n", wantErr: "1:1: apiVersion lava.pleme.io/v2: want lava.pleme.io/v1alpha1"},
		{name: "bad YAML", data: "a: [\n", wantErr: "2:1: invalid YAML: did not find expected node content"},
		{name: "unclosed flow mapping", data: hdr + "metadata: {name: a\n", wantErr: "3:1: invalid YAML: did not find expected ',' or '}'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ms, err := Parse("f.yaml", []byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) && !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, m := range ms {
				keys = append(keys, m.Key())
			}
			if diff := cmp.Diff(tt.keys, keys); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRead_brokenAndDuplicateFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1.yaml", twoDocs)
	write("2.yaml", strings.SplitN(twoDocs, "---", 2)[0]) // default/a again
	write("3.yml", "a: [\n")
	write("notes.txt", "not a manifest")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("sub/4.yaml", twoDocs)
	ms, errs, err := new(Reader).Read([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	// default/a is defined by 1.yaml and 2.yaml: neither document is returned, both are
	// errors; 1.yaml's other document stays.
	if len(ms) != 1 || ms[0].File != filepath.Join(dir, "1.yaml") || ms[0].Key() != "infra/b" {
		t.Errorf("manifests %v, want infra/b of 1.yaml", ms)
	}
	var got []string
	for _, e := range errs {
		got = append(got, filepath.Base(e.File)+" "+e.Key)
	}
	if diff := cmp.Diff([]string{"3.yml ", "1.yaml default/a", "2.yaml default/a"}, got); diff != "" {
		t.Errorf("file errors (-want +got):\n%s", diff)
	}
	one, two := filepath.Join(dir, "1.yaml"), filepath.Join(dir, "2.yaml")
	for i, want := range []string{
		one + ":3:12: default/a is also defined at " + two + ":3:12: a namespace/name belongs to one document, so none of them is applied",
		two + ":3:12: default/a is also defined at " + one + ":3:12: a namespace/name belongs to one document, so none of them is applied",
	} {
		if len(errs) > i+1 && errs[i+1].Error() != want {
			t.Errorf("duplicate error %q, want %q", errs[i+1], want)
		}
	}
	if _, _, err := new(Reader).Read([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing -f path is not an error")
	}
}

func TestMapInlineText(t *testing.T) {
	t.Parallel()
	data := "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: a}\nspec:\n  source:\n    inline: |\n      (x\n        y)\n"
	ms, err := Parse("m.yaml", []byte(data))
	if err != nil || len(ms) != 1 || ms[0].MapInline == nil {
		t.Fatalf("Parse: %v, %v", ms, err)
	}
	got := MapInlineText("inline:2:3: boom; see inline:1:1", ms[0].MapInline)
	if want := "m.yaml:8:9: boom; see m.yaml:7:7"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := MapInlineText("inline:2:3: boom", nil); got != "inline:2:3: boom" {
		t.Errorf("without a mapper: %q", got)
	}
}

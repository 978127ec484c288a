package render

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/bundle"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/policy"
)

// TestSynthesize_bundledModules: the bundled architecture modules-demo calls ./modules/stamp,
// which calls ./tag; the rendered document carries exactly those two directories under
// "//".lava_modules, byte for byte the catalog's files (as JSON), in the pretty and the
// compact form, so the terraform_json digest covers them; the default policy passes it.
func TestSynthesize_bundledModules(t *testing.T) {
	t.Parallel()
	in := Input{SourceKind: SourceName, SourceName: "modules-demo"}
	out, ds := Synthesize(in)
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	for _, doc := range [][]byte{out.JSON, out.Compact} {
		mods, err := bundle.Read(doc)
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for d := range mods {
			dirs = append(dirs, d)
		}
		slices.Sort(dirs)
		if want := []string{"modules/stamp", "modules/stamp/tag"}; !slices.Equal(dirs, want) {
			t.Errorf("bundled %v, want %v", dirs, want)
		}
		want, err := catalog.ModuleBundle("modules-demo", []string{"modules/stamp"})
		if err != nil {
			t.Fatal(err)
		}
		for d, body := range mods {
			if !sameJSON(t, body, want[d]) {
				t.Errorf("%s bundled as %s, want the catalog's %s", d, body, want[d])
			}
		}
	}
	if !sameJSON(t, out.JSON, out.Compact) {
		t.Error("the pretty and compact documents differ")
	}
	var doc struct {
		Module map[string]map[string]any `json:"module"`
	}
	if err := json.Unmarshal(out.Compact, &doc); err != nil || doc.Module["stamp"]["source"] != "./modules/stamp" || doc.Module["stamp"]["name"] != "demo" {
		t.Errorf("module block = %v (%v)", doc.Module, err)
	}
	if got := CheckPolicy(in, out, policy.Default()); len(got) > 0 {
		t.Errorf("the default policy refuses modules-demo: %v", got)
	}
	// The bundle is part of the rendered digest: a document without it digests differently.
	noBundle := *out.Architecture
	noBundle.Bundle = nil
	compact, err := renderJSON(&noBundle, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := DigestJSON(out.Compact)
	d2, _ := DigestJSON(compact)
	if d1 == d2 || out.Record.TerraformJSONDigest != d1 {
		t.Errorf("digests: with bundle %s, without %s, record %s", d1, d2, out.Record.TerraformJSONDigest)
	}
}

// TestSynthesize_inlineLocalModuleRefused: an inline source has no bundle, so a local module
// source there names a directory of Lava's applier; synthesis refuses it at the :modules call,
// mapped into the manifest like every evaluator position. A remote source renders and is left
// to the tenant policy, which refuses it.
func TestSynthesize_inlineLocalModuleRefused(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture tenant
  :modules ((net :source "./modules/net")
            (sub :source "../../../var/lib/lava"))
  :resources ())`
	in := Input{SourceKind: SourceInline, SourceText: []byte(src), File: "manifest.yaml",
		MapPos: func(p arch.Pos) arch.Pos { p.Line += 10; return p }}
	out, ds := Synthesize(in)
	if out != nil {
		t.Fatalf("an inline source with local modules rendered:\n%s", out.JSON)
	}
	got := strings.Join(errorsOf(ds), "\n")
	for _, want := range []string{
		`manifest.yaml:12:13: module net: the local source "./modules/net" names a module directory, but an inline source has no bundle`,
		`manifest.yaml:13:13: module sub: the local source "../../../var/lib/lava" names a module directory, but an inline source has no bundle`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}

	remote := Input{SourceKind: SourceInline, File: "r.tlisp", SourceText: []byte(`(deflava-architecture tenant
  :modules ((net :source "git::https://example.com/net.git"))
  :resources ())`)}
	out, ds = Synthesize(remote)
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	if got := CheckPolicy(remote, out, policy.Default()); len(got) != 1 ||
		!strings.Contains(got[0].String(), `r.tlisp:2:13: policy: module net: the remote source "git::https://example.com/net.git" is not allowed`) {
		t.Errorf("policy = %v, want the remote source refused at the call", got)
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

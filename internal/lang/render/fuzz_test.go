package render

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// FuzzRender reads, evaluates and renders arbitrary sources: no panic may escape (an "internal
// error" diagnostic is a recovered panic and fails too), every diagnostic has a position inside
// the source, and every successful render is valid JSON in both forms. Seeded with the golden
// and error cases, the acceptance cases and the bundled catalog.
func FuzzRender(f *testing.F) {
	var seeds []string
	for _, pat := range []string{"testdata/*.tlisp", "testdata/errors/*.tlisp", "../tlisp/testdata/malformed/*.tlisp"} {
		files, _ := filepath.Glob(pat)
		seeds = append(seeds, files...)
	}
	for _, p := range seeds {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src, "prod")
	}
	for _, e := range catalog.List() {
		f.Add(e.Source, "x.example.com")
	}
	f.Fuzz(func(t *testing.T, src []byte, val string) {
		b := tlisp.Bindings{
			Scalars: map[string]string{"name": val, "enable": val},
			Lists:   map[string][]string{"azs": {val, val + "b"}},
			Records: map[string][]map[string]string{"repos": {{"slug": val}}},
		}
		// Bind every input that has no default, so required inputs do not stop evaluation early.
		decls, _ := tlisp.DeclaredInputs(src, tlisp.Options{})
		for _, d := range decls {
			if d.Default == nil {
				b.Scalars[d.Name] = val
			}
		}
		a, diags := tlisp.EvalArchitecture(src, b, tlisp.Options{File: "f"})
		for _, d := range diags {
			if strings.HasPrefix(d.Message, "internal error") {
				t.Fatalf("recovered panic: %s", d)
			}
			if !d.Pos.IsValid() || d.Pos.Offset < 0 || d.Pos.Offset > len(src) {
				t.Fatalf("diagnostic without a position in the source: %+v", d)
			}
		}
		if a == nil {
			if !diags.HasErrors() {
				t.Fatal("nil architecture without an error")
			}
			return
		}
		if diags.HasErrors() {
			t.Fatal("architecture returned with errors")
		}
		pretty, err := renderJSON(a, true, nil)
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		compact, err := renderJSON(a, false, nil)
		if err != nil {
			t.Fatalf("render compact: %v", err)
		}
		if !json.Valid(pretty) || !json.Valid(compact) {
			t.Fatalf("invalid JSON:\n%s", pretty)
		}
		if _, err := DigestJSON(compact); err != nil {
			t.Fatalf("digest: %v", err)
		}
		if _, diags := tlisp.ReadInterfaces(src, tlisp.Options{}); len(diags) > 0 && strings.HasPrefix(diags[0].Message, "internal error") {
			t.Fatalf("interfaces: %s", diags[0])
		}
	})
}

package tlisp

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadImports(t *testing.T) {
	t.Parallel()
	src := `
(deflava-interface demo :inputs ())
(deflava-import aws-vpc-network
  :as network
  :bindings (:name "preview" :cidr "10.42.0.0/16" :skipped 3))
(deflava-import "cloudflare-dns-records" :as dns :bindings (:zone-id "abcdef1234567890"))
(deflava-import bare)
(deflava-architecture demo :inputs () :resources ())`
	imports, diags := ReadImports([]byte(src), Options{File: "f"})
	if len(diags) != 0 {
		t.Fatalf("diagnostics: %v", diags)
	}
	want := []ImportDecl{
		{Target: "aws-vpc-network", Alias: "network", Bindings: []ImportBinding{{"name", "preview"}, {"cidr", "10.42.0.0/16"}}, Pos: Pos{File: "f", Line: 3, Col: 1, Offset: 37}},
		{Target: "cloudflare-dns-records", Alias: "dns", Bindings: []ImportBinding{{"zone-id", "abcdef1234567890"}}, Pos: Pos{File: "f", Line: 6, Col: 1, Offset: 146}},
		{Target: "bare", Pos: Pos{File: "f", Line: 7, Col: 1, Offset: 236}},
	}
	if diff := cmp.Diff(want, imports); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_, diags = ReadImports([]byte("(deflava-import)"), Options{File: "f"})
	if !diags.HasErrors() || diags[0].Pos.Col != 1 {
		t.Errorf("missing target: %v", diags)
	}
	// The evaluator warns that imports are not composed.
	_, diags = EvalArchitecture([]byte(src), Bindings{}, Options{File: "f"})
	if len(diags) != 3 || diags[0].Severity != SeverityWarning || diags[0].Pos.Line != 3 {
		t.Errorf("evaluation diagnostics: %v", diags)
	}
}

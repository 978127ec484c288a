package tlisp

import "testing"

// TestEval_importsAreNotComposed: the evaluator warns at each deflava-import form that the
// imported architecture is not composed, and evaluates the rest.
func TestEval_importsAreNotComposed(t *testing.T) {
	t.Parallel()
	src := `
(deflava-interface demo :inputs ())
(deflava-import aws-vpc-network
  :as network
  :bindings (:name "preview" :cidr "10.42.0.0/16" :skipped 3))
(deflava-import "cloudflare-dns-records" :as dns :bindings (:zone-id "abcdef1234567890"))
(deflava-import bare)
(deflava-architecture demo :inputs () :resources ())`
	_, diags := EvalArchitecture([]byte(src), Bindings{}, Options{File: "f"})
	if len(diags) != 3 || diags[0].Severity != SeverityWarning || diags[0].Pos.Line != 3 {
		t.Errorf("evaluation diagnostics: %v", diags)
	}
}

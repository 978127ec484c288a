package render

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// TestSynthesize_sensitiveOutputs: an output that derives from a secret binding (directly,
// through a resource attribute, a ${} traversal, a local, a chain of resources) or that the
// source marks (sensitive VALUE) is rendered "sensitive": true; the others are not.
func TestSynthesize_sensitiveOutputs(t *testing.T) {
	src := `(deflava-architecture s
  :inputs ((:pw "") (:plain ""))
  :locals (:from-pw "x-{pw}")
  :resources ((terraform-data "holder" :input "{pw}")
              (terraform-data "chained" :input (ref terraform-data "holder" output))
              (terraform-data "clean" :input "{plain}"))
  :outputs (:direct "{pw}"
            :via-ref (ref terraform-data "holder" output)
            :via-template "id ${terraform_data.holder.id}"
            :via-chain (ref terraform-data "chained" output)
            :via-local "${local.from_pw}"
            :marked (sensitive (ref terraform-data "clean" output))
            :clean (ref terraform-data "clean" output)
            :literal "hello"))
`
	out, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "s.tlisp",
		Bindings:   tlisp.Bindings{Scalars: map[string]string{"pw": "hunter22", "plain": "p"}},
		SecretKeys: []string{"pw"}, BindingsKey: make([]byte, 32)})
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	var doc struct {
		Output map[string]struct {
			Sensitive bool `json:"sensitive"`
		} `json:"output"`
	}
	if err := json.Unmarshal(out.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for k, o := range doc.Output {
		got[k] = o.Sensitive
	}
	want := map[string]bool{"direct": true, "via-ref": true, "via-template": true, "via-chain": true, "via-local": true,
		"marked": true, "clean": false, "literal": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sensitive outputs (-want +got):\n%s", diff)
	}
	// Without secret bindings only the marked output is sensitive.
	out, ds = Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "s.tlisp",
		Bindings: tlisp.Bindings{Scalars: map[string]string{"pw": "hunter22", "plain": "p"}}})
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	if s := SensitiveOutputs(out.Architecture); len(s) != 1 || !s["marked"] {
		t.Errorf("without secret bindings: %v, want only marked", s)
	}
}

// TestSynthesize_keyedJSONDigest: with a Secret-backed binding the terraformJSONDigest is the
// keyed digest (a plain BLAKE3 of the JSON, computable offline for a guessed secret, is not
// used); without one it is the plain digest.
func TestSynthesize_keyedJSONDigest(t *testing.T) {
	src := `(deflava-architecture k :inputs ((:pw "")) :resources ((terraform-data "d" :input "{pw}")))`
	key := []byte("0123456789abcdef0123456789abcdef")
	b := tlisp.Bindings{Scalars: map[string]string{"pw": "hunter22"}}
	sec, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), Bindings: b, SecretKeys: []string{"pw"}, BindingsKey: key})
	if sec == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	plain, err := DigestJSON(sec.Compact)
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := KeyedJSONDigest(sec.Compact, key)
	if err != nil {
		t.Fatal(err)
	}
	if sec.Record.TerraformJSONDigest != keyed || keyed == plain {
		t.Errorf("terraformJSONDigest %s, want the keyed %s (not the plain %s)", sec.Record.TerraformJSONDigest, keyed, plain)
	}
	pub, _ := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), Bindings: b})
	if want, err := DigestJSON(pub.Compact); err != nil || pub.Record.TerraformJSONDigest != want {
		t.Errorf("without secrets terraformJSONDigest %s, want the plain %s (%v)", pub.Record.TerraformJSONDigest, want, err)
	}
	if _, err := KeyedJSONDigest(sec.Compact, key[:16]); err == nil {
		t.Error("a 16-byte key passed")
	}
}

// TestSensitiveOutputs_chainAttack: 1,000 locals declared in reverse order, each referencing
// the next, the last one bound to a Secret. Looping to a fixpoint re-parsed every untainted
// template each pass, one more local tainted a pass: 80 s for 2,000 locals (56 ms without the
// secret), twice per synthesis. Each template is parsed once (counted); the output is
// sensitive, and one whose chain does not reach the secret is not.
func TestSensitiveOutputs_chainAttack(t *testing.T) {
	t.Parallel()
	const n = 1000
	var b strings.Builder
	b.WriteString("(deflava-architecture a :inputs ((:s \"x\")) :locals (")
	for i := n - 1; i >= 1; i-- {
		fmt.Fprintf(&b, ":l%d \"${local.l%d}\"\n", i, i-1)
	}
	fmt.Fprintf(&b, ":l0 \"{s}\" :m1 \"${local.m0}\" :m0 \"x\") :resources ((terraform-data \"r\" :input \"x\"))"+
		" :outputs (:o \"${local.l%d}\" :clean \"${local.m1}\"))", n-1)
	for _, secret := range []bool{true, false} {
		in := Input{SourceKind: SourceInline, SourceText: []byte(b.String()), File: "a.tlisp",
			Bindings: tlisp.Bindings{Scalars: map[string]string{"s": "secretvalue"}}, BindingsKey: make([]byte, 32)}
		if secret {
			in.SecretKeys = []string{"s"}
		}
		out, ds := Synthesize(in)
		if out == nil {
			t.Fatalf("synthesize: %v", errorsOf(ds))
		}
		got, parses := sensitiveOutputs(out.Architecture)
		want := map[string]bool{}
		if secret {
			want["o"] = true
		}
		if !cmp.Equal(want, got) {
			t.Errorf("secret %v: sensitive outputs %v, want %v", secret, got, want)
		}
		// One parse per local with a template and per output, at most.
		if bound := n + 1 + 2; parses > bound {
			t.Errorf("secret %v: %d templates parsed, want at most %d", secret, parses, bound)
		}
		if secret != strings.Contains(string(out.Compact), `"o":{"value":"${local.l999}","sensitive":true}`) {
			t.Errorf("secret %v: the rendered output o: %s", secret, out.Compact[len(out.Compact)-200:])
		}
	}
}

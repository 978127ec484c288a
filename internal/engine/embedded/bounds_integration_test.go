//go:build integration

package embedded

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestEngine_stateNumbersBounded: a state body another engine wrote (OpenTofu writes a number
// in full: tonumber("1e1600000") is 1.6 million digits) or an operator pushed is read by the
// embedded engine only when its numbers are within MaxNumberText digits, text and exponent:
// go-cty parsed each with math/big on every plan and drift scan, 15 s per plan at 1.6 million
// digits, quadratic and uninterruptible. Such a state fails the plan at once, naming the
// limit; the same state with ordinary numbers plans.
func TestEngine_stateNumbersBounded(t *testing.T) {
	e := newEnv(t)
	const doc = `{"resource":{"terraform_data":{"a":{"input":"x","lifecycle":{"ignore_changes":["input"]}}}}}`
	if _, err := e.planApply(doc); err != nil {
		t.Fatal(err)
	}
	_, body, err := e.store.Body(t.Context(), e.key)
	if err != nil {
		t.Fatal(err)
	}
	const input = `"input":{"value":"x","type":"string"}`
	if !strings.Contains(string(body), input) {
		t.Fatalf("state body lacks %s: %s", input, body)
	}
	for _, tc := range []struct{ name, number string }{
		{"digits", "1" + strings.Repeat("0", 1_000_000)},
		{"exponent", "1e1600000"},
		{"ordinary", "12345.678e-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := strings.Replace(string(body), input, `"input":{"value":`+tc.number+`,"type":"number"}`, 1)
			if _, err := e.store.Put(t.Context(), e.key, []byte(b), ""); err != nil {
				t.Fatal(err)
			}
			_, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
			if tc.name == "ordinary" {
				if err != nil {
					t.Fatalf("plan against a state with an ordinary number: %v", err)
				}
				return
			}
			if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "more than 4096, the limit of a number's text") {
				t.Fatalf("plan: %v; want the state refused for its number", err)
			}
		})
	}
}

// TestEngine_sensitiveValuesBounded: the sensitive values a configuration holds are bounded
// by engine.MaxSecretBytes before the engine builds a redactor over them (it costs hundreds
// of bytes per byte: a 15 MB sensitive() value of control bytes took 7.8 GB, and two objects
// ended the applier out of memory). A 1 MB one fails the plan, with an error that names the
// limit and shows no value, whether the plan fails on its own or not; a small one plans.
func TestEngine_sensitiveValuesBounded(t *testing.T) {
	e := newEnv(t)
	big := `${sensitive(replace(format(\"%1000000s\", \"\"), \" \", \"\\u0001\"))}`
	for _, tc := range []struct{ name, doc string }{
		{"a plan that fails", `{"resource":{"terraform_data":{"a":{"input":"` + big + `"},"b":{"input":"${tonumber(terraform_data.a.input)}"}}}}`},
		{"a plan that succeeds", `{"resource":{"terraform_data":{"a":{"input":"` + big + `"}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			alloc := proctest.Allocated(func() { _, err = e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(tc.doc)}) })
			t.Logf("allocated %d MB: %v", alloc>>20, err)
			if !errors.Is(err, engine.ErrSecretsTooLarge) || !strings.Contains(err.Error(), "more than the 262144 bytes") || strings.Contains(err.Error(), "\x01") {
				t.Fatalf("plan: %.300v; want the sensitive values refused, no value shown", err)
			}
			if alloc > 400<<20 {
				t.Errorf("allocated %d MB, want under 400 MB", alloc>>20)
			}
		})
	}
	if _, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(`{"resource":{"terraform_data":{"a":{"input":"${sensitive(\"pw\")}"}}}}`)}); err != nil {
		t.Fatalf("plan with a small sensitive value: %v", err)
	}
	// A 200 KB Secret binding is in the request's redactions and, rendered as sensitive(), in
	// the configuration: the same value, counted once.
	binding := strings.Repeat("k", 200_000)
	tgt := e.target(`{"resource":{"terraform_data":{"a":{"input":"${sensitive(\"` + binding + `\")}"}}}}`)
	tgt.Redact = []string{binding}
	if _, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: tgt}); err != nil {
		t.Fatalf("plan with a 200 KB Secret binding: %.300v", err)
	}
}

// TestEvaluationLimits_providedValuesCharged: what a provider returns (a data source's
// result, a refreshed or imported object) is charged to the operation's text budget at each
// place it lands, as a value built is. A 1.3 MB file written once and read back by 60
// data.local_file instances (its content and content_base64, 3 MB a read) was charged
// nothing, and the plan and the state held 60 copies (160 reads: 5 GB allocated, a 464 MB
// state); the reads now stop at the budget, naming the data source and the limit.
func TestEvaluationLimits_providedValuesCharged(t *testing.T) {
	tools := tofutest.Tofu(t)
	h := newMemHarness(t, tools.Mirror)
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{
		"locals": map[string]any{"big": `${format("%1300000s", "")}`},
		"resource": map[string]any{"local_file": map[string]any{"src": map[string]any{
			"filename": filepath.Join(dir, "src.txt"), "content": "${local.big}"}}},
		"data": map[string]any{"local_file": map[string]any{"r": map[string]any{
			"count": 60, "filename": "${local_file.src.filename}"}}},
	})
	var err error
	alloc := proctest.Allocated(func() { _, err = h.apply(t, doc, nil) })
	t.Logf("allocated %d MB: %v", alloc>>20, err)
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "data source result") ||
		!strings.Contains(err.Error(), "more than 134217728 bytes of text") {
		t.Fatalf("apply: %v; want the data sources' results stopped at the text budget", err)
	}
	if alloc > 2<<30 {
		t.Errorf("allocated %d MB, want under 2 GB", alloc>>20)
	}
}

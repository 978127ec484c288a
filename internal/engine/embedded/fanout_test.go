package embedded

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
)

// bigLocalDoc is a configuration whose local big is a 15 MB string (one value, within
// MaxValueBytes) and whose rest is built by more, referencing it.
func bigLocalDoc(t *testing.T, more map[string]any) string {
	t.Helper()
	doc := map[string]any{"locals": map[string]any{"big": `${format("%15000000s", "")}`}}
	for k, v := range more {
		doc[k] = v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEvaluationLimits_referenceFanOut: a reference is charged at every place it is used. One
// 15 MB local referenced by 12 terraform_data instances (a 200-byte document) was charged
// once, then written 12 times into the plan and the state (2.7 GB allocated; out of memory at
// 60 instances, the applier of every tenant with it); it is now refused at the ninth use,
// naming the limit and where.
func TestEvaluationLimits_referenceFanOut(t *testing.T) {
	doc := bigLocalDoc(t, map[string]any{"resource": map[string]any{"terraform_data": map[string]any{
		"a": map[string]any{"count": 12, "input": "${local.big}"}}}})
	h := newMemHarness(t, t.TempDir())
	var err error
	alloc := proctest.Allocated(func() { _, err = h.apply(t, doc, nil) })
	t.Logf("allocated %d MB: %v", alloc>>20, err)
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "more than 134217728 bytes of text") ||
		!strings.Contains(err.Error(), "main.tf.json:1,") {
		t.Fatalf("apply: %v; want the text budget exceeded, with the position", err)
	}
	if alloc > 1<<30 {
		t.Errorf("allocated %d MB, want under 1 GB", alloc>>20)
	}
}

// TestChecks_messagesBounded: check block failure messages are bounded before they are
// logged, joined into the plan's warnings or stored in check_results. 40 assertions whose
// error_message is the same 15 MB local: each use is charged (the budget stops the
// evaluation at the ninth), and the messages kept are at most maxCheckMessages of at most
// engine.MaxWarningLen bytes (before: every 15 MB message copied three times, out of memory at
// 100 assertions). A message showing a computed copy of a sensitive value (a terraform_data
// output whose input is sensitive) is redacted in the log and the state.
func TestChecks_messagesBounded(t *testing.T) {
	asserts := make([]any, 40)
	for i := range asserts {
		asserts[i] = map[string]any{"condition": "${false}", "error_message": "${local.big}"}
	}
	doc := bigLocalDoc(t, map[string]any{
		"resource": map[string]any{"terraform_data": map[string]any{"a": map[string]any{"input": "x"}}},
		"check":    map[string]any{"c": map[string]any{"assert": asserts}},
	})
	h := newMemHarness(t, t.TempDir())
	var p *Plan
	var err error
	alloc := proctest.Allocated(func() {
		cfg, perr := ParseConfig([]byte(doc))
		if perr != nil {
			err = perr
			return
		}
		p, err = h.r.Plan(t.Context(), cfg, nil, nil, false, nil)
	})
	t.Logf("allocated %d MB", alloc>>20)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if len(p.Checks) != 1 || p.Checks[0].Status != "fail" {
		t.Fatalf("checks %+v, want c failed", p.Checks)
	}
	ms := p.Checks[0].Messages
	if len(ms) != maxCheckMessages+1 || ms[maxCheckMessages] != fmt.Sprintf("(%d more failed assertions)", 40-maxCheckMessages) {
		t.Errorf("%d messages, last %.80q; want %d and a count of the rest", len(ms), ms[len(ms)-1], maxCheckMessages)
	}
	for i, m := range ms {
		if len(m) > engine.MaxWarningLen+len("…") {
			t.Errorf("message %d: %d bytes, want at most %d", i, len(m), engine.MaxWarningLen)
		}
	}
	if !strings.Contains(strings.Join(ms, "\n"), "Evaluation limit exceeded") {
		t.Errorf("no message says the budget stopped the evaluation: %.300q", strings.Join(ms, "\n"))
	}
	if alloc > 1<<30 {
		t.Errorf("allocated %d MB, want under 1 GB", alloc>>20)
	}

	const secret = "db-pw-7f3a-computed-copy"
	sdoc := `{"resource":{"terraform_data":{"d":{"input":"${sensitive(\"` + secret + `\")}"}}},` +
		`"check":{"c":{"assert":[{"condition":"${terraform_data.d.output == \"nope\"}","error_message":"unexpected output ${terraform_data.d.output}"}]}}}`
	var logs bytes.Buffer
	pool := NewPool(Mirror{Dir: t.TempDir()}, nil, 4)
	t.Cleanup(func() { _ = pool.Close() })
	sh := &memHarness{r: NewRunner(pool, 4, slog.New(slog.NewTextHandler(&logs, nil)))}
	if _, err := sh.apply(t, sdoc, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(sdoc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.r.Plan(t.Context(), cfg, sh.state, nil, false, nil); err != nil {
		t.Fatal(err)
	}
	st, err := sh.state.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "check block assertion failed") {
		t.Fatalf("the failed check was not logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), secret) || strings.Contains(string(st), "unexpected output "+secret) {
		t.Errorf("the computed copy of the sensitive value is in the log or in check_results:\n%s", logs.String())
	}
}

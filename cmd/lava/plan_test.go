package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/embedded"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
	"github.com/lava-operator/lava/internal/readmodel"
)

// TestPlanShow: a plan the embedded engine made for review (terraform_data, built in: no
// provider needed) and held in the applier's record is printed as `tofu show` prints it,
// with the value bound from a Secret masked in the text and absent from the JSON body.
func TestPlanShow(t *testing.T) {
	const secret = "s3cret-from-a-Secret"
	b := newStateBus(t)
	srv, kv, art, store := b.srv, b.kv, b.art, b.store
	ctx := t.Context()
	eng := embedded.New(embedded.Options{Store: store, Artifacts: art})
	t.Cleanup(func() { _ = eng.Close() })
	rendered, err := art.Put(ctx, strings.NewReader(`{"resource":{"terraform_data":{"plain":{"input":"hello"},"password":{"input":"`+secret+`"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	key := state.Key{Namespace: "infra", Name: "web"}
	plan, err := eng.Plan(ctx, engine.PlanRequest{Target: engine.Target{Key: key, RenderedDigest: rendered, Redact: []string{secret}},
		BindingsDigest: "b", Review: true})
	if err != nil {
		t.Fatal(err)
	}
	if plan.ReviewDigest == "" {
		t.Fatal("a plan made for review has no review body")
	}
	// The applier's verdict on it, as it records it on a plan a rule holds.
	in := planpolicy.Input{}
	for _, r := range plan.Resources {
		in.Changes = append(in.Changes, planpolicy.Change{Address: r.Address, Type: r.Type, Mode: r.Mode, Actions: []string{string(r.Action)}})
	}
	verdict, err := planpolicy.MustCompile([]planpolicy.Rule{{Name: "new-data", Change: `change.type == "terraform_data" && "create" in change.actions`,
		Verdict: planpolicy.RequireApproval, Message: "new data needs a look"}}).Evaluate(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	plan.Policy = &verdict
	rec, err := json.Marshal(readmodel.Record{UID: "uid-web", Held: plan, HeldGeneration: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, readmodel.RecordKey(key.Namespace, key.Name), rec); err != nil {
		t.Fatal(err)
	}
	lava := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(ctx, append(args, "--nats-url", srv.URL()), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := lava("plan", "show", "infra/web")
	if code != exitOK {
		t.Fatalf("plan show: exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{
		"Plan " + plan.PlanID + " of infra/web (generation 3), awaiting approval",
		"Plan rules: requireApproval\n  requireApproval: rule new-data (terraform_data.password, terraform_data.plain): new data needs a look\n",
		"# terraform_data.password will be created", `+ resource "terraform_data" "password" {`, "+ input  = (sensitive value)",
		"# terraform_data.plain will be created", `+ input  = "hello"`, "+ id     = (known after apply)",
		"Plan: 2 to add, 0 to change, 0 to destroy.", "lava approve infra/web " + plan.PlanID,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan show lacks %q:\n%s", want, out)
		}
	}
	code, body, _ := lava("plan", "show", "infra/web", "--json")
	if code != exitOK || !strings.Contains(body, `"resource_changes"`) || !strings.Contains(body, `"after_sensitive":{"input":true}`) {
		t.Errorf("plan show --json: exit %d:\n%s", code, body)
	}
	for name, text := range map[string]string{"text": out, "json": body} {
		if strings.Contains(text, secret) {
			t.Errorf("the Secret's value appears in the %s output:\n%s", name, text)
		}
	}
	if code, _, errOut := lava("plan", "show", "infra/none"); code != exitInvalid || !strings.Contains(errOut, "no plan of infra/none awaits approval") ||
		!strings.Contains(errOut, "<state-dir>/status/infra/none.yaml under lava up") {
		t.Errorf("plan show of an object without a held plan: exit %d, stderr %s", code, errOut)
	}
}

// TestReviewBody_masks: values the plan marks sensitive, at any depth, and strings containing
// a redacted value are removed and marked; variables, outputs and prior state never enter.
func TestReviewBody_masks(t *testing.T) {
	raw := `{"format_version":"1.2","terraform_version":"1.12.6",
	  "variables":{"db_password":{"value":"vars-secret"}},
	  "prior_state":{"format_version":"1.0","values":{"outputs":{"x":{"value":"prior-secret","sensitive":false}}}},
	  "resource_changes":[{"address":"db.x","mode":"managed","type":"db","name":"x","change":{"actions":["update"],
	    "before":{"name":"a","password":"old-pw-value","tags":{"k":"v"},"nested":{"token":"nested-token"}},
	    "after":{"name":"b","password":"new-pw-value","tags":{"k":"bound-secret-xyz"},"nested":{"token":"nested-token2"}},
	    "after_unknown":{},"before_sensitive":{"password":true,"nested":{"token":true}},"after_sensitive":{"password":true,"nested":{"token":true}}}}]}`
	p, err := engine.ParseReviewBody([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	body, err := engine.ReviewBody(p, []string{"bound-secret-xyz", "abc"})
	if err != nil {
		t.Fatal(err)
	}
	for _, leaked := range []string{"old-pw-value", "new-pw-value", "nested-token", "bound-secret-xyz", "vars-secret", "prior-secret"} {
		if strings.Contains(string(body), leaked) {
			t.Errorf("review body carries %q: %s", leaked, body)
		}
	}
	again, err := engine.ReviewBody(p, []string{"bound-secret-xyz"})
	if err != nil || !bytes.Equal(again, body) {
		t.Errorf("review body is not deterministic: %v", err)
	}
	shown, err := engine.ParseReviewBody(body)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := engine.RenderReview(&text, shown); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`~ name     = "a" -> "b"`, "~ password = (sensitive value)\n", "~ nested   = (sensitive value)\n",
		"~ tags     = {\"k\":\"v\"} -> (sensitive value)", "Plan: 0 to add, 1 to change, 0 to destroy."} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("rendered plan lacks %q:\n%s", want, text.String())
		}
	}
}

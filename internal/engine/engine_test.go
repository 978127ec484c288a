package engine_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

func TestPlanID(t *testing.T) {
	base := func() engine.PlanIDInput {
		return engine.PlanIDInput{RenderedDigest: "r", BindingsDigest: "b", Engine: "tofu", EngineVersion: "1.12.6",
			ProviderVersions: map[string]string{"registry.opentofu.org/hashicorp/local": "1.4.0"},
			StateSerial:      3, StateLineage: "L", StateDigest: "d",
			Resources: []engine.ResourceAction{{Address: "local_file.a", Action: engine.ActionCreate},
				{Address: "local_file.b", Action: engine.ActionUpdate}},
			ReviewDigest: "v"}
	}
	want := engine.PlanID(base())
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(want) {
		t.Fatalf("PlanID = %q, want 64 lowercase hex", want)
	}
	if engine.PlanID(base()) != want {
		t.Fatal("PlanID is not deterministic")
	}
	reordered := base()
	reordered.Resources[0], reordered.Resources[1] = reordered.Resources[1], reordered.Resources[0]
	if engine.PlanID(reordered) != want {
		t.Fatal("PlanID depends on the order the engine listed the resources in")
	}
	tests := []struct {
		name   string
		change func(a *engine.PlanIDInput)
	}{
		{"rendered", func(a *engine.PlanIDInput) { a.RenderedDigest = "r2" }},
		{"bindings", func(a *engine.PlanIDInput) { a.BindingsDigest = "b2" }},
		{"engine", func(a *engine.PlanIDInput) { a.Engine = "terraform" }},
		{"engine version", func(a *engine.PlanIDInput) { a.EngineVersion = "1.12.7" }},
		{"provider version", func(a *engine.PlanIDInput) {
			a.ProviderVersions = map[string]string{"registry.opentofu.org/hashicorp/local": "1.4.1"}
		}},
		{"extra provider", func(a *engine.PlanIDInput) {
			a.ProviderVersions = map[string]string{"registry.opentofu.org/hashicorp/local": "1.4.0", "x": "1"}
		}},
		{"serial", func(a *engine.PlanIDInput) { a.StateSerial = 4 }},
		{"lineage", func(a *engine.PlanIDInput) { a.StateLineage = "L2" }},
		// A state body rewritten at the same serial and lineage.
		{"state digest", func(a *engine.PlanIDInput) { a.StateDigest = "d2" }},
		{"an action", func(a *engine.PlanIDInput) { a.Resources[1].Action = engine.ActionReplace }},
		{"an address", func(a *engine.PlanIDInput) { a.Resources[1].Address = "local_file.c" }},
		{"one resource more", func(a *engine.PlanIDInput) {
			a.Resources = append(a.Resources, engine.ResourceAction{Address: "local_file.c", Action: engine.ActionDelete})
		}},
		{"review body", func(a *engine.PlanIDInput) { a.ReviewDigest = "v2" }},
		// Length prefixes: moving bytes between adjacent fields changes the id.
		{"shifted boundary", func(a *engine.PlanIDInput) { a.RenderedDigest, a.BindingsDigest = "rb", "" }},
		{"shifted resource boundary", func(a *engine.PlanIDInput) {
			a.Resources = []engine.ResourceAction{{Address: "local_file.acreate", Action: ""},
				{Address: "local_file.b", Action: engine.ActionUpdate}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := base()
			tt.change(&a)
			if engine.PlanID(a) == want {
				t.Fatalf("changing the %s kept the plan id", tt.name)
			}
		})
	}
	b := base()
	rec := engine.PlanRecord{Target: engine.Target{RenderedDigest: "r"}, BindingsDigest: "b", Engine: "tofu",
		EngineVersion: "1.12.6", ProviderVersions: b.ProviderVersions, StateSerial: 3, StateLineage: "L", StateDigest: "d",
		Resources: b.Resources, ReviewDigest: "v"}
	if rec.ComputePlanID() != want {
		t.Fatal("ComputePlanID differs from PlanID of the same fields")
	}
	// A plan against a regressed state (an empty state after a wipe hashes like the empty
	// state before the first apply) has an id of its own, one per last applied plan.
	rec.Target.RegressedFrom = "plan-1"
	regressed := rec.ComputePlanID()
	if regressed == want || regressed != engine.RegressedPlanID(want, "plan-1") || len(regressed) != 64 {
		t.Fatalf("regressed plan id %q: want RegressedPlanID of %q, not the plain id", regressed, want)
	}
	rec.Target.RegressedFrom = "plan-2"
	if rec.ComputePlanID() == regressed {
		t.Fatal("regressions from two different applies share a plan id")
	}
}

// TestPlanRecord_OwnID: a plan whose id was applied already gets an id of its own per newest
// applied plan, the id ComputePlanID gives its record (so a held plan recomputes to it), and
// is still refused as stale against another state; a plan held since its id was applied, or
// since another apply, no longer has its own id.
func TestPlanRecord_OwnID(t *testing.T) {
	t.Parallel()
	rec := engine.PlanRecord{Target: engine.Target{RenderedDigest: "r"}, BindingsDigest: "b", Engine: "tofu",
		EngineVersion: "1.12.6", StateSerial: 3, StateLineage: "L", StateDigest: "d",
		Resources: []engine.ResourceAction{{Address: "testkit_file.f", Action: engine.ActionUpdate}}}
	rec.PlanID = rec.ComputePlanID()
	first := rec.PlanID

	rec.OwnID([]string{"p0"})
	if rec.PlanID != first || rec.Target.RepeatedAfter != "" || !rec.HasOwnID([]string{"p0"}) {
		t.Fatalf("a first plan changed its id: %s after %q, want %s", rec.PlanID, rec.Target.RepeatedAfter, first)
	}
	if rec.HasOwnID([]string{"p0", first}) {
		t.Error("a plan held since its id was applied has its own id")
	}

	second := rec
	second.OwnID([]string{"p0", first})
	if second.PlanID == first || second.Target.RepeatedAfter != first || second.PlanID != engine.RepeatedPlanID(first, first) {
		t.Fatalf("repeated plan id %s after %q: want RepeatedPlanID(%s, %s)", second.PlanID, second.Target.RepeatedAfter, first, first)
	}
	if second.ComputePlanID() != second.PlanID || !second.HasOwnID([]string{"p0", first}) {
		t.Error("a repeated plan's record does not recompute to its id")
	}
	if second.HasOwnID([]string{"p0", first, second.PlanID}) {
		t.Error("a repeated plan held since its id was applied has its own id")
	}

	third := rec
	third.OwnID([]string{"p0", first, second.PlanID})
	if third.PlanID == first || third.PlanID == second.PlanID || third.Target.RepeatedAfter != second.PlanID {
		t.Fatalf("third plan id %s after %q: want one of its own after %s", third.PlanID, third.Target.RepeatedAfter, second.PlanID)
	}
	if second.HasOwnID([]string{"p0", first, "p9"}) {
		t.Error("a repeated plan made before another apply has its own id")
	}

	rec.Target.RegressedFrom = "p0"
	rec.PlanID = rec.ComputePlanID()
	regressed := rec.PlanID
	rec.OwnID([]string{"p0", regressed})
	if rec.PlanID != engine.RepeatedPlanID(regressed, regressed) || rec.PlanID == engine.RegressedPlanID(regressed, regressed) {
		t.Errorf("repeated regressed plan id %s: want RepeatedPlanID of the regressed id", rec.PlanID)
	}

	stale := engine.Stale(&second, state.Record{Serial: 4, Lineage: "L", Digest: "d2"})
	if stale == nil || stale.PlanID != second.PlanID {
		t.Errorf("a repeated plan against another state: %v, want stale naming %s", stale, second.PlanID)
	}
}

func TestStale(t *testing.T) {
	plan := &engine.PlanRecord{PlanID: "p", StateSerial: 3, StateLineage: "L", StateDigest: "d"}
	if err := engine.Stale(plan, state.Record{Serial: 3, Lineage: "L", Digest: "d"}); err != nil {
		t.Fatalf("same state is stale: %v", err)
	}
	for name, cur := range map[string]state.Record{
		"serial":  {Serial: 4, Lineage: "L", Digest: "d"},
		"lineage": {Serial: 3, Lineage: "M", Digest: "d"},
		"body":    {Serial: 3, Lineage: "L", Digest: "e"},
		"gone":    {},
	} {
		err := engine.Stale(plan, cur)
		if err == nil || !errors.Is(err, engine.ErrPlanStale) {
			t.Errorf("%s changed: Stale = %v, want a PlanStaleError", name, err)
		}
	}
	if err := engine.Stale(plan, state.Record{Serial: 3, Lineage: "L", Digest: "e"}); err == nil || !strings.Contains(err.Error(), "rewritten") {
		t.Errorf("a rewritten body: %v, want a message saying so", err)
	}
}

func TestRequirements(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		sources map[string]string
		want    []engine.ProviderRequirement
		// versions are the architecture's pins (nil: none).
		versions map[string]string
	}{
		{"seed vpc", `{"resource":{"aws_vpc":{"main":{"cidr_block":"10.42.0.0/16"}}}}`, nil,
			[]engine.ProviderRequirement{{Name: "aws", Source: "hashicorp/aws"}}, nil},
		{"terraform_data needs none", `{"resource":{"terraform_data":{"x":{"input":"a"}}}}`, nil,
			[]engine.ProviderRequirement{}, nil},
		{"sources, provider blocks, meta-arguments and data", `{
			"provider":{"cloudflare":{"api_token":"x"}},
			"data":{"http_body":{"d":{}}},
			"resource":{"testkit_file":{"a":{"filename":"f","content":"c"}},
			            "local_file":{"b":{"provider":"files.alt","filename":"f","content":"c"}},
			            "terraform_data":{"t":{}}}}`,
			map[string]string{"testkit": "example/testkit", "files": "hashicorp/local", "extra": "acme/extra"},
			[]engine.ProviderRequirement{
				{Name: "cloudflare", Source: "hashicorp/cloudflare"},
				{Name: "extra", Source: "acme/extra"},
				{Name: "files", Source: "hashicorp/local"},
				{Name: "http", Source: "hashicorp/http"},
				{Name: "testkit", Source: "example/testkit"},
			}, nil},
		{"the rendered required_providers", `{
			"terraform":{"required_providers":{"local":{"source":"hashicorp/local"},"kit":{"source":"example/testkit","version":"~> 0.1"},"old":"1.0"}},
			"resource":{"terraform_data":{"t":{}}}}`,
			map[string]string{"kit": "acme/kit"},
			[]engine.ProviderRequirement{
				{Name: "kit", Source: "acme/kit", Version: "~> 0.1"},
				{Name: "local", Source: "hashicorp/local"},
				{Name: "old", Source: "hashicorp/old", Version: "1.0"},
			}, nil},
		// The architecture's pins (versions) and the rendered JSON's own constraints must both
		// hold; one given twice is written once.
		{"pinned versions", `{
			"terraform":{"required_providers":{"kit":{"source":"example/testkit","version":"~> 0.1"},"local":{"version":"1.4.0"}}},
			"resource":{"aws_vpc":{"v":{}}}}`,
			nil,
			[]engine.ProviderRequirement{
				{Name: "aws", Source: "hashicorp/aws", Version: "~> 6.0"},
				{Name: "kit", Source: "example/testkit", Version: "~> 0.1, < 0.3"},
				{Name: "local", Source: "hashicorp/local", Version: "1.4.0"},
			},
			map[string]string{"aws": "~> 6.0", "kit": "< 0.3", "local": "1.4.0"}},
		// Keys are Terraform's, matched exactly: a "Provider" attribute is no meta-argument (read
		// as one, it would have tofu install hashicorp/local past the allow-list), nor are
		// "Resource", "Required_Providers" or "Source".
		{"keys in another case", `{
			"Resource":{"google_x":{"a":{}}},
			"terraform":{"Required_Providers":{"kit":{"source":"example/kit"}},"required_providers":{"p":{"Source":"evil/p"}}},
			"resource":{"terraform_data":{"b":{"Provider":"local","input":"x"}}}}`,
			nil,
			[]engine.ProviderRequirement{{Name: "p", Source: "hashicorp/p"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := engine.Requirements([]byte(tt.json), tt.sources, tt.versions)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("Requirements (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := engine.Requirements([]byte(`{`), nil, nil); err == nil {
		t.Fatal("Requirements of broken JSON succeeded")
	}
}

// TestProviderConfigurations: the provider configurations a rendered document uses are its
// provider blocks (object and array forms, aliases) and those its resources and data sources
// name or imply, the built-in terraform provider left out; more than
// MaxProviderConfigurations is refused as an evaluation limit (each is a provider process).
func TestProviderConfigurations(t *testing.T) {
	doc := `{"provider":{"aws":[{"region":"a"},{"alias":"west","region":"b"}],"local":{"alias":"x"}},
		"resource":{"aws_s3_bucket":{"b":{"provider":"aws.east"}},"local_file":{"f":{}},"terraform_data":{"d":{}}},
		"data":{"http":{"h":{}}}}`
	got, err := engine.ProviderConfigurations([]byte(doc))
	want := []string{"aws", "aws.east", "aws.west", "http", "local", "local.x"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ProviderConfigurations = %v, %v; want %v", got, err, want)
	}
	many := func(n int) []byte {
		var provs []string
		for i := range n {
			provs = append(provs, fmt.Sprintf(`{"alias":"a%d"}`, i))
		}
		return []byte(`{"provider":{"local":[` + strings.Join(provs, ",") + `]}}`)
	}
	if err := engine.CheckProviderConfigurations(many(engine.MaxProviderConfigurations)); err != nil {
		t.Errorf("%d configurations: %v", engine.MaxProviderConfigurations, err)
	}
	err = engine.CheckProviderConfigurations(many(engine.MaxProviderConfigurations + 1))
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "17 provider configurations") {
		t.Errorf("%d configurations: %v; want an evaluation limit naming 17", engine.MaxProviderConfigurations+1, err)
	}
}

func TestClassify(t *testing.T) {
	prefixes := engine.DefaultCosmeticPrefixes()
	tests := []struct {
		change    engine.Action
		attribute string
		prefixes  []string
		want      engine.Severity
	}{
		{engine.ActionDelete, "*", prefixes, engine.SeverityCritical},
		{engine.ActionReplace, "content", prefixes, engine.SeverityCritical},
		{engine.ActionCreate, "*", prefixes, engine.SeverityFunctional},
		{engine.ActionUpdate, "tags.Owner", prefixes, engine.SeverityCosmetic},
		{engine.ActionUpdate, "labels.team", prefixes, engine.SeverityCosmetic},
		{engine.ActionUpdate, "metadata.0.labels.app", prefixes, engine.SeverityCosmetic},
		{engine.ActionUpdate, "metadata.0.name", prefixes, engine.SeverityFunctional},
		{engine.ActionUpdate, "spec.0.template.0.metadata.0.labels.app", prefixes, engine.SeverityFunctional},
		{engine.ActionUpdate, "tags_all", prefixes, engine.SeverityFunctional},
		{engine.ActionUpdate, "cidr_block", prefixes, engine.SeverityFunctional},
		{engine.ActionUpdate, "labels.team", []string{"tags."}, engine.SeverityFunctional},
		{engine.ActionNoOp, "x", prefixes, ""},
	}
	for _, tt := range tests {
		if got := engine.Classify(tt.change, tt.attribute, tt.prefixes); got != tt.want {
			t.Errorf("Classify(%s, %s, %v) = %q, want %q", tt.change, tt.attribute, tt.prefixes, got, tt.want)
		}
	}
	r := &engine.DriftReport{Findings: []engine.Finding{
		{Address: "b", Attribute: "x", Severity: engine.SeverityCosmetic},
		{Address: "a", Attribute: "y", Severity: engine.SeverityCritical},
		{Address: "a", Attribute: "x", Severity: engine.SeverityFunctional},
	}}
	r.Finish()
	if r.MaxSeverity != engine.SeverityCritical || r.Findings[0].Attribute != "x" || r.Findings[0].Address != "a" {
		t.Fatalf("Finish: %+v", r)
	}
	if n := len(r.AtOrAbove(engine.SeverityFunctional)); n != 2 {
		t.Fatalf("AtOrAbove(functional) = %d findings, want 2", n)
	}
	clean := &engine.DriftReport{}
	clean.Finish()
	if !clean.Clean() || clean.MaxSeverity != "" {
		t.Fatalf("empty report: %+v", clean)
	}
}

func TestRedactor(t *testing.T) {
	r := engine.NewRedactor("hunter2", "", "hunter2-long")
	got := r.Redact("pw=hunter2-long and hunter2")
	if strings.Contains(got, "hunter") || got != "pw=(redacted) and (redacted)" {
		t.Fatalf("Redact = %q", got)
	}
	if got := engine.Tail("ééé", 3); !utf8.ValidString(got) || got != "…é" {
		t.Fatalf("Tail cut a rune: %q", got)
	}
	if got := engine.Tail("line1\nline2\nline3", 8); got != "…line3" {
		t.Fatalf("Tail = %q", got)
	}
}

func TestOutputsFromState(t *testing.T) {
	o, err := engine.OutputsFromState([]byte(`{"version":4,"outputs":{
		"id":{"value":"abc","type":"string"},
		"pw":{"value":{"user":"u","pass":"s3cret"},"type":["object",{}],"sensitive":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(o.Values["id"]) != `"abc"` || len(o.Values) != 1 || len(o.Sensitive) != 1 {
		t.Fatalf("outputs %+v", o)
	}
	b, _ := json.Marshal(o)
	if strings.Contains(string(b), "s3cret") {
		t.Fatalf("sensitive output in JSON: %s", b)
	}
	if got := engine.NewRedactor(o.SensitiveStrings()...).Redact("user u pass s3cret"); strings.Contains(got, "s3cret") {
		t.Fatalf("sensitive output not redacted: %q", got)
	}
}

func TestErrors(t *testing.T) {
	err := error(&engine.ProviderUnavailableError{Sources: []string{"hashicorp/aws"}, Where: "/m"})
	if !errors.Is(err, engine.ErrProviderUnavailable) || err.Error() != "provider hashicorp/aws is not available: not in the provider mirror /m" {
		t.Fatalf("%v", err)
	}
	if !errors.Is(&engine.PlanStaleError{}, engine.ErrPlanStale) {
		t.Fatal("PlanStaleError is not ErrPlanStale")
	}
	if !errors.Is(&state.LockedError{}, engine.ErrLocked) {
		t.Fatal("state.LockedError is not engine.ErrLocked")
	}
}

// TestRedactor_forms: a secret is redacted in every form other text carries it in: as is,
// JSON-escaped, base64 (both alphabets, padded or raw) and line by line when multi-line.
func TestRedactor_forms(t *testing.T) {
	secret := "line-one-\"quoted\"\n  second-line-of-key\nab"
	r := engine.NewRedactor(secret)
	js, _ := json.Marshal(map[string]string{"v": secret})
	for _, text := range []string{
		"plain: " + secret,
		"json: " + string(js),
		"std: " + base64.StdEncoding.EncodeToString([]byte(secret)),
		"raw url: " + base64.RawURLEncoding.EncodeToString([]byte(secret)),
		"lines: second-line-of-key, and line-one-\"quoted\"",
		"go: " + strconv.Quote(secret),
		// tofu init quotes the configuration line of main.tf.json, where synth rendered the
		// value as an HCL literal inside a JSON string (render.SensitiveTemplate), so the part
		// before the quote could reach a Failed message.
		"tofu: " + string(js) + ` 14: "${sensitive(\"line-one-\\\"quoted\\\"\\n  second-line-of-key\\nab\")}"`,
	} {
		got := r.Redact(text)
		for _, leak := range []string{"second-line-of-key", "line-one-", base64.StdEncoding.EncodeToString([]byte(secret))[:12]} {
			if strings.Contains(got, leak) {
				t.Errorf("Redact(%q) = %q: %q remains", text, got, leak)
			}
		}
	}
	// A short line ("ab") is not redacted on its own, so unrelated text survives.
	if got := r.Redact("tab stop"); got != "tab stop" {
		t.Errorf("short line redacted: %q", got)
	}
}

// TestRedactor_manySecretsAttack: a tenant binds a Secret of 16,000 keys (and one value of
// 20,000 lines); every failure message is redacted of all their forms. The forms are kept once
// each (counted), and a message is scrubbed of them all. Each Add compared every form with
// every form kept so far, and Redact replaced them one after the other: 21 s for the 16,000
// values. The context (30 s, the redactor is built in about 2) is a guard against a hang only.
func TestRedactor_manySecretsAttack(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var values []string
	for i := range 16000 {
		values = append(values, fmt.Sprintf("\x01${\xfb%05d", i))
	}
	var lines strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&lines, "line-of-a-key-%05d\n", i)
	}
	values = append(values, lines.String())
	done := make(chan *engine.Redactor, 1)
	go func() {
		r := engine.NewRedactor(values...)
		r.Add(values...) // again: nothing new
		done <- r
	}()
	var r *engine.Redactor
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("building the redactor did not end")
	}
	distinct := map[string]bool{}
	for _, v := range values {
		for _, f := range engine.Forms(v) {
			distinct[f] = true
		}
	}
	if r.Len() != len(distinct) {
		t.Fatalf("%d forms kept, want the %d distinct ones", r.Len(), len(distinct))
	}
	msg := fmt.Sprintf("error: %q, %s and line-of-a-key-19999", values[15999], base64.StdEncoding.EncodeToString([]byte(values[7])))
	got := r.Redact(msg)
	for _, leak := range []string{"15999", "line-of-a-key", base64.StdEncoding.EncodeToString([]byte(values[7]))[:8]} {
		if strings.Contains(got, leak) {
			t.Errorf("Redact(%q) = %q: %q remains", msg, got, leak)
		}
	}
}

// TestUnavailableSource: a provider the mirror cannot satisfy is named alone when no version
// was asked for, else with the constraint and what the mirror has.
func TestUnavailableSource(t *testing.T) {
	for _, tt := range []struct {
		constraint string
		have       []string
		want       string
	}{
		{"", []string{"0.1.0"}, "example/testkit"},
		{"0.2.0", []string{"0.1.0", "0.4.0"}, "example/testkit version 0.2.0 (the mirror has 0.1.0, 0.4.0)"},
		{" ~> 9.0 ", nil, "example/testkit version ~> 9.0 (the mirror has none)"},
	} {
		if got := engine.UnavailableSource("example/testkit", tt.constraint, tt.have); got != tt.want {
			t.Errorf("UnavailableSource(%q, %v) = %q, want %q", tt.constraint, tt.have, got, tt.want)
		}
	}
}

package drift_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/service/drift"
)

func str(s string) *string { return &s }

func TestClassify_upstreamBehaviours(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		change   engine.Action
		attr     string
		prefixes []string
		want     engine.Severity // "" means filtered out
	}{
		{"no-op filtered", engine.ActionNoOp, "*", nil, ""},
		{"read filtered", engine.ActionRead, "*", nil, ""},
		{"delete critical", engine.ActionDelete, "*", nil, engine.SeverityCritical},
		{"replace critical", engine.ActionReplace, "mode", nil, engine.SeverityCritical},
		{"replace under tags still critical", engine.ActionReplace, "tags.owner", nil, engine.SeverityCritical},
		{"create functional", engine.ActionCreate, "*", nil, engine.SeverityFunctional},
		{"update tags cosmetic", engine.ActionUpdate, "tags.Owner", nil, engine.SeverityCosmetic},
		{"update labels cosmetic by default", engine.ActionUpdate, "labels.app", nil, engine.SeverityCosmetic},
		{"update other functional", engine.ActionUpdate, "content", nil, engine.SeverityFunctional},
		{"update tags prefix needs the dot", engine.ActionUpdate, "tagsfoo", nil, engine.SeverityFunctional},
		{"custom prefixes honoured", engine.ActionUpdate, "labels.app", []string{"labels."}, engine.SeverityCosmetic},
		{"custom prefixes replace the default", engine.ActionUpdate, "tags.owner", []string{"labels."}, engine.SeverityFunctional},
		{"custom prefix of another attribute", engine.ActionUpdate, "annotations.x", []string{"annotations."}, engine.SeverityCosmetic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefixes := tt.prefixes
			if prefixes == nil {
				prefixes = engine.DefaultCosmeticPrefixes()
			}
			// The engine's own severity is ignored: drift classifies with its prefixes.
			got := drift.Classify([]engine.Finding{{Address: "x.a", Attribute: tt.attr, Change: tt.change, Severity: engine.SeverityCritical}}, prefixes)
			switch {
			case tt.want == "" && len(got) != 0:
				t.Fatalf("finding kept: %+v", got)
			case tt.want != "" && (len(got) != 1 || got[0].Severity != tt.want):
				t.Fatalf("got %+v, want severity %s", got, tt.want)
			}
		})
	}
}

func TestSeverity_ordering(t *testing.T) {
	t.Parallel()
	if !(engine.SeverityCosmetic.Rank() < engine.SeverityFunctional.Rank() && engine.SeverityFunctional.Rank() < engine.SeverityCritical.Rank()) {
		t.Fatal("cosmetic < functional < critical does not hold for engine severities")
	}
	if !(lavav1.Severity_SEVERITY_COSMETIC < lavav1.Severity_SEVERITY_FUNCTIONAL && lavav1.Severity_SEVERITY_FUNCTIONAL < lavav1.Severity_SEVERITY_CRITICAL) {
		t.Fatal("cosmetic < functional < critical does not hold for proto severities")
	}
}

func entry() *drift.Entry {
	return &drift.Entry{Namespace: "ns", Name: "web", UID: "uid-1", Generation: 3, Engine: string(v1alpha1.EngineTofu), PlanID: "p1",
		TerraformJSONDigest: "d1", ArtifactDigest: "a1"}
}

func TestEvent_report(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 1, 2, 3, 4, time.UTC)
	findings := []engine.Finding{
		{Address: "testkit_file.b", Attribute: "tags.owner", Change: engine.ActionUpdate, Observed: str(`"x"`), Declared: str(`"y"`)},
		{Address: "testkit_file.a", Attribute: "mode", Change: engine.ActionReplace, Observed: str("0600"), Declared: str("0644")},
		{Address: "testkit_file.a", Attribute: "content", Change: engine.ActionUpdate, Observed: str(engine.Redacted), Declared: str(engine.Redacted)},
		{Address: "testkit_file.c", Attribute: "*", Change: engine.ActionNoOp},
		{Address: "local_file.d", Attribute: "*", Change: engine.ActionCreate},
	}
	ev := drift.Event(entry(), &engine.DriftReport{ScannedAt: at, Findings: findings}, engine.DefaultCosmeticPrefixes())
	type row struct {
		Addr, Attr string
		Sev        lavav1.Severity
		Sensitive  bool
		Obs        string
	}
	var got []row
	for _, f := range ev.GetFindings() {
		got = append(got, row{f.GetAddress(), f.GetAttribute(), f.GetSeverity(), f.GetSensitive(), f.GetObserved()})
	}
	want := []row{
		{"local_file.d", "*", lavav1.Severity_SEVERITY_FUNCTIONAL, false, ""},
		{"testkit_file.a", "content", lavav1.Severity_SEVERITY_FUNCTIONAL, true, engine.Redacted},
		{"testkit_file.a", "mode", lavav1.Severity_SEVERITY_CRITICAL, false, "0600"},
		{"testkit_file.b", "tags.owner", lavav1.Severity_SEVERITY_COSMETIC, false, `"x"`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("findings (-want +got):\n%s", diff)
	}
	if ev.GetMaxSeverity() != lavav1.Severity_SEVERITY_CRITICAL {
		t.Errorf("max severity %v, want critical (the highest)", ev.GetMaxSeverity())
	}
	env := ev.GetEnvelope()
	wantID := eventid.ID("uid-1", 3, "lava.v1.DriftScanned", eventid.DriftTrigger(at))
	if env.GetEventId() != wantID || env.GetTrigger() != "drift:2026-11-30T01:02:03.000000004Z" || env.GetGeneration() != 3 || env.GetSource() != "drift" {
		t.Errorf("envelope %v", env)
	}
	if ev.GetEngine() != lavav1.Engine_ENGINE_TOFU || ev.GetPlanId() != "p1" || ev.GetTerraformJsonDigest() != "d1" {
		t.Errorf("engine %v plan %q digest %q", ev.GetEngine(), ev.GetPlanId(), ev.GetTerraformJsonDigest())
	}
	// Another scan is another event.
	if ev2 := drift.Event(entry(), &engine.DriftReport{ScannedAt: at.Add(time.Second)}, nil); ev2.GetEnvelope().GetEventId() == wantID {
		t.Error("two scans share an event id")
	}
}

func TestEvent_resourceBindingSecretsHasEveryValueRedacted(t *testing.T) {
	t.Parallel()
	e := entry()
	e.BindsSecrets = true
	ev := drift.Event(e, &engine.DriftReport{ScannedAt: time.Now(), Findings: []engine.Finding{
		{Address: "testkit_file.a", Attribute: "content", Change: engine.ActionUpdate, Observed: str("s3cr3t-value"), Declared: str("other")},
		{Address: "testkit_file.b", Attribute: "*", Change: engine.ActionCreate},
	}}, nil)
	for _, f := range ev.GetFindings() {
		if strings.Contains(f.GetObserved()+f.GetDeclared(), "s3cr3t") {
			t.Fatalf("secret-bound value published: %v", f)
		}
	}
	if f := ev.GetFindings()[0]; !f.GetSensitive() || f.GetObserved() != engine.Redacted || f.GetAttribute() != "content" {
		t.Fatalf("finding: %v", f)
	}
	if f := ev.GetFindings()[1]; f.GetSensitive() || f.GetObserved() != "" {
		t.Fatalf("a finding without values was marked: %v", f)
	}
}

// TestEvent_valuesCut: a finding's observed and declared values are cut to
// engine.MaxWarningLen bytes (a stored file read back, a provider's large object: megabytes
// per finding, 49 MB of observed values in one scan of 40 instances before).
func TestEvent_valuesCut(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 1<<20)
	ev := drift.Event(entry(), &engine.DriftReport{ScannedAt: time.Now(), Findings: []engine.Finding{
		{Address: "local_file.a", Attribute: "content", Change: engine.ActionUpdate, Observed: str(big), Declared: str("short")},
	}}, nil)
	f := ev.GetFindings()[0]
	if n := len(f.GetObserved()); n > engine.MaxWarningLen+len("…") || !strings.HasSuffix(f.GetObserved(), "…") || !utf8.ValidString(f.GetObserved()) {
		t.Errorf("observed value: %d bytes (valid UTF-8 %v), want at most %d and marked cut", n, utf8.ValidString(f.GetObserved()), engine.MaxWarningLen)
	}
	if f.GetDeclared() != "short" {
		t.Errorf("declared value %q, want it whole", f.GetDeclared())
	}
}

// TestEvent_attributesCut: a map key is part of a finding's attribute path, and a tenant
// chooses it (`{ "${timestamp()}${local.pad}" = 1 }` drifts at every scan): a 500 KB key was
// carried whole into the DriftScanned, the drift anomaly's metadata and its receipt, every
// scan. The path and the address are cut as the values are.
func TestEvent_attributesCut(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("k", 500<<10)
	ev := drift.Event(entry(), &engine.DriftReport{ScannedAt: time.Now(), Findings: []engine.Finding{
		{Address: `terraform_data.a["` + key + `"]`, Attribute: "input." + key, Change: engine.ActionUpdate, Observed: str("1")},
	}}, nil)
	f := ev.GetFindings()[0]
	for what, v := range map[string]string{"attribute": f.GetAttribute(), "address": f.GetAddress()} {
		if n := len(v); n > engine.MaxWarningLen+len("…") || !strings.HasSuffix(v, "…") {
			t.Errorf("%s: %d bytes, want at most %d and marked cut", what, n, engine.MaxWarningLen)
		}
	}
}

func TestEvent_cleanHasNoMaxSeverity(t *testing.T) {
	t.Parallel()
	ev := drift.Event(entry(), &engine.DriftReport{ScannedAt: time.Now(), Findings: []engine.Finding{{Address: "a.b", Attribute: "*", Change: engine.ActionNoOp}}}, nil)
	if len(ev.GetFindings()) != 0 || ev.GetMaxSeverity() != lavav1.Severity_SEVERITY_UNSPECIFIED {
		t.Fatalf("clean scan: %v", ev)
	}
}

func TestDriftReport_atOrAboveAndJSON(t *testing.T) {
	t.Parallel()
	r := engine.DriftReport{ScannedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Findings: drift.Classify([]engine.Finding{
		{Address: "a.x", Attribute: "tags.a", Change: engine.ActionUpdate},
		{Address: "a.x", Attribute: "size", Change: engine.ActionUpdate},
		{Address: "a.y", Attribute: "*", Change: engine.ActionDelete},
	}, engine.DefaultCosmeticPrefixes())}
	r.Finish()
	for sev, want := range map[engine.Severity]int{engine.SeverityCosmetic: 3, engine.SeverityFunctional: 2, engine.SeverityCritical: 1} {
		if got := len(r.AtOrAbove(sev)); got != want {
			t.Errorf("AtOrAbove(%s) = %d, want %d", sev, got, want)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back engine.DriftReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Fatalf("JSON round trip (-want +got):\n%s", diff)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	if raw["maxSeverity"] != "critical" || raw["driftedFields"] == nil {
		t.Errorf("JSON is not upstream's camelCase with lowercase severity: %s", b)
	}
}

func TestEntry_dueAndNextDue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 200 {
		d := drift.NextDue(now, time.Minute, 0.1).Sub(now)
		if d < 54*time.Second || d > 66*time.Second {
			t.Fatalf("NextDue jitter out of ±10%%: %v", d)
		}
	}
	tests := []struct {
		name string
		mod  func(*drift.Entry)
		want bool
	}{
		{"due", func(*drift.Entry) {}, true},
		{"not yet", func(e *drift.Entry) { e.Due = now.Add(time.Second) }, false},
		{"suspended", func(e *drift.Entry) { e.Suspended = true }, false},
		{"finalizing", func(e *drift.Entry) { e.Finalizing = true }, false},
		{"newer generation observed, not applied", func(e *drift.Entry) { e.ObservedGeneration = 4 }, false},
		{"claimed", func(e *drift.Entry) { e.ClaimedBy, e.ClaimUntil = "other", now.Add(time.Minute) }, false},
		{"claim expired", func(e *drift.Entry) { e.ClaimedBy, e.ClaimUntil = "other", now.Add(-time.Second) }, true},
		{"nothing applied", func(e *drift.Entry) { e.ArtifactDigest = "" }, false},
	}
	for _, tt := range tests {
		e := entry()
		e.Due = now
		tt.mod(e)
		if got := e.DueAt(now); got != tt.want {
			t.Errorf("%s: DueAt = %v, want %v", tt.name, got, tt.want)
		}
	}
}

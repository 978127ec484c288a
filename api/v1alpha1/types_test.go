package v1alpha1

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func TestEscalationTier_WaitDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", 15 * time.Minute, false},
		{"PT15M", 15 * time.Minute, false},
		{"PT1H30M", 90 * time.Minute, false},
		{"P1D", 24 * time.Hour, false},
		{"P1DT2H3M4S", 26*time.Hour + 3*time.Minute + 4*time.Second, false},
		{"PT0S", 0, false},
		{"P", 0, true},
		{"PT", 0, true},
		{"P1DT", 0, true},
		{"15m", 0, true},
		{"PT1.5H", 0, true},
		{"P1W", 0, true},
		{"P999999999999D", 0, true},
	}
	for _, tt := range tests {
		got, err := EscalationTier{WaitBeforeNext: tt.in}.WaitDuration()
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("WaitDuration(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "waitBeforeNext") {
			t.Errorf("error %q does not name the field", err)
		}
	}
}

func TestSource_Kind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  Source
		want SourceKind
	}{
		{Source{Inline: "(x)"}, SourceKindInline},
		{Source{Name: "aws-vpc-network"}, SourceKindName},
		{Source{Inline: "(x)", Name: "n"}, SourceKindInline},
		{Source{}, ""},
	}
	for _, tt := range tests {
		if got := tt.src.Kind(); got != tt.want {
			t.Errorf("%+v.Kind() = %q, want %q", tt.src, got, tt.want)
		}
	}
	ref := LavaArchitectureSpec{SourceRef: &SourceReference{Kind: SourceRefGitRepository, Name: "app"}, Path: "a.tlisp"}
	if got := ref.SourceKind(); got != SourceKindSourceRef {
		t.Errorf("spec with sourceRef: SourceKind() = %q, want %q", got, SourceKindSourceRef)
	}
}

func TestAddToScheme_registersEveryKind(t *testing.T) {
	t.Parallel()
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{KindLavaArchitecture, KindRemediationPolicy, KindLavaArchitectureDependency,
		KindLavaArchitecture + "List", KindRemediationPolicy + "List", KindLavaArchitectureDependency + "List"} {
		if !s.Recognizes(GroupVersion.WithKind(k)) {
			t.Errorf("scheme does not recognize %s", k)
		}
	}
	gvks, _, err := s.ObjectKinds(&LavaArchitecture{})
	if err != nil || len(gvks) != 1 || gvks[0].GroupVersion() != GroupVersion {
		t.Errorf("ObjectKinds(LavaArchitecture) = %v, %v", gvks, err)
	}
}

func TestLavaArchitecture_seedRoundTripsThroughYAML(t *testing.T) {
	t.Parallel()
	const seed = `apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata:
  name: prod-vpc
  namespace: infra
spec:
  bindings:
    cidr: 10.42.0.0/16
    name: prod
  engine: embedded
  gate: aws-vpc-network
  source:
    inline: |
      (deflava-architecture demo-vpc
        :inputs ((:cidr "10.42.0.0/16"))
        :resources ((aws-vpc "main" :cidr-block "{cidr}")))
`
	var la LavaArchitecture
	if err := yaml.UnmarshalStrict([]byte(seed), &la); err != nil {
		t.Fatal(err)
	}
	if la.Spec.Source.Kind() != SourceKindInline || la.Spec.Engine != EngineEmbedded || la.Spec.Bindings["name"] != "prod" {
		t.Errorf("decoded %+v", la.Spec)
	}
	out, err := yaml.Marshal(&la)
	if err != nil {
		t.Fatal(err)
	}
	// creationTimestamp: null comes from ObjectMeta; everything else is as written.
	got := strings.Replace(string(out), "  creationTimestamp: null\n", "", 1)
	got = strings.Replace(got, "status: {}\n", "", 1)
	if got != seed {
		t.Errorf("round trip:\n%s\nwant:\n%s", got, seed)
	}
	cp := la.DeepCopy()
	cp.Spec.Bindings["name"] = "changed"
	if la.Spec.Bindings["name"] != "prod" {
		t.Error("DeepCopy shares the bindings map")
	}
}

// ConditionTypes lists every condition type of condition_types.go.
func ConditionTypes() []string {
	return []string{
		ConditionReady, ConditionReconciling, ConditionStalled,
		ConditionSynthesized, ConditionGated, ConditionPlanned, ConditionApplied,
		ConditionDrifted, ConditionDependenciesReady, ConditionSuspended, ConditionAwaitingApproval,
		ConditionStateRegressed, ConditionDeletionBlocked,
	}
}

func TestConditionTypes_distinct(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range ConditionTypes() {
		if seen[c] {
			t.Errorf("condition %s listed twice", c)
		}
		seen[c] = true
	}
	if len(seen) != 13 {
		t.Errorf("%d condition types, want 13", len(seen))
	}
}

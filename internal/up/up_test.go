package up

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
)

const twoDocs = `apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: a}
spec:
  source: {name: dns-record-set}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: b, namespace: infra}
spec:
  source: {inline: "(deflava-architecture b :resources ())"}
  engine: tofu
`

func TestParseManifests(t *testing.T) {
	t.Parallel()
	const hdr = "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\n"
	tests := []struct {
		name    string
		data    string
		keys    []string
		wantErr string
	}{
		{name: "multi-document, other kinds skipped, namespace defaulted", data: twoDocs, keys: []string{"default/a", "infra/b"}},
		{name: "empty", data: "", keys: nil},
		{name: "no name", data: hdr + "spec: {source: {name: x}}\n", wantErr: "1:1: metadata.name: required"},
		{name: "two sources", data: hdr + "metadata: {name: a}\nspec: {source: {name: x, inline: y}}\n", wantErr: "4:8: spec.source: exactly one of spec.source.inline, spec.source.name or spec.sourceRef must be set (2 set)"},
		{name: "sourceRef without path", data: hdr + "metadata: {name: a}\nspec: {sourceRef: {kind: GitRepository, name: g}}\n", wantErr: "spec.path: required with spec.sourceRef"},
		{name: "path without sourceRef", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, path: a.tlisp}\n", wantErr: "spec.path: only valid with spec.sourceRef"},
		{name: "unknown engine", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, engine: pulumi}\n", wantErr: `4:27: spec.engine: unsupported value "pulumi": want embedded, tofu or terraform`},
		{name: "engine warp", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  engine: warp\n", wantErr: `6:3: spec.engine: unsupported value "warp"`},
		{name: "empty bindingsFrom entry", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  bindingsFrom:\n  - {}\n", wantErr: "7:5: spec.bindingsFrom[0]: exactly one of configMapRef, secretRef or outputsRef must be set"},
		{name: "outputsRef binding", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  bindingsFrom:\n  - outputsRef: {name: producer}\n", keys: []string{"default/a"}},
		{name: "outputsRef without a name", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  bindingsFrom:\n  - outputsRef: {key: k}\n", wantErr: "7:5: spec.bindingsFrom[0].outputsRef.name: required"},
		{name: "bindingsFrom without a name", data: hdr + "metadata: {name: a}\nspec:\n  source: {name: x}\n  bindingsFrom:\n  - secretRef: {key: k}\n", wantErr: "7:5: spec.bindingsFrom[0].secretRef.name: required"},
		{name: "invalid names", data: hdr + "metadata: {name: \"Bad Name!\", namespace: UPPER}\nspec: {source: {name: x}}\n", wantErr: `3:12: metadata.name: "Bad Name!" is not a DNS-1123 subdomain`},
		{name: "invalid namespace", data: hdr + "metadata: {name: a, namespace: UPPER}\nspec: {source: {name: x}}\n", wantErr: `3:21: metadata.namespace: "UPPER" is not a DNS-1123 label`},
		{name: "short driftInterval", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, driftInterval: 10s}\n", wantErr: "4:27: spec.driftInterval: must be at least 30s (got 10s)"},
		{name: "bad approvePlan", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, approvePlan: \"-x y\"}\n", wantErr: `4:27: spec.approvePlan: "-x y" must match`},
		{name: "bad deletionPolicy", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, deletionPolicy: Keep}\n", wantErr: `4:27: spec.deletionPolicy: unsupported value "Keep"`},
		{name: "remediation and a policy", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, remediation: {critical: Alert}, remediationPolicyRef: {name: p}}\n", wantErr: "4:59: spec.remediationPolicyRef: spec.remediation and spec.remediationPolicyRef are mutually exclusive"},
		{name: "duplicate in one file", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}}\n---\n" + hdr + "metadata: {name: a}\nspec: {source: {name: y}}\n", wantErr: "8:12: default/a is already defined at f.yaml:3:12"},
		{name: "unknown field", data: hdr + "metadata: {name: a}\nspec: {source: {name: x}, bindingz: {}}\n", wantErr: "bindingz"},
		{name: "other version", data: "apiVersion: lava.pleme.io/v2\nkind: LavaArchitecture\nmetadata: {name: a}\n", wantErr: "1:1: apiVersion lava.pleme.io/v2: want lava.pleme.io/v1alpha1"},
		{name: "bad YAML", data: "a: [\n", wantErr: "2:1: invalid YAML: did not find expected node content"},
		{name: "unclosed flow mapping", data: hdr + "metadata: {name: a\n", wantErr: "3:1: invalid YAML: did not find expected ',' or '}'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ms, err := ParseManifests("f.yaml", []byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) && !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, m := range ms {
				keys = append(keys, m.Key())
			}
			if diff := cmp.Diff(tt.keys, keys); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadManifests_brokenAndDuplicateFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1.yaml", twoDocs)
	write("2.yaml", strings.SplitN(twoDocs, "---", 2)[0]) // default/a again
	write("3.yml", "a: [\n")
	write("notes.txt", "not a manifest")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("sub/4.yaml", twoDocs)
	ms, errs, err := ReadManifests([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].File != filepath.Join(dir, "1.yaml") {
		t.Errorf("manifests %v, want the two of 1.yaml", ms)
	}
	var files []string
	for _, e := range errs {
		files = append(files, filepath.Base(e.File))
	}
	if diff := cmp.Diff([]string{"2.yaml", "3.yml"}, files); diff != "" {
		t.Errorf("file errors (-want +got):\n%s", diff)
	}
	if want := filepath.Join(dir, "2.yaml") + ":3:12: default/a is already defined at " + filepath.Join(dir, "1.yaml") + ":3:12"; errs[0].Error() != want {
		t.Errorf("duplicate error %q, want %q", errs[0], want)
	}
	if _, _, err := ReadManifests([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing -f path is not an error")
	}
}

func TestSettled(t *testing.T) {
	t.Parallel()
	cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s}
	}
	obj := func(gen, observed int64, p v1alpha1.Phase, conds ...metav1.Condition) v1alpha1.LavaArchitecture {
		o := v1alpha1.LavaArchitecture{}
		o.Generation = gen
		o.Status.ObservedGeneration, o.Status.Phase, o.Status.Conditions = observed, p, conds
		return o
	}
	deleting := obj(1, 1, v1alpha1.PhaseApplied)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	tests := []struct {
		name string
		o    v1alpha1.LavaArchitecture
		want bool
	}{
		{"applied", obj(2, 2, v1alpha1.PhaseApplied), true},
		{"failed", obj(1, 1, v1alpha1.PhaseFailed), true},
		{"applied, older generation", obj(2, 1, v1alpha1.PhaseApplied), false},
		{"pending", obj(1, 1, v1alpha1.PhasePending), false},
		{"fresh", obj(1, 0, ""), false},
		{"planned", obj(1, 1, v1alpha1.PhasePlanned), false},
		{"awaiting approval", obj(1, 1, v1alpha1.PhasePlanned, cond(v1alpha1.ConditionAwaitingApproval, metav1.ConditionTrue)), true},
		{"suspended", obj(1, 1, v1alpha1.PhasePending, cond(v1alpha1.ConditionSuspended, metav1.ConditionTrue)), true},
		{"being deleted", deleting, false},
	}
	for _, tt := range tests {
		if got := Settled(tt.o); got != tt.want {
			t.Errorf("%s: Settled = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestTable_andProgress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	o := v1alpha1.LavaArchitecture{}
	o.Namespace, o.Name, o.Generation = "infra", "prod-vpc", 1
	o.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Second))
	o.Status.Phase, o.Status.ObservedGeneration = v1alpha1.PhaseFailed, 1
	o.Status.Render = &v1alpha1.RenderRecord{ResourceCount: 1}
	o.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "ProviderUnavailable",
		Message: "provider hashicorp/aws is not available", LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Second))}}
	p := o.DeepCopy()
	p.Name, p.Status.Phase = "app", v1alpha1.PhasePlanned
	p.Status.Plan = &v1alpha1.PlanSummary{Add: 2}
	got := Table(Snapshot{Objects: []v1alpha1.LavaArchitecture{o, *p}, FileErrors: []*FileError{{File: "x.yaml", Err: os.ErrPermission}}}, now)
	want := "RESOURCE        PHASE    ENGINE    RESOURCES     LAST CHANGE  MESSAGE\n" +
		"infra/prod-vpc  Failed   embedded  1             3s ago       ProviderUnavailable: provider hashicorp/aws is not available\n" +
		"infra/app       Planned  embedded  1 (+2 ~0 -0)  3s ago\n" +
		"! x.yaml: permission denied\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if line := progressLine([]v1alpha1.LavaArchitecture{o, *p}, now, 0); line != "⠋ infra/app: applying (+2 ~0 -0) with embedded (3s)\n" {
		t.Errorf("progress line %q", line)
	}
	if line := progressLine([]v1alpha1.LavaArchitecture{o}, now, 0); line != "" {
		t.Errorf("progress line %q for a settled resource, want none", line)
	}
	if got := fitWidth("abcdef\nab\n", 5); got != "abc…\nab\n" {
		t.Errorf("fitWidth = %q", got)
	}
}

func TestDisplayUpdate_fileErrorsAreNotResources(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	d := NewDisplay(&b, false, func() time.Time { return now })
	o := v1alpha1.LavaArchitecture{}
	o.Namespace, o.Name, o.Generation = "default", "a", 1
	o.Status.Phase = v1alpha1.PhaseApplied
	bad := &FileError{File: "/m/bad.yaml", Err: os.ErrInvalid}
	for range 3 {
		d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}, FileErrors: []*FileError{bad}})
	}
	d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}}) // the file was fixed
	d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}, FileErrors: []*FileError{bad}})
	d.Update(Snapshot{})
	want := "00:00:00 default/a                    gen 1  Applied      -\n" +
		"00:00:00 /m/bad.yaml: invalid argument\n" +
		"00:00:00 /m/bad.yaml: invalid argument\n" +
		"00:00:00 default/a                    destroyed\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("non-tty output (-want +got):\n%s", diff)
	}
}

// TestDisplayUpdate_samePhaseOtherReason: a Pending object whose Ready reason changes (the
// finalizer added, then waiting for synth) is one line, not two; a change of phase is a line.
func TestDisplayUpdate_samePhaseOtherReason(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	d := NewDisplay(&b, false, func() time.Time { return now })
	o := v1alpha1.LavaArchitecture{}
	o.Namespace, o.Name, o.Generation = "default", "a", 1
	o.Status.Phase = v1alpha1.PhasePending
	for _, reason := range []string{"Progressing", "AwaitingSynthesis"} {
		o.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}}
		d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}})
	}
	o.Status.Phase = v1alpha1.PhaseSynthesized
	d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}})
	want := "00:00:00 default/a                    gen 1  Pending      -\n" +
		"00:00:00 default/a                    gen 1  Synthesized  -\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("non-tty output (-want +got):\n%s", diff)
	}
}

func TestLockStateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	release, err := LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockStateDir(dir)
	want := fmt.Sprintf("up: state dir %s is in use by another lava up (pid %d)", dir, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second lock: %v, want %q", err, want)
	}
	release()
	release2, err := LockStateDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release2()
}

// TestRun_stateDirInUse: a second Run on a locked state directory fails before starting NATS.
func TestRun_stateDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	release, err := LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	m := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(m, []byte(twoDocs), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Run(t.Context(), Options{Paths: []string{m}, StateDir: dir, Once: true, Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "is in use by another lava up") {
		t.Fatalf("Run on a locked state dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileNATSURL)); err == nil {
		t.Errorf("Run wrote %s although the state dir was locked", FileNATSURL)
	}
}

func TestMapInlineText(t *testing.T) {
	t.Parallel()
	data := "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: a}\nspec:\n  source:\n    inline: |\n      (x\n        y)\n"
	ms, err := ParseManifests("m.yaml", []byte(data))
	if err != nil || len(ms) != 1 || ms[0].MapInline == nil {
		t.Fatalf("ParseManifests: %v, %v", ms, err)
	}
	got := mapInlineText("inline:2:3: boom; see inline:1:1", ms[0].MapInline)
	if want := "m.yaml:8:9: boom; see m.yaml:7:7"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := mapInlineText("inline:2:3: boom", nil); got != "inline:2:3: boom" {
		t.Errorf("without a mapper: %q", got)
	}
}

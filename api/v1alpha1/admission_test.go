//go:build integration

package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
)

// TestAdmission runs every admission case against one real API server.
func TestAdmission(t *testing.T) {
	env := kubetest.Start(t)
	t.Run("seed manifest admitted unchanged", func(t *testing.T) { testSeedAdmitted(t, env) })
	t.Run("invalid specs rejected naming the field", func(t *testing.T) { testInvalidRejected(t, env) })
	t.Run("valid variants admitted", func(t *testing.T) { testValidAdmitted(t, env) })
	t.Run("defaults applied", func(t *testing.T) { testDefaults(t, env) })
	t.Run("printer columns and status subresource", func(t *testing.T) { testPrinterColumns(t, env) })
}

// fromYAML decodes a manifest into an unstructured object, exactly as kubectl would send it.
func fromYAML(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("decode manifest: %v\n%s", err, doc)
	}
	return u
}

func testSeedAdmitted(t *testing.T, env *kubetest.Env) {
	raw, err := os.ReadFile("testdata/seed-prod-vpc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	seed := fromYAML(t, string(raw))
	// The manifest names namespace infra; create it as a user would.
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: seed.GetNamespace()}}); err != nil {
		t.Fatalf("create namespace %s: %v", seed.GetNamespace(), err)
	}
	sent := seed.DeepCopy()
	if err := env.Client.Create(t.Context(), seed); err != nil {
		t.Fatalf("the seed manifest was rejected: %v", err)
	}
	var got v1alpha1.LavaArchitecture
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: "infra", Name: "prod-vpc"}, &got); err != nil {
		t.Fatal(err)
	}
	// Every field the manifest sets comes back as sent.
	wantSpec := sent.Object["spec"].(map[string]any)
	gotSpec := toMap(t, got.Spec)
	for k, v := range wantSpec {
		if diff := cmp.Diff(v, gotSpec[k]); diff != "" {
			t.Errorf("spec.%s changed on admission (-sent +stored):\n%s", k, diff)
		}
	}
	if got.Spec.Source.Kind() != v1alpha1.SourceKindInline || !strings.Contains(got.Spec.Source.Inline, "(deflava-architecture demo-vpc") {
		t.Errorf("source = %+v", got.Spec.Source)
	}
	if got.Spec.Bindings["cidr"] != "10.42.0.0/16" || got.Spec.Gate != "aws-vpc-network" || got.Spec.Engine != v1alpha1.EngineEmbedded {
		t.Errorf("spec = %+v", got.Spec)
	}
}

// toMap renders v as JSON and back into a generic map.
func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// lava builds a LavaArchitecture manifest in ns with the given spec body (YAML, indented by
// two spaces under spec).
func lava(ns, name, spec string) string {
	return fmt.Sprintf("apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n%s", name, ns, spec)
}

const inlineSource = "  source:\n    inline: \"(deflava-architecture x :inputs () :resources ())\"\n"

func testInvalidRejected(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	policy := func(name, spec string) string {
		return fmt.Sprintf("apiVersion: lava.pleme.io/v1alpha1\nkind: RemediationPolicy\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n%s", name, ns, spec)
	}
	dep := func(name, spec string) string {
		return fmt.Sprintf("apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitectureDependency\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n%s", name, ns, spec)
	}
	tests := []struct {
		name     string
		manifest string
		want     []string // substrings of the API server's message; the first names the field
	}{
		{"two source kinds", lava(ns, "two-sources", "  source:\n    inline: \"(x)\"\n    name: aws-vpc-network\n"),
			[]string{"spec.source", "exactly one of spec.source.inline or spec.source.name"}},
		{"no source kind", lava(ns, "no-source-kind", "  source: {}\n"),
			[]string{"spec.source", "exactly one of"}},
		{"no source at all", lava(ns, "no-source", "  gate: aws-vpc-network\n"),
			[]string{"spec.sourceRef", "exactly one of spec.source and spec.sourceRef"}},
		{"source and sourceRef", lava(ns, "both-sources", inlineSource+"  sourceRef: {kind: GitRepository, name: app}\n  path: a.tlisp\n"),
			[]string{"spec.sourceRef", "exactly one of spec.source and spec.sourceRef"}},
		{"sourceRef without path", lava(ns, "ref-no-path", "  sourceRef: {kind: GitRepository, name: app}\n"),
			[]string{"spec.path", "required with spec.sourceRef"}},
		{"path without sourceRef", lava(ns, "path-no-ref", inlineSource+"  path: a.tlisp\n"),
			[]string{"spec.path", "only valid with it"}},
		{"sourceRef of another kind", lava(ns, "ref-helm", "  sourceRef: {kind: HelmRepository, name: app}\n  path: a.tlisp\n"),
			[]string{"spec.sourceRef.kind"}},
		{"path leaving the artifact", lava(ns, "ref-dotdot", "  sourceRef: {kind: GitRepository, name: app}\n  path: infra/../../etc/passwd\n"),
			[]string{"spec.path", "must not contain '..'"}},
		{"absolute path", lava(ns, "ref-abs", "  sourceRef: {kind: GitRepository, name: app}\n  path: /etc/passwd\n"),
			[]string{"spec.path", "relative"}},
		{"upstream's url source", lava(ns, "url-source", "  source:\n    url: https://example.com/infra.git\n    rev: main\n    path: vpc.tlisp\n"),
			[]string{"spec.source"}},
		{"empty inline", lava(ns, "empty-inline", "  source:\n    inline: \"\"\n"),
			[]string{"spec.source.inline"}},
		{"driftInterval 10s", lava(ns, "drift-10s", inlineSource+"  driftInterval: 10s\n"),
			[]string{"spec.driftInterval", "must be at least 30s"}},
		{"driftInterval not a duration", lava(ns, "drift-soon", inlineSource+"  driftInterval: soon\n"),
			[]string{"spec.driftInterval"}},
		{"remediation and remediationPolicyRef", lava(ns, "both-remediations", inlineSource+"  remediation:\n    critical: Alert\n  remediationPolicyRef:\n    name: strict\n"),
			[]string{"spec.remediationPolicyRef: Invalid value", "spec.remediation and spec.remediationPolicyRef are mutually exclusive"}},
		{"inline Escalate without a ladder", lava(ns, "inline-escalate", inlineSource+"  remediation:\n    critical: Escalate\n"),
			[]string{"spec.remediation: Invalid value", "spec.remediation: Escalate needs an escalation ladder"}},
		{"bad remediation action", lava(ns, "bad-action", inlineSource+"  remediation:\n    cosmetic: Ignore\n"),
			[]string{"spec.remediation.cosmetic", "Unsupported value"}},
		{"bad engine", lava(ns, "bad-engine", inlineSource+"  engine: pulumi\n"),
			[]string{"spec.engine", "Unsupported value: \"pulumi\""}},
		{"bad deletionPolicy", lava(ns, "bad-deletion", inlineSource+"  deletionPolicy: Delete\n"),
			[]string{"spec.deletionPolicy", "Unsupported value"}},
		{"bad approvePlan", lava(ns, "bad-approve", inlineSource+"  approvePlan: \"yes please\"\n"),
			[]string{"spec.approvePlan"}},
		{"bindingsFrom with both refs", lava(ns, "both-refs", inlineSource+"  bindingsFrom:\n  - configMapRef: {name: a}\n    secretRef: {name: b}\n"),
			[]string{"spec.bindingsFrom[0]", "exactly one of configMapRef, secretRef or outputsRef"}},
		{"bindingsFrom with neither ref", lava(ns, "no-refs", inlineSource+"  bindingsFrom:\n  - {}\n"),
			[]string{"spec.bindingsFrom[0]", "exactly one of configMapRef, secretRef or outputsRef"}},
		{"dependsOn a bad phase", lava(ns, "bad-dep-phase", inlineSource+"  dependsOn:\n  - name: network\n    phase: Failed\n"),
			[]string{"spec.dependsOn[0].phase", "Unsupported value"}},
		{"dependsOn itself", lava(ns, "selfish", inlineSource+"  dependsOn:\n  - name: other\n  - name: selfish\n"),
			[]string{"spec.dependsOn: Invalid value", "spec.dependsOn must not name the LavaArchitecture itself"}},
		{"policy Escalate without tiers", policy("no-tiers", "  critical: Escalate\n"),
			[]string{"spec.escalation: Invalid value", "spec.escalation.tiers must not be empty when an action is Escalate"}},
		{"policy tier without team", policy("no-team", "  critical: Escalate\n  escalation:\n    tiers:\n    - waitBeforeNext: PT5M\n"),
			[]string{"spec.escalation.tiers[0].team: Required value"}},
		{"policy tier with an undelivered target", policy("slack-target", "  critical: Escalate\n  escalation:\n    tiers:\n    - team: ops\n      target: {kind: slack}\n"),
			[]string{`unknown field "spec.escalation.tiers[0].target"`}},
		{"policy tier team not a label value", policy("bad-team", "  critical: Escalate\n  escalation:\n    tiers:\n    - team: Platform On-Call\n"),
			[]string{"spec.escalation.tiers[0].team"}},
		{"policy bad waitBeforeNext", policy("bad-wait", "  escalation:\n    tiers:\n    - team: ops\n      waitBeforeNext: 15m\n"),
			[]string{"spec.escalation.tiers[0].waitBeforeNext"}},
		{"dependency onto itself", dep("self", "  from: {name: a}\n  to: {name: a}\n"),
			[]string{"spec.to: Invalid value", "spec.from and spec.to must name different LavaArchitectures"}},
		{"dependency bad kind", dep("bad-kind", "  from: {name: a}\n  to: {name: b}\n  kind: Requires\n"),
			[]string{"spec.kind", "Unsupported value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Strict, as `kubectl apply` validates by default: an unknown field (a removed
			// one) is an error, not a warning.
			err := env.Client.Create(t.Context(), fromYAML(t, tt.manifest), client.FieldValidation("Strict"))
			if err == nil {
				t.Fatalf("admitted:\n%s", tt.manifest)
			}
			// A strict decoding error (an unknown field) is BadRequest; a schema error Invalid.
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("err = %v, want Invalid or BadRequest", err)
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
		})
	}
}

func testValidAdmitted(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	tests := []struct {
		name     string
		manifest string
	}{
		{"bundled name", lava(ns, "bundled", "  source:\n    name: aws-vpc-network\n  bindings: {name: prod}\n")},
		{"flux GitRepository", lava(ns, "git", "  sourceRef: {kind: GitRepository, name: infra}\n  path: arch/vpc.tlisp\n")},
		{"flux OCIRepository elsewhere", lava(ns, "oci", "  sourceRef: {kind: OCIRepository, name: infra, namespace: flux-system}\n  path: vpc.tlisp\n")},
		{"flux Bucket", lava(ns, "bucket", "  sourceRef: {kind: Bucket, name: infra, apiVersion: source.toolkit.fluxcd.io/v1}\n  path: vpc.tlisp\n")},
		{"everything", lava(ns, "everything", inlineSource+`  bindings: {name: prod}
  listBindings:
    azs: [us-east-1a, us-east-1b]
    empty: []
  recordBindings:
    repos:
    - {repo: lava, description: operator}
    - {repo: magma}
  bindingsFrom:
  - configMapRef: {name: defaults}
  - secretRef: {name: creds, key: token}
  gate: aws-vpc-network
  engine: tofu
  driftInterval: 30s
  suspend: true
  deletionPolicy: Orphan
  remediation: {cosmetic: NoOp, functional: Alert, critical: RequireApproval}
  dependsOn:
  - name: network
  - name: dns
    namespace: other
    phase: Synthesized
  - name: everything
    namespace: elsewhere
  approvePlan: "blake3:0f3a9c"
`)},
		{"policy ref", lava(ns, "policy-ref", inlineSource+"  remediationPolicyRef: {name: strict}\n  approvePlan: manual\n  driftInterval: 1h30m\n")},
		{"policy with ladder", fmt.Sprintf(`apiVersion: lava.pleme.io/v1alpha1
kind: RemediationPolicy
metadata: {name: strict, namespace: %s}
spec:
  cosmetic: NoOp
  functional: RequireApproval
  critical: Escalate
  escalation:
    tiers:
    - team: platform
      waitBeforeNext: PT5M
    - team: platform-oncall
    - team: sre.escalations
`, ns)},
		{"dependency", fmt.Sprintf(`apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitectureDependency
metadata: {name: app-on-network, namespace: %s}
spec:
  from: {name: app}
  to: {name: network, namespace: shared}
`, ns)},
		{"dependency same name other namespace", fmt.Sprintf(`apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitectureDependency
metadata: {name: a-on-a, namespace: %s}
spec:
  from: {name: a, namespace: one}
  to: {name: a, namespace: two}
  kind: Influences
`, ns)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := env.Client.Create(t.Context(), fromYAML(t, tt.manifest)); err != nil {
				t.Fatalf("rejected: %v\n%s", err, tt.manifest)
			}
		})
	}
}

func testDefaults(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	if err := env.Client.Create(t.Context(), fromYAML(t, lava(ns, "minimal", inlineSource+"  remediation: {critical: Alert}\n  dependsOn:\n  - name: network\n"))); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.LavaArchitecture
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "minimal"}, &got); err != nil {
		t.Fatal(err)
	}
	s := got.Spec
	if s.Engine != v1alpha1.EngineEmbedded {
		t.Errorf("engine = %q, want embedded", s.Engine)
	}
	if s.DeletionPolicy != v1alpha1.DeletionPolicyDestroy {
		t.Errorf("deletionPolicy = %q, want Destroy", s.DeletionPolicy)
	}
	if s.DriftInterval == nil || s.DriftInterval.Duration != 5*time.Minute {
		t.Errorf("driftInterval = %v, want 5m", s.DriftInterval)
	}
	if s.ApprovePlan != v1alpha1.ApprovePlanAuto {
		t.Errorf("approvePlan = %q, want auto", s.ApprovePlan)
	}
	want := v1alpha1.DriftRemediation{Cosmetic: v1alpha1.RemediationAlert, Functional: v1alpha1.RemediationAutoCorrect, Critical: v1alpha1.RemediationAlert}
	if s.Remediation == nil || *s.Remediation != want {
		t.Errorf("remediation = %+v, want %+v", s.Remediation, want)
	}
	if len(s.DependsOn) != 1 || s.DependsOn[0].Phase != v1alpha1.PhaseApplied {
		t.Errorf("dependsOn = %+v, want phase Applied", s.DependsOn)
	}

	if err := env.Client.Create(t.Context(), fromYAML(t, fmt.Sprintf("apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitectureDependency\nmetadata: {name: d, namespace: %s}\nspec:\n  from: {name: a}\n  to: {name: b}\n", ns))); err != nil {
		t.Fatal(err)
	}
	var d v1alpha1.LavaArchitectureDependency
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "d"}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Kind != v1alpha1.DependencyBlocksOn || d.Spec.RequirePhase != v1alpha1.PhaseApplied {
		t.Errorf("dependency defaults kind %q requirePhase %q, want BlocksOn Applied", d.Spec.Kind, d.Spec.RequirePhase)
	}

	if err := env.Client.Create(t.Context(), fromYAML(t, fmt.Sprintf("apiVersion: lava.pleme.io/v1alpha1\nkind: RemediationPolicy\nmetadata: {name: p, namespace: %s}\nspec:\n  escalation:\n    tiers:\n    - team: ops\n", ns))); err != nil {
		t.Fatal(err)
	}
	var p v1alpha1.RemediationPolicy
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "p"}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.DriftRemediation != v1alpha1.DefaultDriftRemediation() {
		t.Errorf("policy defaults %+v, want %+v", p.Spec.DriftRemediation, v1alpha1.DefaultDriftRemediation())
	}
	if w, err := p.Spec.Escalation.Tiers[0].WaitDuration(); err != nil || w != 15*time.Minute || p.Spec.Escalation.Tiers[0].WaitBeforeNext != v1alpha1.DefaultWaitBeforeNext {
		t.Errorf("waitBeforeNext %q = %v, %v; want PT15M", p.Spec.Escalation.Tiers[0].WaitBeforeNext, w, err)
	}
}

func testPrinterColumns(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	obj := fromYAML(t, lava(ns, "columns", inlineSource+"  engine: tofu\n"))
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	var la v1alpha1.LavaArchitecture
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "columns"}, &la); err != nil {
		t.Fatal(err)
	}
	la.Status = v1alpha1.LavaArchitectureStatus{
		Phase:              v1alpha1.PhaseApplied,
		ObservedGeneration: la.Generation,
		Render:             &v1alpha1.RenderRecord{SourceKind: v1alpha1.SourceKindInline, ResourceCount: 3},
		Outputs:            map[string]apiextensionsv1.JSON{"ids": {Raw: []byte(`["a","b"]`)}, "name": {Raw: []byte(`"prod"`)}},
		Receipt:            &v1alpha1.ReceiptHead{Sequence: 0, Hash: "00ff"},
		Conditions: []metav1.Condition{
			{Type: "Reconciling", Status: metav1.ConditionFalse, Reason: "Applied", Message: "not this one", LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0))},
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Applied", Message: "applied plan 1a2b: 3 added", ObservedGeneration: la.Generation, LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0))},
		},
	}
	if err := env.Client.Status().Update(t.Context(), &la); err != nil {
		t.Fatalf("status update: %v", err)
	}
	var after v1alpha1.LavaArchitecture
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "columns"}, &after); err != nil {
		t.Fatal(err)
	}
	if after.Generation != la.Generation {
		t.Errorf("a status write bumped the generation %d -> %d", la.Generation, after.Generation)
	}
	if diff := cmp.Diff(la.Status, after.Status); diff != "" {
		t.Errorf("status did not round-trip (-sent +stored):\n%s", diff)
	}

	table := getTable(t, env.Config, fmt.Sprintf("/apis/lava.pleme.io/v1alpha1/namespaces/%s/lavaarchitectures", ns))
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if got, want := strings.Join(cols, ","), "Name,Ready,Phase,Engine,Resources,Age,Message"; got != want {
		t.Errorf("columns = %s, want %s", got, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(table.Rows))
	}
	// Ready and Message come from the Ready condition, not from the first condition.
	cells := fmt.Sprint(append(table.Rows[0].Cells[:5:5], table.Rows[0].Cells[6]))
	if want := "[columns True Applied tofu 3 applied plan 1a2b: 3 added]"; cells != want {
		t.Errorf("row = %s, want %s", cells, want)
	}
}

// getTable GETs path asking for server-side printing, as kubectl get does.
func getTable(t *testing.T, cfg *rest.Config, path string) metav1.Table {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decode table: %v", err)
	}
	return table
}

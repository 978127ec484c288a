package manifest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lava-operator/lava/config/crd"
)

// TestParse_crdRules: a manifest is checked against the whole CRD as the API server checks it
// (schema, formats, list limits, the CEL rules at any level, object metadata), each problem at
// its YAML node.
func TestParse_crdRules(t *testing.T) {
	t.Parallel()
	const hdr = "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: a}\n"
	ref := "spec:\n  sourceRef: {kind: GitRepository, name: g}\n"
	tests := []struct {
		name, data, want string
	}{
		{"path leaving the artifact", hdr + ref + "  path: infra/../../etc/passwd\n",
			"6:3: spec.path: must be relative to the artifact's root and must not contain '..'"},
		{"absolute path", hdr + ref + "  path: /etc/passwd\n", "6:3: spec.path: must be relative"},
		{"sourceRef of another kind", hdr + ref[:len(ref)-len("GitRepository, name: g}\n")] + "HelmRepository, name: g}\n  path: a.tlisp\n",
			`5:15: spec.sourceRef.kind: unsupported value "HelmRepository": want GitRepository, OCIRepository or Bucket`},
		{"dependsOn itself", hdr + "spec:\n  source: {name: x}\n  dependsOn:\n  - name: b\n  - name: a\n",
			"6:3: spec.dependsOn: must not name the LavaArchitecture itself"},
		{"dependency phase", hdr + "spec:\n  source: {name: x}\n  dependsOn:\n  - {name: b, phase: Failed}\n",
			`7:15: spec.dependsOn[0].phase: unsupported value "Failed": want Synthesized, Planned or Applied`},
		{"Escalate without a ladder", hdr + "spec:\n  source: {name: x}\n  remediation: {critical: Escalate}\n",
			"6:3: spec.remediation: Escalate needs an escalation ladder"},
		{"serviceAccountName", hdr + "spec:\n  source: {name: x}\n  serviceAccountName: Bad_Name\n",
			`6:3: spec.serviceAccountName: "Bad_Name" must match ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`},
		{"too many bindingsFrom", hdr + "spec:\n  source: {name: x}\n  bindingsFrom:\n" + strings.Repeat("  - configMapRef: {name: c}\n", 33),
			"6:3: spec.bindingsFrom: Too many: 33: must have at most 32 items"},
		{"empty gate", hdr + "spec:\n  source: {name: x}\n  gate: \"\"\n", ""},
		{"label key", "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata:\n  name: a\n  labels: {\"-x\": y}\nspec: {source: {name: x}}\n",
			`5:3: metadata.labels: Invalid value: "-x": name part must consist of alphanumeric characters`},
		{"unknown field, at its key", hdr + "spec:\n  source: {name: x}\n  bindngs: {a: b}\n",
			`6:3: document 1 is not a valid LavaArchitecture: unknown field "bindngs"`},
		{"unknown nested field, at its key", hdr + "spec:\n  source: {name: x, inlin: y}\n",
			`5:21: document 1 is not a valid LavaArchitecture: unknown field "inlin"`},
		{"wrong type, at its key, in the author's words", hdr + "spec:\n  source: {name: x}\n  bindings: [a]\n",
			`6:3: document 1 is not a valid LavaArchitecture: spec.bindings: got an array, want an object of strings`},
		{"driftInterval not a duration", hdr + "spec:\n  source: {name: x}\n  driftInterval: soon\n",
			`1:1: document 1 is not a valid LavaArchitecture: time: invalid duration "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ms, err := Parse("f.yaml", []byte(tt.data))
			if tt.want == "" {
				if err != nil || len(ms) != 1 {
					t.Fatalf("Parse: %v, %v; want one manifest", ms, err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error %v, want one starting with %q", err, tt.want)
			}
		})
	}
}

// TestDecode_everyProblemInDocumentOrder: a document gets every problem the API server would
// name, sorted by position, the CEL rules only when no schema error blocks them (as the API
// server runs them).
func TestDecode_everyProblemInDocumentOrder(t *testing.T) {
	t.Parallel()
	data := "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: \"Bad Name!\", namespace: UPPER}\n" +
		"spec:\n  source: {name: x}\n  driftInterval: 10s\n  approvePlan: \"-x\"\n"
	docs, err := Decode([]byte(data))
	if err != nil || len(docs) != 1 {
		t.Fatalf("Decode: %v, %v", docs, err)
	}
	var got []string
	for _, e := range docs[0].Errors {
		got = append(got, e.Error())
	}
	want := []string{
		`3:12: metadata.name: "Bad Name!" is not a DNS-1123 subdomain`,
		`3:31: metadata.namespace: "UPPER" is not a DNS-1123 label`,
		"6:3: spec.driftInterval: must be at least 30s (got 10s)",
		`7:3: spec.approvePlan: "-x" must match ^[A-Za-z0-9][A-Za-z0-9._:-]*$`,
	}
	if len(got) != len(want) {
		t.Fatalf("errors:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d: %q, want it to start with %q", i, got[i], want[i])
		}
	}

	// An unsupported engine blocks the CEL rules: the remediation conflict is not reported.
	blocked := "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: a}\n" +
		"spec: {source: {name: x}, engine: pulumi, remediation: {critical: Alert}, remediationPolicyRef: {name: p}}\n"
	docs, err = Decode([]byte(blocked))
	if err != nil || len(docs) != 1 || len(docs[0].Errors) != 1 || !strings.Contains(docs[0].Errors[0].Msg, "spec.engine") {
		t.Fatalf("Decode: %+v, %v; want the engine's error only", docs, err)
	}
}

// TestParse_objectNotDefaulted: the schema's defaults apply to what is validated, not to the
// object lava up keeps (empty fields read as the CRD's defaults downstream).
func TestParse_objectNotDefaulted(t *testing.T) {
	t.Parallel()
	ms, err := Parse("f.yaml", []byte("apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: a}\nspec: {source: {name: x}}\n"))
	if err != nil || len(ms) != 1 {
		t.Fatalf("Parse: %v, %v", ms, err)
	}
	s := ms[0].Object.Spec
	if s.Engine != "" || s.DriftInterval != nil || s.ApprovePlan != "" || s.DeletionPolicy != "" {
		t.Errorf("spec was defaulted: %+v", s)
	}
}

// TestCELWording_rulesOfTheCRD: every CEL message that wording.go words differently is a rule
// message of the committed CRD, so a rule reworded in api/v1alpha1 is not left unmatched.
func TestCELWording_rulesOfTheCRD(t *testing.T) {
	t.Parallel()
	def := string(crd.LavaArchitecture())
	for msg := range celWording {
		// controller-gen folds long messages; compare without line breaks and indentation.
		if !strings.Contains(strings.Join(strings.Fields(def), " "), msg) {
			t.Errorf("CEL message %q is not in the LavaArchitecture CRD", msg)
		}
	}
	if _, err := schema(); err != nil {
		t.Fatal(err)
	}
}

func TestFieldNode(t *testing.T) {
	t.Parallel()
	data := "metadata: {name: a}\nspec:\n  bindings:\n    zone: z\n  bindingsFrom:\n  - {secretRef: {name: s}}\n"
	docs, err := Decode([]byte("apiVersion: v1\nkind: ConfigMap\n" + data))
	if err != nil || len(docs) != 1 {
		t.Fatalf("Decode: %v, %v", docs, err)
	}
	root := docs[0].Root
	for path, want := range map[string]string{
		"spec.bindings[zone]":                 "6:5",
		"spec.bindings.zone":                  "6:5",
		"spec.bindingsFrom[0].secretRef.name": "8:18",
		"spec.bindingsFrom[3]":                "7:3",
		"spec.gate":                           "4:1",
		"status":                              "1:1",
		"":                                    "1:1",
	} {
		n := FieldNode(root, path)
		if got := fmt.Sprintf("%d:%d", n.Line, n.Column); got != want {
			t.Errorf("FieldNode(%q) at %s, want %s", path, got, want)
		}
	}
}

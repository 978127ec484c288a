//go:build integration

package applier_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/service/applier"
)

// publishSynthesized stores rendered as the artifact and publishes Synthesized as synth does,
// with spec.approvePlan auto.
func (h *harness) publishSynthesized(ns, name string, gen int64, rendered string, eng lavav1.Engine, providers ...*lavav1.ProviderRequirement) {
	h.t.Helper()
	h.publishSynthesizedApproving(ns, name, gen, rendered, eng, "auto", providers...)
}

// publishSynthesizedApproving is publishSynthesized with spec.approvePlan approve.
func (h *harness) publishSynthesizedApproving(ns, name string, gen int64, rendered string, eng lavav1.Engine, approve string, providers ...*lavav1.ProviderRequirement) {
	h.t.Helper()
	art, err := bus.NewArtifacts(h.t.Context(), h.js)
	if err != nil {
		h.t.Fatal(err)
	}
	digest, err := art.Put(h.t.Context(), strings.NewReader(rendered))
	if err != nil {
		h.t.Fatal(err)
	}
	ev := &lavav1.Synthesized{
		Envelope:       envelope(ns, name, "uid-"+name, gen, "lava.v1.Synthesized", eventid.CauseTrigger("test-"+name)),
		Render:         &lavav1.RenderRecord{TerraformJsonDigest: digest, BindingsDigest: "b0", ObservedGeneration: gen},
		Gate:           &lavav1.GateVerdict{Passed: true},
		ArtifactDigest: digest, ArtifactSizeBytes: int64(len(rendered)), Engine: eng, ApprovePlan: approve, Providers: providers,
	}
	if _, err := h.pub.PublishEvent(h.t.Context(), ev); err != nil {
		h.t.Fatal(err)
	}
}

// TestApplier_sensitiveOutputs: non-sensitive outputs travel in Applied; sensitive ones go only
// to the Secret "<name>-lava-outputs" (owned by the LavaArchitecture), never into an event or
// a log line.
func TestApplier_sensitiveOutputs(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	h := newHarness(t)
	h.startApplier(applierOpts{kube: env.Client})
	const secret = "s3cr3t-output-value-9d41"
	rendered := `{"resource":{"terraform_data":{"t":{"input":"visible"}}},
	  "output":{"plain":{"value":"${terraform_data.t.output}"},"token":{"value":"` + secret + `","sensitive":true}}}`
	h.publishSynthesized(ns, "out", 1, rendered, lavav1.Engine_ENGINE_TOFU)
	applied := await(h, ns, "out", 2*time.Minute, gen[*lavav1.Applied](1))
	if got := applied.GetOutputs(); len(got) != 1 || got["plain"] != `"visible"` {
		t.Errorf("Applied outputs = %v, want only plain", got)
	}
	if applied.GetOutputsSecret() != applier.OutputsSecretName("out") {
		t.Fatalf("outputs_secret = %q", applied.GetOutputsSecret())
	}
	var sec corev1.Secret
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "out-lava-outputs"}, &sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["token"]) != secret || len(sec.Data) != 1 {
		t.Errorf("Secret data keys %v, token %q", len(sec.Data), sec.Data["token"])
	}
	if refs := sec.OwnerReferences; len(refs) != 1 || refs[0].Kind != "LavaArchitecture" || string(refs[0].UID) != "uid-out" {
		t.Errorf("owner references = %v", refs)
	}
	if where := h.leaks(secret); len(where) > 0 {
		t.Errorf("sensitive output leaked into %v", where)
	}
}

// TestApplier_contendedLease: while another holder has a resource's lease the applier naks the
// message with delay (counted) and applies once the lease is free.
func TestApplier_contendedLease(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	other, err := bus.NewLeases(t.Context(), h.js, "someone-else", nil)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := other.Acquire(t.Context(), "demo", "busy")
	if err != nil {
		t.Fatal(err)
	}
	h.publishSynthesized("demo", "busy", 1, `{"resource":{"terraform_data":{"d":{"input":"x"}}}}`, lavav1.Engine_ENGINE_EMBEDDED)
	deadline := time.Now().Add(30 * time.Second)
	for metricValue(t, r.reg, "lava_applier_lease_contended_total") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the applier never found the lease contended twice")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(events[*lavav1.Planned](h, "demo", "busy")); n != 0 {
		t.Fatalf("planned %d times under another holder's lease", n)
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	await(h, "demo", "busy", time.Minute, gen[*lavav1.Applied](1))
}

// TestApplier_secretNeverLeaks: a provider gets a Secret binding's value without its
// sensitive mark, so its own error text can carry it (testkit_file's failing create names its
// file); the applier redacts it from the Failed message, and no published event and no log
// line carries it. synth refuses a Secret in a file path (the path is a template), so the
// test publishes the rendered JSON itself, as synth renders it (render.SensitiveTemplate); the
// observed object binds the Secret, from which the applier reads what to redact, and synth's
// own refusal of that source leaks nothing either.
func TestApplier_secretNeverLeaks(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	const token = "tok-1c2d3e4f-never-in-events"
	if err := env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		Data: map[string][]byte{"token": []byte(token)}}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, env.Client)
	h.startApplier(applierOpts{kube: env.Client})
	dir := t.TempDir()
	const src = `(deflava-architecture leaky
  :inputs ((:dir "/tmp") (:token "x"))
  :providers ((testkit :source "example/testkit"))
  :resources ((terraform-data "ok" :input "{token}")
              (testkit-file "bad" :filename "{dir}/{token}.txt" :content "x" :fail-on-create "true")))`
	// synth reads bindingsFrom only for an object the API server has (docs/security.md).
	obj := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaky"},
		Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	h.observeUID(ns, "leaky", string(obj.UID), 1, &lavav1.ArchitectureSpec{
		Source:       &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
		Bindings:     map[string]string{"dir": dir},
		BindingsFrom: []*lavav1.BindingsFromRef{{Ref: &lavav1.BindingsFromRef_SecretRef{SecretRef: &lavav1.ObjectKeyRef{Name: "creds"}}}},
		Engine:       lavav1.Engine_ENGINE_TOFU,
	})
	refused := await(h, ns, "leaky", 2*time.Minute, func(f *lavav1.Failed) bool { return f.GetStage() == lavav1.Stage_STAGE_SYNTH })
	if refused.GetReason() != "PolicyRejected" || !strings.Contains(refused.GetMessage(), "(sensitive value)") {
		t.Errorf("synth: %s %q, want PolicyRejected showing (sensitive value) for the path", refused.GetReason(), refused.GetMessage())
	}
	rendered, err := json.Marshal(map[string]any{"resource": map[string]any{
		"terraform_data": map[string]any{"ok": map[string]any{"input": render.SensitiveTemplate(token)}},
		"testkit_file": map[string]any{"bad": map[string]any{"filename": dir + "/" + render.SensitiveTemplate(token) + ".txt",
			"content": "x", "fail_on_create": true}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.publishSynthesized(ns, "leaky", 1, string(rendered), lavav1.Engine_ENGINE_TOFU, &lavav1.ProviderRequirement{Name: "testkit", Source: "example/testkit"})
	f := await(h, ns, "leaky", 2*time.Minute, func(f *lavav1.Failed) bool { return f.GetStage() == lavav1.Stage_STAGE_APPLY })
	// The configuration has a sensitive value, so tofu's output tail keeps the provider error's
	// summary and position, not its detail (which quoted the file name).
	if f.GetReason() != "ApplyFailed" || !f.GetRetryable() ||
		!strings.Contains(f.GetMessage(), "fail_on_create") || !strings.Contains(f.GetMessage(), "the detail is not shown") {
		t.Errorf("Failed %v %s retryable %v: %q, want a retryable ApplyFailed with the provider error's summary, its detail hidden",
			f.GetStage(), f.GetReason(), f.GetRetryable(), f.GetMessage())
	}
	if where := h.leaks(token); len(where) > 0 {
		t.Errorf("Secret value leaked into %v", where)
	}
}

//go:build integration

package up

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// TestCore_sameStatusThroughBothStores runs one phase-event sequence through the watcher's
// core over the API server (a real kube-apiserver, status written with coalescing) and over
// lava up's files (every fold written at once) and compares the statuses they store.
func TestCore_sameStatusThroughBothStores(t *testing.T) {
	kube := kubetest.Start(t)
	nats := natstest.RunJetStream(t)
	js := nats.JetStream()
	ctx := t.Context()
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := kube.Namespace(t)
	obj := &v1alpha1.LavaArchitecture{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "same"},
		Spec:       v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "greeting"}},
	}
	if err := kube.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	apiCore, err := watcher.NewCore(watcher.CoreConfig{
		Store: watcher.NewAPIStore(kube.Client, kube.Client, nil), Publisher: bus.NewPublisher(js),
		Window: 20 * time.Millisecond, Hold: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}

	// The file store: the same object (its own uid) in a status directory, as a previous run of
	// lava up left it.
	dir := t.TempDir()
	fileObj := obj.DeepCopy()
	fileObj.Namespace, fileObj.UID, fileObj.ResourceVersion, fileObj.Generation = "files", "8a5b0c63-0d3c-4a53-9d1e-0a4f3e1c2b7d", "", 1
	fileObj.APIVersion, fileObj.Kind = v1alpha1.GroupVersion.String(), "LavaArchitecture"
	data, err := sigsyaml.Marshal(fileObj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "files", "same.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(ctx, SourceConfig{JS: js, StatusDir: dir})
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(n int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(n) * time.Second)) }
	type step struct {
		local *pipeline.Event // folded by the watcher itself (Observed)
		ev    bus.Event
	}
	steps := func(seq int) []step {
		env := func(id string, n int) *lavav1.Envelope {
			return &lavav1.Envelope{EventId: id, Generation: 1, OccurredAt: at(n), CorrelationId: "c"}
		}
		return []step{
			{local: &pipeline.Event{Type: pipeline.EventObserved, Force: true, Generation: 1, Time: t0}},
			{ev: &lavav1.Synthesized{Envelope: env("s", 1), Render: &lavav1.RenderRecord{SourceKind: lavav1.SourceKind_SOURCE_KIND_NAME,
				ArchitectureName: "greeting", ResourceCount: 3, SourceDigest: "sha256:aa"}, Gate: &lavav1.GateVerdict{Passed: true}}},
			{ev: &lavav1.ReceiptAppended{Envelope: env("r0", 2), Sequence: uint64(seq), ContentHash: []byte{1}}},
			{ev: &lavav1.Planned{Envelope: env("p", 3), PlanId: "plan-1", Summary: &lavav1.ChangeSummary{Add: 3}}},
			{ev: &lavav1.Applied{Envelope: env("a", 4), PlanId: "plan-1", Summary: &lavav1.ChangeSummary{Add: 3},
				Outputs: map[string]string{"greeting": `"hello"`}}},
			{ev: &lavav1.ReceiptAppended{Envelope: env("r1", 5), Sequence: uint64(seq + 1), ContentHash: []byte{2}}},
			{ev: &lavav1.DriftScanned{Envelope: env("d0", 6)}},
			{ev: &lavav1.TickReported{Envelope: env("t", 7), FinalPhase: lavav1.Phase_PHASE_DRIFTED, Decision: &lavav1.Decision{
				Action: lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL, Severity: lavav1.Severity_SEVERITY_FUNCTIONAL}}},
			{ev: &lavav1.Failed{Envelope: env("f", 8), Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Message: "provider crashed", Retryable: true}},
			{ev: &lavav1.Applied{Envelope: env("a2", 9), PlanId: "plan-2", Summary: &lavav1.ChangeSummary{Change: 1}}},
		}
	}
	run := func(t *testing.T, key types.NamespacedName, uid types.UID, fold func(context.Context, types.NamespacedName, types.UID, pipeline.Event, watcher.Cause) error,
		handle func(context.Context, *bus.Message) error) {
		for i, s := range steps(10) {
			if s.local != nil {
				if err := fold(ctx, key, uid, *s.local, watcher.Cause{EventID: "o", CorrelationID: "o"}); err != nil {
					t.Fatalf("step %d: fold: %v", i, err)
				}
				continue
			}
			env := s.ev.GetEnvelope()
			env.Resource = &lavav1.ResourceRef{Namespace: key.Namespace, Name: key.Name, Uid: string(uid)}
			m := &bus.Message{Subject: bus.PhaseSubject(key.Namespace, key.Name, "x"), Event: s.ev, Envelope: env, NumDelivered: 1, Published: t0}
			if err := handle(ctx, m); err != nil {
				t.Fatalf("step %d (%T): %v", i, s.ev, err)
			}
		}
	}
	apiKey := types.NamespacedName{Namespace: ns, Name: "same"}
	run(t, apiKey, obj.UID, func(ctx context.Context, k types.NamespacedName, u types.UID, ev pipeline.Event, c watcher.Cause) error {
		_, err := apiCore.Fold(ctx, k, u, ev, c)
		return err
	}, apiCore.HandlePhase)
	run(t, types.NamespacedName{Namespace: "files", Name: "same"}, fileObj.UID, func(ctx context.Context, k types.NamespacedName, u types.UID, ev pipeline.Event, c watcher.Cause) error {
		_, err := src.core.Fold(ctx, k, u, ev, c)
		return err
	}, src.HandlePhase)

	got := &v1alpha1.LavaArchitecture{}
	if err := kube.Client.Get(ctx, apiKey, got); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "files", "same.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fromFile := &v1alpha1.LavaArchitecture{}
	if err := sigsyaml.Unmarshal(raw, fromFile); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1alpha1.PhaseApplied || got.Status.Plan == nil || got.Status.Plan.ID != "plan-2" {
		t.Fatalf("API server status: phase %s plan %+v, want Applied plan-2", got.Status.Phase, got.Status.Plan)
	}
	if got.Status.Receipt == nil || got.Status.Receipt.Sequence != 11 {
		t.Errorf("API server status.receipt %+v, want sequence 11 (riding on a later write)", got.Status.Receipt)
	}
	if diff := cmp.Diff(got.Status, fromFile.Status); diff != "" {
		t.Errorf("status through the API server (-) and through lava up's files (+) differ:\n%s", diff)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", c)
	}
}

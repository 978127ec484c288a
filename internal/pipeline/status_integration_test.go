//go:build integration

package pipeline

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
)

// TestReduce_statusAcceptedByTheAPIServer folds a whole lifecycle, writes every status Reduce
// returns to the status subresource of a real API server and checks that the server accepts
// it and returns it unchanged, so comparing a reduced status with the last patched one is
// meaningful. It ends with a real deletion: the finalizer holds the object, deletion bumps the
// generation, and removing the finalizer after Destroyed lets it go.
func TestReduce_statusAcceptedByTheAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	obj := &v1alpha1.LavaArchitecture{
		ObjectMeta: metav1.ObjectMeta{Name: "lifecycle", Namespace: ns, Finalizers: []string{v1alpha1.Finalizer}},
		Spec:       v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}},
	}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(obj)

	// write stores st as the status and checks the round trip.
	write := func(step string, st v1alpha1.LavaArchitectureStatus) {
		t.Helper()
		var cur v1alpha1.LavaArchitecture
		if err := env.Client.Get(ctx, key, &cur); err != nil {
			t.Fatalf("%s: get: %v", step, err)
		}
		cur.Status = st
		if err := env.Client.Status().Update(ctx, &cur); err != nil {
			t.Fatalf("%s: the API server rejected the reduced status: %v", step, err)
		}
		var back v1alpha1.LavaArchitecture
		if err := env.Client.Get(ctx, key, &back); err != nil {
			t.Fatalf("%s: get: %v", step, err)
		}
		if !equality.Semantic.DeepEqual(st, back.Status) {
			t.Fatalf("%s: status changed in the round trip:\n%s", step, cmp.Diff(st, back.Status))
		}
	}

	gen := obj.Generation
	steps := []Event{
		sample(EventObserved, gen, 0),
		sample(EventSuspended, gen, 1),
		sample(EventResumed, gen, 2),
		sample(EventDependenciesBlocked, gen, 3),
		sample(EventDependenciesSatisfied, gen, 4),
		sample(EventSynthesized, gen, 5),
		sample(EventAwaitingApproval, gen, 6),
		sample(EventApplied, gen, 7),
		sample(EventReceiptAppended, 0, 8),
		sample(EventDrifted, gen, 9),
		// A clean scan changes the status only when it ends a drift (a clean scan of a clean
		// resource writes nothing: docs/design/0007-status-writes.md).
		sample(EventDriftClean, gen, 10),
		sample(EventReconverging, gen, 11),
		sample(EventPlanned, gen, 12),
		sample(EventApplied, gen, 13),
		{Type: EventFailed, Generation: gen, Time: at(14), Stage: StageApply, Terminal: true, Reason: v1alpha1.ReasonProviderUnavailable, Message: "provider registry.terraform.io/hashicorp/aws is not installed"},
	}
	var st v1alpha1.LavaArchitectureStatus
	for _, ev := range steps {
		var tr Transition
		var err error
		st, tr, err = Reduce(st, ev)
		if err != nil {
			t.Fatalf("%s: %v", ev.Type, err)
		}
		if !tr.Changed {
			t.Fatalf("%s: no change", ev.Type)
		}
		write(string(ev.Type), st)
	}

	// Delete: the finalizer keeps the object, and the deletion bumps the generation.
	if err := env.Client.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	var deleting v1alpha1.LavaArchitecture
	if err := env.Client.Get(ctx, key, &deleting); err != nil {
		t.Fatal(err)
	}
	if deleting.DeletionTimestamp == nil {
		t.Fatal("no deletionTimestamp after delete")
	}
	if deleting.Generation <= gen {
		t.Errorf("deletion left the generation at %d (was %d)", deleting.Generation, gen)
	}
	st, tr, err := Reduce(st, sample(EventDeletionRequested, deleting.Generation, 20))
	if err != nil || tr.To != Finalizing {
		t.Fatalf("DeletionRequested: %v %+v", err, tr)
	}
	write("DeletionRequested", st)
	st, tr, err = Reduce(st, sample(EventDestroyed, deleting.Generation, 21))
	if err != nil || !tr.RemoveFinalizer {
		t.Fatalf("Destroyed: %v %+v", err, tr)
	}
	write("Destroyed", st)

	if err := env.Client.Get(ctx, key, &deleting); err != nil {
		t.Fatal(err)
	}
	controllerutil.RemoveFinalizer(&deleting, v1alpha1.Finalizer)
	if err := env.Client.Update(ctx, &deleting); err != nil {
		t.Fatalf("remove finalizer: %v", err)
	}
	if err := env.Client.Get(ctx, key, &deleting); !apierrors.IsNotFound(err) {
		t.Errorf("object still there after the finalizer went: %v", err)
	}
}

//go:build integration

package applier_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
)

// TestApplier_forgedDeletionDestroysNothing: a DeletionRequested for a live, Applied object
// (right name and UID, as anyone who read its events knows them) is refused: terminated and
// reported as a poison_message anomaly, nothing destroyed. Once the object really is being
// deleted (deletionTimestamp, Lava's finalizer) the same request destroys it; one naming
// another UID is refused.
func TestApplier_forgedDeletionDestroysNothing(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	h := newHarness(t)
	h.startApplier(applierOpts{kube: env.Client})
	const name = "files"
	dir := t.TempDir()

	obj := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{v1alpha1.Finalizer}},
		Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	uid := string(obj.UID)
	h.observeUID(ns, name, uid, 1, filesSpec(dir, "v1", "auto", "ana"))
	await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](1))
	file := filepath.Join(dir, "ana.txt")

	h.deletionAs(ns, name, uid, 1, "forged")
	eventuallyH(t, 30*time.Second, "the poison report", func() bool { return h.captured(bus.PoisonAnomalySubject) > 0 })
	time.Sleep(2 * time.Second) // a destroy would have started by now
	if d := events[*lavav1.Destroyed](h, ns, name); len(d) > 0 {
		t.Fatalf("a forged DeletionRequested for a live object destroyed it: %v", d)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("%s is gone after a forged DeletionRequested: %v", file, err)
	}

	// The object is now being deleted (its finalizer holds it); a request naming another
	// object of that name is still refused, the watcher's is carried out.
	if err := env.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	before := h.captured(bus.PoisonAnomalySubject)
	h.deletionAs(ns, name, "uid-of-another-object", 1, "other-uid")
	eventuallyH(t, 30*time.Second, "the second poison report", func() bool { return h.captured(bus.PoisonAnomalySubject) > before })
	if d := events[*lavav1.Destroyed](h, ns, name); len(d) > 0 {
		t.Fatalf("a DeletionRequested with another uid destroyed the object: %v", d)
	}
	h.deletionAs(ns, name, uid, 1, "watcher")
	await[*lavav1.Destroyed](h, ns, name, 2*time.Minute, nil)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("%s still exists after the confirmed destroy (%v)", file, err)
	}
}

// deletionAs publishes a DeletionRequested for ns/name with uid, trigger making its event id.
func (h *harness) deletionAs(ns, name, uid string, gen int64, trigger string) {
	h.t.Helper()
	ev := &lavav1.DeletionRequested{Envelope: envelope(ns, name, uid, gen, "lava.v1.DeletionRequested", trigger),
		DeletionPolicy: lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, Engine: lavav1.Engine_ENGINE_TOFU}
	if _, err := h.pub.PublishEvent(h.t.Context(), ev); err != nil {
		h.t.Fatal(err)
	}
}

// captured counts the captured messages on subject.
func (h *harness) captured(subject string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(slices.DeleteFunc(slices.Clone(h.msgs), func(c captured) bool { return c.subject != subject }))
}

func eventuallyH(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

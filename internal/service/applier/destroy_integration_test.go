//go:build integration

package applier_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/service/applier"
)

// kitSource is one testkit_file (example/testkit 0.3.0, with the fault knobs).
const kitSource = `(deflava-architecture kit
  :inputs ((:dir "/tmp"))
  :providers ((testkit :source "example/testkit"))
  :resources ((testkit-file "a" :filename "{dir}/a.txt" :content "a\n")))
`

// creates reads the testkit create counter of file (0 when it never was created).
func creates(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file + ".creates")
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func touch(t *testing.T, file string) {
	t.Helper()
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// retryDestroy publishes the RetryRequested viggy publishes after a failed destroy.
func (h *harness) retryDestroy(ns, name string, attempt int32, failed *lavav1.Failed) {
	h.t.Helper()
	trig := eventid.RetryTrigger("destroy", int(attempt))
	uid := "uid-" + name
	ev := &lavav1.RetryRequested{
		Envelope: &lavav1.Envelope{EventId: eventid.ID(uid, 1, "lava.v1.RetryRequested", trig), OccurredAt: timestamppb.Now(), Source: "viggy",
			Resource: &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: uid}, Generation: 1, CorrelationId: failed.GetEnvelope().GetCorrelationId(), Trigger: trig},
		Target: lavav1.Stage_STAGE_DESTROY, Attempt: attempt, Reason: failed.GetReason(), FailedEventId: failed.GetEnvelope().GetEventId(),
	}
	if _, err := h.pub.PublishEvent(h.t.Context(), ev); err != nil {
		h.t.Fatal(err)
	}
}

// TestApplier_destroyErrorsKeepState: with either engine, a destroy whose refresh (provider
// Read) fails, then one whose Delete fails, each report Failed (stage DESTROY,
// DestroyFailed, retryable, the provider's reason in the message) and keep the state, the
// object and the finalizer (no Destroyed); once the provider works, the retry destroys the
// object exactly once and forgets the state.
func TestApplier_destroyErrorsKeepState(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{testkit: true})
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		t.Run(applier.EngineName(eng), func(t *testing.T) {
			const ns = "demo"
			name := "doomed-" + applier.EngineName(eng)
			dir := t.TempDir()
			file := filepath.Join(dir, "a.txt")
			h.observe(ns, name, 1, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: kitSource}},
				Bindings: map[string]string{"dir": dir}, Engine: eng})
			await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](1))
			if n := creates(t, file); n != 1 {
				t.Fatalf("%d creates of a.txt after the apply, want 1", n)
			}
			key := state.Key{Namespace: ns, Name: name}
			kept := func(when string) {
				t.Helper()
				_, body, err := r.store.Body(t.Context(), key)
				if err != nil {
					t.Fatalf("%s: state: %v, want it kept", when, err)
				}
				if addrs, _ := state.ManagedInstances(body); len(addrs) != 1 {
					t.Fatalf("%s: state holds %v, want testkit_file.a kept", when, addrs)
				}
				if _, err := os.Stat(file); err != nil {
					t.Fatalf("%s: a.txt: %v, want it left in place", when, err)
				}
				if d := events[*lavav1.Destroyed](h, ns, name); len(d) != 0 {
					t.Fatalf("%s: Destroyed published (count %d): the finalizer would be removed", when, d[0].GetDestroyedCount())
				}
			}
			failedAttempt := func(attempt int32, want string) *lavav1.Failed {
				t.Helper()
				f := await(h, ns, name, 2*time.Minute, func(f *lavav1.Failed) bool { return f.GetAttempt() == attempt })
				if f.GetStage() != lavav1.Stage_STAGE_DESTROY || f.GetReason() != applier.ReasonDestroyFailed || !f.GetRetryable() ||
					!strings.Contains(f.GetMessage(), want) {
					t.Fatalf("attempt %d: Failed %v %s retryable=%v %q, want a retryable DESTROY DestroyFailed naming %q", attempt,
						f.GetStage(), f.GetReason(), f.GetRetryable(), f.GetMessage(), want)
				}
				return f
			}

			touch(t, file+".fail-read")
			h.deletion(ns, name, 1, lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, eng)
			f := failedAttempt(1, "fail-read")
			kept("after a failed refresh")

			if err := os.Remove(file + ".fail-read"); err != nil {
				t.Fatal(err)
			}
			touch(t, file+".fail-delete")
			h.retryDestroy(ns, name, 2, f)
			f = failedAttempt(2, "fail-delete")
			kept("after a failed delete")

			if err := os.Remove(file + ".fail-delete"); err != nil {
				t.Fatal(err)
			}
			h.retryDestroy(ns, name, 3, f)
			d := await[*lavav1.Destroyed](h, ns, name, 2*time.Minute, nil)
			if d.GetDestroyedCount() != 1 || d.GetOrphaned() {
				t.Errorf("Destroyed count %d orphaned %v, want 1 destroyed", d.GetDestroyedCount(), d.GetOrphaned())
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("a.txt after the destroy: %v, want it gone", err)
			}
			if _, err := r.store.Get(t.Context(), key); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("state after the destroy: %v, want it forgotten", err)
			}
			if n := creates(t, file); n != 1 {
				t.Errorf("%d creates of a.txt in all, want 1", n)
			}
		})
	}
}

// TestApplier_destroyNothing: deleting an object that never applied anything (no state)
// finishes at once with Destroyed, count 0.
func TestApplier_destroyNothing(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	h.deletion("demo", "never-applied", 1, lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, lavav1.Engine_ENGINE_UNSPECIFIED)
	d := await[*lavav1.Destroyed](h, "demo", "never-applied", time.Minute, nil)
	if d.GetDestroyedCount() != 0 || d.GetOrphaned() {
		t.Errorf("Destroyed %v, want count 0, not orphaned", d)
	}
	if f := events[*lavav1.Failed](h, "demo", "never-applied"); len(f) != 0 {
		t.Errorf("Failed %s: %s", f[0].GetReason(), f[0].GetMessage())
	}
}

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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
)

// kitSource is one testkit_file (example/testkit 0.4.0, with the fault knobs).
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
		t.Run(pipeline.EngineName(eng), func(t *testing.T) {
			const ns = "demo"
			name := "doomed-" + pipeline.EngineName(eng)
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
				if f.GetStage() != lavav1.Stage_STAGE_DESTROY || f.GetReason() != v1alpha1.ReasonDestroyFailed || !f.GetRetryable() ||
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

// deletionUID publishes a DeletionRequested for the object with the given uid.
func (h *harness) deletionUID(ns, name, uid string, gen int64, policy lavav1.DeletionPolicy) {
	h.t.Helper()
	ev := &lavav1.DeletionRequested{
		Envelope:       envelope(ns, name, uid, gen, "lava.v1.DeletionRequested", eventid.GenerationTrigger(gen)),
		DeletionPolicy: policy,
	}
	if _, err := h.pub.PublishEvent(h.t.Context(), ev); err != nil {
		h.t.Fatal(err)
	}
}

// TestApplier_orphanThenSameName: deletionPolicy Orphan keeps the state and the
// infrastructure; a new object with the same name (another uid) fails StateOrphaned (not
// retryable, naming `lava state adopt`) instead of planning against it, and deleting that
// object destroys nothing of it; after `lava state adopt` (Store.Adopt) a third object
// plans against the state and finds nothing to change.
func TestApplier_orphanThenSameName(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{testkit: true})
	const ns, name = "demo", "kept"
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	spec := &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: kitSource}},
		Bindings: map[string]string{"dir": dir}, Engine: lavav1.Engine_ENGINE_EMBEDDED}
	uid := func(u string) func(ev interface{ GetEnvelope() *lavav1.Envelope }) bool {
		return func(ev interface{ GetEnvelope() *lavav1.Envelope }) bool {
			return ev.GetEnvelope().GetResource().GetUid() == u
		}
	}
	h.observeUID(ns, name, "uid-a", 1, spec)
	await(h, ns, name, time.Minute, func(a *lavav1.Applied) bool { return uid("uid-a")(a) })
	h.deletionUID(ns, name, "uid-a", 1, lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN)
	d := await(h, ns, name, time.Minute, func(d *lavav1.Destroyed) bool { return uid("uid-a")(d) })
	key := state.Key{Namespace: ns, Name: name}
	rec, err := r.store.Get(t.Context(), key)
	if !d.GetOrphaned() || err != nil || !rec.HasState() || rec.OrphanedBy != "uid-a" {
		t.Fatalf("after the orphaning delete: orphaned=%v state %+v (%v), want the state kept and marked by uid-a", d.GetOrphaned(), rec, err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("a.txt after the orphaning delete: %v, want it kept", err)
	}

	// A new object of the same name is refused.
	h.observeUID(ns, name, "uid-b", 1, spec)
	f := await(h, ns, name, time.Minute, func(f *lavav1.Failed) bool { return uid("uid-b")(f) })
	if f.GetReason() != v1alpha1.ReasonStateOrphaned || f.GetRetryable() || f.GetStage() != lavav1.Stage_STAGE_PLAN ||
		!strings.Contains(f.GetMessage(), "lava state adopt demo/kept") || !strings.Contains(f.GetMessage(), "uid-a") {
		t.Fatalf("new object of the same name: Failed %s retryable=%v %q, want a final StateOrphaned naming uid-a and `lava state adopt`",
			f.GetReason(), f.GetRetryable(), f.GetMessage())
	}
	for _, p := range events[*lavav1.Planned](h, ns, name) {
		if uid("uid-b")(p) {
			t.Fatalf("the new object planned (%s) against the orphaned state", p.GetPlanId())
		}
	}
	// Deleting it destroys nothing of the orphaned state.
	h.deletionUID(ns, name, "uid-b", 1, lavav1.DeletionPolicy_DELETION_POLICY_DESTROY)
	d = await(h, ns, name, time.Minute, func(d *lavav1.Destroyed) bool { return uid("uid-b")(d) })
	if d.GetDestroyedCount() != 0 {
		t.Errorf("deleting the refused object destroyed %d resources", d.GetDestroyedCount())
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("a.txt after deleting the refused object: %v, want it kept", err)
	}
	if rec, err := r.store.Get(t.Context(), key); err != nil || !rec.HasState() || rec.OrphanedBy != "uid-a" {
		t.Fatalf("state after deleting the refused object: %+v (%v), want it kept and still marked", rec, err)
	}

	// Adopted, a third object manages it: nothing to change, nothing created again.
	if err := r.store.Adopt(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	h.observeUID(ns, name, "uid-c", 1, spec)
	a := await(h, ns, name, time.Minute, func(a *lavav1.Applied) bool { return uid("uid-c")(a) })
	if s := a.GetSummary(); s.GetAdd() != 0 || s.GetChange() != 0 || s.GetDestroy() != 0 {
		t.Errorf("the adopting object's apply %v, want nothing to change", s)
	}
	if n := creates(t, file); n != 1 {
		t.Errorf("%d creates of a.txt, want 1", n)
	}
}

// TestApplier_destroyAfterBindingsSecretDeleted: a resource whose bindingsFrom Secret was
// deleted before the object still destroys: the last render and the state are enough.
func TestApplier_destroyAfterBindingsSecretDeleted(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "content"}, Data: map[string][]byte{"body": []byte("from-a-secret")}}
	if err := env.Client.Create(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, env.Client)
	h.startApplier(applierOpts{kube: env.Client, testkit: true})
	dir := t.TempDir()
	const src = `(deflava-architecture fromsecret
  :inputs ((:dir "/tmp") (:body "x"))
  :providers ((testkit :source "example/testkit"))
  :resources ((testkit-file "a" :filename "{dir}/a.txt" :content "{body}")))`
	objs := map[string]*v1alpha1.LavaArchitecture{}
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		name := "fromsecret-" + pipeline.EngineName(eng)
		file := filepath.Join(dir, name+".txt")
		// synth reads bindingsFrom, and the applier destroys, only for an object the API
		// server has (and shows being deleted): the object, held by Lava's finalizer.
		obj := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{v1alpha1.Finalizer}},
			Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		objs[name] = obj
		h.observeUID(ns, name, string(obj.UID), 1, &lavav1.ArchitectureSpec{
			Source:   &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: strings.ReplaceAll(src, "{dir}/a.txt", "{dir}/"+name+".txt")}},
			Bindings: map[string]string{"dir": dir}, Engine: eng,
			BindingsFrom: []*lavav1.BindingsFromRef{{Ref: &lavav1.BindingsFromRef_SecretRef{SecretRef: &lavav1.ObjectKeyRef{Name: "content"}}}},
		})
		await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](1))
		if got := readFile(t, file); got != "from-a-secret" {
			t.Fatalf("%s = %q", file, got)
		}
	}
	if err := env.Client.Delete(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		name := "fromsecret-" + pipeline.EngineName(eng)
		if err := env.Client.Delete(t.Context(), objs[name]); err != nil {
			t.Fatal(err)
		}
		ev := &lavav1.DeletionRequested{Envelope: envelope(ns, name, string(objs[name].UID), 1, "lava.v1.DeletionRequested", eventid.GenerationTrigger(1)),
			DeletionPolicy: lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, Engine: eng}
		if _, err := h.pub.PublishEvent(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		d := await[*lavav1.Destroyed](h, ns, name, 2*time.Minute, nil)
		if d.GetDestroyedCount() != 1 {
			t.Errorf("%s: destroyed %d, want 1", name, d.GetDestroyedCount())
		}
		if _, err := os.Stat(filepath.Join(dir, name+".txt")); !os.IsNotExist(err) {
			t.Errorf("%s: file after the destroy: %v, want it gone", name, err)
		}
	}
	if where := h.leaks("from-a-secret"); len(where) > 0 {
		t.Errorf("the Secret's value leaked into %v", where)
	}
}

// TestApplier_orphanLimitAttack is the orphan churn of the twentieth trial: objects deleted
// with deletionPolicy Orphan keep their state body for good (up to 64 MiB each), so creating
// and deleting objects under new names grew the artifact store without bound. A namespace keeps
// at most MaxOrphanedStates orphaned states: past it the deletion fails OrphanLimitReached
// (retryable, at stage DESTROY: the finalizer stays) and the state is neither orphaned nor
// destroyed; another namespace still orphans; with deletionPolicy Destroy the waiting object is
// destroyed. Checked to fail without the limit: the third state was orphaned.
func TestApplier_orphanLimitAttack(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{maxOrphaned: 2})
	apply := func(ns, name string) {
		h.publishSynthesized(ns, name, 1, `{"resource":{"terraform_data":{"a":{"input":"x"}}}}`, lavav1.Engine_ENGINE_EMBEDDED)
		await(h, ns, name, time.Minute, gen[*lavav1.Applied](1))
	}
	for _, name := range []string{"o1", "o2", "o3"} {
		apply("atk", name)
	}
	apply("other", "p1") // another uid: events ids are made of the uid
	for _, name := range []string{"o1", "o2"} {
		h.deletion("atk", name, 1, lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN, lavav1.Engine_ENGINE_EMBEDDED)
		if d := await(h, "atk", name, time.Minute, gen[*lavav1.Destroyed](1)); !d.GetOrphaned() {
			t.Fatalf("atk/%s: Destroyed not orphaned", name)
		}
	}
	h.deletion("atk", "o3", 1, lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN, lavav1.Engine_ENGINE_EMBEDDED)
	f := await(h, "atk", "o3", time.Minute, func(f *lavav1.Failed) bool { return f.GetStage() == lavav1.Stage_STAGE_DESTROY })
	if f.GetReason() != v1alpha1.ReasonOrphanLimitReached || !f.GetRetryable() || !strings.Contains(f.GetMessage(), "already keeps 2 orphaned states") {
		t.Errorf("the third Orphan deletion: Failed %s retryable=%v %q", f.GetReason(), f.GetRetryable(), f.GetMessage())
	}
	if len(events[*lavav1.Destroyed](h, "atk", "o3")) != 0 {
		t.Error("atk/o3 was Destroyed past the limit")
	}
	if rec, err := r.store.Get(t.Context(), state.Key{Namespace: "atk", Name: "o3"}); err != nil || !rec.HasState() || rec.OrphanedBy != "" {
		t.Errorf("atk/o3's state after the refusal: %+v (%v), want it kept and not orphaned", rec, err)
	}
	h.deletion("other", "p1", 1, lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN, lavav1.Engine_ENGINE_EMBEDDED)
	if d := await(h, "other", "p1", time.Minute, gen[*lavav1.Destroyed](1)); !d.GetOrphaned() {
		t.Error("another namespace's Orphan deletion was not orphaned")
	}
	h.deletion("atk", "o3", 2, lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, lavav1.Engine_ENGINE_EMBEDDED)
	if d := await(h, "atk", "o3", time.Minute, gen[*lavav1.Destroyed](2)); d.GetOrphaned() {
		t.Error("atk/o3 deleted with deletionPolicy Destroy was orphaned")
	}
}

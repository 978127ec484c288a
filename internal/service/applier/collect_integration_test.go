//go:build integration

package applier_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/service/applier"
)

// objects counts the objects in lava-artifacts.
func objects(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	obs, err := js.ObjectStore(t.Context(), bus.ObjectStoreArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	list, err := obs.List(t.Context())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// metaSubjects counts the meta subjects of lava-artifacts' stream: one per live object, and one
// per deleted object whose delete marker stayed.
func metaSubjects(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	st, err := js.Stream(t.Context(), "OBJ_"+bus.ObjectStoreArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter("$O."+bus.ObjectStoreArtifacts+".M.>"))
	if err != nil {
		t.Fatal(err)
	}
	return len(info.State.Subjects)
}

// TestApplier_artifactsBounded: 100 generations of one resource each leave a render, a plan
// and state bodies in lava-artifacts; collecting every 10 generations keeps the store at the
// few artifacts still referenced (the current state body and the last render), with no delete
// marker of a collected one left in the stream, and the
// resource still applies and destroys afterwards (nothing it needs was collected).
func TestApplier_artifactsBounded(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	const ns, name = "demo", "churn"
	src := `(deflava-architecture churn :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}")))`
	spec := func(g int) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
			Bindings: map[string]string{"v": fmt.Sprint(g)}, Engine: lavav1.Engine_ENGINE_EMBEDDED}
	}
	grew, kept := 0, 0
	for g := 1; g <= 100; g++ {
		h.observe(ns, name, int64(g), spec(g))
		await(h, ns, name, time.Minute, gen[*lavav1.Applied](int64(g)))
		if g%10 != 0 {
			continue
		}
		before := objects(t, h.js)
		res, err := applier.CollectArtifacts(t.Context(), h.js, 0, h.log)
		if err != nil {
			t.Fatal(err)
		}
		after := objects(t, h.js)
		grew, kept = max(grew, before), max(kept, after)
		if after > 3 || res.Deleted != before-after {
			t.Fatalf("generation %d: %d artifacts before the collection, %d after (%d deleted): want at most 3 kept", g, before, after, res.Deleted)
		}
		// A deleted object leaves no delete marker behind (otherwise the markers grow with every
		// artifact ever collected: docs/operations.md, the soak).
		if m := metaSubjects(t, h.js); m != after {
			t.Fatalf("generation %d: %d meta subjects in the store after the collection for %d artifacts: delete markers stay", g, m, after)
		}
	}
	if grew < 20 {
		t.Fatalf("the store held at most %d artifacts between collections: the test does not exercise growth", grew)
	}
	// What is kept is enough: another generation applies, and the destroy finds its render.
	h.observe(ns, name, 101, spec(101))
	await(h, ns, name, time.Minute, gen[*lavav1.Applied](101))
	if _, err := applier.CollectArtifacts(t.Context(), h.js, 0, h.log); err != nil {
		t.Fatal(err)
	}
	h.deletion(ns, name, 101, lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, lavav1.Engine_ENGINE_UNSPECIFIED)
	d := await[*lavav1.Destroyed](h, ns, name, time.Minute, nil)
	if d.GetDestroyedCount() != 1 {
		t.Errorf("destroyed %d after the collections, want 1", d.GetDestroyedCount())
	}
	t.Logf("100 generations: up to %d artifacts between collections, at most %d after each", grew, kept)
}

// TestApplier_collectKeepsYoungAndHeld: a collection with a minimum age keeps what was put
// within it, and a held plan's artifacts whatever their age.
func TestApplier_collectKeepsYoungAndHeld(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	src := `(deflava-architecture held :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}")))`
	h.observe("demo", "held", 1, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
		Bindings: map[string]string{"v": "1"}, Engine: lavav1.Engine_ENGINE_EMBEDDED, ApprovePlan: "manual"})
	p := await(h, "demo", "held", time.Minute, gen[*lavav1.Planned](1))
	n := objects(t, h.js)
	if res, err := applier.CollectArtifacts(t.Context(), h.js, time.Hour, h.log); err != nil || res.Deleted != 0 {
		t.Fatalf("collection with a 1h minimum age deleted %d (%v), want none", res.Deleted, err)
	}
	if _, err := applier.CollectArtifacts(t.Context(), h.js, 0, h.log); err != nil {
		t.Fatal(err)
	}
	art, err := bus.NewArtifacts(t.Context(), h.js)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := art.Has(t.Context(), p.GetPlanArtifactDigest()); err != nil || !ok {
		t.Fatalf("the held plan's artifact was collected (%v); %d objects before", err, n)
	}
	// Approving it still applies.
	h.observe("demo", "held", 2, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
		Bindings: map[string]string{"v": "1"}, Engine: lavav1.Engine_ENGINE_EMBEDDED, ApprovePlan: p.GetPlanId()})
	if a := await(h, "demo", "held", time.Minute, gen[*lavav1.Applied](2)); a.GetPlanId() != p.GetPlanId() {
		t.Errorf("applied %s, want the held %s", a.GetPlanId(), p.GetPlanId())
	}
}

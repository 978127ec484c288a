//go:build integration

package applier_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// slowKitSource is one testkit_file whose create waits {delay} ms first (cancellable).
const slowKitSource = `(deflava-architecture slow
  :inputs ((:dir "/tmp") (:delay "0"))
  :providers ((testkit :source "example/testkit"))
  :resources ((testkit-file "a" :filename "{dir}/a.txt" :content "a\n" :create-delay-ms delay)))
`

// TestApplier_namespaceShareAttack is the trial's hold on the handlers: four objects of one
// namespace whose creates take ten minutes (a provider call that sleeps, as a hung endpoint
// would) are planned first. They hold at most their namespace's share of the applier's four
// handlers (two); another namespace's object, observed after them, is applied while they are
// still creating.
func TestApplier_namespaceShareAttack(t *testing.T) { slowNamespaceAttack(t, 4) }

// TestApplier_namespaceFloodAttack is the same with more slow objects than the consumer's
// first backlog held (64): a later trial's 72 filled it, the pull stopped, and another
// tenant's object waited for the attacker's creates. The backlog is the consumer's
// MaxAckPending now, so the victim's object is applied while the attacker's wait.
func TestApplier_namespaceFloodAttack(t *testing.T) { slowNamespaceAttack(t, 80) }

// slowNamespaceAttack observes `objects` slow objects of namespace "attacker" whose creates
// take ten minutes, waits for two creates to start, then checks that an object of namespace
// "victim" observed after them is applied while no other attacker create has started.
func slowNamespaceAttack(t *testing.T, objects int) {
	h := newHarness(t)
	h.startApplier(applierOpts{testkit: true, concurrency: 4, drainTimeout: time.Second})
	dir := t.TempDir()
	started := func() (n int) {
		for i := range objects {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("slow-%d", i), "a.txt.create-started")); err == nil {
				n++
			}
		}
		return n
	}
	for i := range objects {
		sub := filepath.Join(dir, fmt.Sprintf("slow-%d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		h.observe("attacker", fmt.Sprintf("slow-%d", i), 1, &lavav1.ArchitectureSpec{
			Source:   &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: slowKitSource}},
			Bindings: map[string]string{"dir": sub, "delay": "600000"}, Engine: lavav1.Engine_ENGINE_EMBEDDED})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for started() < 2 || len(events[*lavav1.Synthesized](h, "attacker", fmt.Sprintf("slow-%d", objects-1))) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the attacker's creates started in 2m, want 2, and its last object rendered:\n%s", started(), h.describe("attacker", "slow-0"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	victim := t.TempDir()
	h.observe("victim", "fast", 1, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: kitSource}},
		Bindings: map[string]string{"dir": victim}, Engine: lavav1.Engine_ENGINE_EMBEDDED})
	await(h, "victim", "fast", 2*time.Minute, gen[*lavav1.Applied](1))
	if n := started(); n != 2 {
		t.Fatalf("%d of the attacker's creates had started when the victim's object was applied, want its share of 2", n)
	}
}

// TestApplier_supersededGenerationAttack: spec edits of one object, each a generation of its
// own, queued one Synthesized after another; the applier planned and applied every superseded
// generation in turn (an attack trial queued 90 of them, each a slow create, ahead of another
// tenant's object). A Synthesized whose generation is older than the object's newest observed
// one is not planned: only the newest generation is applied.
func TestApplier_supersededGenerationAttack(t *testing.T) {
	h := newHarness(t)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	// Each generation is observed once synth rendered the one before: synth drops a generation
	// older than one it already took (its watermark), so three observations at once may render
	// only the newest, and the attack needs three Synthesized queued.
	for i, dir := range dirs {
		h.observe("attacker", "edited", int64(i+1), &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: kitSource}},
			Bindings: map[string]string{"dir": dir}, Engine: lavav1.Engine_ENGINE_EMBEDDED})
		deadline := time.Now().Add(time.Minute)
		for len(events[*lavav1.Synthesized](h, "attacker", "edited")) < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("synth did not render generation %d in 1m:\n%s", i+1, h.describe("attacker", "edited"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// One worker: the Synthesized events are handled in stream order, oldest first.
	h.startApplier(applierOpts{testkit: true, concurrency: 1})
	await(h, "attacker", "edited", 2*time.Minute, gen[*lavav1.Applied](3))
	for _, p := range events[*lavav1.Planned](h, "attacker", "edited") {
		if g := p.GetEnvelope().GetGeneration(); g != 3 {
			t.Errorf("generation %d was planned, superseded by generation 3", g)
		}
	}
	for _, dir := range dirs[:2] {
		if n := creates(t, filepath.Join(dir, "a.txt")); n != 0 {
			t.Errorf("%s/a.txt created %d times by a superseded generation", dir, n)
		}
	}
}

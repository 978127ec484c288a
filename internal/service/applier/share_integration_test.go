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
func TestApplier_namespaceShareAttack(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{testkit: true, concurrency: 4, drainTimeout: time.Second})
	dir := t.TempDir()
	started := func() (n int) {
		for i := range 4 {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("slow-%d", i), "a.txt.create-started")); err == nil {
				n++
			}
		}
		return n
	}
	for i := range 4 {
		sub := filepath.Join(dir, fmt.Sprintf("slow-%d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		h.observe("attacker", fmt.Sprintf("slow-%d", i), 1, &lavav1.ArchitectureSpec{
			Source:   &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: slowKitSource}},
			Bindings: map[string]string{"dir": sub, "delay": "600000"}, Engine: lavav1.Engine_ENGINE_EMBEDDED})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for started() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the attacker's creates started in 2m, want 2:\n%s", started(), h.describe("attacker", "slow-0"))
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

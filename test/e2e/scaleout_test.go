//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/test/e2e/harness"
)

// createKits creates kit-000..kit-<n-1> in ns from clusterSource, each with its own directory
// under root (the testkit_file's create counter is <dir>/kit.txt.creates).
func createKits(ctx context.Context, t *testing.T, kc client.Client, ns, root string, n int, delay time.Duration) {
	t.Helper()
	if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		createKit(ctx, t, kc, ns, root, i, delay, v1alpha1.EngineEmbedded)
	}
}

// createKit creates kit-<i> (three digits) in ns from clusterSource on engine, its testkit_file's
// Create taking delay, in the directory <root>/o<i>.
func createKit(ctx context.Context, t *testing.T, kc client.Client, ns, root string, i int, delay time.Duration, engine v1alpha1.Engine) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprintf("o%03d", i))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	la := &v1alpha1.LavaArchitecture{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("kit-%03d", i)},
		Spec: v1alpha1.LavaArchitectureSpec{
			Source:   v1alpha1.Source{Inline: clusterSource},
			Bindings: map[string]string{"dir": dir, "delay": strconv.FormatInt(delay.Milliseconds(), 10)},
			Engine:   engine,
		},
	}
	if err := kc.Create(ctx, la); err != nil {
		t.Fatalf("create %s: %v", la.Name, err)
	}
}

// countApplied returns how many objects of ns are Applied at their generation, and a summary.
func countApplied(ctx context.Context, kc client.Client, ns string, n int) (int, string) {
	var list v1alpha1.LavaArchitectureList
	if err := kc.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err.Error()
	}
	c := 0
	phases := map[v1alpha1.Phase]int{}
	for _, la := range list.Items {
		phases[la.Status.Phase]++
		if la.Status.Phase == v1alpha1.PhaseApplied && la.Status.ObservedGeneration == la.Generation {
			c++
		}
	}
	return c, fmt.Sprintf("%d of %d Applied; phases %v", c, n, phases)
}

// checkCreatedOnce fails for every kit whose testkit_file was not created exactly once; it
// returns how many were.
func checkCreatedOnce(t *testing.T, root string, n int) int {
	t.Helper()
	once := 0
	for i := range n {
		b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("o%03d", i), "kit.txt.creates"))
		if err != nil {
			t.Errorf("kit-%03d: %v", i, err)
			continue
		}
		if c, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || c != 1 {
			t.Errorf("kit-%03d: testkit_file created %q times, want exactly once", i, strings.TrimSpace(string(b)))
			continue
		}
		once++
	}
	return once
}

// phaseRank orders the outcome phases of one generation's way through the pipeline.
var phaseRank = map[string]int{"PENDING": 0, "SYNTHESIZED": 1, "PLANNED": 2, "APPLYING": 3, "APPLIED": 4}

// checkPhaseOrder reads kit-000..kit-<n-1>'s receipt chains in ns with `lava receipts show` and
// fails for every chain whose outcome phases are not in pipeline order (phaseRank) or that holds
// no APPLIED.
func checkPhaseOrder(ctx context.Context, t *testing.T, env *harness.Env, ns string, n int) {
	t.Helper()
	for i := range n {
		r := fmt.Sprintf("%s/kit-%03d", ns, i)
		out, err := env.Lava(ctx, "receipts", "show", r, "--nats-url", env.NATSURL)
		if err != nil {
			t.Errorf("%s: lava receipts show: %v", r, err)
			continue
		}
		last, inOrder, seq := -1, true, []string{}
		for line := range strings.Lines(out) {
			f := strings.Split(strings.TrimSpace(line), "\t")
			if len(f) < 4 {
				continue
			}
			ph := strings.SplitN(f[3], "/", 2)[0]
			rank, ok := phaseRank[ph]
			if !ok {
				continue
			}
			seq = append(seq, ph)
			inOrder = inOrder && rank >= last
			last = rank
		}
		if !inOrder {
			t.Errorf("%s: receipt chain out of phase order: %v", r, seq)
		}
		if !slices.Contains(seq, "APPLIED") {
			t.Errorf("%s: receipt chain %v holds no APPLIED", r, seq)
		}
	}
}

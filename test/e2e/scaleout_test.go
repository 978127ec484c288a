//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// createKits creates kit-000..kit-<n-1> in ns from clusterSource, each with its own directory
// under root (the testkit_file's create counter is <dir>/kit.txt.creates).
func createKits(ctx context.Context, t *testing.T, kc client.Client, ns, root string, n int, delay time.Duration) {
	t.Helper()
	if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("o%03d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		la := &v1alpha1.LavaArchitecture{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("kit-%03d", i)},
			Spec: v1alpha1.LavaArchitectureSpec{
				Source:   v1alpha1.Source{Inline: clusterSource},
				Bindings: map[string]string{"dir": dir, "delay": strconv.FormatInt(delay.Milliseconds(), 10)},
				Engine:   v1alpha1.EngineEmbedded,
			},
		}
		if err := kc.Create(ctx, la); err != nil {
			t.Fatalf("create %s: %v", la.Name, err)
		}
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

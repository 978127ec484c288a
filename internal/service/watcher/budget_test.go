package watcher

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// TestSecretBudget: a generation's first reads are free, rechecks are charged to their
// namespace and put off (with the wait) once it is spent, nothing is taken by a put-off
// recheck, and another namespace has its own budget.
func TestSecretBudget(t *testing.T) {
	t.Parallel()
	b := newSecretBudget(1, 64)
	now := time.Unix(0, 0)
	obj := func(ns, name string, gen int64) *v1alpha1.LavaArchitecture {
		return &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("u-" + ns + name), Generation: gen}}
	}
	a := obj("a", "x", 1)
	if d := b.take(a, 32, now); d != 0 {
		t.Fatalf("first reads of a generation: put off %v", d)
	}
	for i := range 2 {
		if d := b.take(a, 32, now); d != 0 {
			t.Fatalf("recheck %d within the burst: put off %v", i, d)
		}
	}
	d := b.take(a, 32, now)
	if d < 31*time.Second || d > 33*time.Second {
		t.Fatalf("recheck past the burst: put off %v, want about 32 s at 1 a second", d)
	}
	if d2 := b.take(a, 32, now); d2 != d {
		t.Errorf("a put-off recheck took reads: the next waits %v, want %v", d2, d)
	}
	if d := b.take(obj("a", "x", 2), 32, now); d != 0 {
		t.Errorf("a new generation's first reads: put off %v", d)
	}
	other := obj("b", "y", 1)
	b.take(other, 32, now)
	if d := b.take(other, 32, now); d != 0 {
		t.Errorf("another namespace's recheck: put off %v", d)
	}
	if d := b.take(a, 32, now.Add(32*time.Second)); d != 0 {
		t.Errorf("recheck after the wait: put off %v", d)
	}
	if newSecretBudget(-1, 0).take(a, 32, now) != 0 {
		t.Error("no budget put a recheck off")
	}
}

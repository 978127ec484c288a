package embedded

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waits reports whether reserve(ns, n) waits (until a short deadline) instead of returning.
func waits(t *testing.T, b *ProcessBudget, ns string, n int) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := b.reserve(ctx, ns, n)
	if err == nil {
		b.unreserve(ns, n)
		return false
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reserve(%s, %d): %v", ns, n, err)
	}
	return true
}

// TestProcessBudget_firstInFirstOut: operations get their shares in the order they asked, so
// a stream of small operations cannot keep a larger one waiting forever: with 2 of 4
// processes free, an operation asking for 1 waits behind one asking for 4.
func TestProcessBudget_firstInFirstOut(t *testing.T) {
	t.Parallel()
	b := NewProcessBudget(4, nil)
	if err := b.reserve(t.Context(), "a", 2); err != nil {
		t.Fatal(err)
	}
	large := make(chan error, 1)
	go func() { large <- b.reserve(t.Context(), "b", 4) }()
	// The large operation is queued once a small one no longer gets in at once.
	for b.tryReserve("c", 1) {
		b.unreserve("c", 1)
		time.Sleep(time.Millisecond)
	}
	if !waits(t, b, "c", 1) {
		t.Error("a small operation behind a waiting large one did not wait")
	}
	b.unreserve("a", 2)
	if err := <-large; err != nil {
		t.Errorf("large operation: %v", err)
	}
}

// TestProcessBudget_namespaceShare: one namespace holds at most half the budget; its next
// operation waits for its own share and holds up no other namespace's, which gets its
// processes at once; the waiting one gets its share when its namespace gives some back. An
// operation of a namespace that holds nothing may take more than half (a budget smaller than
// twice the configurations an operation may use still runs it). Checked to fail without the
// share: the second operation of 16 took the rest of the budget and the other namespace's
// operation waited.
func TestProcessBudget_namespaceShare(t *testing.T) {
	t.Parallel()
	b := NewProcessBudget(32, nil)
	if err := b.reserve(t.Context(), "hog", 16); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() { second <- b.reserve(t.Context(), "hog", 16) }()
	if !waits(t, b, "hog", 1) {
		t.Error("the namespace holding half the budget got one more process")
	}
	if waits(t, b, "victim", 16) {
		t.Error("another namespace's operation waited behind the namespace at its share")
	}
	if !b.tryReserve("victim", 1) || b.tryReserve("hog", 1) {
		t.Error("tryReserve: want room for the other namespace, none for the one at its share")
	}
	b.unreserve("victim", 1)
	select {
	case err := <-second:
		t.Fatalf("the namespace's second operation of 16 did not wait for its share: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.unreserve("hog", 16)
	if err := <-second; err != nil {
		t.Fatalf("the namespace's second operation once the first ended: %v", err)
	}

	small := NewProcessBudget(4, nil)
	if err := small.reserve(t.Context(), "a", 4); err != nil {
		t.Errorf("an operation of the whole budget, its namespace holding nothing: %v", err)
	}
	if !waits(t, small, "b", 1) {
		t.Error("the budget is full, yet another operation got a process")
	}
}

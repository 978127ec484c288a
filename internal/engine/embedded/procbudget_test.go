package embedded

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestProcessBudget_firstInFirstOut: operations get their shares in the order they asked, so
// a stream of small operations (one namespace's) cannot keep a larger one waiting forever: with
// 2 of 4 processes free, an operation asking for 1 waits behind one asking for 4.
func TestProcessBudget_firstInFirstOut(t *testing.T) {
	t.Parallel()
	b := NewProcessBudget(4, nil)
	if err := b.reserve(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	large := make(chan error, 1)
	go func() { large <- b.reserve(t.Context(), 4) }()
	// The large operation is queued once a small one no longer gets in at once.
	for b.tryReserve(1) {
		b.unreserve(1)
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := b.reserve(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("small operation behind a waiting large one: %v; want it to wait (context deadline)", err)
	}
	b.unreserve(2)
	if err := <-large; err != nil {
		t.Errorf("large operation: %v", err)
	}
}

package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
)

// TestBounded: the step timeout ends an operation by cancelling its context, never by a
// context deadline (under a deadline nats.go's jetstream waits for a lost reply until the
// deadline, not its 5 s request timeout: a plan under natsPodDeleted of the cluster test held
// its handler until NATS restarted), and the operation's error then names the step and the
// timeout; an operation that ends in time keeps its own result.
func TestBounded(t *testing.T) {
	t.Parallel()
	_, err := bounded(t.Context(), "plan", 50*time.Millisecond, func(ctx context.Context) (int, error) {
		if d, ok := ctx.Deadline(); ok {
			t.Errorf("the operation's context has a deadline (%v): nats.go would wait for it", d)
		}
		<-ctx.Done()
		return 0, ctx.Err()
	})
	var te *engine.StepTimeoutError
	if !errors.As(err, &te) || te.Step != "plan" || te.After != 50*time.Millisecond {
		t.Fatalf("error %v, want a StepTimeoutError of plan after 50ms", err)
	}
	n, err := bounded(t.Context(), "apply", time.Minute, func(context.Context) (int, error) { return 7, nil })
	if n != 7 || err != nil {
		t.Fatalf("bounded = %d, %v; want 7, nil", n, err)
	}
}

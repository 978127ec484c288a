package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// TestRetrySave: a save that fails for want of the bus is tried again until it succeeds; one
// the store refuses is not; the bound ends the retries with the last error.
func TestRetrySave(t *testing.T) {
	saveRetry = bus.Backoff{Base: time.Millisecond, Max: 2 * time.Millisecond}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	transient := fmt.Errorf("state x/y: store body: %w", nats.ErrNoResponders)

	calls := 0
	err := retrySave(t.Context(), log, func() error {
		calls++
		if calls < 3 {
			return transient
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("transient failures: err %v after %d calls, want nil after 3", err, calls)
	}

	for _, refused := range []error{&state.LockedError{Key: state.Key{Namespace: "x", Name: "y"}}, fmt.Errorf("w: %w", state.ErrConflict), state.ErrInvalidState} {
		calls = 0
		err = retrySave(t.Context(), log, func() error { calls++; return refused })
		if !errors.Is(err, refused) || calls != 1 {
			t.Errorf("%v: err %v after %d calls, want it at once", refused, err, calls)
		}
	}

	old := saveRetryFor
	saveRetryFor = 20 * time.Millisecond
	defer func() { saveRetryFor = old }()
	calls = 0
	err = retrySave(t.Context(), log, func() error { calls++; return transient })
	if !errors.Is(err, nats.ErrNoResponders) || calls < 2 {
		t.Errorf("bounded: err %v after %d calls, want the last error after several", err, calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls = 0
	if err = retrySave(ctx, log, func() error { calls++; return transient }); calls != 1 || err == nil {
		t.Errorf("cancelled: err %v after %d calls, want the error after 1", err, calls)
	}
}

package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
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

// TestRunner_builtinSavedOnce: terraform_data objects exist only in the state, so an apply
// that makes only them writes the state once, at the end, with all of them; an apply that
// fails part-way still writes what it made.
func TestRunner_builtinSavedOnce(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	doc := `{"resource":{"terraform_data":{"a":{"input":"1"},"b":{"input":"${terraform_data.a.id}"},"c":{"count":3,"input":"${count.index}"}}}}`
	if _, err := h.apply(t, doc, nil); err != nil {
		t.Fatal(err)
	}
	if h.saves != 1 {
		t.Errorf("an apply of 5 terraform_data instances wrote the state %d times, want 1", h.saves)
	}
	if got := resourceNames(h.state); got != "terraform_data.a terraform_data.b terraform_data.c" {
		t.Errorf("state holds %q, want a, b and c", got)
	}

	// A failure part-way (a postcondition after the first instance) keeps what was made.
	h2 := newMemHarness(t, t.TempDir())
	bad := `{"resource":{"terraform_data":{"a":{"input":"1"},"b":{"input":"${terraform_data.a.output}",
	  "lifecycle":{"postcondition":[{"condition":"${self.output == \"2\"}","error_message":"b is not 2"}]}}}}}`
	if _, err := h2.apply(t, bad, nil); err == nil || !strings.Contains(err.Error(), "b is not 2") {
		t.Fatalf("apply error = %v, want b's postcondition", err)
	}
	if got := resourceNames(h2.state); got != "terraform_data.a terraform_data.b" {
		t.Errorf("state after the failed apply holds %q, want both objects made", got)
	}
}

// resourceNames lists st's resources as TYPE.NAME, space-separated, in state order.
func resourceNames(st *State) string {
	var out []string
	for _, r := range st.Resources {
		out = append(out, r.Type+"."+r.Name)
	}
	return strings.Join(out, " ")
}

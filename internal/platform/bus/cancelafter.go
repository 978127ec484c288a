package bus

import (
	"context"
	"fmt"
	"time"
)

// CancelAfter returns a copy of ctx that is cancelled d after the call, or when ctx ends, and
// the function that releases it. Its context.Cause after d wraps context.DeadlineExceeded.
//
// Use it instead of context.WithTimeout for a context that JetStream calls run under: nats.go's
// jetstream package bounds each API request by its DefaultTimeout (5s unless configured) only
// when the caller's context has no deadline. Under a deadline of minutes or hours, a request
// whose reply was lost (sent as a server restarted) waits for all of it; under CancelAfter it
// fails at the default timeout and the caller's retry takes over.
func CancelAfter(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(d, func() { cancel(fmt.Errorf("bus: ran past %v: %w", d, context.DeadlineExceeded)) })
	return cctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

package applier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// withLease runs fn under the resource's lease, taken without waiting, renewing it every
// TTL/3; fn's context ends if the lease is lost. A lease held by another replica is
// bus.ErrLeaseHeld (wrapped): the message is naked and redelivered after the consumer's
// backoff.
func (s *Service) withLease(ctx context.Context, namespace, name string, fn func(ctx context.Context, lease *bus.Lease) error) error {
	lease, err := s.leases.Acquire(ctx, namespace, name)
	if errors.Is(err, bus.ErrLeaseHeld) {
		s.metrics.contended.Inc()
		return fmt.Errorf("applier: %s/%s: %w", namespace, name, bus.ErrLeaseHeld)
	}
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var lost error
	ttl := s.leases.TTL()
	wg.Go(func() {
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if err := lease.Renew(fctx); errors.Is(err, bus.ErrLeaseLost) || !lease.Valid() {
					lost = fmt.Errorf("applier: %s/%s: %w", namespace, name, bus.ErrLeaseLost)
					cancel(lost)
					return
				}
			}
		}
	})
	ferr := fn(fctx, lease)
	close(stop)
	wg.Wait()
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	rerr := lease.Release(rctx)
	switch {
	case ferr != nil:
		return ferr
	case lost != nil:
		return lost
	case errors.Is(rerr, bus.ErrLeaseLost):
		return rerr
	}
	return nil
}

// HolderAlive returns a state.HolderAlive over lava-leases: a lock holder of the form
// bus.Lease.LockHolder ("<replica>~<acquired>@<lease key>") is alive while the lease of that
// key is held by that replica under that acquisition, and gone (its lock taken over at once)
// when the lease expired, was released, or is held by another replica or under a later
// acquisition. A holder of another form gives state.ErrHolderUnknown (only its lock age can
// expire it); a lease that cannot be read gives the read error (the lock stays held).
func HolderAlive(leases jetstream.KeyValue) func(ctx context.Context, holder string) (bool, error) {
	return func(ctx context.Context, holder string) (bool, error) {
		replica, acquired, key, ok := bus.ParseLockHolder(holder)
		if !ok {
			return true, state.ErrHolderUnknown
		}
		e, err := leases.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return false, nil
		}
		if err != nil {
			return true, err
		}
		held, err := bus.HeldUnder(e.Value(), replica, acquired)
		if err != nil {
			return true, fmt.Errorf("lease %s: %w", key, err)
		}
		return held, nil
	}
}

package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Lease errors.
var (
	// ErrLeaseHeld: another holder holds the resource's lease. Transient: retry later.
	ErrLeaseHeld = errors.New("bus: lease held by another holder")
	// ErrLeaseLost: the lease expired or was taken over before a renewal or release; whatever
	// the holder was doing must stop.
	ErrLeaseLost = errors.New("bus: lease lost")
)

// leaseValue is the JSON stored under a lease key. The server-side TTL of the bucket, not
// these times, decides expiry; they are for operators (`nats kv get lava-leases KEY`).
type leaseValue struct {
	Holder    string    `json:"holder"`
	Acquired  time.Time `json:"acquired"`
	RenewedAt time.Time `json:"renewed"`
}

// Leases hands out per-resource work leases over the lava-leases bucket. A lease is the key
// [ResourceKey](namespace, name); it is acquired with KV Create (fails if present), renewed
// with Update on the revision the holder last wrote (fails if anyone else wrote since), and
// released with a revision-checked Delete. The bucket's TTL ([TopologyOptions].LeaseTTL,
// enforced by the server's clock) expires a lease its holder stopped renewing, and a holder
// considers its lease valid only until TTL after it sent its last successful write, which is
// never later than the server's expiry: two holders never hold one lease at once.
type Leases struct {
	kv      jetstream.KeyValue
	holder  string
	ttl     time.Duration
	metrics *Metrics
}

// NewLeases binds lava-leases for holder (a replica's identity, such as its pod name; it is
// stored in the lease for operators). m may be nil.
func NewLeases(ctx context.Context, js jetstream.JetStream, holder string, m *Metrics) (*Leases, error) {
	kv, err := js.KeyValue(ctx, BucketLeases)
	if err != nil {
		return nil, fmt.Errorf("bus: bind %s: %w", BucketLeases, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("bus: status of %s: %w", BucketLeases, err)
	}
	if st.TTL() <= 0 {
		return nil, fmt.Errorf("bus: %s has no TTL: leases would never expire", BucketLeases)
	}
	return &Leases{kv: kv, holder: holder, ttl: st.TTL(), metrics: m}, nil
}

// LockHolder is the state-lock holder name of this lease's holder working on its resource:
// "<replica>~<acquired>@<ResourceKey>", acquired being the lease's acquisition time in Unix
// nanoseconds (kept in the lease's value across renewals). A lock held under such a name lives
// exactly as long as this lease: the applier's state store takes it over as soon as the lease
// expired, was released, or is held by another replica or under a later acquisition (a lock a
// failed operation of the same replica left behind is not the next operation's);
// internal/service/applier HolderAlive.
func (ls *Lease) LockHolder() string {
	return ls.ls.holder + "~" + strconv.FormatInt(ls.acquired.UTC().UnixNano(), 10) + "@" + ls.key
}

// ParseLockHolder inverts [Lease.LockHolder]; acquired is 0 for a name without the
// acquisition ("<replica>@<key>"); ok is false for a name of another form.
func ParseLockHolder(holder string) (replica string, acquired int64, key string, ok bool) {
	i := strings.LastIndexByte(holder, '@')
	if i <= 0 || i == len(holder)-1 {
		return "", 0, "", false
	}
	if _, _, err := ParseResourceKey(holder[i+1:]); err != nil {
		return "", 0, "", false
	}
	replica, key = holder[:i], holder[i+1:]
	if j := strings.LastIndexByte(replica, '~'); j > 0 {
		if n, err := strconv.ParseInt(replica[j+1:], 10, 64); err == nil {
			return replica[:j], n, key, true
		}
	}
	return replica, 0, key, true
}

// HeldUnder reports whether the lease value v (the JSON stored under a lease key) is held by
// replica under the acquisition acquired (Unix nanoseconds; 0 matches any acquisition).
func HeldUnder(v []byte, replica string, acquired int64) (bool, error) {
	var lv leaseValue
	if err := json.Unmarshal(v, &lv); err != nil {
		return false, fmt.Errorf("bus: decode lease: %w", err)
	}
	return lv.Holder == replica && (acquired == 0 || lv.Acquired.UnixNano() == acquired), nil
}

// TTL is the lease lifetime without renewal.
func (l *Leases) TTL() time.Duration { return l.ttl }

// Lease is one held lease. Its methods are safe for concurrent use.
type Lease struct {
	ls       *Leases
	key      string
	acquired time.Time

	mu       sync.Mutex
	rev      uint64
	deadline time.Time
	done     bool
}

// Acquire takes the lease of a resource. It fails with [ErrLeaseHeld] (wrapped) if another
// holder has it, and does not wait.
func (l *Leases) Acquire(ctx context.Context, namespace, name string) (*Lease, error) {
	key := ResourceKey(namespace, name)
	now := time.Now()
	val, err := json.Marshal(leaseValue{Holder: l.holder, Acquired: now.UTC(), RenewedAt: now.UTC()})
	if err != nil {
		return nil, fmt.Errorf("bus: lease %s: %w", key, err)
	}
	rev, err := l.kv.Create(ctx, key, val)
	if errors.Is(err, jetstream.ErrKeyExists) {
		l.metrics.inc(func(m *Metrics) prometheus.Counter { return m.leaseContended })
		return nil, fmt.Errorf("%w: %s", ErrLeaseHeld, key)
	}
	if err != nil {
		return nil, fmt.Errorf("bus: acquire lease %s: %w", key, err)
	}
	l.metrics.inc(func(m *Metrics) prometheus.Counter { return m.leaseAcquired })
	l.metrics.held(1)
	return &Lease{ls: l, key: key, acquired: now, rev: rev, deadline: now.Add(l.ttl)}, nil
}

// Key is the lease's KV key.
func (ls *Lease) Key() string { return ls.key }

// Deadline is when the lease ends unless renewed (local clock, conservative).
func (ls *Lease) Deadline() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.deadline
}

// Valid reports whether the lease is still held: not released, not lost, before its deadline.
func (ls *Lease) Valid() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return !ls.done && time.Now().Before(ls.deadline)
}

// Renew extends the lease by the TTL. It fails with [ErrLeaseLost] (wrapped) if the lease
// expired, was released, or was taken by another holder; the lease is then invalid.
func (ls *Lease) Renew(ctx context.Context) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.done {
		return fmt.Errorf("%w: %s: released", ErrLeaseLost, ls.key)
	}
	now := time.Now()
	if !now.Before(ls.deadline) {
		ls.lostLocked()
		return fmt.Errorf("%w: %s: expired", ErrLeaseLost, ls.key)
	}
	val, err := json.Marshal(leaseValue{Holder: ls.ls.holder, Acquired: ls.acquired.UTC(), RenewedAt: now.UTC()})
	if err != nil {
		return fmt.Errorf("bus: lease %s: %w", ls.key, err)
	}
	rev, err := ls.ls.kv.Update(ctx, ls.key, val, ls.rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) {
		ls.lostLocked()
		return fmt.Errorf("%w: %s: %w", ErrLeaseLost, ls.key, err)
	}
	if err != nil {
		// Unknown outcome: the old deadline still bounds the lease.
		return fmt.Errorf("bus: renew lease %s: %w", ls.key, err)
	}
	ls.rev, ls.deadline = rev, now.Add(ls.ls.ttl)
	return nil
}

func (ls *Lease) lostLocked() {
	ls.done = true
	ls.ls.metrics.inc(func(m *Metrics) prometheus.Counter { return m.leaseLost })
	ls.ls.metrics.held(-1)
}

// Release gives the lease up if this holder still has it (a revision-checked delete). It is a
// no-op after a previous Release or loss. A lease that already expired and was taken by
// another holder is left alone and reported as [ErrLeaseLost].
func (ls *Lease) Release(ctx context.Context) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.done {
		return nil
	}
	err := ls.ls.kv.Delete(ctx, ls.key, jetstream.LastRevision(ls.rev))
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) {
		ls.lostLocked()
		return fmt.Errorf("%w: %s: %w", ErrLeaseLost, ls.key, err)
	}
	if err != nil {
		return fmt.Errorf("bus: release lease %s: %w", ls.key, err)
	}
	ls.done = true
	ls.ls.metrics.inc(func(m *Metrics) prometheus.Counter { return m.leaseReleased })
	ls.ls.metrics.held(-1)
	return nil
}

// Hold acquires the resource's lease, runs fn while renewing it every TTL/3, and releases it
// when fn returns. If another holder has the lease, Hold polls for it (5ms doubling to 250ms)
// for up to one TTL before giving up with [ErrLeaseHeld] (wrapped) without running fn; a
// handler returns that error so the message is redelivered later. fn's context is cancelled
// if the lease is lost or its deadline passes without a renewal, so fn must stop acting when
// its context is done. Hold returns fn's error, or [ErrLeaseLost] (wrapped) if fn succeeded but
// the lease was lost while it ran.
func (l *Leases) Hold(ctx context.Context, namespace, name string, fn func(ctx context.Context) error) (err error) {
	lease, err := l.acquireWait(ctx, namespace, name)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var lostErr error
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(l.ttl / 3)
		defer tick.Stop()
		for {
			timer := time.NewTimer(time.Until(lease.Deadline()))
			select {
			case <-stop:
				timer.Stop()
				return
			case <-timer.C:
				lostErr = fmt.Errorf("%w: %s: deadline passed without renewal", ErrLeaseLost, lease.key)
				cancel(lostErr)
				return
			case <-tick.C:
				timer.Stop()
				if err := lease.Renew(fctx); errors.Is(err, ErrLeaseLost) {
					lostErr = err
					cancel(err)
					return
				}
			}
		}
	})
	// Deferred, so that a panicking fn still stops the renewals and releases the lease.
	defer func() {
		close(stop)
		wg.Wait()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), defaultCleanupTimeout)
		rerr := lease.Release(rctx)
		rcancel()
		if err == nil {
			switch {
			case lostErr != nil:
				err = lostErr
			case errors.Is(rerr, ErrLeaseLost):
				err = rerr
			}
		}
	}()
	return fn(fctx)
}

// acquireWait is Acquire, retried while the lease is held, for up to one TTL.
func (l *Leases) acquireWait(ctx context.Context, namespace, name string) (*Lease, error) {
	giveUp := time.Now().Add(l.ttl)
	delay := 5 * time.Millisecond
	for {
		lease, err := l.Acquire(ctx, namespace, name)
		if err == nil || !errors.Is(err, ErrLeaseHeld) || time.Now().Add(delay).After(giveUp) {
			return lease, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("bus: wait for lease %s: %w", ResourceKey(namespace, name), ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

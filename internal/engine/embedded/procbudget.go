package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/lava-operator/lava/internal/engine"
)

// DefaultMaxProcesses is the provider processes a [ProcessBudget] lets run at once when none
// is given. Each is a process of its own in the applier's or drift scanner's container: a
// configured hashicorp/local measured about 20 MB of RSS of its own (16 of them: 331 MB) and
// about 55 MB of the container's with the engine's side of it (64 of them, four plans of 16
// aliases at once, took 3.5 GB), so 32 such processes take about 1.8 GB, within the 2 GiB the
// chart gives the applier, and two operations at [engine.MaxProviderConfigurations] run at
// once. Larger providers take more each: the budget is sized to the container's memory limit.
const DefaultMaxProcesses = 32

// ProcessBudget bounds the provider processes running at once across every operation of the
// pools that share it (one per service process: the applier's engine, drift's, or both under
// `lava up`): started or starting, leased or kept warm.
//
// An operation reserves its share before its first process starts: as many processes as the
// provider configurations it may use (those its configuration declares and uses, and those of
// the objects its state holds), at most the budget. It waits for the share in first-in,
// first-out order with the operations before it, bounded by its context, and returns it when
// it ends. Since no operation waits while it holds a process, operations never wait on each
// other in a circle; and since the shares in use never add up past the budget, a process an
// operation starts within its share finds room, after the least recently used idle (warm)
// processes are stopped. An operation that may use more configurations than the whole budget
// fails at once ([engine.ErrEvaluationLimit]) instead of waiting for room that never comes.
//
// One namespace's operations hold at most half the budget (rounded up) at once: a tenant's
// slow operations (creates that take minutes, each with many provider configurations) cannot
// take every process while another tenant's plan waits for one. An operation of a namespace
// that holds nothing may take more than half, up to the budget, so a budget smaller than twice
// [engine.MaxProviderConfigurations] still runs every operation; at the default budget half is
// [engine.MaxProviderConfigurations] and no operation needs that. An operation waiting for its
// namespace's share does not hold up those behind it of other namespaces.
// docs/design/0043-provider-process-budget.md. Safe for concurrent use.
type ProcessBudget struct {
	max int
	log *slog.Logger

	// resMu guards the reservations: used in all, held per namespace, and the operations
	// waiting for theirs, in the order they asked.
	resMu   sync.Mutex
	used    int
	held    map[string]int
	waiters []*budgetWaiter

	mu sync.Mutex
	// running counts the processes started or starting and not yet stopped.
	running int
	// stopped is closed, and replaced, whenever running drops.
	stopped chan struct{}
	// pools are the pools whose idle processes make room.
	pools []*Pool
}

// budgetWaiter is an operation waiting for its share: n processes for namespace ns; ready is
// closed when they are reserved.
type budgetWaiter struct {
	ns    string
	n     int
	ready chan struct{}
}

// NewProcessBudget returns a budget of max provider processes at once (<= 0 means
// [DefaultMaxProcesses]); log receives a line when an operation waits for its share (nil:
// discard).
func NewProcessBudget(max int, log *slog.Logger) *ProcessBudget {
	if max <= 0 {
		max = DefaultMaxProcesses
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ProcessBudget{max: max, log: log, held: map[string]int{}, stopped: make(chan struct{})}
}

// attach makes p's idle processes count in the budget and make room in it.
func (b *ProcessBudget) attach(p *Pool) {
	b.mu.Lock()
	b.pools = append(b.pools, p)
	b.mu.Unlock()
}

// perNamespace is the share of the budget one namespace holds at most: half, rounded up.
func (b *ProcessBudget) perNamespace() int { return (b.max + 1) / 2 }

// underShare reports whether namespace ns may reserve n more processes as far as its own share
// goes (resMu held): within half the budget, or any n when it holds none.
func (b *ProcessBudget) underShare(ns string, n int) bool {
	h := b.held[ns]
	return h == 0 || h+n <= b.perNamespace()
}

// take reserves n processes for ns (resMu held).
func (b *ProcessBudget) take(ns string, n int) {
	b.used += n
	b.held[ns] += n
}

// grant reserves the shares of the waiters that fit, in order (resMu held): a waiter over its
// namespace's share is passed over; the first that does not fit the budget stops the others
// behind it, so a large operation is not kept waiting by a stream of small ones.
func (b *ProcessBudget) grant() {
	kept := b.waiters[:0]
	blocked := false
	for _, w := range b.waiters {
		switch {
		case blocked || !b.underShare(w.ns, w.n):
			kept = append(kept, w)
		case b.used+w.n > b.max:
			blocked = true
			kept = append(kept, w)
		default:
			b.take(w.ns, w.n)
			close(w.ready)
		}
	}
	clear(b.waiters[len(kept):])
	b.waiters = kept
}

// reserve takes an operation's share of n processes for namespace ns, waiting first-in,
// first-out for it until ctx ends (the error then wraps ctx's). n above the budget fails at
// once, wrapping [engine.ErrEvaluationLimit].
func (b *ProcessBudget) reserve(ctx context.Context, ns string, n int) error {
	if n > b.max {
		return fmt.Errorf("%w: the operation uses %d provider configurations, more than the %d provider processes this service runs at once (--max-provider-processes): each configuration is a provider process of its own, held for the whole operation",
			engine.ErrEvaluationLimit, n, b.max)
	}
	w := &budgetWaiter{ns: ns, n: n, ready: make(chan struct{})}
	b.resMu.Lock()
	b.waiters = append(b.waiters, w)
	b.grant()
	b.resMu.Unlock()
	select {
	case <-w.ready:
		return nil
	default:
	}
	attrs := []any{slog.Int("processes", n), slog.Int("max_provider_processes", b.max), slog.Int("namespace_share", b.perNamespace())}
	if l := providerLockFrom(ctx); l != nil {
		attrs = append(attrs, slog.String("namespace", l.key.Namespace), slog.String("name", l.key.Name))
	}
	b.log.Warn("provider process budget in use: the operation waits for its share", attrs...)
	start := time.Now()
	select {
	case <-w.ready:
		b.log.Info("provider process budget: the operation got its share", append(attrs, slog.Duration("waited", time.Since(start)))...)
		return nil
	case <-ctx.Done():
	}
	b.resMu.Lock()
	select {
	case <-w.ready: // granted meanwhile: given back
		b.give(ns, n)
	default:
		b.waiters = slices.DeleteFunc(b.waiters, func(o *budgetWaiter) bool { return o == w })
	}
	b.grant()
	b.resMu.Unlock()
	return fmt.Errorf("wait for %d of the %d provider processes this service runs at once (--max-provider-processes; one namespace at most %d): %w", n, b.max, b.perNamespace(), ctx.Err())
}

// tryReserve takes n more processes for ns, for an operation that holds a share already, only
// if they are free now and no operation of a namespace under its share waits for them (an
// operation holding processes never waits).
func (b *ProcessBudget) tryReserve(ns string, n int) bool {
	b.resMu.Lock()
	defer b.resMu.Unlock()
	for _, w := range b.waiters {
		if b.underShare(w.ns, w.n) {
			return false
		}
	}
	if b.used+n > b.max || b.held[ns]+n > b.perNamespace() {
		return false
	}
	b.take(ns, n)
	return true
}

// unreserve returns n processes of an operation's share for ns.
func (b *ProcessBudget) unreserve(ns string, n int) {
	b.resMu.Lock()
	defer b.resMu.Unlock()
	b.give(ns, n)
	b.grant()
}

// give returns n processes of ns's reservations (resMu held): [ProcessBudget.take] undone.
func (b *ProcessBudget) give(ns string, n int) {
	b.used -= n
	if b.held[ns] -= n; b.held[ns] <= 0 {
		delete(b.held, ns)
	}
}

// claim counts a process about to start: at once while fewer than the budget run, else after
// stopping the least recently used idle process of the budget's pools, or after a process
// being stopped has exited. The error is ctx's.
func (b *ProcessBudget) claim(ctx context.Context) error {
	for {
		b.mu.Lock()
		if b.running < b.max {
			b.running++
			b.mu.Unlock()
			return nil
		}
		stopped, pools := b.stopped, slices.Clone(b.pools)
		b.mu.Unlock()
		if evictIdle(pools) {
			continue // stopped one, or lost it to another claim or lease: look again
		}
		select {
		case <-stopped:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// free uncounts n processes that have exited (or never started).
func (b *ProcessBudget) free(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.running -= n
	close(b.stopped)
	b.stopped = make(chan struct{})
	b.mu.Unlock()
}

// evictIdle stops the least recently used idle process of pools (another claim or lease may
// take it first); false when none has one.
func evictIdle(pools []*Pool) bool {
	var oldest *Pool
	var at time.Time
	for _, p := range pools {
		if t, ok := p.oldestIdle(); ok && (oldest == nil || t.Before(at)) {
			oldest, at = p, t
		}
	}
	if oldest == nil {
		return false
	}
	oldest.evictOldest()
	return true
}

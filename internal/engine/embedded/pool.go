package embedded

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/platform/credentials"
)

// ErrPoolClosed is returned by [Pool.Get] after [Pool.Close].
var ErrPoolClosed = errors.New("embedded: provider pool closed")

// Pool keeps configured provider processes warm between operations, keyed by provider
// address, version and configuration digest (a provider process is configured once). At most
// MaxWarm idle processes are kept; the least recently used idle ones beyond that are shut
// down. Processes in use are never stopped. With a [ProcessBudget] ([Pool.SetBudget]) the
// processes running at once, in use or idle, are bounded across every operation: a new one
// first stops the least recently used idle ones. Safe for concurrent use.
type Pool struct {
	mirror Mirror
	// installer installs providers the mirror lacks (nil: the mirror only).
	installer    *providers.Installer
	maxWarm      int
	idleTimeout  time.Duration
	startTimeout time.Duration
	// host starts the processes when not nil ([Pool.SetHost]).
	host ProviderHost
	// budget bounds the processes running at once when not nil ([Pool.SetBudget]).
	budget *ProcessBudget

	mu      sync.Mutex
	closed  bool
	entries map[string]*poolEntry
	// starts counts processes launched, for tests and metrics.
	starts int
	// valid remembers configurations providers validated (session.validate), at most
	// maxValidated keys; the set is cleared when full.
	valid map[string]bool
	// hashes caches package hashes ([Pool.PackageHash]).
	hashes providers.HashCache
	// pins are the mirror's packages as they were when the pool was made: a package found in
	// the mirror is checked against them before every process of it starts.
	pins *providers.Pins
}

const maxValidated = 4096

func (p *Pool) validated(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.valid[key]
}

func (p *Pool) rememberValid(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.valid == nil || len(p.valid) >= maxValidated {
		p.valid = map[string]bool{}
	}
	p.valid[key] = true
}

type poolEntry struct {
	key     string
	ready   chan struct{}
	proc    *process
	err     error
	refs    int
	lastUse time.Time
}

// NewPool returns a pool over the mirror directory and, when installer is not nil, the
// providers it installs. maxWarm <= 0 means 8. The mirror's packages are pinned as they are
// now ([providers.PinMirror]): one added or changed later is never started.
func NewPool(mirror Mirror, installer *providers.Installer, maxWarm int) *Pool {
	if maxWarm <= 0 {
		maxWarm = 8
	}
	return &Pool{mirror: mirror, installer: installer, maxWarm: maxWarm, startTimeout: time.Minute, entries: map[string]*poolEntry{},
		pins: providers.PinMirror(mirror.Dir)}
}

// find returns the executable and version of addr meeting constraint, and the hashes its
// release is known by besides the package's own h1: (from the installer): from the directory
// mirror, else from the installer (its cache, or installed) (lock: the object's entry for addr,
// may be nil). Without an installer the error wraps [ErrProviderNotFound]; with one, the
// installer's errors (providers.Installer.Install).
func (p *Pool) find(ctx context.Context, addr ProviderAddr, constraint string, lock *providers.LockEntry) (exe, version string, known []string, err error) {
	exe, version, err = p.mirror.Find(addr, constraint)
	if err == nil || p.installer == nil || !errors.Is(err, ErrProviderNotFound) {
		return exe, version, nil, err
	}
	// An exact version (the lock's, or a plan's) already in the cache is used as is; a range
	// asks the source for its newest version first, as `tofu init` does.
	if v, exact := providers.ExactVersion(constraint); exact {
		pkg, ok, err := p.installer.Cached(providers.Addr(addr), v)
		if err != nil {
			return "", "", nil, err
		}
		if ok {
			return pkg.Exe, pkg.Version, pkg.Hashes, nil
		}
	}
	pkg, err := p.installer.Install(ctx, providers.Addr(addr), constraint, lock)
	if err != nil {
		return "", "", nil, err
	}
	return pkg.Exe, pkg.Version, pkg.Hashes, nil
}

// Lease is a provider process lent by the pool; call Release when done with it.
type Lease struct {
	Client
	// Addr and Version identify the provider.
	Addr    ProviderAddr
	Version string
	pool    *Pool
	entry   *poolEntry
	proc    *process
	once    sync.Once
}

// Release returns the process to the pool.
func (l *Lease) Release() { l.once.Do(func() { l.pool.release(l.entry) }) }

// Exited reports whether the process behind the lease has died.
func (l *Lease) Exited() bool { return l.proc.exited() }

// Get returns a configured provider process started with creds (an object's provider
// credentials, nil for none): a warm one if the pool has one for (addr, version, configKey,
// creds.Key()), whose token file is then rewritten with creds' token, else a new one on which
// configure runs once. A process started with one object's credentials is never handed out for
// other credentials. version "" means the newest in the mirror. With a budget
// ([Pool.SetBudget]) a new process past it waits, until ctx ends, for an idle one to stop:
// Get takes no share of the budget, as an operation does. The error wraps
// [ErrProviderNotFound] when the mirror has no such provider.
func (p *Pool) Get(ctx context.Context, addr ProviderAddr, version, configKey string, creds *credentials.Provider, configure func(context.Context, Client) error) (*Lease, error) {
	exe, found, _, err := p.find(ctx, addr, version, nil)
	if err != nil {
		return nil, err
	}
	return p.get(ctx, addr, exe, found, configKey, creds, configure)
}

// get is [Pool.Get] of the package exe, version found, already found.
func (p *Pool) get(ctx context.Context, addr ProviderAddr, exe, found, configKey string, creds *credentials.Provider, configure func(context.Context, Client) error) (*Lease, error) {
	key := addr.String() + "@" + found + "#" + configKey + "#" + creds.Key()
	if p.host != nil {
		// A process runs in its namespace's runner: it serves that namespace only.
		key += "#" + namespaceFrom(ctx)
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		e, ok := p.entries[key]
		if ok {
			e.refs++
			p.mu.Unlock()
			select {
			case <-e.ready:
			case <-ctx.Done():
				p.release(e)
				return nil, ctx.Err()
			}
			if e.err != nil {
				p.release(e)
				return nil, e.err
			}
			if e.proc.exited() {
				p.drop(e)
				p.release(e)
				continue
			}
			if err := e.proc.refresh(creds); err != nil {
				p.release(e)
				return nil, err
			}
			return &Lease{Client: e.proc, Addr: addr, Version: found, pool: p, entry: e, proc: e.proc}, nil
		}
		e = &poolEntry{key: key, ready: make(chan struct{}), refs: 1}
		p.entries[key] = e
		p.mu.Unlock()

		p.start(ctx, e, addr, exe, found, creds)
		if e.err == nil {
			if cerr := configure(ctx, e.proc); cerr != nil {
				p.stop(e.proc)
				e.proc, e.err = nil, fmt.Errorf("%s: %w", addr, cerr)
			}
		}
		if e.err != nil {
			p.drop(e)
		}
		close(e.ready)
		if e.err != nil {
			p.release(e)
			return nil, e.err
		}
		return &Lease{Client: e.proc, Addr: addr, Version: found, pool: p, entry: e, proc: e.proc}, nil
	}
}

// start starts e's process (e.proc, or e.err): the package found is checked against the
// mirror's pins right before it starts (the object's lock was checked by the session), and
// the process is counted in the budget, waiting for room until ctx ends.
func (p *Pool) start(ctx context.Context, e *poolEntry, addr ProviderAddr, exe, found string, creds *credentials.Provider) {
	if e.err = p.pins.Verify(addr.String(), found, filepath.Dir(exe)); e.err != nil {
		return
	}
	if p.budget != nil {
		if e.err = p.budget.claim(ctx); e.err != nil {
			e.err = fmt.Errorf("%s: wait for room among the %d provider processes this service runs at once: %w", addr, p.budget.max, e.err)
			return
		}
	}
	p.mu.Lock()
	p.starts++
	p.mu.Unlock()
	if p.host != nil {
		e.proc, e.err = startHosted(ctx, p.host, namespaceFrom(ctx), exe, creds)
	} else {
		e.proc, e.err = startProvider(exe, p.startTimeout, creds)
	}
	if e.err != nil && p.budget != nil {
		p.budget.free(1)
	}
}

// stop shuts procs down and uncounts them from the budget once they have exited.
func (p *Pool) stop(procs ...*process) {
	for _, k := range procs {
		k.kill()
	}
	if p.budget != nil {
		p.budget.free(len(procs))
	}
}

// oldestIdle is when the least recently used idle process was last released; false when the
// pool has none.
func (p *Pool) oldestIdle() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.oldestIdleLocked()
	if e == nil {
		return time.Time{}, false
	}
	return e.lastUse, true
}

// evictOldest stops the least recently used idle process, if the pool still has one.
func (p *Pool) evictOldest() {
	p.mu.Lock()
	e := p.oldestIdleLocked()
	if e == nil {
		p.mu.Unlock()
		return
	}
	delete(p.entries, e.key)
	proc := e.proc
	e.proc = nil
	p.mu.Unlock()
	p.stop(proc)
}

// oldestIdleLocked is the idle entry released longest ago (nil: none); p.mu held.
func (p *Pool) oldestIdleLocked() *poolEntry {
	var oldest *poolEntry
	for _, e := range p.entries {
		if e.refs == 0 && e.proc != nil && (oldest == nil || e.lastUse.Before(oldest.lastUse)) {
			oldest = e
		}
	}
	return oldest
}

// drop removes the entry from the map (it is no longer handed out).
func (p *Pool) drop(e *poolEntry) {
	p.mu.Lock()
	if p.entries[e.key] == e {
		delete(p.entries, e.key)
	}
	p.mu.Unlock()
}

func (p *Pool) release(e *poolEntry) {
	p.mu.Lock()
	e.refs--
	e.lastUse = time.Now()
	var kill []*process
	if e.refs == 0 && (p.closed || p.entries[e.key] != e) && e.proc != nil {
		kill = append(kill, e.proc)
		e.proc = nil
	}
	kill = append(kill, p.pruneLocked(e.lastUse)...)
	var idle []*poolEntry
	for _, x := range p.entries {
		if x.refs == 0 && x.proc != nil {
			idle = append(idle, x)
		}
	}
	if len(idle) > p.maxWarm {
		sort.Slice(idle, func(i, j int) bool { return idle[i].lastUse.Before(idle[j].lastUse) })
		for _, x := range idle[:len(idle)-p.maxWarm] {
			delete(p.entries, x.key)
			kill = append(kill, x.proc)
			x.proc = nil
		}
	}
	p.mu.Unlock()
	p.stop(kill...)
}

// SetHost makes the pool start its provider processes through host (nil: in process); call
// it before the first [Pool.Get].
func (p *Pool) SetHost(host ProviderHost) {
	p.mu.Lock()
	p.host = host
	p.mu.Unlock()
}

// SetBudget makes the pool count its processes in b, which other pools may share, and start
// one past it only after stopping idle ones or waiting for room; call it before the first
// [Pool.Get]. Operations take their share of b before their first process starts
// ([ProcessBudget]).
func (p *Pool) SetBudget(b *ProcessBudget) {
	p.mu.Lock()
	p.budget = b
	p.mu.Unlock()
	b.attach(p)
}

// SetIdleTimeout makes the pool stop processes idle for longer than d (checked whenever a
// process is released and by [Pool.Prune]); 0, the default, keeps them until evicted.
func (p *Pool) SetIdleTimeout(d time.Duration) {
	p.mu.Lock()
	p.idleTimeout = d
	p.mu.Unlock()
}

// Prune stops the processes idle for longer than the idle timeout. Call it periodically when
// an idle timeout is set and operations are rare.
func (p *Pool) Prune() {
	p.mu.Lock()
	kill := p.pruneLocked(time.Now())
	p.mu.Unlock()
	p.stop(kill...)
}

// pruneLocked removes idle entries past the idle timeout; p.mu held.
func (p *Pool) pruneLocked(now time.Time) []*process {
	if p.idleTimeout <= 0 {
		return nil
	}
	var kill []*process
	for k, e := range p.entries {
		if e.refs == 0 && e.proc != nil && now.Sub(e.lastUse) > p.idleTimeout {
			delete(p.entries, k)
			kill = append(kill, e.proc)
			e.proc = nil
		}
	}
	return kill
}

// Starts is how many provider processes the pool has launched.
func (p *Pool) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Warm is how many provider processes are running now.
func (p *Pool) Warm() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.entries {
		if e.proc != nil {
			n++
		}
	}
	return n
}

// Close shuts every idle provider down and makes later Gets fail; processes still leased
// are shut down when released.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	var kill []*process
	for k, e := range p.entries {
		if e.refs == 0 && e.proc != nil {
			kill = append(kill, e.proc)
			e.proc = nil
		}
		delete(p.entries, k)
	}
	p.mu.Unlock()
	p.stop(kill...)
	return nil
}

package embedded

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
)

// session holds one operation's providers: leased lazily from the pool, configured from the
// configuration's provider blocks, released together. Before its first provider process it
// takes its share of the pool's process budget ([ProcessBudget]), returned by close.
type session struct {
	pool    *Pool
	cfg     *Config
	sources map[string]string
	// funcs are the operation's functions (its budget's), for provider configurations.
	funcs map[string]function.Function
	// also are the provider configurations the operation may use besides cfg's.
	also []string

	mu       sync.Mutex
	leases   map[string]*Lease
	versions map[string]string // provider address -> version
	// shared are the provider configurations the session's share of the process budget
	// counts (nil: no share taken yet).
	shared map[string]bool
	// sharedNS is the namespace the share is reserved for (the operation's object's).
	sharedNS string

	findMu sync.Mutex
	finds  map[string]foundPackage // by address and constraint: what the operation found
}

// foundPackage is one provider package an operation found ([Pool.find]).
type foundPackage struct {
	exe, version string
	known        []string
}

// newSession returns the session of an operation over cfg. also are the provider
// configurations ("local", "local.alias") it may use besides those cfg declares and its
// resources use: those of the objects in its state, of its plan's changes, of interrupted
// creates ([stateKeys]); they count in its share of the process budget.
func newSession(pool *Pool, cfg *Config, sources map[string]string, funcs map[string]function.Function, also []string) *session {
	return &session{pool: pool, cfg: cfg, sources: sources, funcs: funcs, also: also, leases: map[string]*Lease{}, versions: map[string]string{}, finds: map[string]foundPackage{}}
}

// stateKeys are the provider configurations of st's objects (nil: none).
func stateKeys(st *State) []string {
	if st == nil {
		return nil
	}
	keys := make([]string, 0, len(st.Resources))
	for _, r := range st.Resources {
		keys = append(keys, stateProviderKey(r.Provider))
	}
	return keys
}

// configurations are the provider configurations the operation may start a process for:
// those cfg declares, those its resources use and s.also, without the built-in provider.
func (s *session) configurations() map[string]bool {
	keys := map[string]bool{}
	add := func(key string) {
		if addr, err := s.addrOf(providerLocal(key)); err == nil && addr != BuiltinAddr() {
			keys[key] = true
		}
	}
	for key := range s.cfg.Providers {
		add(key)
	}
	for _, rc := range s.cfg.Resources {
		add(rc.ProviderKey)
	}
	for _, key := range s.also {
		add(key)
	}
	return keys
}

// reserve makes sure the session's share of the process budget counts key before a process
// for it starts (s.mu held): the first time, a share of every configuration the operation
// may use, waiting for it until ctx ends; a configuration that share missed only if the
// budget has room now, since an operation holding processes never waits.
func (s *session) reserve(ctx context.Context, key string) error {
	b := s.pool.budget
	if b == nil || s.shared[key] {
		return nil
	}
	if s.shared == nil {
		keys := s.configurations()
		keys[key] = true
		ns := namespaceFrom(ctx)
		if err := b.reserve(ctx, ns, len(keys)); err != nil {
			return err
		}
		s.shared, s.sharedNS = keys, ns
		return nil
	}
	if !b.tryReserve(s.sharedNS, 1) {
		return fmt.Errorf("provider configuration %q is past the operation's share of %d provider processes, and the %d this service runs at once (--max-provider-processes) are in use, or its namespace holds its share of them (half)",
			key, len(s.shared), b.max)
	}
	s.shared[key] = true
	return nil
}

// find is [Pool.find], once per address and constraint in an operation: the missing-provider
// check and the provider's start see the same package, and the mirror's directories are read
// once.
func (s *session) find(ctx context.Context, addr ProviderAddr, constraint string, lock *providers.LockEntry) (exe, version string, known []string, err error) {
	key := addr.String() + "|" + constraint
	s.findMu.Lock()
	f, ok := s.finds[key]
	s.findMu.Unlock()
	if ok {
		return f.exe, f.version, f.known, nil
	}
	if exe, version, known, err = s.pool.find(ctx, addr, constraint, lock); err != nil {
		return "", "", nil, err
	}
	s.findMu.Lock()
	s.finds[key] = foundPackage{exe: exe, version: version, known: known}
	s.findMu.Unlock()
	return exe, version, known, nil
}

// addrOf returns the provider address of a local name.
func (s *session) addrOf(local string) (ProviderAddr, error) {
	if local == "terraform" {
		return BuiltinAddr(), nil
	}
	src := s.cfg.Requirements[local].Source
	if src == "" {
		src = s.sources[local]
	}
	if src == "" {
		src = "hashicorp/" + local
	}
	return ParseProviderSource(src)
}

// constraint is the version constraint of a local name (required_providers; "" for any).
func (s *session) constraint(local string) string { return s.cfg.Requirements[local].Version }

// missing returns the sources of every provider the configuration (and the given state)
// needs that the mirror does not have.
func (s *session) missing(ctx context.Context, st *State) []string {
	locals := map[string]bool{}
	for _, rc := range s.cfg.Resources {
		locals[rc.ProviderLocalName()] = true
	}
	for key := range s.cfg.Providers {
		locals[providerLocal(key)] = true
	}
	if st != nil {
		for _, r := range st.Resources {
			if l := localFromStateProvider(r.Provider); l != "" {
				locals[l] = true
			}
		}
	}
	var out []string
	for l := range locals {
		if l == "terraform" {
			continue
		}
		addr, err := s.addrOf(l)
		if err != nil {
			out = append(out, l)
			continue
		}
		if s.pool.installer != nil {
			continue // the installer reports each provider's own failure
		}
		if _, _, _, err := s.find(ctx, addr, s.constraint(l), nil); err != nil {
			out = append(out, engine.UnavailableSource(addr.Namespace+"/"+addr.Type, s.constraint(l), s.pool.mirror.Versions(addr)))
		}
	}
	sort.Strings(out)
	return out
}

func providerLocal(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '.' {
			return key[:i]
		}
	}
	return key
}

// localFromStateProvider extracts the type from provider["host/ns/type"] (optionally .alias).
func localFromStateProvider(p string) string {
	const pre = `provider["`
	if len(p) < len(pre) || p[:len(pre)] != pre {
		return ""
	}
	rest := p[len(pre):]
	end := -1
	for i := 0; i < len(rest); i++ {
		if rest[i] == '"' {
			end = i
			break
		}
	}
	if end < 0 {
		return ""
	}
	addr := rest[:end]
	last := addr
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == '/' {
			last = addr[i+1:]
			break
		}
	}
	return last
}

// provider returns the configured client for a provider key ("local" or "local.alias").
func (s *session) provider(ctx context.Context, key string) (Client, ProviderAddr, error) {
	local := providerLocal(key)
	addr, err := s.addrOf(local)
	if err != nil {
		return nil, ProviderAddr{}, err
	}
	if addr == BuiltinAddr() {
		return builtinClient{}, addr, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[key]; ok {
		return l, addr, nil
	}
	body, ok := s.cfg.Providers[key]
	if !ok && key != local {
		return nil, addr, fmt.Errorf("provider configuration %q is not declared", key)
	}
	if body == nil {
		body = hcl.EmptyBody()
	}
	sum := sha256.Sum256([]byte(s.cfg.providerHash + "\x00" + key))
	configure := func(ctx context.Context, c Client) error {
		ps, err := c.Schema(ctx)
		if err != nil {
			return err
		}
		cfgVal, err := decodeBlock(ps.Provider.Block, body, staticContext(s.funcs), "provider "+key)
		if err != nil {
			return err
		}
		cfgVal, _ = cfgVal.UnmarkDeep()
		if cfgVal, err = c.ValidateProviderConfig(ctx, cfgVal); err != nil {
			return err
		}
		return c.Configure(ctx, cfgVal)
	}
	// The version is the one the resource's dependency lock pins when it still meets the
	// constraint, else the newest that does; the package is checked against the mirror's pins
	// and the object's lock before any process of it is handed out, and against the pins again
	// before every process of it starts (docs/security.md, "Engines").
	constraint := s.constraint(local)
	pl := providerLockFrom(ctx)
	var entry *providers.LockEntry
	if pl != nil {
		if entry, err = pl.entry(ctx, addr); err != nil {
			return nil, addr, err
		}
	}
	want := constraint
	if entry != nil && meets(entry.Version, constraint) {
		want = entry.Version
	}
	exe, found, known, err := s.find(ctx, addr, want, entry)
	if err != nil && want != constraint && errors.Is(err, ErrProviderNotFound) {
		// The directory mirror no longer has the locked version (it was upgraded): the
		// newest that meets the constraint is recorded anew.
		exe, found, known, err = s.find(ctx, addr, constraint, entry)
	}
	if err != nil {
		return nil, addr, err
	}
	// A mirror package not as the engine found it at start is refused before the object's
	// lock records anything of it.
	if err := s.pool.pins.Verify(addr.String(), found, filepath.Dir(exe)); err != nil {
		return nil, addr, err
	}
	if pl != nil {
		if err := pl.verify(ctx, s.pool, addr, found, constraint, filepath.Dir(exe), known); err != nil {
			return nil, addr, err
		}
	}
	if err := s.reserve(ctx, key); err != nil {
		return nil, addr, err
	}
	// The package started is the one verified against the lock above.
	l, err := s.pool.get(ctx, addr, exe, found, hex.EncodeToString(sum[:]), credentialsFrom(ctx), configure)
	if err != nil {
		return nil, addr, err
	}
	s.leases[key] = l
	s.versions[addr.String()] = l.Version
	return l, addr, nil
}

// meets reports whether version v meets the constraint ("" for any).
func meets(v, constraint string) bool {
	ver, err := version.NewVersion(v)
	if err != nil {
		return false
	}
	c, err := providers.ParseConstraint(constraint)
	return err == nil && c.Check(ver)
}

// crashed reports whether the provider of key has died. When the call failed with
// Unavailable (the connection broke) it waits a moment for go-plugin to notice the exit.
func (s *session) crashed(key string, callErr error) bool {
	s.mu.Lock()
	l, ok := s.leases[key]
	s.mu.Unlock()
	if !ok {
		return false
	}
	if status.Code(callErr) != codes.Unavailable && !errors.Is(callErr, io.EOF) {
		return l.Exited()
	}
	for range 100 {
		if l.Exited() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func (s *session) providerVersions() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.versions))
	for k, v := range s.versions {
		out[k] = v
	}
	return out
}

// close releases the session's providers. When ctx, the operation's, has ended (cancelled, or
// at its step timeout), they are not kept warm: each process is stopped once no operation
// holds it, for it may still run a call the operation abandoned (a read that never returns,
// a create past its stop grace) or have been told to stop (StopProvider).
func (s *session) close(ctx context.Context) {
	ended := ctx.Err() != nil
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, l := range s.leases {
		if ended {
			l.pool.drop(l.entry)
		}
		l.Release()
		delete(s.leases, k)
	}
	if len(s.shared) > 0 {
		s.pool.budget.unreserve(s.sharedNS, len(s.shared))
		s.shared = nil
	}
}

// staticContext is the evaluation context of provider configurations: the operation's
// functions, no references (a reference is an error naming it).
func staticContext(funcs map[string]function.Function) *hcl.EvalContext {
	return &hcl.EvalContext{Functions: funcs}
}

// ProviderCrashedError reports a provider process that died during an operation.
type ProviderCrashedError struct {
	Provider string
	Address  string
	Err      error
}

func (e *ProviderCrashedError) Error() string {
	return fmt.Sprintf("%s: provider %s crashed (its process exited): %v", e.Address, e.Provider, e.Err)
}

func (e *ProviderCrashedError) Unwrap() error { return e.Err }

// validate is ValidateResourceConfig, remembered in the pool: a provider version's verdict on
// one configuration value does not change (validation has no side effects), so a plan of an
// unchanged configuration skips the call.
func (s *session) validate(ctx context.Context, c Client, addr ProviderAddr, typ string, config cty.Value) error {
	if _, ok := c.(builtinClient); ok {
		return c.ValidateResourceConfig(ctx, typ, config) // in-process and cheaper than the key
	}
	b, err := ctyjson.Marshal(config, config.Type())
	if err != nil {
		return c.ValidateResourceConfig(ctx, typ, config)
	}
	s.mu.Lock()
	version := s.versions[addr.String()]
	s.mu.Unlock()
	sum := sha256.Sum256(b)
	key := addr.String() + "@" + version + "|" + typ + "|" + hex.EncodeToString(sum[:])
	if s.pool.validated(key) {
		return nil
	}
	if err := c.ValidateResourceConfig(ctx, typ, config); err != nil {
		return err
	}
	s.pool.rememberValid(key)
	return nil
}

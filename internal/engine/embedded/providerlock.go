package embedded

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/credentials"
)

// PackageHash is [providers.PackageHash] of dir, computed again only when a file under dir
// changed ([providers.HashCache]).
func (p *Pool) PackageHash(dir string) (string, error) { return p.hashes.Hash(dir) }

// ChecksumMismatchError is a provider package whose h1: hash is none of the hashes the
// resource's lock records for its version. It wraps [engine.ErrProviderChecksumMismatch].
type ChecksumMismatchError struct {
	Provider, Version, Got string
	Want                   []string
}

func (e *ChecksumMismatchError) Error() string {
	return fmt.Sprintf("provider %s %s does not match the resource's dependency lock: its package hashes to %s, the lock records %v; it was not started (if the mirror was upgraded on purpose, delete the resource's provider lock)",
		e.Provider, e.Version, e.Got, e.Want)
}

// Unwrap returns [engine.ErrProviderChecksumMismatch].
func (e *ChecksumMismatchError) Unwrap() error { return engine.ErrProviderChecksumMismatch }

// providerLock enforces one resource's dependency lock during an operation: a provider
// version's first use records its h1: hash (trust on first use), every later use must match.
type providerLock struct {
	store *state.Store
	key   state.Key
	mu    sync.Mutex
	// read is the lock as this operation first read it (nil before): a provider that matches
	// it needs no second read.
	read providers.Lock
	// prefetch delivers the read started with the operation (withProviderLock), so the first
	// provider does not wait for it after the state read; nil once consumed.
	prefetch chan lockRead
	// readOnly: verify against the lock, record nothing (a speculative plan).
	readOnly bool
}

type lockRead struct {
	lock providers.Lock
	err  error
}

type providerLockKey struct{}

// withProviderLock carries the resource's lock to the session that starts providers, and
// starts reading it: the read overlaps the operation's own reads of the configuration and
// the state record (one round trip less before the first provider call).
func withProviderLock(ctx context.Context, store *state.Store, key state.Key, readOnly bool) context.Context {
	if store == nil {
		return ctx
	}
	l := &providerLock{store: store, key: key, prefetch: make(chan lockRead, 1), readOnly: readOnly}
	go func() {
		lock, _, err := providers.ReadLock(ctx, store, key)
		l.prefetch <- lockRead{lock, err}
	}()
	return context.WithValue(ctx, providerLockKey{}, l)
}

type credentialsKey struct{}

// withCredentials carries the object's provider credentials to the session that starts
// providers (nil: none).
func withCredentials(ctx context.Context, c *credentials.Provider) context.Context {
	return context.WithValue(ctx, credentialsKey{}, c)
}

func credentialsFrom(ctx context.Context) *credentials.Provider {
	c, _ := ctx.Value(credentialsKey{}).(*credentials.Provider)
	return c
}

// namespaceFrom is the namespace of the object the operation is for ("" outside one).
func namespaceFrom(ctx context.Context) string {
	if l := providerLockFrom(ctx); l != nil {
		return l.key.Namespace
	}
	return ""
}

func providerLockFrom(ctx context.Context) *providerLock {
	l, _ := ctx.Value(providerLockKey{}).(*providerLock)
	return l
}

// entry returns the lock's entry for addr (nil when it has none).
func (l *providerLock) entry(ctx context.Context, addr ProviderAddr) (*providers.LockEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.read == nil && l.prefetch != nil {
		r := <-l.prefetch
		l.prefetch = nil
		if r.err == nil {
			l.read = r.lock
		}
	}
	if l.read == nil {
		// No prefetch, or it failed (read again: the error is this read's).
		lock, _, err := providers.ReadLock(ctx, l.store, l.key)
		if err != nil {
			return nil, err
		}
		l.read = lock
	}
	if e, ok := l.read[addr.String()]; ok {
		return &e, nil
	}
	return nil, nil
}

// verify checks the package directory dir of provider addr at version against the lock,
// recording it (its h1: hash and the known hashes of its release, with the constraint it was
// selected by) when the lock has no entry for that version. A version other than the recorded
// one is recorded anew: the version is selected by the lock when the lock's version meets the
// constraint and is available, so a new one is selected only when the constraint changed or
// the directory mirror no longer has the locked version; a changed binary of the same version
// is the tampering this catches. A read-only lock records nothing: a version the lock has must
// match it, any other passes (the next plan that is not speculative records it).
func (l *providerLock) verify(ctx context.Context, pool *Pool, addr ProviderAddr, version, constraint, dir string, known []string) error {
	got, err := pool.PackageHash(dir)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.read[addr.String()]; ok && e.Version == version && slices.Contains(e.Hashes, got) {
		return nil
	}
	if l.readOnly {
		if e, ok := l.read[addr.String()]; ok && e.Version == version && len(e.Hashes) > 0 {
			return &ChecksumMismatchError{Provider: addr.String(), Version: version, Got: got, Want: e.Hashes}
		}
		return nil
	}
	l.read, err = providers.UpdateLock(ctx, l.store, l.key, func(m providers.Lock) (bool, error) {
		e, ok := m[addr.String()]
		if ok && e.Version == version && len(e.Hashes) > 0 {
			if slices.Contains(e.Hashes, got) {
				return false, nil
			}
			return false, &ChecksumMismatchError{Provider: addr.String(), Version: version, Got: got, Want: e.Hashes}
		}
		// A new version, or a pinned version with no hashes yet (as tofu, which adds them).
		m[addr.String()] = providers.LockEntry{Version: version, Constraints: constraint, Hashes: append([]string{got}, known...)}
		return true, nil
	})
	return err
}

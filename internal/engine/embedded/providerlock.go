package embedded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/mod/sumdb/dirhash"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/credentials"
)

// LockEntry is one provider of a dependency lock: the version selected and its hashes
// ("h1:..." over the unpacked package directory, "zh:..." over a release zip).
type LockEntry struct {
	Version string
	Hashes  []string
}

// ParseLock reads a dependency lock in the .terraform.lock.hcl format that `tofu providers
// lock` writes: provider "ADDRESS" { version = "V" hashes = ["h1:...", "zh:..."] }. Other
// blocks and attributes are ignored. The error has the file's line:col.
func ParseLock(src []byte) (map[string]LockEntry, error) {
	f, diags := hclsyntax.ParseConfig(src, ".terraform.lock.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("dependency lock: %s", diags.Error())
	}
	out := map[string]LockEntry{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "provider" || len(b.Labels) != 1 {
			continue
		}
		var e LockEntry
		if a, ok := b.Body.Attributes["version"]; ok {
			v, d := a.Expr.Value(nil)
			if d.HasErrors() || v.Type() != cty.String {
				return nil, fmt.Errorf("dependency lock: %s: version is not a string", a.SrcRange)
			}
			e.Version = v.AsString()
		}
		if a, ok := b.Body.Attributes["hashes"]; ok {
			v, d := a.Expr.Value(nil)
			if d.HasErrors() || !(v.Type().IsListType() || v.Type().IsTupleType()) {
				return nil, fmt.Errorf("dependency lock: %s: hashes is not a list of strings", a.SrcRange)
			}
			for it := v.ElementIterator(); it.Next(); {
				_, h := it.Element()
				if h.Type() != cty.String {
					return nil, fmt.Errorf("dependency lock: %s: hashes is not a list of strings", a.SrcRange)
				}
				e.Hashes = append(e.Hashes, h.AsString())
			}
		}
		out[b.Labels[0]] = e
	}
	return out, nil
}

// WriteLock renders a dependency lock in the .terraform.lock.hcl format (providers sorted by
// address, hashes sorted), which OpenTofu and Terraform read.
func WriteLock(m map[string]LockEntry) []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	addrs := make([]string, 0, len(m))
	for a := range m {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for i, a := range addrs {
		if i > 0 {
			body.AppendNewline()
		}
		e := m[a]
		b := body.AppendNewBlock("provider", []string{a}).Body()
		b.SetAttributeValue("version", cty.StringVal(e.Version))
		hs := slices.Clone(e.Hashes)
		slices.Sort(hs)
		vals := make([]cty.Value, len(hs))
		for j, h := range hs {
			vals[j] = cty.StringVal(h)
		}
		if len(vals) == 0 {
			b.SetAttributeValue("hashes", cty.ListValEmpty(cty.String))
		} else {
			b.SetAttributeValue("hashes", cty.ListVal(vals))
		}
	}
	return f.Bytes()
}

// PackageHash is the h1: hash of an unpacked provider package directory, the hash the
// dependency lock records: golang.org/x/mod's dirhash Hash1 (SHA-256 over a sorted manifest of
// the files' SHA-256), as OpenTofu and Terraform compute it.
func PackageHash(dir string) (string, error) {
	h, err := dirhash.HashDir(dir, "", dirhash.Hash1)
	if err != nil {
		return "", fmt.Errorf("hash provider package %s: %w", dir, err)
	}
	return h, nil
}

// packageHashes caches PackageHash per directory, valid while no file in it changed: the
// signature is every file's name, size, modification and status-change time and inode (the
// status-change time moves on any write, chmod or rename and cannot be set back by a process).
type packageHashes struct {
	mu sync.Mutex
	m  map[string]cachedHash
}

type cachedHash struct{ sig, h1 string }

// fileSignature describes the files under dir; "" when it cannot (no caching then).
func fileSignature(dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return errors.ErrUnsupported
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\x00%d.%d\x00%d.%d\x00%o\n", p, info.Size(), st.Ino,
			st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, info.Mode())
		return nil
	})
	if err != nil {
		return ""
	}
	return b.String()
}

// PackageHash is [PackageHash] of dir, computed again only when a file under dir changed.
func (p *Pool) PackageHash(dir string) (string, error) {
	sig := fileSignature(dir)
	c := &p.hashes
	c.mu.Lock()
	if h, ok := c.m[dir]; ok && sig != "" && h.sig == sig {
		c.mu.Unlock()
		return h.h1, nil
	}
	c.mu.Unlock()
	h1, err := PackageHash(dir)
	if err != nil {
		return "", err
	}
	if sig != "" && sig == fileSignature(dir) {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]cachedHash{}
		}
		c.m[dir] = cachedHash{sig: sig, h1: h1}
		c.mu.Unlock()
	}
	return h1, nil
}

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
}

type providerLockKey struct{}

// withProviderLock carries the resource's lock to the session that starts providers.
func withProviderLock(ctx context.Context, store *state.Store, key state.Key) context.Context {
	if store == nil {
		return ctx
	}
	return context.WithValue(ctx, providerLockKey{}, &providerLock{store: store, key: key})
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

func providerLockFrom(ctx context.Context) *providerLock {
	l, _ := ctx.Value(providerLockKey{}).(*providerLock)
	return l
}

// verify checks the package directory dir of provider addr at version against the lock,
// recording it when the lock has no entry for that version. A version other than the recorded
// one is recorded anew (the mirror's newest version is used; a changed binary of the same
// version is the tampering this catches).
func (l *providerLock) verify(ctx context.Context, pool *Pool, addr ProviderAddr, version, dir string) error {
	got, err := pool.PackageHash(dir)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for range 3 {
		body, rev, err := l.store.ProviderLock(ctx, l.key)
		if err != nil {
			return err
		}
		m := map[string]LockEntry{}
		if body != nil {
			if m, err = ParseLock(body); err != nil {
				return err
			}
		}
		e, ok := m[addr.String()]
		if ok && e.Version == version {
			if slices.Contains(e.Hashes, got) {
				return nil
			}
			return &ChecksumMismatchError{Provider: addr.String(), Version: version, Got: got, Want: e.Hashes}
		}
		m[addr.String()] = LockEntry{Version: version, Hashes: []string{got}}
		if _, err := l.store.PutProviderLock(ctx, l.key, WriteLock(m), rev); err == nil {
			return nil
		} else if !isConflict(err) {
			return err
		}
	}
	return fmt.Errorf("provider lock of %s: concurrent writers, try again", l.key)
}

// isConflict reports a lost compare-and-set on the KV.
func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

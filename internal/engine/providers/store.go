package providers

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/contentcache"
)

// ReadLock returns the object's dependency lock from the state store (empty when none is
// recorded) and the KV revision it was read at.
func ReadLock(ctx context.Context, store *state.Store, key state.Key) (Lock, uint64, error) {
	body, rev, err := store.ProviderLock(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	if body == nil {
		return Lock{}, 0, nil
	}
	l, err := parsedLocks.parse(body)
	if err != nil {
		return nil, 0, fmt.Errorf("provider lock of %s: %w", key, err)
	}
	return l, rev, nil
}

// maxParsedLocks bounds the bytes of lock files whose parse [ReadLock] keeps; when the next
// would pass it, the kept parses are dropped.
const maxParsedLocks = 1 << 20

// parsedLocks keeps the parse of each distinct lock file ReadLock read, so an operation on an
// object whose lock did not change parses nothing (every plan reads its object's lock).
var parsedLocks lockCache

type lockCache struct{ contentcache.Cache[Lock] }

// parse is ParseLock(body), from the cache when body was parsed before; the caller gets its
// own copy to change.
func (c *lockCache) parse(body []byte) (Lock, error) {
	l, ok := c.Get(body)
	if !ok {
		var err error
		if l, err = ParseLock(body); err != nil {
			return nil, err
		}
		c.Put(body, l, maxParsedLocks, maxParsedLocks)
	}
	return l.Clone(), nil
}

// UpdateLock reads the object's lock, lets change edit it (it reports whether it changed
// anything; its error is returned as is) and writes it back with compare-and-set, reading again
// when another writer came first (at most 3 times). It returns the lock as stored.
func UpdateLock(ctx context.Context, store *state.Store, key state.Key, change func(Lock) (bool, error)) (Lock, error) {
	for range 3 {
		l, rev, err := ReadLock(ctx, store, key)
		if err != nil {
			return nil, err
		}
		changed, err := change(l)
		if err != nil || !changed {
			return l, err
		}
		if _, err := store.PutProviderLock(ctx, key, l.Write(), rev); err == nil {
			return l, nil
		} else if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("provider lock of %s: concurrent writers, try again", key)
}

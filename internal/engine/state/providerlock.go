package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ProviderLock returns the resource's provider dependency lock (the .terraform.lock.hcl text
// the embedded engine records on a provider's first use; docs/security.md, "Engines") and the
// KV revision it was read at; nil and 0 when none is recorded.
func (s *Store) ProviderLock(ctx context.Context, key Key) ([]byte, uint64, error) {
	e, err := s.kv.Get(ctx, key.lockKey())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("state: read provider lock of %s: %w", key, err)
	}
	return e.Value(), e.Revision(), nil
}

// PutProviderLock stores the resource's provider lock if it is still at revision rev (0: none
// yet) and returns the new revision. Another writer in between is an error wrapping
// jetstream.ErrKeyExists or a wrong-last-sequence API error: the caller reads again and merges.
func (s *Store) PutProviderLock(ctx context.Context, key Key, body []byte, rev uint64) (uint64, error) {
	var (
		n   uint64
		err error
	)
	if rev == 0 {
		n, err = s.kv.Create(ctx, key.lockKey(), body)
	} else {
		n, err = s.kv.Update(ctx, key.lockKey(), body, rev)
	}
	if err != nil {
		return 0, fmt.Errorf("state: write provider lock of %s: %w", key, err)
	}
	return n, nil
}

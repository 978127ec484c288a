package bus

import (
	"context"
	"encoding/hex"

	"github.com/nats-io/nats.go/jetstream"
	"lukechampine.com/blake3"
)

// WrapObjectStoreForTest replaces the object store a uses with wrap of it, so a test can inject
// a fault into a real store's calls (a rename that stops halfway).
func WrapObjectStoreForTest(a *Artifacts, wrap func(jetstream.ObjectStore) jetstream.ObjectStore) {
	a.obs = wrap(a.obs)
}

// KeyedDigestForTest computes the name [Artifacts.PutKeyed] gives data under key on its own
// (the keyed BLAKE3-256 of the domain, a zero byte and data, in lowercase hex), to check
// [KeyedDigest] and PutKeyed against.
func KeyedDigestForTest(data, key []byte) string {
	h := blake3.New(32, key)
	_, _ = h.Write([]byte(keyedArtifactDomain + "\x00"))
	_, _ = h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// FairQueueForTest is the queue of a [ConsumeOptions].FairKey consumer, keyed by
// [NamespaceKey], to check its bounds on real messages.
type FairQueueForTest struct{ q *fairQueue }

// NewFairQueueForTest returns a queue with the given share and bounds.
func NewFairQueueForTest(maxPerKey, backlog, backlogBytes int) FairQueueForTest {
	return FairQueueForTest{newFairQueue(NamespaceKey, nil, maxPerKey, backlog, backlogBytes)}
}

// Put adds m, waiting while the queue is full; false when ctx ended first.
func (f FairQueueForTest) Put(ctx context.Context, m jetstream.Msg) bool {
	ok, _ := f.q.put(ctx, m)
	return ok
}

// Take returns the next message a worker would run, and ends its run at once.
func (f FairQueueForTest) Take() jetstream.Msg {
	m, key, _ := f.q.take()
	f.q.done(key)
	return m
}

package bus

import "github.com/nats-io/nats.go/jetstream"

// WrapObjectStoreForTest replaces the object store a uses with wrap of it, so a test can inject
// a fault into a real store's calls (a rename that stops halfway).
func WrapObjectStoreForTest(a *Artifacts, wrap func(jetstream.ObjectStore) jetstream.ObjectStore) {
	a.obs = wrap(a.obs)
}

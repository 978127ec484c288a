package watcher

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// StoredForTest returns the object the Core keeps for key between writes (nil if none).
func (c *Core) StoredForTest(key types.NamespacedName) *v1alpha1.LavaArchitecture {
	c.mu.Lock()
	e := c.entries[key]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stored
}

// Elected is closed when this replica became the leader (at once without leader election).
func (w *Watcher) Elected() <-chan struct{} { return w.mgr.Elected() }

// StartManagerForTest starts the manager as [Watcher.Start] does, without the access check.
func (w *Watcher) StartManagerForTest(ctx context.Context) error { return w.run(ctx) }

// RecheckForTest is [reconciler.recheck] of a reconciler reading bound Secrets when readSecrets,
// with the given recheck interval.
func RecheckForTest(readSecrets bool, recheck time.Duration, obj *v1alpha1.LavaArchitecture, res reconcile.Result) reconcile.Result {
	r := &reconciler{readSecrets: readSecrets, secretRecheck: recheck}
	return r.recheck(obj, res)
}

package watcher

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// Defaults of the Secret read budget ([Config].SecretReadsPerSecond, SecretReadBurst).
const (
	// DefaultSecretReadsPerSecond is the sustained rate of bound Secret reads per namespace:
	// at the default interval of 5 minutes, 3,000 objects binding one Secret each.
	DefaultSecretReadsPerSecond = 10
	// DefaultSecretReadBurst is the reads a namespace may make at once: twice the most one
	// object binds (spec.bindingsFrom has at most 32 entries).
	DefaultSecretReadBurst = 64
)

// secretBudget is a token bucket per namespace for the watcher's rechecks of bound Secrets.
// A recheck that would read more than its namespace has left is put off, never made to wait:
// the reads of one namespace's objects (32 Secrets each, rechecked every 30 s) otherwise held
// every reconcile worker in the rate limiter of that namespace's impersonated client, and every
// other namespace's reconciles waited behind them. The first reads of an object's generation
// are not charged (a new spec is observed at once; each one is a write of the tenant's). Nil:
// no budget. Safe for concurrent use.
type secretBudget struct {
	rate  rate.Limit
	burst int

	mu   sync.Mutex
	lims map[string]*rate.Limiter
	// read is the object (uid and generation) each name's Secrets were last read for.
	read map[types.NamespacedName]readFor
}

// readFor is an object's uid and generation.
type readFor struct {
	uid        types.UID
	generation int64
}

// newSecretBudget is the budget of perSecond reads per namespace with burst (defaults when
// zero); nil when perSecond is negative.
func newSecretBudget(perSecond float64, burst int) *secretBudget {
	if perSecond < 0 {
		return nil
	}
	if perSecond == 0 {
		perSecond = DefaultSecretReadsPerSecond
	}
	if burst <= 0 {
		burst = DefaultSecretReadBurst
	}
	return &secretBudget{rate: rate.Limit(perSecond), burst: burst, lims: map[string]*rate.Limiter{}, read: map[types.NamespacedName]readFor{}}
}

// take takes n reads for obj at now and returns 0, or, when its namespace has not that many
// left, takes nothing and returns how long until it has. The first reads of a generation are
// free.
func (b *secretBudget) take(obj *v1alpha1.LavaArchitecture, n int, now time.Time) time.Duration {
	if b == nil || n == 0 {
		return 0
	}
	b.mu.Lock()
	key, cur := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}, readFor{obj.UID, obj.Generation}
	if b.read[key] != cur {
		b.read[key] = cur
		b.mu.Unlock()
		return 0
	}
	ns := obj.Namespace
	l := b.lims[ns]
	if l == nil {
		l = rate.NewLimiter(b.rate, b.burst)
		b.lims[ns] = l
	}
	b.mu.Unlock()
	r := l.ReserveN(now, min(n, b.burst))
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// forget drops what b keeps about the object key (it no longer exists).
func (b *secretBudget) forget(key types.NamespacedName) {
	if b == nil {
		return
	}
	b.mu.Lock()
	delete(b.read, key)
	b.mu.Unlock()
}

// secretReads is how many Secrets a reconcile of obj reads at most: its distinct secretRef
// names and one outputs Secret per outputsRef, when Secrets are read at all.
func (r *reconciler) secretReads(obj *v1alpha1.LavaArchitecture) int {
	if !r.watchSecrets && !r.readSecrets {
		return 0
	}
	names := sets.New[string]()
	n := 0
	for _, b := range obj.Spec.BindingsFrom {
		switch {
		case b.SecretRef != nil:
			names.Insert(b.SecretRef.Name)
		case b.OutputsRef != nil:
			n++
		}
	}
	return n + names.Len()
}

package synthesis

import (
	"fmt"
	"sync"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// DefaultArtifactQuotaBytes is a namespace's default [ArtifactQuota]: 256 MiB of renders
// within the collection window.
const DefaultArtifactQuotaBytes = 256 << 20

// DefaultArtifactQuotaWindow is how long a render counts toward its namespace's quota: the
// longest a superseded artifact put now stays in lava-artifacts before the applier's
// collection deletes it, at the collection's defaults (bus.DefaultCollectMinAge +
// bus.DefaultCollectInterval).
const DefaultArtifactQuotaWindow = bus.DefaultCollectMinAge + bus.DefaultCollectInterval

// ArtifactQuota bounds the bytes of rendered Terraform JSON each namespace puts into the
// shared artifact store (lava-artifacts) within Window: a render that would take its
// namespace past Bytes is refused before it is stored. A render counts once per content
// within the window (rendering the same JSON again stores nothing new). What one namespace
// renders never counts against another's. Each synth replica counts its own renders, so R
// replicas admit at most R times Bytes per namespace. Safe for concurrent use; the zero value
// (or a nil *ArtifactQuota) admits everything.
type ArtifactQuota struct {
	// Bytes is a namespace's quota, in bytes (0: no quota).
	Bytes int64
	// Window is how long a render counts (0: DefaultArtifactQuotaWindow).
	Window time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time

	mu   sync.Mutex
	puts map[string][]quotaPut // namespace -> its renders within the window, oldest first
}

type quotaPut struct {
	digest string
	size   int64
	at     time.Time
}

// QuotaExceededError is a render refused by an [ArtifactQuota].
type QuotaExceededError struct {
	Namespace string
	// Size is the refused render's size, Used what the namespace's renders within the window
	// hold, Quota the namespace's quota, all in bytes.
	Size, Used, Quota int64
	Window            time.Duration
	// FreeAt is when the oldest counted render leaves the window.
	FreeAt time.Time
}

func (e *QuotaExceededError) Error() string {
	return fmt.Sprintf("the rendered Terraform JSON (%d bytes) would take namespace %s past its artifact quota: its renders of the last %v hold %d of %d bytes "+
		"in the shared artifact store (synth's --artifact-quota-bytes); the oldest leaves the count at %s",
		e.Size, e.Namespace, e.Window, e.Used, e.Quota, e.FreeAt.UTC().Format(time.RFC3339))
}

// Charge counts a render of size bytes whose content has the plain BLAKE3 digest digest
// (bus.Digest) against namespace ns, or refuses it with a *QuotaExceededError and counts
// nothing. Content counted within the window is admitted again without a new charge.
func (q *ArtifactQuota) Charge(ns, digest string, size int64) error {
	if q == nil || q.Bytes <= 0 {
		return nil
	}
	now, window := time.Now, q.Window
	if q.Now != nil {
		now = q.Now
	}
	if window <= 0 {
		window = DefaultArtifactQuotaWindow
	}
	t := now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.puts == nil {
		q.puts = map[string][]quotaPut{}
	}
	puts := q.puts[ns]
	for len(puts) > 0 && !puts[0].at.After(t.Add(-window)) {
		puts = puts[1:]
	}
	var used int64
	for _, p := range puts {
		if p.digest == digest {
			q.puts[ns] = puts
			return nil
		}
		used += p.size
	}
	if used+size > q.Bytes {
		q.puts[ns] = puts
		free := t
		if len(puts) > 0 {
			free = puts[0].at.Add(window)
		}
		return &QuotaExceededError{Namespace: ns, Size: size, Used: used, Quota: q.Bytes, Window: window, FreeAt: free}
	}
	q.puts[ns] = append(puts, quotaPut{digest: digest, size: size, at: t})
	return nil
}

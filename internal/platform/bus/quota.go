package bus

import (
	"fmt"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

// DefaultArtifactQuotaBytes is a namespace's default [ArtifactQuota]: 256 MiB stored within
// the collection window, per process.
const DefaultArtifactQuotaBytes = 256 << 20

// DefaultArtifactQuotaWindow is how long a stored artifact counts toward its namespace's
// quota: the longest a superseded artifact put now stays in lava-artifacts before the
// applier's collection deletes it, at the collection's defaults.
const DefaultArtifactQuotaWindow = DefaultCollectMinAge + DefaultCollectInterval

// ArtifactQuota bounds the bytes each namespace puts into the shared artifact store
// (lava-artifacts) within Window: synth's renders, the applier's plan artifacts, review
// bodies and state bodies. [ArtifactQuota.Charge] refuses an artifact that would take its
// namespace past Bytes before it is stored; [ArtifactQuota.Add] counts what must be stored
// whatever the count (a state body: what an apply made is never forgotten), so the next
// Charge of that namespace is refused instead. Content counted within the window counts once.
// What one namespace stores never counts against another's. Each process counts its own puts
// (synth and every applier replica), so a namespace stores at most Bytes per process within
// Window. Safe for concurrent use; a nil *ArtifactQuota, or one with Bytes 0, admits
// everything.
type ArtifactQuota struct {
	// Bytes is a namespace's quota, in bytes (0: no quota).
	Bytes int64
	// Window is how long a put counts (0: DefaultArtifactQuotaWindow).
	Window time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time

	mu sync.Mutex
	ns map[string]*quotaUsage
}

// quotaUsage is one namespace's puts within the window, oldest first, with their total and
// the digests they hold (a digest put again within the window is counted once: its count is
// how many of puts hold it).
type quotaUsage struct {
	puts    []quotaPut // puts[head:] are within the window
	head    int
	used    int64
	digests map[string]int
}

type quotaPut struct {
	digest string
	size   int64
	at     time.Time
}

// QuotaExceededError is an artifact refused by an [ArtifactQuota].
type QuotaExceededError struct {
	Namespace string
	// Size is the refused artifact's size, Used what the namespace's puts within the window
	// hold, Quota the namespace's quota, all in bytes.
	Size, Used, Quota int64
	Window            time.Duration
	// FreeAt is when the oldest counted put leaves the window.
	FreeAt time.Time
}

func (e *QuotaExceededError) Error() string {
	return fmt.Sprintf("storing %d more bytes would take namespace %s past its artifact quota: what it stored in the shared artifact store in the last %v "+
		"(renders, plans, review bodies, state bodies) holds %d of %d bytes (--artifact-quota-bytes); the oldest leaves the count at %s",
		e.Size, e.Namespace, e.Window, e.Used, e.Quota, e.FreeAt.UTC().Format(time.RFC3339))
}

// QuotaFlags are an [ArtifactQuota]'s settings as flags give them.
type QuotaFlags struct {
	Bytes  int64
	Window time.Duration
}

// Register defines --artifact-quota-bytes and --artifact-quota-window on fs.
func (f *QuotaFlags) Register(fs *pflag.FlagSet) {
	fs.Int64Var(&f.Bytes, "artifact-quota-bytes", DefaultArtifactQuotaBytes,
		"bytes one namespace may store in lava-artifacts within --artifact-quota-window (renders, plans, review bodies, state bodies; counted per process); 0: no quota")
	fs.DurationVar(&f.Window, "artifact-quota-window", DefaultArtifactQuotaWindow,
		"how long a stored artifact counts toward its namespace's quota: the applier's --artifact-min-age plus --artifact-collect-interval")
}

// Quota returns a new [ArtifactQuota] with f's settings.
func (f QuotaFlags) Quota() *ArtifactQuota { return &ArtifactQuota{Bytes: f.Bytes, Window: f.Window} }

// Charge counts an artifact of size bytes whose content has the plain digest digest ([Digest])
// against namespace ns, or refuses it with a *QuotaExceededError and counts nothing.
func (q *ArtifactQuota) Charge(ns, digest string, size int64) error {
	return q.count(ns, digest, size, false)
}

// Add counts an artifact that is stored whatever the count (see [ArtifactQuota]).
func (q *ArtifactQuota) Add(ns, digest string, size int64) {
	_ = q.count(ns, digest, size, true)
}

func (q *ArtifactQuota) count(ns, digest string, size int64, always bool) error {
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
	if q.ns == nil {
		q.ns = map[string]*quotaUsage{}
	}
	u := q.ns[ns]
	if u == nil {
		u = &quotaUsage{digests: map[string]int{}}
		q.ns[ns] = u
	}
	u.expire(t.Add(-window))
	if u.digests[digest] > 0 {
		return nil
	}
	if !always && u.used+size > q.Bytes {
		free := t
		if u.head < len(u.puts) {
			free = u.puts[u.head].at.Add(window)
		}
		return &QuotaExceededError{Namespace: ns, Size: size, Used: u.used, Quota: q.Bytes, Window: window, FreeAt: free}
	}
	u.puts = append(u.puts, quotaPut{digest: digest, size: size, at: t})
	u.used += size
	u.digests[digest]++
	return nil
}

// expire drops the puts made at or before cutoff, in time amortized constant per put: the
// slice is compacted only when its dropped head is the larger half.
func (u *quotaUsage) expire(cutoff time.Time) {
	for u.head < len(u.puts) && !u.puts[u.head].at.After(cutoff) {
		p := u.puts[u.head]
		u.used -= p.size
		if u.digests[p.digest]--; u.digests[p.digest] <= 0 {
			delete(u.digests, p.digest)
		}
		u.puts[u.head] = quotaPut{}
		u.head++
	}
	if u.head > 0 && u.head*2 >= len(u.puts) {
		u.puts = append(u.puts[:0:0], u.puts[u.head:]...)
		u.head = 0
	}
}

package anomaly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// BucketWindows is the KV bucket holding one de-duplication window per key (a fingerprint, or
// "<fingerprint>.escalation.<tier>" for an escalation tier), shared by every replica, so
// replicas agree and a restart keeps the windows. Values are JSON [Window]s. It is declared
// with the topology ([bus.Declare]: history 1, entries expire after max(2*window, 1h) without
// a sighting).
const BucketWindows = bus.BucketAnomalyWindows

// maxSeenIDs bounds the event ids a window remembers to recognise a redelivered event.
const maxSeenIDs = 32

// Window is one fingerprint's de-duplication window.
type Window struct {
	// Count is how many distinct events raised the fingerprint in this window, from 1.
	Count int64 `json:"count"`
	// FirstSeen opened the window; LastSeen is the latest sighting (UTC).
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	// Ordinal numbers the windows opened for the key since the entry was created, from 1
	// (it enters the published event id, so each window's alert is a new event).
	Ordinal int64 `json:"ordinal"`
	// OpenedBy is the event id that opened the window (its delivery is the window's alert).
	OpenedBy string `json:"openedBy"`
	// Seen are the most recent event ids counted in the window.
	Seen []string `json:"seen,omitempty"`
	// Delivered are the sinks that have the window's alert (or gave up on it for good).
	Delivered []string `json:"delivered,omitempty"`
}

// Verdict is what a sighting means.
type Verdict int

// Verdicts of [Windows.Observe].
const (
	// Opened: the first sighting in a window; route the anomaly.
	Opened Verdict = iota + 1
	// Repeated: a new event within the window; counted, not routed.
	Repeated
	// Redelivered: an event already counted (a redelivery); route it again to the sinks that
	// do not have it only if it opened the window.
	Redelivered
)

// Windows is the de-duplication state in [BucketWindows].
type Windows struct {
	kv     jetstream.KeyValue
	window time.Duration
}

// OpenWindows returns the Windows of [BucketWindows] for a de-duplication window of window
// (<= 0: [DefaultWindow]). The bucket must exist: bus.EnsureTopology declares it, with the
// TTL of bus.TopologyOptions.AnomalyWindow. It fails, wrapping jetstream.ErrBucketNotFound,
// when the topology was not ensured.
func OpenWindows(ctx context.Context, js jetstream.JetStream, window time.Duration) (*Windows, error) {
	if window <= 0 {
		window = DefaultWindow
	}
	kv, err := js.KeyValue(ctx, BucketWindows)
	if err != nil {
		return nil, fmt.Errorf("anomaly: kv bucket %s (create it with bus.EnsureTopology): %w", BucketWindows, err)
	}
	return &Windows{kv: kv, window: window}, nil
}

// TTL is the bucket's entry TTL as the server reports it.
func (w *Windows) TTL(ctx context.Context) (time.Duration, error) {
	st, err := w.kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("anomaly: kv bucket %s: %w", BucketWindows, err)
	}
	return st.TTL(), nil
}

// casAttempts bounds optimistic-concurrency retries on one key.
const casAttempts = 20

func (w *Windows) get(ctx context.Context, key string) (*Window, uint64, error) {
	e, err := w.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("anomaly: get window %s: %w", key, err)
	}
	win := &Window{}
	if err := json.Unmarshal(e.Value(), win); err != nil {
		// A corrupt entry is replaced.
		return nil, e.Revision(), nil
	}
	return win, e.Revision(), nil
}

// update applies f to the current window of key with compare-and-set, retrying on conflict.
func (w *Windows) update(ctx context.Context, key string, f func(cur *Window) (*Window, bool)) (*Window, error) {
	for range casAttempts {
		cur, rev, err := w.get(ctx, key)
		if err != nil {
			return nil, err
		}
		next, write := f(cur)
		if !write {
			return next, nil
		}
		b, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("anomaly: encode window: %w", err)
		}
		if rev == 0 {
			_, err = w.kv.Create(ctx, key, b)
		} else {
			_, err = w.kv.Update(ctx, key, b, rev)
		}
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return nil, fmt.Errorf("anomaly: write window %s: %w", key, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("anomaly: window %s: too much contention", key)
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Observe records a sighting of key by event id at now and says what it means: [Opened] when
// there is no window or it is older than the window length (a new window with count 1),
// [Redelivered] when id was already counted, else [Repeated] (count + 1, LastSeen = now).
// Replicas racing on one key agree: exactly one of them opens a window.
func (w *Windows) Observe(ctx context.Context, key, id string, now time.Time) (*Window, Verdict, error) {
	now = now.UTC()
	var verdict Verdict
	win, err := w.update(ctx, key, func(cur *Window) (*Window, bool) {
		switch {
		case cur == nil || now.Sub(cur.FirstSeen) >= w.window:
			ord := int64(1)
			if cur != nil {
				ord = cur.Ordinal + 1
			}
			verdict = Opened
			return &Window{Count: 1, FirstSeen: now, LastSeen: now, Ordinal: ord, OpenedBy: id, Seen: []string{id}}, true
		case slices.Contains(cur.Seen, id):
			verdict = Redelivered
			return cur, false
		}
		verdict = Repeated
		next := *cur
		next.Count++
		if now.After(next.LastSeen) {
			next.LastSeen = now
		}
		next.Seen = append(slices.Clone(cur.Seen), id)
		if len(next.Seen) > maxSeenIDs {
			next.Seen = next.Seen[len(next.Seen)-maxSeenIDs:]
		}
		return &next, true
	})
	if err != nil {
		return nil, 0, err
	}
	return win, verdict, nil
}

// MarkDelivered records that sink has the alert of window ordinal of key; a newer window
// is left alone.
func (w *Windows) MarkDelivered(ctx context.Context, key string, ordinal int64, sink string) error {
	_, err := w.update(ctx, key, func(cur *Window) (*Window, bool) {
		if cur == nil || cur.Ordinal != ordinal || slices.Contains(cur.Delivered, sink) {
			return cur, false
		}
		next := *cur
		next.Delivered = append(slices.Clone(cur.Delivered), sink)
		return &next, true
	})
	return err
}

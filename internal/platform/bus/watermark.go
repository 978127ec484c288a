package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Watermarks is one service's generation filter over the lava-watermarks bucket: per resource
// the newest metadata.generation the service has acted on, so an event of an older generation
// delivered after a newer one (redelivery, another replica, a restart) never wins. The value
// survives restarts; updates are compare-and-set on the KV revision, so replicas racing on one
// resource never move a watermark backwards. Pair it with the resource's lease ([Leases]) so the
// check and the effect happen under one holder.
type Watermarks struct {
	kv      jetstream.KeyValue
	service string
	metrics *Metrics
}

// NewWatermarks binds service's watermarks in lava-watermarks (created by [EnsureTopology]).
// service is one of the Service constants. m may be nil.
func NewWatermarks(ctx context.Context, js jetstream.JetStream, service string, m *Metrics) (*Watermarks, error) {
	if !isWord(service) {
		return nil, fmt.Errorf("bus: watermarks: service %q is not a lowercase word", service)
	}
	kv, err := js.KeyValue(ctx, BucketWatermarks)
	if err != nil {
		return nil, fmt.Errorf("bus: bind %s: %w", BucketWatermarks, err)
	}
	return &Watermarks{kv: kv, service: service, metrics: m}, nil
}

// Get returns the watermark of a resource, 0 if the service has seen none, and the KV
// revision (0 when absent).
func (w *Watermarks) Get(ctx context.Context, namespace, name string) (generation int64, revision uint64, err error) {
	key := WatermarkKey(w.service, namespace, name)
	e, err := w.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("bus: get watermark %s: %w", key, err)
	}
	g, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("bus: watermark %s: value %q: %w", key, e.Value(), err)
	}
	return g, e.Revision(), nil
}

// Advance reports whether generation is current for the resource: true if it is at least the
// watermark (and the watermark is raised to it), false if it is older (a stale event: ack it
// and do nothing). An equal generation is current: one generation has many events (retries,
// drift scans). The value is stored as decimal ASCII under [WatermarkKey].
func (w *Watermarks) Advance(ctx context.Context, namespace, name string, generation int64) (bool, error) {
	key := WatermarkKey(w.service, namespace, name)
	val := []byte(strconv.FormatInt(generation, 10))
	for {
		cur, rev, err := w.Get(ctx, namespace, name)
		if err != nil {
			return false, err
		}
		switch {
		case generation < cur:
			w.metrics.inc(func(m *Metrics) prometheus.Counter { return m.staleDropped })
			return false, nil
		case generation == cur && rev != 0:
			return true, nil
		case rev == 0:
			_, err = w.kv.Create(ctx, key, val)
		default:
			_, err = w.kv.Update(ctx, key, val, rev)
		}
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			// Another replica moved it: read again.
			if ctx.Err() != nil {
				return false, fmt.Errorf("bus: advance watermark %s: %w", key, ctx.Err())
			}
		default:
			return false, fmt.Errorf("bus: advance watermark %s: %w", key, err)
		}
	}
}

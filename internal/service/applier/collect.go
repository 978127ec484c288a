package applier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/readmodel"
)

// LiveArtifacts returns the digests in lava-artifacts that records in lava-state still
// reference: every resource's current state body ("state.*"), the body a destroy forgot
// ("forgotten.*", kept for audit), the body a `lava state restore` replaced ("replaced.*"), and
// in the applier's records ("applier.*") the held plan's artifact, review body and render, the
// last applied render (what a destroy, a re-apply and drift need) and the state body the last
// apply left (what `lava state restore` puts back after the state was lost). Old plans, old
// renders and the bodies of superseded state serials are not live.
func LiveArtifacts(ctx context.Context, kv jetstream.KeyValue) (map[string]bool, error) {
	live := map[string]bool{}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("applier: list %s: %w", bus.BucketState, err)
	}
	defer func() { _ = keys.Stop() }()
	for key := range keys.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("applier: read %s: %w", key, err)
		}
		switch {
		case strings.HasPrefix(key, "state."):
			var r state.Record
			if err := json.Unmarshal(e.Value(), &r); err != nil {
				return nil, fmt.Errorf("applier: decode %s: %w", key, err)
			}
			live[r.Digest] = true
		case strings.HasPrefix(key, "forgotten."), strings.HasPrefix(key, state.ReplacedPrefix):
			var f state.Forgotten
			if err := json.Unmarshal(e.Value(), &f); err != nil {
				return nil, fmt.Errorf("applier: decode %s: %w", key, err)
			}
			live[f.Record.Digest] = true
		case strings.HasPrefix(key, readmodel.RecordPrefix):
			var r readmodel.Record
			if err := json.Unmarshal(e.Value(), &r); err != nil {
				return nil, fmt.Errorf("applier: decode %s: %w", key, err)
			}
			if h := r.Held; h != nil {
				live[h.PlanDigest], live[h.Target.RenderedDigest], live[h.ReviewDigest] = true, true, true
			}
			if r.Last != nil {
				live[r.Last.ArtifactDigest], live[r.Last.StateDigest] = true, true
			}
		}
	}
	delete(live, "")
	return live, nil
}

// liveRenders adds the render of every resource's newest Synthesized (LAVA_PHASES) to live:
// a Synthesized not yet planned (an applier down for longer than the minimum age) must still
// find its render.
func liveRenders(ctx context.Context, js jetstream.JetStream, live map[string]bool) error {
	st, err := js.Stream(ctx, bus.StreamPhases)
	if err != nil {
		return fmt.Errorf("applier: %w", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(bus.PrefixPhase+"*.*."+bus.EventSynthesized))
	if err != nil {
		return fmt.Errorf("applier: list Synthesized subjects: %w", err)
	}
	for subject := range info.State.Subjects {
		syn := &lavav1.Synthesized{}
		found, err := bus.LastEvent(ctx, st, subject, syn)
		if errors.Is(err, bus.ErrUndecodable) || (err == nil && !found) {
			continue // a poison message references nothing
		}
		if err != nil {
			return fmt.Errorf("applier: %w", err)
		}
		if d := syn.GetArtifactDigest(); d != "" {
			live[d] = true
		}
	}
	return nil
}

// CollectArtifacts deletes the artifacts no record references (LiveArtifacts) and no
// resource's newest Synthesized names that are older than minAge (bus.Artifacts.Collect) and logs what it did.
func CollectArtifacts(ctx context.Context, js jetstream.JetStream, minAge time.Duration, log *slog.Logger) (bus.CollectResult, error) {
	kv, err := js.KeyValue(ctx, bus.BucketState)
	if err != nil {
		return bus.CollectResult{}, fmt.Errorf("applier: bind %s: %w", bus.BucketState, err)
	}
	art, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		return bus.CollectResult{}, err
	}
	live, err := LiveArtifacts(ctx, kv)
	if err != nil {
		return bus.CollectResult{}, err
	}
	if err := liveRenders(ctx, js, live); err != nil {
		return bus.CollectResult{}, err
	}
	res, err := art.Collect(ctx, bus.CollectOptions{MinAge: minAge, Keep: func(d string) bool { return live[d] }})
	if log != nil && (res.Deleted > 0 || err != nil) {
		log.Info("artifacts collected", "deleted", res.Deleted, "deleted_bytes", res.DeletedBytes, "kept", res.Kept, "error", err)
	}
	return res, err
}

// collectLoop runs CollectArtifacts every CollectInterval until ctx ends; a failed pass is
// logged and retried at the next interval. Every replica collects: the deletions are
// idempotent.
func (s *Service) collectLoop(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.CollectInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			res, err := CollectArtifacts(ctx, s.cfg.JS, s.cfg.CollectMinAge, s.cfg.Logger)
			if err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("artifact collection failed; next pass at the next interval", "error", err)
			}
			s.metrics.collected.Add(float64(res.Deleted))
		}
	}
}

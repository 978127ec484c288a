package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/identity"
)

// Entry is one resource's schedule, stored as JSON in lava-drift-schedule under
// [bus.ResourceKey]. Times are UTC.
type Entry struct {
	// Namespace, Name and UID identify the resource.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Generation is the generation of the last Applied; ObservedGeneration the newest
	// ResourceObserved seen. A scan runs only when Generation >= ObservedGeneration (the
	// newest spec is what is applied).
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Engine is the engine name ("embedded", "tofu", "terraform") of the last apply.
	Engine string `json:"engine,omitempty"`
	// PlanID, TerraformJSONDigest and ArtifactDigest come from the last Applied.
	PlanID              string `json:"planId,omitempty"`
	TerraformJSONDigest string `json:"terraformJsonDigest,omitempty"`
	ArtifactDigest      string `json:"artifactDigest,omitempty"`
	// Providers are the applied configuration's provider requirements.
	Providers []engine.ProviderRequirement `json:"providers,omitempty"`
	// AppliedEventID is the event_id of the last Applied.
	AppliedEventID string `json:"appliedEventId,omitempty"`
	// Interval is spec.driftInterval (0: the service default).
	Interval time.Duration `json:"interval,omitempty"`
	// BindsSecrets is true when spec.bindingsFrom names a Secret: drift does not read those
	// Secrets, so every observed and declared value of the resource's findings
	// is redacted, since it could carry a Secret's value.
	BindsSecrets bool `json:"bindsSecrets,omitempty"`
	// ServiceAccountName (spec.serviceAccountName) and ProviderEnvFrom (spec.providerEnvFrom,
	// names only) choose the provider credentials of a scan, as the applier's
	// (identity.Resolver.For).
	ServiceAccountName string                  `json:"serviceAccountName,omitempty"`
	ProviderEnvFrom    []identity.SecretKeyRef `json:"providerEnvFrom,omitempty"`
	// Suspended (spec.suspend) and Finalizing stop scans.
	Suspended  bool `json:"suspended,omitempty"`
	Finalizing bool `json:"finalizing,omitempty"`
	// LastScan is when the last scan finished; Due when the next one is due (zero: nothing
	// applied yet).
	LastScan time.Time `json:"lastScan,omitzero"`
	Due      time.Time `json:"due,omitzero"`
	// Failures counts consecutive failed scans (reset by a successful one).
	Failures int `json:"failures,omitempty"`
	// ClaimedBy and ClaimUntil mark a scan in progress by a replica.
	ClaimedBy  string    `json:"claimedBy,omitempty"`
	ClaimUntil time.Time `json:"claimUntil,omitzero"`
}

// Scannable reports whether e has something applied to scan and nothing holds it back.
func (e *Entry) Scannable() bool {
	return e.ArtifactDigest != "" && !e.Due.IsZero() && !e.Suspended && !e.Finalizing &&
		e.Generation >= e.ObservedGeneration
}

// DueAt reports whether e should be scanned at now: scannable, due, and not claimed by a live
// claim.
func (e *Entry) DueAt(now time.Time) bool {
	return e.Scannable() && !now.Before(e.Due) && (e.ClaimedBy == "" || now.After(e.ClaimUntil))
}

// NextDue is base + interval scaled by a uniform factor in [1-jitter, 1+jitter].
func NextDue(base time.Time, interval time.Duration, jitter float64) time.Time {
	if jitter <= 0 {
		return base.Add(interval)
	}
	f := 1 - jitter + 2*jitter*rand.Float64()
	return base.Add(time.Duration(float64(interval) * f))
}

// maxCAS bounds compare-and-set retries of one update.
const maxCAS = 16

// errSkip, returned by an update function, leaves the entry unchanged.
var errSkip = errors.New("drift: no change")

// update applies fn to the entry under key with a compare-and-set, retrying on a concurrent
// write. fn receives nil when there is no entry; it returns the new entry, nil to delete, or
// errSkip to leave it. It returns the stored entry (nil when deleted or absent).
func update(ctx context.Context, kv jetstream.KeyValue, key string, fn func(*Entry) (*Entry, error)) (*Entry, error) {
	for range maxCAS {
		var cur *Entry
		var rev uint64
		kve, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("drift: read schedule %s: %w", key, err)
		default:
			rev = kve.Revision()
			cur = &Entry{}
			if err := json.Unmarshal(kve.Value(), cur); err != nil {
				return nil, fmt.Errorf("drift: decode schedule %s: %w", key, err)
			}
		}
		next, err := fn(cur)
		if errors.Is(err, errSkip) {
			return cur, nil
		}
		if err != nil {
			return nil, err
		}
		if next == nil {
			if cur == nil {
				return nil, nil
			}
			err = kv.Delete(ctx, key, jetstream.LastRevision(rev))
		} else {
			b, merr := json.Marshal(next)
			if merr != nil {
				return nil, fmt.Errorf("drift: encode schedule %s: %w", key, merr)
			}
			if cur == nil {
				_, err = kv.Create(ctx, key, b)
			} else {
				_, err = kv.Update(ctx, key, b, rev)
			}
		}
		if err == nil {
			return next, nil
		}
		if !isConflict(err) {
			return nil, fmt.Errorf("drift: write schedule %s: %w", key, err)
		}
	}
	return nil, fmt.Errorf("drift: schedule %s: too many concurrent writes", key)
}

// isConflict reports a failed compare-and-set.
func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return true
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}

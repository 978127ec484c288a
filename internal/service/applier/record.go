package applier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// recordPrefix starts the applier's keys in lava-state ("applier.<ns>.<name>", the
// name part being bus.ResourceKey).
const recordPrefix = "applier."

// History bounds of a [Record].
const (
	maxPlans   = 32
	maxApplied = 32
	maxHandled = 64
)

// Record is what the applier keeps per resource in lava-state under "applier.<ns>.<name>"
// (JSON). It is written only under the resource's lease.
type Record struct {
	// UID is the LavaArchitecture's metadata.uid the record belongs to.
	UID string `json:"uid"`
	// Held is the plan awaiting approval; nil when none.
	Held *engine.PlanRecord `json:"held,omitempty"`
	// HeldGeneration is the generation Held was planned for.
	HeldGeneration int64 `json:"heldGeneration,omitempty"`
	// Plans are the most recent plan ids made for the resource, oldest first (at most 32).
	Plans []string `json:"plans,omitempty"`
	// Applied are the most recent plan ids applied, oldest first (at most 32).
	Applied []string `json:"applied,omitempty"`
	// Handled are the most recent event ids whose outcome was published, oldest first (at
	// most 64).
	Handled []string `json:"handled,omitempty"`
	// Last is the last applied configuration, what a destroy or a re-apply needs; nil before
	// the first apply and after a destroy.
	Last *LastApplied `json:"last,omitempty"`
	// Deleted is set once Destroyed was published for UID: later events of that object are
	// dropped (a late Synthesized must never resurrect it).
	Deleted bool `json:"deleted,omitempty"`

	revision uint64
}

// LastApplied describes the configuration last applied to a resource.
type LastApplied struct {
	PlanID              string `json:"planId"`
	Engine              string `json:"engine"`
	ArtifactDigest      string `json:"artifactDigest"`
	TerraformJSONDigest string `json:"terraformJsonDigest"`
	BindingsDigest      string `json:"bindingsDigest"`
	// Providers are the architecture's providers (local name and source).
	Providers    []engine.ProviderRequirement `json:"providers,omitempty"`
	Generation   int64                        `json:"generation"`
	StateSerial  uint64                       `json:"stateSerial"`
	StateLineage string                       `json:"stateLineage"`
	// Resources is the number of managed resource instances the apply left in the state
	// (state.ManagedInstances); a later state with fewer at the same or an older serial has
	// regressed.
	Resources int       `json:"resources,omitempty"`
	AppliedAt time.Time `json:"appliedAt"`
}

func push(list []string, v string, limit int) []string {
	if slices.Contains(list, v) {
		return list
	}
	list = append(list, v)
	if len(list) > limit {
		list = list[len(list)-limit:]
	}
	return list
}

// records reads and writes [Record]s.
type records struct {
	kv jetstream.KeyValue
}

// RecordKey is the lava-state key of a resource's [Record]: "applier.<ns>.<name>".
func RecordKey(namespace, name string) string { return recordPrefix + bus.ResourceKey(namespace, name) }

// load returns the record of a resource (an empty one when absent).
func (r records) load(ctx context.Context, namespace, name string) (*Record, error) {
	e, err := r.kv.Get(ctx, RecordKey(namespace, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return &Record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("applier: read record of %s/%s: %w", namespace, name, err)
	}
	rec := &Record{}
	if err := json.Unmarshal(e.Value(), rec); err != nil {
		return nil, fmt.Errorf("applier: decode record of %s/%s: %w", namespace, name, err)
	}
	rec.revision = e.Revision()
	return rec, nil
}

// save writes rec with a compare-and-set on the revision it was read at.
func (r records) save(ctx context.Context, namespace, name string, rec *Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("applier: encode record of %s/%s: %w", namespace, name, err)
	}
	key := RecordKey(namespace, name)
	var rev uint64
	if rec.revision == 0 {
		rev, err = r.kv.Create(ctx, key, b)
	} else {
		rev, err = r.kv.Update(ctx, key, b, rec.revision)
	}
	if err != nil {
		return fmt.Errorf("applier: write record of %s/%s: %w", namespace, name, err)
	}
	rec.revision = rev
	return nil
}

// Load reads the applier's record of a resource from lava-state (for `lava state show` and
// tests); the zero Record when there is none.
func Load(ctx context.Context, js jetstream.JetStream, namespace, name string) (*Record, error) {
	kv, err := js.KeyValue(ctx, bus.BucketState)
	if err != nil {
		return nil, fmt.Errorf("applier: bind %s: %w", bus.BucketState, err)
	}
	return records{kv: kv}.load(ctx, namespace, name)
}

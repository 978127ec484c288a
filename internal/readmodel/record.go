package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// RecordPrefix starts the applier's keys in lava-state ("applier.<ns>.<name>", the
// name part being bus.ResourceKey).
const RecordPrefix = "applier."

// Record is what the applier keeps per resource in lava-state under "applier.<ns>.<name>"
// (JSON). The applier writes it, only under the resource's lease; `lava state show` and
// `lava plan show` read it.
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
	// Interrupted is set when an apply's CLI was killed before it saved its state
	// (engine.ErrApplyInterrupted): objects it made may be missing from the state, so every
	// later plan is held for approval as a regressed state's is, until an apply succeeds.
	Interrupted *Interruption `json:"interrupted,omitempty"`
	// Deleted is set once Destroyed was published for UID: later events of that object are
	// dropped (a late Synthesized must never resurrect it).
	Deleted bool `json:"deleted,omitempty"`
}

// Interruption is an apply stopped before it saved its state ([Record].Interrupted).
type Interruption struct {
	// PlanID is the plan whose apply was stopped.
	PlanID string `json:"planId"`
	// Message is the engine's error, redacted and bounded as a Failed condition's: what the
	// run made and what of it the stored state lacks.
	Message string    `json:"message"`
	At      time.Time `json:"at"`
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
	Resources int `json:"resources,omitempty"`
	// StateDigest is the artifact digest of the state body the apply left (StateSerial of
	// StateLineage): the body `lava state restore` puts back when the state is lost or
	// regressed; the artifact collection keeps it. Empty in records written before it existed.
	StateDigest string    `json:"stateDigest,omitempty"`
	AppliedAt   time.Time `json:"appliedAt"`
	// Manual: the object's spec.approvePlan was not auto when this configuration was applied,
	// so a re-apply of it (a drift correction) is held for approval whatever the remediation
	// policy says.
	Manual bool `json:"manual,omitempty"`
}

// RecordKey is the lava-state key of a resource's [Record]: "applier.<ns>.<name>".
func RecordKey(namespace, name string) string { return RecordPrefix + bus.ResourceKey(namespace, name) }

// ReadRecord reads a resource's [Record] from kv (the lava-state bucket) with the revision it
// was read at, for a compare-and-set write; an empty Record and revision 0 when there is none.
// Errors (reading, or a value that is not a Record's JSON) name the resource.
func ReadRecord(ctx context.Context, kv jetstream.KeyValue, namespace, name string) (*Record, uint64, error) {
	e, err := kv.Get(ctx, RecordKey(namespace, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return &Record{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("readmodel: read the applier's record of %s/%s: %w", namespace, name, err)
	}
	rec := &Record{}
	if err := json.Unmarshal(e.Value(), rec); err != nil {
		return nil, 0, fmt.Errorf("readmodel: decode the applier's record of %s/%s: %w", namespace, name, err)
	}
	return rec, e.Revision(), nil
}

// Load reads the applier's record of a resource from lava-state (for `lava state show`,
// `lava plan show` and tests); the zero Record when there is none.
func Load(ctx context.Context, js jetstream.JetStream, namespace, name string) (*Record, error) {
	kv, err := js.KeyValue(ctx, bus.BucketState)
	if err != nil {
		return nil, fmt.Errorf("readmodel: bind %s: %w", bus.BucketState, err)
	}
	rec, _, err := ReadRecord(ctx, kv, namespace, name)
	return rec, err
}

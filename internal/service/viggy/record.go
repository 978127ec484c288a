package viggy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/lava-operator/lava/internal/platform/bus"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// Bucket is the JetStream KV bucket holding viggy's per-resource [Record], keyed by
// bus.ResourceKey. [New] creates it when missing (it is not yet in bus.Declare).
const Bucket = bus.BucketViggy

// Record is what viggy keeps per resource, as JSON. Times are UTC.
type Record struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Generation is the newest generation seen (ResourceObserved, or the events acted on).
	Generation int64 `json:"generation"`
	// Policy is the effective RemediationPolicy of the newest ResourceObserved, as binary
	// protobuf; empty: [DefaultPolicy].
	Policy []byte `json:"policy,omitempty"`
	// Labels are the resource's metadata.labels (for anomalies).
	Labels map[string]string `json:"labels,omitempty"`
	// Interval is spec.driftInterval (the next scan; the decision's requeue_after).
	Interval time.Duration `json:"interval,omitempty"`
	// Suspended is spec.suspend of the newest ResourceObserved: no pass, retry or escalation
	// runs until a resumed generation is observed.
	Suspended bool `json:"suspended,omitempty"`
	// LastEventID, LastSeverity, LastAction and LastPhase describe the last pass.
	LastEventID  string `json:"lastEventId,omitempty"`
	LastSeverity int32  `json:"lastSeverity,omitempty"`
	LastAction   int32  `json:"lastAction,omitempty"`
	LastPhase    int32  `json:"lastPhase,omitempty"`
	// HeldPlanID is the plan a RequireApproval hold waits on (from Planned with
	// awaiting_approval).
	HeldPlanID string `json:"heldPlanId,omitempty"`
	// Retry is the scheduled retry of a failed stage, nil when none.
	Retry *Retry `json:"retry,omitempty"`
	// Escalation is the running escalation, nil when none.
	Escalation *Escalation `json:"escalation,omitempty"`
	// LockWaits counts the consecutive Failed with reason Locked since the last Applied or
	// new generation: each schedules a retry of the same attempt (a wait, not a failed
	// attempt), delayed by the backoff of this count.
	LockWaits int `json:"lockWaits,omitempty"`
}

// Retry is a scheduled RetryRequested.
type Retry struct {
	// Stage is the lavav1.Stage to run again; Attempt the attempt the retry is (from 2, or
	// the failed attempt again after a lock wait).
	Stage   int32 `json:"stage"`
	Attempt int32 `json:"attempt"`
	// LockWait is set when the retry follows a Failed with reason Locked: it repeats the
	// attempt, and its event id is eventid.LockWaitTrigger of the Failed.
	LockWait bool `json:"lockWait,omitempty"`
	// Reason, FailedEventID and PlanID come from the Failed.
	Reason        string `json:"reason,omitempty"`
	FailedEventID string `json:"failedEventId"`
	PlanID        string `json:"planId,omitempty"`
	// Generation is the failed generation.
	Generation int64 `json:"generation"`
	// Due is when RetryRequested is published (its not_before).
	Due time.Time `json:"due"`
}

// Escalation is a running escalation ladder.
type Escalation struct {
	// Tier is the last tier notified (0 = first); Next when the next tier is due.
	Tier int       `json:"tier"`
	Next time.Time `json:"next"`
	// Severity, Fields, DriftEventID, TerraformJSONDigest and Generation describe the drift.
	Severity            int32  `json:"severity"`
	Fields              int    `json:"fields"`
	DriftEventID        string `json:"driftEventId"`
	TerraformJSONDigest string `json:"terraformJsonDigest,omitempty"`
	Generation          int64  `json:"generation"`
}

// policy decodes r.Policy ([DefaultPolicy] when empty or undecodable).
func (r *Record) policy() *lavav1.RemediationPolicy {
	if len(r.Policy) == 0 {
		return pipeline.DefaultRemediation()
	}
	p := &lavav1.RemediationPolicy{}
	if proto.Unmarshal(r.Policy, p) != nil {
		return pipeline.DefaultRemediation()
	}
	return p
}

// errSkip, returned by an update function, leaves the record unchanged.
var errSkip = errors.New("viggy: no change")

const maxCAS = 16

// load reads the record under key; nil when absent.
func load(ctx context.Context, kv jetstream.KeyValue, key string) (*Record, uint64, error) {
	kve, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("viggy: read %s: %w", key, err)
	}
	r := &Record{}
	if err := json.Unmarshal(kve.Value(), r); err != nil {
		return nil, 0, fmt.Errorf("viggy: decode %s: %w", key, err)
	}
	return r, kve.Revision(), nil
}

// update applies fn to the record under key with a compare-and-set, retrying on a concurrent
// write. fn receives nil when there is none and returns the new record or errSkip.
func update(ctx context.Context, kv jetstream.KeyValue, key string, fn func(*Record) (*Record, error)) (*Record, error) {
	for range maxCAS {
		cur, rev, err := load(ctx, kv, key)
		if err != nil {
			return nil, err
		}
		var in *Record
		if cur != nil {
			c := *cur
			in = &c
		}
		next, err := fn(in)
		if errors.Is(err, errSkip) {
			return cur, nil
		}
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("viggy: encode %s: %w", key, err)
		}
		if cur == nil {
			_, err = kv.Create(ctx, key, b)
		} else {
			_, err = kv.Update(ctx, key, b, rev)
		}
		if err == nil {
			return next, nil
		}
		var apiErr *jetstream.APIError
		if !errors.Is(err, jetstream.ErrKeyExists) && !(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) {
			return nil, fmt.Errorf("viggy: write %s: %w", key, err)
		}
	}
	return nil, fmt.Errorf("viggy: %s: too many concurrent writes", key)
}

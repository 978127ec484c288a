package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
	"github.com/lava-operator/lava/internal/platform/credentials"
)

// Engine plans and applies one resource's rendered Terraform JSON against its durable state.
// Implementations are safe for concurrent use on different resources; callers serialise
// operations on one resource (the applier's lease), and the state lock refuses overlaps.
type Engine interface {
	// Name is the engine's name as the CRD spells it: "tofu", "terraform" or "embedded".
	Name() string
	// Plan plans target against its current state and stores the plan artifact. The error
	// wraps [ErrProviderUnavailable] when a provider cannot be installed and [ErrLocked] when
	// the state is locked by someone else.
	Plan(ctx context.Context, req PlanRequest) (*PlanRecord, error)
	// Apply applies exactly the recorded plan, after checking that the state's serial and
	// lineage are still those it was planned against (else [ErrPlanStale]).
	Apply(ctx context.Context, req ApplyRequest) (*ApplyResult, error)
	// Destroy destroys every object in the target's state. The state record stays (with no
	// resources); removing it is the caller's decision ([state.Store.Forget]).
	Destroy(ctx context.Context, req DestroyRequest) (*DestroyResult, error)
	// ScanDrift refreshes the state against the real world and compares it with the
	// configuration, attribute by attribute. It changes no state.
	ScanDrift(ctx context.Context, req DriftRequest) (*DriftReport, error)
	// Outputs reads the outputs recorded in the target's state; [state.ErrNotFound] when the
	// resource has no state.
	Outputs(ctx context.Context, key state.Key) (*Outputs, error)
}

// Target is what every operation works on: one resource's rendered Terraform JSON (by
// artifact digest) and its state.
type Target struct {
	// Key names the resource whose state is used.
	Key state.Key `json:"key"`
	// RenderedDigest is the artifact digest of the rendered Terraform JSON (the exact bytes
	// synth stored; written unchanged as main.tf.json).
	RenderedDigest string `json:"renderedDigest"`
	// Rendered, set only for a speculative plan ([PlanRequest].Speculative), is the rendered
	// JSON itself, never stored: the engines read it instead of the artifact RenderedDigest
	// names (which is still its digest, for the plan id).
	Rendered []byte `json:"-"`
	// ProviderSources maps a provider local name to its source address, from the
	// architecture's :providers (e.g. "aws" -> "hashicorp/aws"). Local names used by the JSON
	// without an entry default to "hashicorp/NAME" ([Requirements]).
	ProviderSources map[string]string `json:"providerSources,omitempty"`
	// ProviderConstraints maps a provider local name to the version constraint the architecture's
	// :providers pins it at (e.g. "aws" -> "~> 6.0"); a name without an entry has no pin. Both
	// engines require it besides any constraint of the rendered JSON's own required_providers,
	// and fail with [ErrProviderUnavailable] naming it and the versions the mirror has when
	// the mirror has none that meets it.
	ProviderConstraints map[string]string `json:"providerConstraints,omitempty"`
	// RegressedFrom, set only for a plan, is the id of the last applied plan when the state
	// regressed since that apply (fewer resources, an older serial, another lineage or no
	// state at all). It enters the plan id ([PlanRecord.ComputePlanID]), so a plan against a
	// wiped state never reuses the id of a plan approved or applied before.
	RegressedFrom string `json:"regressedFrom,omitempty"`
	// RepeatedAfter, set only for a plan, is the newest applied plan id of the object when the
	// plan's id without it is one already applied: the same drift corrected again is the same
	// plan against the same state (a correction leaves the state body the last apply left at
	// the same serial). It enters the plan id ([PlanRecord.ComputePlanID]), so such a plan has
	// an id no approval named before: an approval by id is spent by its apply.
	RepeatedAfter string `json:"repeatedAfter,omitempty"`
	// Redact lists secret values (binding values from Secrets) that must not appear in any
	// error text; engines add the sensitive values they learn themselves.
	Redact []string `json:"-"`
	// Holder names who takes the state lock: the replica and its work lease, so a lock left
	// by a dead holder can be recognised and taken over.
	Holder string `json:"-"`
	// Credentials are the object's provider credentials (its ServiceAccount's token and
	// workload-identity variables, spec.providerEnvFrom); the only credentials its providers
	// (and tofu) get: nil for none (docs/security.md, "Engines"). Never recorded.
	Credentials *credentials.Provider `json:"-"`
}

// PlanRequest asks for a plan.
type PlanRequest struct {
	Target
	// BindingsDigest is the digest of the bindings the JSON was rendered from; it enters the
	// plan id only.
	BindingsDigest string
	// Review asks for the reviewable plan body (PlanRecord.ReviewDigest), for a plan a
	// person approves: `lava plan show` prints it.
	Review bool
	// Speculative asks for a plan that changes nothing (a preview, PlanService): it reads the
	// rendered JSON from Target.Rendered and stores nothing in the artifact store (no plan
	// artifact, the review body in PlanRecord.ReviewBody), no state lock is taken, no provider is recorded in the object's
	// dependency lock (a version it records must still match), and an interrupted apply is
	// not recovered (the error then wraps [ErrRecoveryPending]). Its plan id is the one a plan
	// of the same request would get.
	Speculative bool
}

// ApplyRequest asks to apply a recorded plan.
type ApplyRequest struct {
	// Plan is the record [Engine.Plan] returned.
	Plan *PlanRecord
	// Redact, Holder and Credentials as in [Target].
	Redact      []string
	Holder      string
	Credentials *credentials.Provider
}

// DestroyRequest asks to destroy a target's objects.
type DestroyRequest struct {
	Target
}

// DriftRequest asks for a drift scan.
type DriftRequest struct {
	Target
	// CosmeticPrefixes are attribute path prefixes whose updates are cosmetic
	// (nil: [DefaultCosmeticPrefixes]).
	CosmeticPrefixes []string
}

// Action is what a plan does to one resource: the Terraform plan's actions folded into one
// word.
type Action string

// Actions.
const (
	ActionNoOp    Action = "no-op"
	ActionCreate  Action = "create"
	ActionUpdate  Action = "update"
	ActionDelete  Action = "delete"
	ActionReplace Action = "replace"
	ActionRead    Action = "read"
)

// Summary counts a plan's changes the way Terraform's "Plan: N to add, N to change, N to
// destroy" does (a replacement counts as one add and one destroy).
type Summary struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
}

// ResourceAction is the planned action for one resource instance.
type ResourceAction struct {
	// Address is the instance address ("local_file.a", "aws_subnet.s[0]").
	Address string `json:"address"`
	// Type is the resource type; Mode "managed" or "data".
	Type string `json:"type"`
	Mode string `json:"mode"`
	// Action is the folded action.
	Action Action `json:"action"`
}

// PlanRecord is a recorded plan: what was planned, against which state, and where its
// artifact is. It is JSON-serialisable so the applier can keep it between plan and apply.
type PlanRecord struct {
	// PlanID is [PlanID] over the fields below.
	PlanID string `json:"planId"`
	// Target is what was planned (Redact and Holder are not kept).
	Target Target `json:"target"`
	// BindingsDigest is the request's bindings digest.
	BindingsDigest string `json:"bindingsDigest"`
	// Engine and EngineVersion name the engine ("tofu", "1.12.6").
	Engine        string `json:"engine"`
	EngineVersion string `json:"engineVersion"`
	// ProviderVersions maps each provider's full address
	// ("registry.opentofu.org/hashicorp/local") to the version installed.
	ProviderVersions map[string]string `json:"providerVersions"`
	// StateSerial and StateLineage are the state planned against (0 and "" for no state);
	// StateDigest the state.Record digest of its body ("" for no state).
	StateSerial  uint64 `json:"stateSerial"`
	StateLineage string `json:"stateLineage"`
	StateDigest  string `json:"stateDigest,omitempty"`
	// PlanDigest is the artifact digest of the opaque plan artifact (for tofu/terraform the
	// saved plan file).
	PlanDigest string `json:"planDigest"`
	// ReviewDigest is the artifact digest of the plan's reviewable body: the plan in the
	// JSON format of `tofu show -json` (terraform-json's Plan), sensitive values removed
	// ([ReviewPlan]); "" when the request did not ask for one (PlanRequest.Review).
	ReviewDigest string `json:"reviewDigest,omitempty"`
	// ReviewBody is a speculative plan's review body, kept in memory and never stored
	// (ReviewDigest is then its digest); nil for any other plan, whose body is the artifact
	// ReviewDigest names.
	ReviewBody []byte `json:"-"`
	// HasChanges is false when applying would change nothing.
	HasChanges bool             `json:"hasChanges"`
	Summary    Summary          `json:"summary"`
	Resources  []ResourceAction `json:"resources"`
	// Warnings are the plan's warning diagnostics ("SUMMARY: DETAIL"), failed check block
	// assertions among them ("Check block assertion failed: MESSAGE"), with the request's
	// redactions and the plan's sensitive values removed, at most [MaxWarnings] of at most
	// [MaxWarningLen] bytes each. They derive from the inputs the plan id covers and are not
	// part of it.
	Warnings []string `json:"warnings,omitempty"`
	// CreatedAt is when the plan was made (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// Policy is the verdict of the namespace's plan rules on this plan, set by the applier when
	// a rule matched (nil: every rule allowed it; internal/lang/planpolicy). Not part of the
	// plan id: the rules judge the plan, they are not what it does.
	Policy *planpolicy.Result `json:"policy,omitempty"`
}

// ApplyResult is the outcome of an apply.
type ApplyResult struct {
	PlanID string `json:"planId"`
	// StateSerial, StateLineage and StateDigest describe the state written by the apply.
	StateSerial  uint64 `json:"stateSerial"`
	StateLineage string `json:"stateLineage"`
	StateDigest  string `json:"stateDigest"`
	// Summary is the applied plan's summary.
	Summary Summary `json:"summary"`
	// Outputs are the state's outputs after the apply.
	Outputs *Outputs `json:"-"`
}

// DestroyResult is the outcome of a destroy.
type DestroyResult struct {
	// Destroyed is how many resource instances were destroyed.
	Destroyed    int    `json:"destroyed"`
	StateSerial  uint64 `json:"stateSerial"`
	StateLineage string `json:"stateLineage"`
}

// Outputs are a state's root module outputs, split by sensitivity. Sensitive values go only
// to the Secret "<name>-lava-outputs", never into events, status or logs.
type Outputs struct {
	// Values are the non-sensitive outputs, each as the JSON of its value.
	Values map[string]json.RawMessage `json:"values"`
	// Sensitive are the outputs Terraform marks sensitive.
	Sensitive map[string]json.RawMessage `json:"-"`
}

// Bounds of PlanRecord.Warnings.
const (
	MaxWarnings   = 20
	MaxWarningLen = 512
)

// Cut returns s cut to [MaxWarningLen] bytes (at a UTF-8 boundary, then "…"): the bound of a
// warning, a check's failure message and a drift finding's value. Redact before cutting: a
// secret straddling the cut would keep a fragment no redaction matches.
func Cut(s string) string {
	if len(s) <= MaxWarningLen {
		return s
	}
	return strings.ToValidUTF8(s[:MaxWarningLen], "") + "…"
}

// AddWarning appends a warning to the record, redacted by r and within the bounds of
// [MaxWarnings] and [MaxWarningLen]; repeated warnings are kept once.
func (p *PlanRecord) AddWarning(r *Redactor, w string) {
	w = Cut(r.Redact(w))
	if len(p.Warnings) >= MaxWarnings || slices.Contains(p.Warnings, w) {
		return
	}
	p.Warnings = append(p.Warnings, w)
}

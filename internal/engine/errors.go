package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lava-operator/lava/internal/engine/state"
)

var (
	// ErrProviderUnavailable reports a provider that cannot be installed from the configured
	// mirror; the error is a *[ProviderUnavailableError].
	ErrProviderUnavailable = errors.New("engine: provider not available")
	// ErrEngineUnavailable reports an engine that cannot run here: a CLI engine whose binary
	// is not there (yet: lava up offers the tofu engine while `make tools-tofu` builds it).
	// Not retried until the environment changes.
	ErrEngineUnavailable = errors.New("engine: not available")
	// ErrProviderChecksumMismatch reports a provider binary whose h1: hash is none of those the
	// resource's dependency lock records for it (docs/security.md, "Engines"), or a downloaded
	// archive that does not match its signed SHA256SUMS or its network mirror's hashes: it is
	// never started.
	ErrProviderChecksumMismatch = errors.New("engine: provider checksum mismatch")
	// ErrProviderSignatureInvalid reports a provider release whose SHA256SUMS file carries no
	// valid OpenPGP signature by a key the registry lists for it: it is not installed.
	ErrProviderSignatureInvalid = errors.New("engine: provider signature invalid")
	// ErrProviderVersionNotFound reports a provider that the registry or network mirror has,
	// but in no version that meets the configuration's version constraints (or not for this
	// platform).
	ErrProviderVersionNotFound = errors.New("engine: provider version not found")
	// ErrProviderRegistryUnavailable reports a provider registry or network mirror that did not
	// answer (connection refused, TLS failure, a 5xx, a malformed answer); retried.
	ErrProviderRegistryUnavailable = errors.New("engine: provider registry unavailable")
	// ErrPlanStale reports a plan whose state changed since it was planned; the error is a
	// *[PlanStaleError]. Plan again.
	ErrPlanStale = errors.New("engine: plan is stale")
	// ErrCreateInterrupted reports creates whose results a dead operation lost and that the
	// engine can neither find again nor rule out: the objects may exist, and a new create could
	// make them twice (docs/design/0021). The error is a *[CreateInterruptedError]; not retried
	// until an operator settles it (`lava state forget-intent`).
	ErrCreateInterrupted = errors.New("engine: create interrupted")
	// ErrEvaluationLimit reports an expression the embedded engine refused to evaluate because
	// it would exceed one of its evaluation limits (result size, evaluation budget, bcrypt
	// cost; docs/embedded-engine.md, "Evaluation limits"): the same configuration fails again,
	// so it is not retried.
	ErrEvaluationLimit = errors.New("engine: evaluation limit exceeded")
	// ErrApplyInterrupted reports an apply or destroy whose CLI was killed (at its CPU or
	// memory limit, or at its timeout after the grace of its interrupt) before it saved its
	// state: objects it made since its last save are missing from the state, and a new plan
	// would make them again. The error names those it made; the applier holds the object's next
	// plan for approval (docs/design/0025-lost-or-regressed-state.md).
	ErrApplyInterrupted = errors.New("engine: apply interrupted before its state was saved")
	// ErrRecoveryPending reports a speculative plan ([PlanRequest].Speculative) of a state an
	// interrupted apply or destroy left for recovery: the next plan of the object recovers it.
	ErrRecoveryPending = errors.New("engine: an interrupted operation awaits recovery")
	// ErrLocked reports a state locked by someone else (the same sentinel as
	// [state.ErrLocked]; errors.As finds the *[state.LockedError] with the holder).
	ErrLocked = state.ErrLocked
)

// ProviderUnavailableError names the providers that cannot be installed.
type ProviderUnavailableError struct {
	// Sources are the provider source addresses ("hashicorp/aws"), each with the version
	// constraint it was wanted at and the versions the mirror has, when there was one
	// ([UnavailableSource]).
	Sources []string
	// Where describes where providers are looked up (the mirror directory), when known.
	Where string
	// Detail is the engine's own reason (e.g. the CLI's error summary), when Where is unknown.
	Detail string
}

// Error reads "provider hashicorp/aws is not available: not in the provider mirror DIR".
func (e *ProviderUnavailableError) Error() string {
	what := "provider " + strings.Join(e.Sources, ", ") + " is"
	if len(e.Sources) > 1 {
		what = "providers " + strings.Join(e.Sources, ", ") + " are"
	}
	where := "cannot be installed"
	if e.Detail != "" {
		where = "cannot be installed: " + e.Detail
	}
	if e.Where != "" {
		where = "not in the provider mirror " + e.Where
	}
	return fmt.Sprintf("%s not available: %s", what, where)
}

// Unwrap returns [ErrProviderUnavailable].
func (e *ProviderUnavailableError) Unwrap() error { return ErrProviderUnavailable }

// UnavailableSource is how both engines name, in a [ProviderUnavailableError], a provider the
// mirror cannot satisfy: the source alone when no version was asked for, else with the
// constraint and the versions the mirror has of it, oldest first:
// "example/testkit version 0.2.0 (the mirror has 0.1.0, 0.4.0)".
func UnavailableSource(source, constraint string, have []string) string {
	constraint = strings.TrimSpace(constraint)
	if constraint == "" {
		return source
	}
	mirror := "the mirror has none"
	if len(have) > 0 {
		mirror = "the mirror has " + strings.Join(have, ", ")
	}
	return fmt.Sprintf("%s version %s (%s)", source, constraint, mirror)
}

// PlanStaleError is a refused apply: the plan was made against one state and the state is now
// another.
type PlanStaleError struct {
	PlanID                         string
	PlannedSerial, CurrentSerial   uint64
	PlannedLineage, CurrentLineage string
	// PlannedDigest and CurrentDigest are the state body digests, set when only the body
	// changed (rewritten at the same serial and lineage).
	PlannedDigest, CurrentDigest string
}

// Error names both states.
func (e *PlanStaleError) Error() string {
	if e.PlannedDigest != e.CurrentDigest && e.PlannedSerial == e.CurrentSerial && e.PlannedLineage == e.CurrentLineage {
		return fmt.Sprintf("plan %s is stale: the state body (serial %d lineage %q) was rewritten since it was planned (digest %s, now %s)",
			e.PlanID, e.PlannedSerial, e.PlannedLineage, e.PlannedDigest, e.CurrentDigest)
	}
	return fmt.Sprintf("plan %s is stale: planned against state serial %d lineage %q, state is now serial %d lineage %q",
		e.PlanID, e.PlannedSerial, e.PlannedLineage, e.CurrentSerial, e.CurrentLineage)
}

// Stale returns the [PlanStaleError] of plan against the current state record (the zero
// Record for no state), nil when the state is still the one planned against: same serial,
// lineage and, when the plan recorded one, body digest.
func Stale(plan *PlanRecord, cur state.Record) *PlanStaleError {
	if cur.Serial == plan.StateSerial && cur.Lineage == plan.StateLineage &&
		(plan.StateDigest == "" || cur.Digest == plan.StateDigest) {
		return nil
	}
	return &PlanStaleError{PlanID: plan.PlanID, PlannedSerial: plan.StateSerial, CurrentSerial: cur.Serial,
		PlannedLineage: plan.StateLineage, CurrentLineage: cur.Lineage, PlannedDigest: plan.StateDigest, CurrentDigest: cur.Digest}
}

// Unwrap returns [ErrPlanStale].
func (e *PlanStaleError) Unwrap() error { return ErrPlanStale }

// CreateInterruptedError names the resource instances whose creates were interrupted after the
// provider was asked to make them and before the state recorded what it made, with no resource
// identity to look them up by (the provider has none, or the identity was known only after the
// create).
type CreateInterruptedError struct {
	// Key is the state's NAMESPACE/NAME.
	Key string
	// Addresses are the instance addresses ("testkit_file.a", `module.m.x.y["k"]`).
	Addresses []string
}

// Error names the addresses and what an operator does about them.
func (e *CreateInterruptedError) Error() string {
	return fmt.Sprintf("create of %s interrupted: an earlier apply asked the provider to create it and stopped before saving the result, "+
		"and the provider cannot look it up by a resource identity, so it may exist; Lava will not create it again. "+
		"Delete the object if it exists (or add an import block for it), then run `lava state forget-intent %s %s`",
		strings.Join(e.Addresses, ", "), e.Key, shellWords(e.Addresses))
}

// shellWords joins addresses as shell arguments, quoting those with brackets or quotes.
func shellWords(addrs []string) string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a
		if strings.ContainsAny(a, `[]"' `) {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// Unwrap returns [ErrCreateInterrupted].
func (e *CreateInterruptedError) Unwrap() error { return ErrCreateInterrupted }

// StepError is a failed engine step (a CLI command, or a provider call). Tail holds the end of
// the step's output with every secret redacted, fit for a Failed condition's message.
type StepError struct {
	// Step names the step: "init", "plan", "show", "apply", "destroy".
	Step string
	// Tail is the last lines of stdout and stderr, redacted.
	Tail string
	// Err is the underlying error (redacted text; wraps context errors).
	Err error
}

// Error reads "STEP: ERR: TAIL".
func (e *StepError) Error() string {
	if e.Tail == "" {
		return e.Step + ": " + e.Err.Error()
	}
	return e.Step + ": " + e.Err.Error() + ": " + e.Tail
}

// Unwrap returns the underlying error.
func (e *StepError) Unwrap() error { return e.Err }

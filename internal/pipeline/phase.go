package pipeline

import "github.com/lava-operator/lava/api/v1alpha1"

// Phase is where a LavaArchitecture is in its lifecycle. It is the API type
// [v1alpha1.Phase]: status.phase holds these PascalCase strings.
type Phase = v1alpha1.Phase

// The phases (docs/dialect.md section 5.4).
const (
	// Pending: a generation was observed; synthesis has not finished.
	Pending = v1alpha1.PhasePending
	// Synthesized: rendered to Terraform JSON and passed the gate.
	Synthesized = v1alpha1.PhaseSynthesized
	// Planned: a plan exists (and may await approval).
	Planned = v1alpha1.PhasePlanned
	// Applied: the plan was applied; the infrastructure matches the spec.
	Applied = v1alpha1.PhaseApplied
	// Drifted: drift was found and is recorded or held.
	Drifted = v1alpha1.PhaseDrifted
	// Reconverging: drift is being corrected by a re-apply.
	Reconverging = v1alpha1.PhaseReconverging
	// Finalizing: deletion in progress.
	Finalizing = v1alpha1.PhaseFinalizing
	// Failed: a stage failed; Stalled says whether a retry will come.
	Failed = v1alpha1.PhaseFailed
)

// All returns every phase, in lifecycle order.
func All() []Phase {
	return []Phase{Pending, Synthesized, Planned, Applied, Drifted, Reconverging, Finalizing, Failed}
}

// current reads status.phase, treating the empty phase of a fresh object as Pending.
func current(p Phase) Phase {
	if p == "" {
		return Pending
	}
	return p
}

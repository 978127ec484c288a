// Package engine defines the Engine interface every Lava engine implements (the tofu and
// terraform CLIs in engine/tofu, the embedded plugin-protocol engine in engine/embedded): plan
// a rendered Terraform JSON against a resource's durable state, apply exactly a recorded plan,
// destroy, scan for drift and read outputs. It also holds what engines share: the plan id,
// the provider requirements derived from a rendered JSON, drift severity classification, the
// tenant policy's file-access check with the provider schemas ([FileAccess],
// docs/design/0022-file-access-from-schemas.md), the step timeouts of both engine families
// ([Timeouts], [StepTimeoutError]) and the typed errors ([ErrProviderUnavailable],
// [ErrPlanStale], [ErrLocked], [ErrPolicyRejected], [ErrStepTimeout]).
//
// State lives in engine/state (docs/architecture.md section 5), so a resource can move between engines and
// any replica can continue an operation another one started.
package engine

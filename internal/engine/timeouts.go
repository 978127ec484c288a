package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// The step timeouts' defaults: below the bus's handler deadline (internal/platform/bus
// ConsumeOptions.HandlerTimeout, 1h), so a step that never ends fails as a timeout, with the
// handler still there to record it.
const (
	DefaultInitTimeout    = 2 * time.Minute
	DefaultPlanTimeout    = 10 * time.Minute
	DefaultShowTimeout    = 2 * time.Minute
	DefaultApplyTimeout   = 30 * time.Minute
	DefaultDestroyTimeout = 30 * time.Minute
)

// InterruptGrace is how long a step stopped at its timeout is given to wind down before it is
// ended: the tofu and terraform CLIs after their SIGINT (then SIGKILL, terraform-exec's
// default WaitDelay), the embedded engine's provider call after StopProvider (then the call
// is abandoned and the provider process stopped).
const InterruptGrace = 60 * time.Second

// Timeouts bound each step of an operation, one declaration for both engine families: the
// embedded engine bounds a plan (its refresh and data source reads included) and a drift
// scan by Plan, an apply by Apply and a destroy by Destroy; the tofu and terraform engines
// bound each CLI command (init, plan, show, apply, destroy) by its field. Zero fields take the
// defaults ([Timeouts.WithDefaults]).
type Timeouts struct {
	// Init bounds `init` (the CLI engines only) [DefaultInitTimeout].
	Init time.Duration
	// Plan bounds a plan and a drift scan [DefaultPlanTimeout].
	Plan time.Duration
	// Show bounds `show` and `providers schema` (the CLI engines only) [DefaultShowTimeout].
	Show time.Duration
	// Apply bounds an apply [DefaultApplyTimeout].
	Apply time.Duration
	// Destroy bounds a destroy [DefaultDestroyTimeout].
	Destroy time.Duration
}

// WithDefaults returns t with each zero or negative field set to its default.
func (t Timeouts) WithDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Init, DefaultInitTimeout)
	def(&t.Plan, DefaultPlanTimeout)
	def(&t.Show, DefaultShowTimeout)
	def(&t.Apply, DefaultApplyTimeout)
	def(&t.Destroy, DefaultDestroyTimeout)
	return t
}

// RegisterFlags defines --plan-timeout, --apply-timeout and --destroy-timeout on fs, bound to
// t.Plan, t.Apply and t.Destroy, with their defaults (the applier and `lava up`; drift bounds
// a scan by its own --scan-timeout).
func (t *Timeouts) RegisterFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&t.Plan, "plan-timeout", DefaultPlanTimeout, "how long one plan may run in every engine, refresh and data source reads included; past it the plan fails StepTimeout (with the others, it must end before the handler deadline, 1h: checked at start)")
	fs.DurationVar(&t.Apply, "apply-timeout", DefaultApplyTimeout, "how long one apply may run in every engine; past it the providers are asked to stop, what they did is saved, and the apply fails StepTimeout (with the others, it must end before the handler deadline, 1h: checked at start)")
	fs.DurationVar(&t.Destroy, "destroy-timeout", DefaultDestroyTimeout, "how long one destroy may run in every engine; past it as for --apply-timeout (with the others, it must end before the handler deadline, 1h: checked at start)")
}

// Check returns an error when the steps one handler of the applier runs could outlast
// handler, its deadline (bus.DefaultHandlerTimeout): a handler plans and applies, or plans
// twice (a plan a rule holds is planned again with its review body), or destroys; a CLI
// engine's plan is init, plan and show, its destroy init and destroy; each step may take its
// [InterruptGrace] after its timeout. A handler abandoned at its deadline is terminated as
// poison, so a step timeout that does not end the step before it would never be reported as
// StepTimeout. Zero fields count as their defaults.
func (t Timeouts) Check(handler time.Duration) error {
	t = t.WithDefaults()
	plan := t.Init + t.Plan + t.Show + InterruptGrace
	longest := max(2*plan, plan+t.Apply+InterruptGrace, t.Init+t.Destroy+InterruptGrace)
	if longest >= handler {
		return fmt.Errorf("engine: the step timeouts (plan %s, apply %s, destroy %s) let one handler run its steps for up to %s, not below the handler deadline of %s: lower --plan-timeout, --apply-timeout or --destroy-timeout",
			t.Plan, t.Apply, t.Destroy, longest, handler)
	}
	return nil
}

// ErrStepTimeout reports an engine step that ran past its timeout ([Timeouts]); the error is a
// *[StepTimeoutError]. Retried: a provider endpoint that did not answer may answer later.
var ErrStepTimeout = errors.New("engine: step timed out")

// StepTimeoutError is a step stopped at its timeout.
type StepTimeoutError struct {
	// Engine is the engine's name ("embedded", "tofu", "terraform").
	Engine string
	// Step names the step: "plan", "apply", "destroy", "drift" (a scan), "init", "show".
	Step string
	// After is the step's timeout.
	After time.Duration
	// Err is what the step reported once stopped (redacted; the embedded engine's provider
	// answers to StopProvider), nil when nothing.
	Err error
}

// Error reads "embedded apply timed out after 30m0s" and, with Err, ": " and Err's text.
func (e *StepTimeoutError) Error() string {
	msg := fmt.Sprintf("%s %s timed out after %s", e.Engine, e.Step, e.After)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns [ErrStepTimeout], context.DeadlineExceeded and Err, when set.
func (e *StepTimeoutError) Unwrap() []error {
	errs := []error{ErrStepTimeout, context.DeadlineExceeded}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

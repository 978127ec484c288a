package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/engine"
)

// TestTimeouts_flags: the applier's and lava up's flags, with the defaults a zero Timeouts
// takes; a parsed value replaces only its own field.
func TestTimeouts_flags(t *testing.T) {
	t.Parallel()
	var to engine.Timeouts
	fs := pflag.NewFlagSet("timeouts", pflag.ContinueOnError)
	to.RegisterFlags(fs)
	defaults := engine.Timeouts{}.WithDefaults()
	if to.Plan != defaults.Plan || to.Apply != defaults.Apply || to.Destroy != defaults.Destroy {
		t.Errorf("flag defaults %+v, want those of WithDefaults %+v", to, defaults)
	}
	if defaults != (engine.Timeouts{Init: 2 * time.Minute, Plan: 10 * time.Minute, Show: 2 * time.Minute, Apply: 30 * time.Minute, Destroy: 30 * time.Minute}) {
		t.Errorf("WithDefaults = %+v", defaults)
	}
	if err := fs.Parse([]string{"--apply-timeout", "5m", "--plan-timeout=90s"}); err != nil {
		t.Fatal(err)
	}
	if to.Plan != 90*time.Second || to.Apply != 5*time.Minute || to.Destroy != 30*time.Minute {
		t.Errorf("parsed %+v", to)
	}
}

// TestStepTimeoutError: its text names the engine, the step and the timeout, then what the
// step reported; errors.Is finds ErrStepTimeout, context.DeadlineExceeded and the report.
func TestStepTimeoutError(t *testing.T) {
	t.Parallel()
	stopped := errors.New("testkit_file.a: cancelled")
	err := error(&engine.StepError{Step: "apply", Err: &engine.StepTimeoutError{Engine: "embedded", Step: "apply", After: 3 * time.Second, Err: stopped}})
	if got, want := err.Error(), "apply: embedded apply timed out after 3s: testkit_file.a: cancelled"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	for _, target := range []error{engine.ErrStepTimeout, context.DeadlineExceeded, stopped} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false", err, target)
		}
	}
	if got := (&engine.StepTimeoutError{Engine: "tofu", Step: "plan", After: 10 * time.Minute}).Error(); got != "tofu plan timed out after 10m0s" {
		t.Errorf("without a report: %q", got)
	}
}

// TestTimeouts_Check: the defaults fit a handler's hour (plan and apply: 14m + 30m and two
// graces); an apply, a destroy or two plans that could outlast it are refused, naming the
// flags; zero fields count as their defaults.
func TestTimeouts_Check(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		to   engine.Timeouts
		ok   bool
	}{
		{"defaults", engine.Timeouts{}, true},
		{"apply of 2h", engine.Timeouts{Apply: 2 * time.Hour}, false},
		{"apply just fitting", engine.Timeouts{Apply: 43 * time.Minute}, true},
		{"plan and apply at the deadline", engine.Timeouts{Apply: 44 * time.Minute}, false},
		{"destroy of 57m", engine.Timeouts{Destroy: 57 * time.Minute}, false},
		{"two plans of 25m, at the deadline", engine.Timeouts{Plan: 25 * time.Minute, Apply: time.Minute}, false},
		{"two plans of 24m", engine.Timeouts{Plan: 24 * time.Minute, Apply: time.Minute}, true},
	} {
		err := tc.to.Check(time.Hour)
		if (err == nil) != tc.ok {
			t.Errorf("%s: Check = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--apply-timeout") {
			t.Errorf("%s: the error names no flag: %v", tc.name, err)
		}
	}
}

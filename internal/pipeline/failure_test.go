package pipeline_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/pipeline"
)

// Each kind maps onto Failed.retryable as Flux's error kinds map onto requeues: only a terminal
// failure is not retried. A failure is found in an error chain and reaches its cause.
func TestFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f             *pipeline.Failure
		wantKind      pipeline.FailureKind
		wantRetryable bool
		wantString    string
	}{
		{&pipeline.Failure{Kind: pipeline.FailureTerminal, Reason: v1alpha1.ReasonPolicyRejected, Message: "denied"}, pipeline.FailureTerminal, false, "terminal"},
		{&pipeline.Failure{Kind: pipeline.FailureRetryable, Reason: v1alpha1.ReasonRBACForbidden, Message: "forbidden"}, pipeline.FailureRetryable, true, "retryable"},
		{&pipeline.Failure{Kind: pipeline.FailureWaiting, Reason: v1alpha1.ReasonBindingSourceNotFound, Message: "not found"}, pipeline.FailureWaiting, true, "waiting"},
		{&pipeline.Failure{Reason: v1alpha1.ReasonSynthesisFailed}, pipeline.FailureTerminal, false, "terminal"},
	}
	for _, tt := range tests {
		if tt.f.Kind != tt.wantKind || tt.f.Retryable() != tt.wantRetryable || tt.f.Kind.String() != tt.wantString {
			t.Errorf("%+v: kind %v retryable %v, want %v %v", tt.f, tt.f.Kind, tt.f.Retryable(), tt.wantKind, tt.wantRetryable)
		}
	}

	cause := errors.New("provider registry: connection refused")
	f := &pipeline.Failure{Kind: pipeline.FailureRetryable, Reason: v1alpha1.ReasonProviderRegistryUnavailable, Err: cause}
	wrapped := fmt.Errorf("plan: %w", f)
	var got *pipeline.Failure
	if !errors.As(wrapped, &got) || got != f {
		t.Fatalf("errors.As did not find the failure in %v", wrapped)
	}
	if !errors.Is(wrapped, cause) {
		t.Error("the failure does not unwrap to its cause")
	}
	if want := v1alpha1.ReasonProviderRegistryUnavailable + ": provider registry: connection refused"; f.Error() != want {
		t.Errorf("Error() = %q, want %q", f.Error(), want)
	}
	if got := (&pipeline.Failure{Message: "no reason"}).Error(); got != "no reason" {
		t.Errorf("Error() without a reason = %q", got)
	}
}

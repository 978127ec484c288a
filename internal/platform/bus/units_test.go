package bus_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// TestBackoff_Delay: the n-th delay doubles from Base, is capped at Max, carries ±Jitter and
// never exceeds Max (viggy's retry schedule and the bus's redelivery delays).
func TestBackoff_Delay(t *testing.T) {
	t.Parallel()
	b := bus.Backoff{Base: time.Second, Max: time.Minute, Jitter: 0.2}
	tests := []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 32 * time.Second}, {7, time.Minute}, {100, time.Minute}}
	for _, tt := range tests {
		for range 50 {
			got := b.Delay(tt.n)
			lo, hi := time.Duration(float64(tt.want)*0.8), time.Duration(float64(tt.want)*1.2)
			if got < lo || got > min(hi, b.Max) {
				t.Fatalf("Delay(%d) = %v, want %v ±20%% capped at %v", tt.n, got, tt.want, b.Max)
			}
		}
	}
	if exact := (bus.Backoff{Base: time.Second, Max: time.Minute}); exact.Delay(3) != 4*time.Second || exact.Delay(0) != time.Second {
		t.Fatalf("without jitter: Delay(3) = %v, Delay(0) = %v", exact.Delay(3), exact.Delay(0))
	}
}

func TestSnakeCase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"DriftScanned": "drift_scanned", "Applied": "applied", "ReceiptAppended": "receipt_appended",
		"APPLY_FAILURE": "apply_failure", "CRITICAL": "critical",
	} {
		if got := bus.SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	base := errors.New("bad spec")
	err := fmt.Errorf("synth: %w", bus.Permanent(base))
	if !bus.IsPermanent(err) || !errors.Is(err, base) {
		t.Fatalf("IsPermanent(%v) = %v, errors.Is = %v", err, bus.IsPermanent(err), errors.Is(err, base))
	}
	if bus.IsPermanent(base) || bus.Permanent(nil) != nil {
		t.Fatal("a plain error is permanent, or Permanent(nil) is not nil")
	}
}

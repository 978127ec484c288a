package bus_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
)

func TestBackoff_Delay(t *testing.T) {
	t.Parallel()
	b := bus.Backoff{Base: time.Second, Max: time.Minute}
	tests := []struct {
		n    uint64
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 32 * time.Second}, {7, time.Minute}, {100, time.Minute}}
	for _, tt := range tests {
		for range 50 {
			got := b.Delay(tt.n)
			lo, hi := time.Duration(float64(tt.want)*0.8), time.Duration(float64(tt.want)*1.2)
			if got < lo || got > hi {
				t.Fatalf("Delay(%d) = %v, want %v ±20%%", tt.n, got, tt.want)
			}
		}
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

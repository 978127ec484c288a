package pipeline

import (
	"testing"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// BenchmarkReduce folds the happy path (Observed, Synthesized, Planned, Applied) per iteration.
func BenchmarkReduce(b *testing.B) {
	evs := []Event{
		sample(EventObserved, 1, 0), sample(EventSynthesized, 1, 1),
		sample(EventPlanned, 1, 2), sample(EventApplied, 1, 3),
	}
	b.ReportAllocs()
	for b.Loop() {
		var st v1alpha1.LavaArchitectureStatus
		for _, ev := range evs {
			var err error
			if st, _, err = Reduce(st, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkReduce_duplicate measures the common no-op: a redelivered Applied.
func BenchmarkReduce_duplicate(b *testing.B) {
	var st v1alpha1.LavaArchitectureStatus
	for _, ev := range []Event{sample(EventObserved, 1, 0), sample(EventSynthesized, 1, 1), sample(EventPlanned, 1, 2), sample(EventApplied, 1, 3)} {
		st, _, _ = Reduce(st, ev)
	}
	ev := sample(EventApplied, 1, 3)
	b.ReportAllocs()
	for b.Loop() {
		if _, tr, err := Reduce(st, ev); err != nil || tr.Changed {
			b.Fatalf("err %v changed %v", err, tr.Changed)
		}
	}
}

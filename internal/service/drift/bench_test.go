package drift_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/service/drift"
)

// BenchmarkScan1000 measures the drift service scanning 1,000 applied resources (each a
// LavaArchitecture with one terraform_data) with the embedded engine over real JetStream: every
// entry is made due at once and the clock runs until 1,000 DriftScanned are stored. Each scan is
// a claim (CAS), the engine's ScanDrift (configuration and state from the artifact store and
// lava-state, a refresh and a plan), the DriftScanned publish and the schedule update. It
// reports scans/s and the seconds for 1,000 (target: under 10 s), without and with the
// resource's work lease held around each scan (the service default).
func BenchmarkScan1000(b *testing.B) {
	for _, lease := range []bool{false, true} {
		b.Run(fmt.Sprintf("lease=%v", lease), func(b *testing.B) { scan1000(b, lease) })
	}
}

func scan1000(b *testing.B, lease bool) {
	const n = 1000
	w := newWorld(b)
	doc := dataDoc(1)
	var entries []*drift.Entry
	for i := range n {
		name := fmt.Sprintf("r%04d", i)
		ev := w.apply("bench", name, doc)
		entries = append(entries, &drift.Entry{Namespace: "bench", Name: name, UID: "uid-" + name, Generation: 1,
			Engine: string(v1alpha1.EngineEmbedded), PlanID: ev.GetPlanId(), TerraformJSONDigest: ev.GetTerraformJsonDigest(),
			ArtifactDigest: ev.GetArtifactDigest(), Interval: time.Hour})
	}
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		total += scanAll(b, w, entries, fmt.Sprintf("bench-%d", i), lease)
	}
	per := total / time.Duration(b.N)
	b.ReportMetric(per.Seconds(), "s/1000scans")
	b.ReportMetric(float64(n)/per.Seconds(), "scans/s")
}

// scanAll makes every entry due now, runs a drift service (as holder, with its work lease when
// lease is set) with the embedded engine until one DriftScanned per entry is stored, stops it
// and returns the time from making them due to the last scan stored.
func scanAll(b *testing.B, w *world, entries []*drift.Entry, holder string, lease bool) time.Duration {
	b.Helper()
	kv, err := w.js.KeyValue(b.Context(), bus.BucketDriftSchedule)
	if err != nil {
		b.Fatal(err)
	}
	st, err := w.js.Stream(b.Context(), bus.StreamPhases)
	if err != nil {
		b.Fatal(err)
	}
	info, err := st.Info(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	base := info.State.Msgs
	start := time.Now()
	for _, e := range entries {
		e.Due = start
		v, _ := json.Marshal(e)
		if _, err := kv.Put(b.Context(), bus.ResourceKey(e.Namespace, e.Name), v); err != nil {
			b.Fatal(err)
		}
	}
	var leases *bus.Leases
	if lease {
		if leases, err = bus.NewLeases(b.Context(), w.js, holder, nil); err != nil {
			b.Fatal(err)
		}
	}
	s, err := drift.New(b.Context(), drift.Config{JS: w.js, Engines: map[string]engine.Engine{string(v1alpha1.EngineEmbedded): w.engines[string(v1alpha1.EngineEmbedded)]},
		Holder: holder, Tick: 10 * time.Millisecond, Leases: leases})
	if err != nil {
		b.Fatal(err)
	}
	stop := run(b, s)
	defer stop()
	waitFor(b, 10*time.Minute, fmt.Sprintf("%d scans", len(entries)), func() bool {
		info, err := st.Info(b.Context())
		return err == nil && info.State.Msgs >= base+uint64(len(entries))
	})
	return time.Since(start)
}

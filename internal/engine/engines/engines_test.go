package engines_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// TestOpen: without a CLI binary the set is the embedded engine on the store, with no
// backend; a CLI binary that does not exist fails, naming the process and the engine.
func TestOpen(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if _, err := engines.Open(t.Context(), js, engines.Options{Process: "drift"}, nil); err == nil ||
		!strings.Contains(err.Error(), "drift: bind "+bus.BucketState) {
		t.Fatalf("Open without the topology: %v", err)
	}
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	set, err := engines.Open(t.Context(), js, engines.Options{Process: "drift"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	var names []string
	for n := range set.Engines {
		names = append(names, n)
	}
	if !slices.Equal(names, []string{"embedded"}) || set.Store == nil || set.Backend != nil {
		t.Fatalf("engines %v, store %v, backend %+v", names, set.Store != nil, set.Backend)
	}
	missing := filepath.Join(t.TempDir(), "no-tofu")
	if _, err := engines.Open(t.Context(), js, engines.Options{Process: "applier", TofuBin: missing, WorkDir: t.TempDir()}, nil); err == nil ||
		!strings.HasPrefix(err.Error(), "applier: tofu engine: ") {
		t.Fatalf("Open with a missing tofu: %v", err)
	}
}

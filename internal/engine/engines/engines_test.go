package engines_test

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/httpserver"
	"github.com/lava-operator/lava/internal/platform/testutil/conntest"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestOpen: without a CLI binary the set is the embedded engine on the store, with no
// backend; a CLI binary that does not exist fails, naming the process and the engine; step
// timeouts a handler's deadline would cut short are refused.
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
	if _, err := engines.Open(t.Context(), js, engines.Options{Process: "applier", Timeouts: engine.Timeouts{Apply: 2 * time.Hour}}, nil); err == nil ||
		!strings.Contains(err.Error(), "applier: engine: the step timeouts") {
		t.Fatalf("Open with an apply timeout past the handler deadline: %v", err)
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

// TestOpen_fileRootsOverlapLava: a policy whose fileWriteRoots or fileReadRoots overlaps the
// provider mirror, the installer's cache, the work directory or a protected directory (lava
// up's state directory) is refused when the engines start, naming the setting and the
// directory; disjoint roots start.
func TestOpen_fileRootsOverlapLava(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	mirror, work, stateDir := filepath.Join(base, "providers"), filepath.Join(base, "work"), filepath.Join(base, "state")
	open := func(doc string) error {
		cfg, err := policy.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		set, err := engines.Open(t.Context(), js, engines.Options{Process: "applier", ProviderDir: mirror, WorkDir: work,
			Policy: &policy.File{Default: cfg}, ProtectedDirs: []string{stateDir}}, nil)
		if err == nil {
			set.Close()
		}
		return err
	}
	for doc, want := range map[string]string{
		"cluster: {fileWriteRoots: [" + mirror + "/registry.opentofu.org]}": "applier: policy: cluster.fileWriteRoots: " + mirror + "/registry.opentofu.org overlaps " + mirror,
		"namespaces: {t: {fileReadRoots: [" + base + "]}}":                  "namespaces.t.fileReadRoots: " + base + " overlaps",
		"cluster: {fileWriteRoots: [" + work + "]}":                         "overlaps " + work,
		"cluster: {fileWriteRoots: [" + stateDir + "/x]}":                   "overlaps " + stateDir,
	} {
		if err := open(doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Open = %v, want %q", doc, err, want)
		}
	}
	if err := open("cluster: {fileWriteRoots: [" + filepath.Join(base, "files") + "]}"); err != nil {
		t.Errorf("disjoint roots: %v", err)
	}
}

// TestServeBackend_idleConnectionFlood: the state backend holds at most its MaxConns
// connections however many idle ones are opened (the file-descriptor attack), closes idle ones
// after ReadHeaderTimeout, and then serves a CLI's state request.
func TestServeBackend_idleConnectionFlood(t *testing.T) {
	t.Parallel()
	_, kv, art := tofutest.StateBus(t)
	const maxConns = 16
	b, err := engines.ServeBackend(state.NewStore(kv, art, state.Options{}), "127.0.0.1:0",
		httpserver.Limits{MaxConns: maxConns, ReadHeaderTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := strings.TrimPrefix(b.URL, "http://")
	key := state.Key{Namespace: "team-a", Name: "net"}
	conntest.Flood(t, addr, []string{"127.0.0.1"}, 3*maxConns, maxConns, func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, state.Address(b.URL, key), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("lava", b.Tokens.Issue(key))
		conntest.Serve(t, "127.0.0.1", req, http.StatusNoContent) // no state yet
	})
}

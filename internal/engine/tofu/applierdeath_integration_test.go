//go:build (integration || terraform) && linux

package tofu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/engine/tofu"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// applierChildEnv makes the test binary act as an applier (TestEngine_applierSIGKILLedMidApply):
// the variable's value is a childApplier as JSON. It plans and applies the rendered JSON on the
// shared stores, prints "pid=N" (its tofu apply) once fast's create is counted, and waits to
// be SIGKILLed.
const applierChildEnv = "LAVA_TEST_TOFU_APPLIER_CHILD"

// childApplier is what the applier child needs: the parent's nats-server, and the engine's
// binary, mirror and work directory.
type childApplier struct {
	NATS, Bin, Mirror, WorkDir, Rendered, Counter string
	Key                                           state.Key
}

func TestMain(m *testing.M) {
	if v := os.Getenv(applierChildEnv); v != "" {
		os.Exit(applierChild(v))
	}
	os.Exit(m.Run())
}

func applierChild(v string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "applier child:", err); return 1 }
	var c childApplier
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return fail(err)
	}
	ctx := context.Background()
	nc, err := nats.Connect(c.NATS)
	if err != nil {
		return fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	kv, err := js.KeyValue(ctx, state.Bucket)
	if err != nil {
		return fail(err)
	}
	art, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		return fail(err)
	}
	store := state.NewStore(kv, art, state.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: state.NewHandler(store, state.HandlerOptions{Password: "backend-pw"}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	eng, err := tofu.New(tofu.Config{Bin: c.Bin, MirrorDir: c.Mirror, WorkDir: c.WorkDir,
		BackendURL: "http://" + ln.Addr().String(), BackendPassword: "backend-pw", Store: store, Artifacts: art})
	if err != nil {
		return fail(err)
	}
	d, err := art.Put(ctx, strings.NewReader(c.Rendered))
	if err != nil {
		return fail(err)
	}
	p, err := eng.Plan(ctx, engine.PlanRequest{Target: engine.Target{Key: c.Key, RenderedDigest: d, Holder: "applier-child",
		ProviderSources: map[string]string{"testkit": "example/testkit"}}})
	if err != nil {
		return fail(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := eng.Apply(ctx, engine.ApplyRequest{Plan: p, Holder: "applier-child"})
		errc <- err
	}()
	for {
		select {
		case err := <-errc:
			return fail(fmt.Errorf("the apply ended before the kill: %v", err))
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := os.Stat(c.Counter); err != nil {
			continue
		}
		if pids := childProcesses("tofu"); len(pids) == 1 {
			fmt.Printf("pid=%d\n", pids[0])
			select {}
		}
	}
}

// TestEngine_applierSIGKILLedMidApply: an applier SIGKILLed in the middle of a tofu apply (here
// a child process of the test, killed once the fast resource's Create returned while the slow
// one's still sleeps) does not take tofu with it: tofu finishes both creates and, its backend
// gone with the applier, writes errored.tfstate in the object's run directory. Another engine
// on the same work directory then plans: it waits for the orphaned tofu to end, stores its
// errored.tfstate, and plans no change. Each resource was created exactly once (testkit's
// create counter), and the state holds each once, unlocked.
func TestEngine_applierSIGKILLedMidApply(t *testing.T) {
	tools := tofutest.Tofu(t)
	mirror := tofutest.TestkitMirror(t, tools)
	work := t.TempDir()
	// The dead applier's state lock is taken over at once (as the applier's lease-tied holders are).
	h := newHarness(t, harnessOpts{mirror: mirror, workDir: work, holderAlive: func(_ context.Context, holder string) (bool, error) {
		return holder != "applier-child", nil
	}})
	dir := t.TempDir()
	fast, slow := filepath.Join(dir, "fast.txt"), filepath.Join(dir, "slow.txt")
	rendered := fmt.Sprintf(`{"resource":{"testkit_file":{
	  "fast":{"filename":%q,"content":"fast\n"},
	  "slow":{"filename":%q,"content":"slow\n","create_delay_ms":5000}}}}`, fast, slow)
	cfg, err := json.Marshal(childApplier{NATS: h.natsURL, Bin: tools.Bin, Mirror: mirror, WorkDir: work, Rendered: rendered,
		Counter: fast + ".creates", Key: h.key})
	if err != nil {
		t.Fatal(err)
	}
	applier, pid := proctest.StartParent(t, applierChildEnv+"="+string(cfg))
	if err := applier.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = applier.Wait()
	killed := time.Now()
	if !proctest.Running(pid) {
		t.Errorf("tofu %d died with its applier", pid)
	}
	if r := h.record(); r.Lock == nil || r.Lock.Holder != "applier-child" {
		t.Fatalf("after the kill the state record is %+v, want the apply's lock by applier-child", r)
	}

	p := h.plan(rendered)
	t.Logf("the next plan returned %s after the kill: %d changes (%+v)", time.Since(killed).Round(time.Millisecond),
		len(p.Resources), p.Summary)
	if proctest.Running(pid) {
		t.Errorf("tofu %d still runs after the next plan", pid)
	}
	if p.HasChanges {
		h.apply(p)
	}
	for _, f := range []string{fast, slow} {
		if got := fileContent(t, f+".creates"); got != "1\n" {
			t.Errorf("%s created %q times, want exactly once", filepath.Base(f), strings.TrimSpace(got))
		}
	}
	_, body, err := h.store.Body(t.Context(), h.key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := state.ManagedInstances(body)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[testkit_file.fast testkit_file.slow]" {
		t.Errorf("state holds %v, want each resource once", got)
	}
	if r := h.record(); r.Lock != nil {
		t.Errorf("lock left: %+v", r.Lock)
	}
	if final := h.plan(rendered); final.HasChanges {
		t.Errorf("a plan after the recovery has changes: %+v", final.Resources)
	}
}

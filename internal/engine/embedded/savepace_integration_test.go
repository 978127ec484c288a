//go:build integration

package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestRunner_largeStateSavesPaced: an apply journaled with create intents writes a large state
// at the snapshot pace, not once per instance. A terraform_data holding 4 MiB (an 8 MiB state:
// input and output) beside 60 testkit_file creates wrote the whole state before each create
// (about 480 MiB); the bound now is snapshotRate times the apply's duration plus two snapshots
// (the first, the final). At every write, each file the provider has made is in the state
// written so far or has its create's intent recorded, and the apply ends with no intent open
// and every file in the state.
func TestRunner_largeStateSavesPaced(t *testing.T) {
	r, kit := testkitRunner(t)
	const files = 60
	cfg, plan, cj := bigStateFiles(t, r, kit, 4<<20, files)
	start := time.Now()
	st, err := r.apply(t.Context(), cfg, plan, nil, kit, journal{intents: true, write: cj.write}, nil)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	cj.mu.Lock()
	defer cj.mu.Unlock()
	size := int64(len(cj.last))
	bound := int64(elapsed.Seconds()*snapshotRate) + 2*size
	t.Logf("%d snapshots, %d MiB written in %s; final state %d MiB; bound %d MiB", cj.snapshots, cj.written>>20, elapsed.Round(time.Millisecond), size>>20, bound>>20)
	if cj.written > bound {
		t.Errorf("wrote %d bytes of state in %d snapshots over %s, want at most %d (snapshotRate x duration + 2 x %d)", cj.written, cj.snapshots, elapsed, bound, size)
	}
	cj.check(t)
	if n := len(st.Resources); n != 2 {
		t.Errorf("final state holds %d resources, want terraform_data.big and testkit_file.f", n)
	}
	for _, res := range st.Resources {
		if res.Type == "testkit_file" && len(res.Instances) != files {
			t.Errorf("final state holds %d testkit_file instances, want %d", len(res.Instances), files)
		}
	}
}

// TestRunner_pacedReplaceRecovered: a process that dies inside the save pace after the create
// half of a replacement keeps nothing it made out of the state, whether the replacement
// destroys first or creates first (the old object then deposed, and destroyed by the next
// apply). A large state (paced) holds
// testkit_file.kit at A and d1 depending on it; the next apply destroys d1 (a snapshot), then
// replaces kit with B (its destroy of A is held back by the pace while B's intent is written)
// and goes on to the next create; the process "dies" once that create's intent is written. The
// stored body still holds kit at A under B's open intent: recovery must not take A for B. It
// finds B by its identity, and the next apply creates B no second time.
func TestRunner_pacedReplaceRecovered(t *testing.T) {
	t.Run("destroy then create", func(t *testing.T) { testPacedReplaceRecovered(t, false) })
	t.Run("create before destroy", func(t *testing.T) { testPacedReplaceRecovered(t, true) })
}

func testPacedReplaceRecovered(t *testing.T, cbd bool) {
	r, kit := testkitRunner(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "A.txt"), filepath.Join(dir, "B.txt")
	// A 20 MiB state: snapshots 5 s apart, so both destroys fall inside one pace window.
	big := `"terraform_data":{"big":{"input":"` + strings.Repeat("x", 10<<20) + `"}}`
	config := func(s string) *Config {
		t.Helper()
		cfg, err := ParseConfig([]byte(`{"resource":{` + big + `,"testkit_file":{` + s + `}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	gen1 := config(`"kit":{"filename":` + jsonString(a) + `,"content":"k","depends_on":["terraform_data.big"]},` +
		`"d1":{"filename":` + jsonString(filepath.Join(dir, "d1.txt")) + `,"content":"d","depends_on":["testkit_file.kit"]}`)
	lifecycle := ""
	if cbd {
		lifecycle = `,"lifecycle":{"create_before_destroy":true}`
	}
	gen2 := config(`"kit":{"filename":` + jsonString(b) + `,"content":"k","depends_on":["terraform_data.big"]` + lifecycle + `},` +
		`"slow":{"filename":` + jsonString(filepath.Join(dir, "slow.txt")) + `,"content":"s","depends_on":["testkit_file.kit"]}`)

	// The store as a crash leaves it: the last body written and the intents still open.
	var (
		mu      sync.Mutex
		body    []byte
		open    = map[string]state.Intent{}
		crashed bool
	)
	ctx, crash := context.WithCancel(t.Context())
	defer crash()
	jr := journal{intents: true, write: func(_ context.Context, bd []byte, resolved []string, added []state.Intent) error {
		mu.Lock()
		defer mu.Unlock()
		if crashed {
			return context.Canceled
		}
		if bd != nil {
			body = append(body[:0], bd...)
		}
		for _, addr := range resolved {
			delete(open, addr)
		}
		for _, in := range added {
			open[in.Address] = in
		}
		if _, ok := open["testkit_file.slow"]; ok {
			// This write landed; the process dies before anything else happens.
			crashed = true
			crash()
			return context.Canceled
		}
		return nil
	}}
	plan1, err := r.Plan(t.Context(), gen1, nil, kit, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := r.apply(t.Context(), gen1, plan1, nil, kit, jr, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan2, err := r.Plan(t.Context(), gen2, st1, kit, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.apply(ctx, gen2, plan2, st1, kit, jr, nil); err == nil {
		t.Fatal("the apply went on after the process died")
	}
	mu.Lock()
	heldBack := strings.Contains(string(body), jsonString(a))
	stored, err := ParseState(body)
	var intents []state.Intent
	for _, in := range open {
		intents = append(intents, in)
	}
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got := readCount(t, b+".creates"); got != 1 {
		t.Fatalf("B was created %d times before the crash, want 1 (the scenario needs its create done)", got)
	}
	if !heldBack {
		t.Fatalf("the stored body no longer holds kit at A: the pace did not hold the destroy back, so this does not test the window")
	}

	found, err := r.recoverIntents(t.Context(), gen2, stored, intents, kit, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Interrupted) > 0 || found.State == nil {
		t.Fatalf("recovery: interrupted %v, state %v; want B found by its identity", found.Interrupted, found.State != nil)
	}
	plan3, err := r.Plan(t.Context(), gen2, found.State, kit, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plan3.Changes {
		if c.Addr == "testkit_file.kit" && c.Action != NoOp {
			t.Errorf("after recovery kit plans %s, want no-op (B exists and is in the state)", c.Action)
		}
	}
	if _, err := r.apply(t.Context(), gen2, plan3, found.State, kit, journal{write: func(context.Context, []byte, []string, []state.Intent) error { return nil }}, nil); err != nil {
		t.Fatal(err)
	}
	if got := readCount(t, b+".creates"); got != 1 {
		t.Errorf("B was created %d times, want 1: the replacement's object was forgotten and made again", got)
	}
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Errorf("A exists after the replacement and the next apply (%v)", err)
	}
}

// readCount reads a testkit counter file ("<filename>.creates"); 0 when absent.
func readCount(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscan(string(b), &n); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

// testkitRunner is a Runner over the test provider's mirror (closed on t.Cleanup) and the
// provider sources that name it.
func testkitRunner(t *testing.T) (*Runner, map[string]string) {
	t.Helper()
	pool := NewPool(Mirror{Dir: tofutest.TestkitMirror(t, tofutest.Tofu(t))}, nil, 4)
	t.Cleanup(func() { _ = pool.Close() })
	return NewRunner(pool, 4, nil), map[string]string{"testkit": "example/testkit"}
}

// TestRunner_snapshotsHeldBackByQuota is the snapshot flood of the twenty-first trial: an
// apply of slow creates beside a large state wrote a snapshot at the pace for as long as it
// ran (4 MiB/s each, about 7 MB/s from three objects of one namespace), none of it refused by
// the artifact quota, which counted state bodies only. Snapshots before the final one are
// charged now: with the quota refusing every one, the apply writes the final state only, and
// at every write each file the provider has made is in the state written so far or has its
// create's intent recorded; the apply ends with no intent open.
func TestRunner_snapshotsHeldBackByQuota(t *testing.T) {
	r, kit := testkitRunner(t)
	const files = 30
	cfg, plan, cj := bigStateFiles(t, r, kit, 1<<20, files)
	asked := 0
	admit := func([]byte) bool { asked++; return false }
	st, err := r.apply(t.Context(), cfg, plan, nil, kit, journal{intents: true, admit: admit, write: cj.write}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cj.mu.Lock()
	defer cj.mu.Unlock()
	if asked == 0 || cj.snapshots != 1 {
		t.Errorf("the quota was asked %d times and %d snapshots were written, want it asked and only the final one written", asked, cj.snapshots)
	}
	cj.check(t)
	for _, res := range st.Resources {
		if res.Type == "testkit_file" && len(res.Instances) != files {
			t.Errorf("final state holds %d testkit_file instances, want %d", len(res.Instances), files)
		}
	}
}

// checkedJournal is an apply's journal for the tests of the save pace: it keeps what was
// written and checks at every write that each file the provider has made (dir/N.txt, N <
// files, testkit_file.f[N]) is in the state written so far or has its create's intent open.
type checkedJournal struct {
	dir   string
	files int

	mu         sync.Mutex
	snapshots  int
	written    int64
	last       []byte
	open       map[string]bool
	violations []string
}

func (c *checkedJournal) write(_ context.Context, body []byte, resolved []string, added []state.Intent) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if body != nil {
		c.snapshots++
		c.written += int64(len(body))
		c.last = append(c.last[:0], body...)
	}
	for _, a := range resolved {
		delete(c.open, a)
	}
	for _, in := range added {
		c.open[in.Address] = true
	}
	for i := range c.files {
		f := filepath.Join(c.dir, fmt.Sprintf("%d.txt", i))
		if _, err := os.Stat(f); err != nil {
			continue
		}
		addr := fmt.Sprintf("testkit_file.f[%d]", i)
		if !c.open[addr] && !strings.Contains(string(c.last), f) {
			c.violations = append(c.violations, addr)
		}
	}
	return nil
}

// check fails t for a made file that was neither in the state nor under an intent at a write,
// and for an intent open after the apply (c.mu held).
func (c *checkedJournal) check(t *testing.T) {
	t.Helper()
	if len(c.violations) > 0 {
		t.Errorf("writes left made files neither in the state nor under an intent: %v", c.violations)
	}
	if len(c.open) > 0 {
		t.Errorf("intents still open after the apply: %v", c.open)
	}
}

// bigStateFiles plans a terraform_data holding size bytes and, after it, files testkit_file
// creates in a new directory, and returns the configuration, the plan and a journal checking
// those files.
func bigStateFiles(t *testing.T, r *Runner, kit map[string]string, size, files int) (*Config, *Plan, *checkedJournal) {
	t.Helper()
	dir := t.TempDir()
	cfg, err := ParseConfig([]byte(`{"resource":{"terraform_data":{"big":{"input":"` + strings.Repeat("x", size) + `"}},` +
		`"testkit_file":{"f":{"count":` + fmt.Sprint(files) + `,"filename":` + jsonString(dir+"/${count.index}.txt") + `,` +
		`"content":"${count.index}","depends_on":["terraform_data.big"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Plan(t.Context(), cfg, nil, kit, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, plan, &checkedJournal{dir: dir, files: files, open: map[string]bool{}}
}

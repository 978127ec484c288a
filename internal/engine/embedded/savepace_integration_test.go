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
	tools := tofutest.Tofu(t)
	pool := NewPool(Mirror{Dir: tofutest.TestkitMirror(t, tools)}, nil, 4)
	t.Cleanup(func() { _ = pool.Close() })
	r := NewRunner(pool, 4, nil)
	kit := map[string]string{"testkit": "example/testkit"}
	dir := t.TempDir()
	const files = 60
	big := strings.Repeat("x", 4<<20)
	cfg, err := ParseConfig([]byte(`{"resource":{"terraform_data":{"big":{"input":"` + big + `"}},` +
		`"testkit_file":{"f":{"count":` + fmt.Sprint(files) + `,"filename":` + jsonString(dir+"/${count.index}.txt") + `,` +
		`"content":"${count.index}","depends_on":["terraform_data.big"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Plan(t.Context(), cfg, nil, kit, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu         sync.Mutex
		snapshots  int
		written    int64
		last       []byte
		open       = map[string]bool{}
		violations []string
	)
	jr := journal{intents: true, write: func(_ context.Context, body []byte, resolved []string, added []state.Intent) error {
		mu.Lock()
		defer mu.Unlock()
		if body != nil {
			snapshots++
			written += int64(len(body))
			last = append(last[:0], body...)
		}
		for _, a := range resolved {
			delete(open, a)
		}
		for _, in := range added {
			open[in.Address] = true
		}
		for i := range files {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%d.txt", i))); err != nil {
				continue
			}
			addr := fmt.Sprintf("testkit_file.f[%d]", i)
			if !open[addr] && !strings.Contains(string(last), filepath.Join(dir, fmt.Sprintf("%d.txt", i))) {
				violations = append(violations, addr)
			}
		}
		return nil
	}}
	start := time.Now()
	st, err := r.apply(t.Context(), cfg, plan, nil, kit, jr, nil)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	size := int64(len(last))
	bound := int64(elapsed.Seconds()*snapshotRate) + 2*size
	t.Logf("%d snapshots, %d MiB written in %s; final state %d MiB; bound %d MiB", snapshots, written>>20, elapsed.Round(time.Millisecond), size>>20, bound>>20)
	if written > bound {
		t.Errorf("wrote %d bytes of state in %d snapshots over %s, want at most %d (snapshotRate x duration + 2 x %d)", written, snapshots, elapsed, bound, size)
	}
	if len(violations) > 0 {
		t.Errorf("writes left made files neither in the state nor under an intent: %v", violations)
	}
	if len(open) > 0 {
		t.Errorf("intents still open after the apply: %v", open)
	}
	if n := len(st.Resources); n != 2 {
		t.Errorf("final state holds %d resources, want terraform_data.big and testkit_file.f", n)
	}
	for _, res := range st.Resources {
		if res.Type == "testkit_file" && len(res.Instances) != files {
			t.Errorf("final state holds %d testkit_file instances, want %d", len(res.Instances), files)
		}
	}
}

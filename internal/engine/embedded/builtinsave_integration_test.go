//go:build integration

package embedded

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestRunner_builtinSavedBeforeDependentUpdate: a terraform_data change is saved with the next
// state write, not on its own, yet never after a real object was changed with it: the update
// of a testkit_file whose content comes from the terraform_data's output is preceded by a save
// that holds the new terraform_data (a process lost between the two leaves a state that
// already names what the file was updated with). Checked at each save: the first save with
// the new terraform_data finds the file still holding the old content.
func TestRunner_builtinSavedBeforeDependentUpdate(t *testing.T) {
	tools := tofutest.Tofu(t)
	pool := NewPool(Mirror{Dir: tofutest.TestkitMirror(t, tools)}, nil, 4)
	t.Cleanup(func() { _ = pool.Close() })
	r := NewRunner(pool, 4, nil)
	kit := map[string]string{"testkit": "example/testkit"}
	file := filepath.Join(t.TempDir(), "f.txt")
	doc := func(v string) *Config {
		cfg, err := ParseConfig([]byte(`{"resource":{"terraform_data":{"t":{"input":"` + v + `"}},` +
			`"testkit_file":{"f":{"filename":` + jsonString(file) + `,"content":"${terraform_data.t.output}"}}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var mu sync.Mutex
	var st *State
	var seen []string // per save: whether it holds t's new input, and the file's content then
	persist := func(_ context.Context, body []byte) error {
		s, err := ParseState(body)
		if err != nil {
			return err
		}
		content, _ := os.ReadFile(file)
		mu.Lock()
		defer mu.Unlock()
		st = s
		seen = append(seen, strconv.FormatBool(strings.Contains(string(body), `"value":"new"`))+"/"+string(content))
		return nil
	}
	for _, v := range []string{"old", "new"} {
		mu.Lock()
		prior := st
		seen = nil
		mu.Unlock()
		cfg := doc(v)
		p, err := r.Plan(t.Context(), cfg, prior, kit, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Apply(t.Context(), cfg, p, prior, kit, persist, nil); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.HasPrefix(s, "true/") {
			if s != "true/old" {
				t.Errorf("saves of the second apply (new input?/file content): %q; the first save with the new terraform_data came after the file was updated", seen)
			}
			return
		}
	}
	t.Errorf("no save of the second apply holds the new terraform_data: %q", seen)
}

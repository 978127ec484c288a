//go:build integration

package embedded

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
)

// aliasDoc is an architecture of n aliased hashicorp/local configurations, each used by one
// local_file under dir.
func aliasDoc(t *testing.T, dir string, n int) string {
	t.Helper()
	return aliasDocNamed(t, dir, "a", n)
}

// aliasDocNamed is aliasDoc with the aliases named prefix0, prefix1, ... (configurations of
// other names are other provider processes).
func aliasDocNamed(t *testing.T, dir, prefix string, n int) string {
	t.Helper()
	var provs []any
	files := map[string]any{}
	for i := range n {
		a := fmt.Sprintf("%s%d", prefix, i)
		provs = append(provs, map[string]any{"alias": a})
		files["f"+a] = map[string]any{"filename": filepath.Join(dir, a+".txt"), "content": "x", "provider": "local." + a}
	}
	return jsonDoc(t, map[string]any{"provider": map[string]any{"local": provs}, "resource": map[string]any{"local_file": files}})
}

// TestEngine_providerConfigurationsBounded: an operation uses at most
// engine.MaxProviderConfigurations provider configurations. Each one, an alias too, is a
// provider process of its own held until the operation ends, in the container every tenant's
// plans share: 150 aliases of hashicorp/local, each used by one local_file (150 resources,
// under maxResources), started 150 processes in one plan (2.7 GB under lava up, more than the chart gives the applier), again at every
// retry, drift scan and speculative plan (found by a nineteenth trial). Such a configuration
// now fails before any provider starts, naming the limit, and is not retried; one at the
// limit plans.
func TestEngine_providerConfigurationsBounded(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	_, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(aliasDoc(t, dir, 150))})
	t.Logf("plan of 150 configurations: %d provider processes started: %v", e.eng.Pool().Starts(), err)
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "150 provider configurations") {
		t.Errorf("plan: %v; want the configuration refused for its 150 provider configurations", err)
	}
	if n := e.eng.Pool().Starts(); n != 0 {
		t.Errorf("%d provider processes started, want none", n)
	}
	if _, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(aliasDoc(t, dir, engine.MaxProviderConfigurations))}); err != nil {
		t.Fatalf("plan of %d configurations: %v", engine.MaxProviderConfigurations, err)
	}
	if n := e.eng.Pool().Starts(); n != engine.MaxProviderConfigurations {
		t.Errorf("%d provider processes started, want %d", n, engine.MaxProviderConfigurations)
	}
}

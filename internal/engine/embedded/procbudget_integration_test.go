//go:build integration

package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// providerComm is the command name of every terraform-provider-* process (/proc/PID/stat
// keeps 15 bytes of it).
const providerComm = "terraform-provi"

// TestEngine_processBudgetAcrossOperations: the provider processes of operations running at
// once are bounded across them by the engine's budget, not per plan. Four objects planned at
// once, each with 16 aliased configurations (the per-plan limit), made the applier hold 64
// provider processes and 3.5 GB (the chart gives it 2 GiB), found by an attack trial. Here six
// plans of four configurations of their own each, at once, under a budget of 8: never more
// than 8 live provider processes, the plans that find no room wait for their share, and every
// plan completes (none waits on another in a circle). Checked to fail without the budget: 24
// providers ran at once.
func TestEngine_processBudgetAcrossOperations(t *testing.T) {
	const ops, configs, budget = 6, 4, 8
	e := newEnvOptions(t, slog.LevelDebug, Options{ProviderDir: tofutest.Tofu(t).Mirror, MaxProcesses: budget})
	dir := t.TempDir()
	targets := make([]engine.Target, ops)
	for i := range ops {
		o := *e
		o.key = state.Key{Namespace: "demo", Name: fmt.Sprintf("o%d", i)}
		targets[i] = o.target(aliasDocNamed(t, dir, fmt.Sprintf("o%da", i), configs))
	}
	errs := make([]error, ops)
	peak := proctest.PeakChildren(t, providerComm, func() {
		var wg sync.WaitGroup
		for i := range ops {
			wg.Go(func() { _, errs[i] = e.eng.Plan(t.Context(), engine.PlanRequest{Target: targets[i]}) })
		}
		wg.Wait()
	})
	t.Logf("%d plans of %d configurations each under a budget of %d: %d provider processes started, at most %d running at once",
		ops, configs, budget, e.eng.Pool().Starts(), peak)
	for i, err := range errs {
		if err != nil {
			t.Errorf("plan %d: %v", i, err)
		}
	}
	if peak > budget {
		t.Errorf("%d provider processes ran at once, want at most the budget of %d", peak, budget)
	}
	if n := e.eng.Pool().Starts(); n != ops*configs {
		t.Errorf("%d provider processes started, want %d (one per configuration)", n, ops*configs)
	}
	if !strings.Contains(e.logs.String(), "waits for its share") {
		t.Error("no plan waited for its share of the budget: the plans did not contend")
	}
}

// TestEngine_processBudgetOperationOverBudget: an operation that uses more provider
// configurations than the whole budget fails at once with an evaluation limit (not retried)
// naming the budget, before any provider starts, instead of waiting for room that never comes.
// Checked to fail without the budget: the plan of 4 configurations succeeded.
func TestEngine_processBudgetOperationOverBudget(t *testing.T) {
	e := newEnvOptions(t, slog.LevelDebug, Options{ProviderDir: tofutest.Tofu(t).Mirror, MaxProcesses: 3})
	_, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(aliasDoc(t, t.TempDir(), 4))})
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "4 provider configurations, more than the 3 provider processes") ||
		!strings.Contains(err.Error(), "--max-provider-processes") {
		t.Errorf("plan: %v; want an evaluation limit naming 4 configurations and the budget of 3", err)
	}
	if n := e.eng.Pool().Starts(); n != 0 {
		t.Errorf("%d provider processes started, want none", n)
	}
	if _, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(aliasDoc(t, t.TempDir(), 3))}); err != nil {
		t.Errorf("plan of 3 configurations under a budget of 3: %v", err)
	}
}

// TestEngine_processBudgetWaitEndsWithContext: an operation waiting for its share waits no
// longer than its context, and fails naming the budget; once the share is free, it runs.
// Checked to fail without the budget: the plan ran at once.
func TestEngine_processBudgetWaitEndsWithContext(t *testing.T) {
	e := newEnvOptions(t, slog.LevelDebug, Options{ProviderDir: tofutest.Tofu(t).Mirror, MaxProcesses: 4})
	target := e.target(aliasDoc(t, t.TempDir(), 2))
	b := e.eng.Pool().budget
	if b == nil {
		t.Fatal("the engine has no process budget")
	}
	// Operations holding the whole budget.
	if err := b.reserve(t.Context(), "others", 4); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := e.eng.Plan(ctx, engine.PlanRequest{Target: target})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "--max-provider-processes") {
		t.Errorf("plan while the budget is taken: %v; want the context's deadline, naming the budget", err)
	}
	if n := e.eng.Pool().Starts(); n != 0 {
		t.Errorf("%d provider processes started, want none", n)
	}
	b.unreserve("others", 4)
	if _, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: target}); err != nil {
		t.Errorf("plan once the budget is free: %v", err)
	}
}

// TestEngine_processBudgetShared: engines that share a budget (lava up's applier and drift
// scanner) are bounded together: the idle (warm) processes one keeps are stopped, least
// recently used first, to make room for the other's. Checked to fail without the shared
// budget: 8 providers ran at once.
func TestEngine_processBudgetShared(t *testing.T) {
	const budget = 4
	mirror := tofutest.Tofu(t).Mirror
	shared := NewProcessBudget(budget, nil)
	a := newEnvOptions(t, slog.LevelDebug, Options{ProviderDir: mirror, Processes: shared})
	b := newEnvOptions(t, slog.LevelDebug, Options{ProviderDir: mirror, Processes: shared})
	dir := t.TempDir()
	ta, tb := a.target(aliasDocNamed(t, dir, "a", budget)), b.target(aliasDocNamed(t, dir, "b", budget))
	peak := proctest.PeakChildren(t, providerComm, func() {
		if _, err := a.eng.Plan(t.Context(), engine.PlanRequest{Target: ta}); err != nil {
			t.Errorf("plan of engine a: %v", err)
		}
		if _, err := b.eng.Plan(t.Context(), engine.PlanRequest{Target: tb}); err != nil {
			t.Errorf("plan of engine b: %v", err)
		}
	})
	if peak > budget {
		t.Errorf("%d provider processes ran at once, want at most the shared budget of %d", peak, budget)
	}
	if wa, wb := a.eng.Pool().Warm(), b.eng.Pool().Warm(); wa != 0 || wb != budget {
		t.Errorf("warm: engine a %d, engine b %d; want a's idle processes stopped for b's %d", wa, wb, budget)
	}
}

// TestEngine_processBudgetNamespaceShareAttack: one namespace whose operations hold provider
// processes for minutes (two objects of 16 configurations, each a create of 15 minutes, held
// all 32 processes, and another tenant's plan waited for one until its plan timeout: found by
// an attack trial) holds at most half the budget. Here, with a budget of 8, namespace hog
// holds 4 (its share); its next plan of 4 configurations waits for its own share, while
// namespace victim's plan of 4 runs at once. Checked to fail without the share: hog's second
// plan took the other 4 and ran.
func TestEngine_processBudgetNamespaceShareAttack(t *testing.T) {
	e := newEnvOptions(t, slog.LevelDebug, Options{ProviderDir: tofutest.Tofu(t).Mirror, MaxProcesses: 8})
	b := e.eng.Pool().budget
	if err := b.reserve(t.Context(), "hog", 4); err != nil { // hog's running operation
		t.Fatal(err)
	}
	defer b.unreserve("hog", 4)
	dir := t.TempDir()
	in := func(ns, name string) engine.Target {
		o := *e
		o.key = state.Key{Namespace: ns, Name: name}
		return o.target(aliasDocNamed(t, dir, name, 4))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	hog := make(chan error, 1)
	go func() {
		_, err := e.eng.Plan(ctx, engine.PlanRequest{Target: in("hog", "second")})
		hog <- err
	}()
	if _, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: in("victim", "own")}); err != nil {
		t.Fatalf("the other namespace's plan: %v", err)
	}
	if err := <-hog; !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "one namespace at most 4") {
		t.Errorf("hog's second plan: %v; want it to wait for its namespace's share until its context ended", err)
	}
}

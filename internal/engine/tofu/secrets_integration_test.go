//go:build integration

package tofu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
)

// TestEngine_sensitiveStateOutputsBounded: the sensitive outputs of an object's state, which
// every later run's messages are redacted of, are bounded by engine.MaxSecretBytes before a
// redactor is built over them (a 9 MB output of control bytes cost 4.6 GB and 37 s on every
// later plan and destroy): a state holding a 300 KB one fails the plan before tofu runs,
// naming the limit; a small one plans.
func TestEngine_sensitiveStateOutputsBounded(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	state := func(serial, value string) []byte {
		return []byte(`{"version":4,"terraform_version":"1.12.6","serial":` + serial + `,"lineage":"3f6c2b1e-0000-4000-8000-000000000001",` +
			`"outputs":{"s":{"value":"` + value + `","type":"string","sensitive":true}},"resources":[],"check_results":null}`)
	}
	const doc = `{"output":{"s":{"value":"x","sensitive":true}}}`
	if _, err := h.store.Put(t.Context(), h.key, state("1", strings.Repeat("\\u0001", 300_000)), ""); err != nil {
		t.Fatal(err)
	}
	_, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(doc), BindingsDigest: "b0"})
	if !errors.Is(err, engine.ErrSecretsTooLarge) || !strings.Contains(err.Error(), "more than the 262144 bytes") {
		t.Fatalf("plan against a state with a 300 KB sensitive output: %.300v; want it refused", err)
	}
	if _, err := h.store.Put(t.Context(), h.key, state("2", "pw"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(doc), BindingsDigest: "b0"}); err != nil {
		t.Fatalf("plan against a state with a small sensitive output: %v", err)
	}
}

// TestEngine_shownPlanBounded: Lava reads a saved plan as JSON (`show -json`, for a review body
// and for every drift scan) only when the plan file's values fit the largest state it stores:
// six 60 MB values took 5.7 GB of Lava's own memory, read whole. Here the store takes 1 MiB and
// a plan of 2 MB of values is refused with the limit for a review and for a drift scan, while a
// small one is reviewed.
func TestEngine_shownPlanBounded(t *testing.T) {
	h := newHarness(t, harnessOpts{maxStateBytes: 1 << 20})
	const big = `{"resource":{"terraform_data":{"a":{"count":2,"input":"${format(\"%1000000s\", \"\")}"}}}}`
	_, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(big), BindingsDigest: "b0", Review: true})
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "more than 1048576, the largest state Lava stores") {
		t.Fatalf("reviewed plan of 2 MB of values: %.300v; want it refused", err)
	}
	_, err = h.eng.ScanDrift(t.Context(), engine.DriftRequest{Target: h.target(big)})
	if !errors.Is(err, engine.ErrEvaluationLimit) {
		t.Fatalf("drift scan of 2 MB of values: %.300v; want it refused", err)
	}
	p, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(`{"resource":{"terraform_data":{"a":{"input":"x"}}}}`), BindingsDigest: "b0", Review: true})
	if err != nil || p.ReviewDigest == "" {
		t.Fatalf("reviewed plan of a small value: %+v, %v; want a review body", p, err)
	}
}

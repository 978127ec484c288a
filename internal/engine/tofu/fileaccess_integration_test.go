//go:build integration

package tofu_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/enginetest"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestEngine_fileAccessAttacks runs the file-access attacks on the tofu engine, with real
// OpenTofu and example/testkit 0.4.0 (docs/security.md, "Engines"; the embedded
// engine's test runs the same documents, enginetest.FileAttacks): a testkit_legacy_file writing
// outside the policy's root, an import whose id names a NATS seed of a `lava up` state
// directory with ignore_changes and an output (unchecked, it reads the seed or attest's signing
// key into the object's status.outputs), and imports of signing.key and
// rpc.token whose plan replaces them. Each plan fails with engine.ErrPolicyRejected after init
// (the schemas come from `tofu providers schema -json`) and before any provider reads or writes
// a file: no state, no outputs, every secret untouched, nothing written. A file under the root
// still applies.
func TestEngine_fileAccessAttacks(t *testing.T) {
	tools := tofutest.Tofu(t)
	mirror := tofutest.TestkitMirror(t, tools)
	atk := enginetest.NewFileAttacks(t, mirror)
	h := newHarness(t, harnessOpts{mirror: mirror, files: atk.FileAccess})
	atk.Run(t, func(key state.Key, doc string) error {
		h.key = key
		p, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(doc)})
		if err == nil {
			_, err = h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "test-replica"})
		}
		return err
	}, func(key state.Key) (*engine.Outputs, error) { return h.eng.Outputs(t.Context(), key) })

	h.key = state.Key{Namespace: "tenant", Name: "allowed"}
	ok := filepath.Join(atk.Root, "ok.txt")
	h.apply(h.plan(`{"resource":{"testkit_legacy_file":{"ok":{"filename":"` + ok + `","content":"fine"}}}}`))
	if b, err := os.ReadFile(ok); err != nil || string(b) != "fine" {
		t.Errorf("%s = %q, %v; want the file applied", ok, b, err)
	}
}

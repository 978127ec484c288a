//go:build integration

package embedded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/enginetest"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestEngine_fileAccessAttacks runs the file-access attacks on the embedded engine, with the
// real example/testkit 0.4.0 (docs/security.md, "Engines"; the tofu engine's
// test runs the same documents, enginetest.FileAttacks): a testkit_legacy_file writing outside
// the policy's root, an import whose id names a NATS seed of a `lava up` state directory
// (ignore_changes and an output: the seed's content would be read into the object's outputs),
// and imports of signing.key and rpc.token whose plan replaces them (an unchecked apply deletes
// both). Each plan fails with engine.ErrPolicyRejected before any provider reads
// or writes a file: no state, no outputs, every secret untouched, nothing written. A file under
// the root still applies.
func TestEngine_fileAccessAttacks(t *testing.T) {
	e := newEnv(t)
	mirror := tofutest.TestkitMirror(t, e.tools)
	atk := enginetest.NewFileAttacks(t, mirror)
	e.eng = New(Options{Store: e.store, Artifacts: e.art, ProviderDir: mirror, Logger: e.eng.opts.Logger, FileAccess: atk.FileAccess})
	t.Cleanup(func() { _ = e.eng.Close() })
	atk.Run(t, func(key state.Key, doc string) error {
		e.key = key
		_, err := e.planApply(doc)
		return err
	}, func(key state.Key) (*engine.Outputs, error) { return e.eng.Outputs(t.Context(), key) })

	e.key = state.Key{Namespace: "tenant", Name: "allowed"}
	ok := filepath.Join(atk.Root, "ok.txt")
	if _, err := e.planApply(`{"resource":{"testkit_legacy_file":{"ok":{"filename":"` + ok + `","content":"fine"}}}}`); err != nil {
		t.Fatalf("a file under the root: %v", err)
	}
	if b, err := os.ReadFile(ok); err != nil || string(b) != "fine" {
		t.Errorf("%s = %q, %v; want the file applied", ok, b, err)
	}
}

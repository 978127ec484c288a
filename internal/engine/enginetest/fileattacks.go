package enginetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// FileAttacks are file-access attacks on an engine through the test
// provider example/testkit (docs/security.md, "Engines"), over directories of their own: a
// file root (the policy's only fileWriteRoots entry), a directory outside it, and a fake `lava
// up` state directory holding a NATS seed, attest's signing key and the RPC token.
type FileAttacks struct {
	Root, Outside, StateDir string
	// Secrets are the state directory's files and their contents.
	Secrets map[string]string
	// FileAccess holds the engines to Root, with StateDir and the mirror protected.
	FileAccess *engine.FileAccess
}

// NewFileAttacks makes the directories and the state directory's files; mirror is the
// provider mirror the engine under attack uses (protected).
func NewFileAttacks(t testing.TB, mirror string) *FileAttacks {
	t.Helper()
	base := t.TempDir()
	a := &FileAttacks{Root: filepath.Join(base, "files"), Outside: filepath.Join(base, "outside"), StateDir: filepath.Join(base, "state"),
		Secrets: map[string]string{}}
	for _, d := range []string{a.Root, a.Outside, filepath.Join(a.StateDir, "nats-credentials")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"nats-credentials/bootstrap.nk": "SUAFAKEBOOTSTRAPSEED", "signing.key": "fake-signing-seed",
		"rpc.token": "fake-rpc-token"} {
		p := filepath.Join(a.StateDir, filepath.FromSlash(name))
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		a.Secrets[p] = content
	}
	a.FileAccess = &engine.FileAccess{
		Policy:    &policy.File{Default: policy.Config{Cluster: policy.Settings{FileWriteRoots: &[]string{a.Root}}}},
		Protected: []string{mirror, a.StateDir},
	}
	return a
}

// FileAttack is one attack: a rendered document for testkit, and the paths it must not
// create.
type FileAttack struct {
	Name, Doc string
	Creates   []string
}

// Attacks are the documents: testkit_legacy_file (a type no table of known types listed)
// writing outside the root; imports whose id names the seed, with ignore_changes and an output
// that would read its content into the object's outputs, and without, which plans a replace
// that deletes the imported file (signing.key, then rpc.token).
func (a *FileAttacks) Attacks() []FileAttack {
	outside := filepath.Join(a.Outside, "legacy.txt")
	seed := filepath.Join(a.StateDir, "nats-credentials", "bootstrap.nk")
	return []FileAttack{
		{Name: "legacy file outside the root", Creates: []string{outside},
			Doc: fmt.Sprintf(`{"resource":{"testkit_legacy_file":{"w":{"filename":%q,"content":"written"}}}}`, outside)},
		{Name: "import reads the seed into outputs",
			Doc: fmt.Sprintf(`{"import":[{"to":"testkit_file.s","id":%q}],`+
				`"resource":{"testkit_file":{"s":{"filename":%q,"content":"x","lifecycle":{"ignore_changes":"all"}}}},`+
				`"output":{"leak":{"value":"${testkit_file.s.content}"}}}`, seed, filepath.Join(a.Root, "s.txt"))},
		{Name: "import replaces signing.key and rpc.token",
			Doc: fmt.Sprintf(`{"import":[{"to":"testkit_file.k","id":%q},{"to":"testkit_file.t","id":%q}],`+
				`"resource":{"testkit_file":{"k":{"filename":%q,"content":"x"},"t":{"filename":%q,"content":"x"}}}}`,
				filepath.Join(a.StateDir, "signing.key"), filepath.Join(a.StateDir, "rpc.token"),
				filepath.Join(a.Root, "k.txt"), filepath.Join(a.Root, "t.txt"))},
	}
}

// Run runs every attack as its own object of namespace "tenant": attack plans the document
// (and applies the plan when the plan succeeds) on the engine under test, outputs reads the
// object's outputs. Each must fail with engine.ErrPolicyRejected, leave no output holding a
// secret, every secret untouched and nothing written.
func (a *FileAttacks) Run(t testing.TB, attack func(key state.Key, doc string) error, outputs func(key state.Key) (*engine.Outputs, error)) {
	t.Helper()
	for i, at := range a.Attacks() {
		key := state.Key{Namespace: "tenant", Name: fmt.Sprintf("attack-%d", i)}
		if err := attack(key, at.Doc); !errors.Is(err, engine.ErrPolicyRejected) {
			t.Errorf("%s: plan and apply: %v; want ErrPolicyRejected", at.Name, err)
		}
		o, err := outputs(key)
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			t.Fatal(err)
		}
		b, _ := json.Marshal(o)
		for p, want := range a.Secrets {
			if got, err := os.ReadFile(p); err != nil || string(got) != want {
				t.Errorf("%s: %s is %q (%v), want it untouched", at.Name, p, got, err)
			}
			if o != nil && strings.Contains(string(b), want) {
				t.Errorf("%s: the object's outputs hold %s's content: %s", at.Name, p, b)
			}
		}
		for _, p := range at.Creates {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s: %s was written", at.Name, p)
			}
		}
	}
}

// PlantProvider writes an executable named terraform-provider-testkit into testkit's package
// directory of mirror (the name FindExecutable and OpenTofu pick before the real
// terraform-provider-testkit_vVERSION), which writes a marker file when it runs, and returns
// the marker's path. mirror's package directory must be a directory of the test's own (a
// merged mirror: tofutest.TestkitMirror).
func PlantProvider(t testing.TB, mirror string) string {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "planted-ran")
	dir := filepath.Join(mirror, "registry.opentofu.org", "example", "testkit", tofutest.TestkitVersion, runtime.GOOS+"_"+runtime.GOARCH)
	script := fmt.Sprintf("#!/bin/sh\necho ran > %q\nexit 1\n", marker)
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-testkit"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return marker
}

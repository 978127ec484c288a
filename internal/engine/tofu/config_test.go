package tofu

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/lava-operator/lava/internal/engine/state"
)

// lava up passes a relative state directory (.lava/work); the CLI runs in each workspace, so
// the paths it is given must be absolute or it cannot find its CLI configuration.
func TestConfig_validate_makesPathsAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	c := Config{
		Bin: "tofu", BackendURL: "http://127.0.0.1:1/state",
		WorkDir: ".lava/work", MirrorDir: "mirror", CLIConfigFile: "cli.tfrc",
		Store: &state.Store{}, Artifacts: nopArtifacts{},
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{"WorkDir": c.WorkDir, "MirrorDir": c.MirrorDir, "CLIConfigFile": c.CLIConfigFile} {
		if !filepath.IsAbs(p) {
			t.Errorf("%s = %q, want an absolute path", name, p)
		}
	}
	if c.PluginCacheDir != "" {
		t.Errorf("PluginCacheDir = %q, want it left empty", c.PluginCacheDir)
	}
}

// nopArtifacts satisfies state.Artifacts for a test that never stores anything.
type nopArtifacts struct{}

func (nopArtifacts) Put(context.Context, io.Reader) (string, error)     { return "", nil }
func (nopArtifacts) PutBytes(context.Context, []byte) (string, error)   { return "", nil }
func (nopArtifacts) Get(context.Context, string) (io.ReadCloser, error) { return nil, nil }

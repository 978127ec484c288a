package tofutest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// Workspace is a tofu working directory for running the CLI by hand, as an operator would:
// local state (Dir/terraform.tfstate), providers only from one filesystem mirror, plugins
// linked from a shared plugin cache.
type Workspace struct {
	// Dir is the working directory (a test temp dir unless given).
	Dir string
	bin string
	env []string
}

// Workspace returns a working directory whose tofu installs providers only from mirror (the
// tool directory's CLI config when mirror is tt.Mirror, else a CLI config written for mirror)
// and, when cache is not empty, caches them in cache (TF_PLUGIN_CACHE_DIR; a cache shared by
// the workspaces of one test makes `tofu init` link instead of copy). dir "" means a new
// temp dir.
func (tt Tools) Workspace(t testing.TB, dir, mirror, cache string) *Workspace {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cliConfig := tt.MirrorConfig(t, mirror)
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	if cache != "" {
		env = append(env, "TF_PLUGIN_CACHE_DIR="+cache)
	}
	return &Workspace{Dir: dir, bin: tt.Bin, env: env}
}

// MirrorConfig returns a CLI config file that installs providers only from mirror: the tool
// directory's own when mirror is tt.Mirror, else one written for mirror in a temp dir of t.
func (tt Tools) MirrorConfig(t testing.TB, mirror string) string {
	t.Helper()
	if mirror == tt.Mirror {
		return tt.CLIConfig
	}
	abs, err := filepath.Abs(mirror)
	if err != nil {
		t.Fatal(err)
	}
	cliConfig := filepath.Join(t.TempDir(), "tofurc")
	body := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"*/*/*\"]\n  }\n}\ndisable_checkpoint = true\n", abs)
	if err := os.WriteFile(cliConfig, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return cliConfig
}

// Run runs `tofu args...` (the workspace's binary: tofu, or terraform for a [Tools] whose Bin
// is terraform) in the workspace and returns its stdout and exit code. An exit code not in ok
// (nil means only 0) fails t with the command's stdout and stderr, as does a binary that
// cannot be started.
func (w *Workspace) Run(t testing.TB, ok []int, args ...string) ([]byte, int) {
	t.Helper()
	if ok == nil {
		ok = []int{0}
	}
	cmd := exec.CommandContext(t.Context(), w.bin, args...)
	cmd.Dir, cmd.Env = w.Dir, w.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s %v: %v", filepath.Base(w.bin), args, err)
		}
		code = ee.ExitCode()
	}
	if !slices.Contains(ok, code) {
		t.Fatalf("%s %v: exit code %d (want one of %v)\n%s%s", filepath.Base(w.bin), args, code, ok, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), code
}

// AddEnv adds variables ("NAME=value", later ones win) to the environment tofu runs with, as
// a provider's credentials would be given to it.
func (w *Workspace) AddEnv(kv ...string) {
	w.env = append(w.env, kv...)
}

// WriteFile writes name (relative to Dir) with body, failing t on error.
func (w *Workspace) WriteFile(t testing.TB, name string, body []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(w.Dir, name), body, 0o644); err != nil {
		t.Fatal(err)
	}
}

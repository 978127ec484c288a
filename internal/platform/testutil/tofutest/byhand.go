package tofutest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// ByHandScript is the baseline of the benchmarks that compare Lava with OpenTofu run as an
// operator would run it by hand on the same Terraform JSON (local state, the tool directory's
// CLI config and a plugin cache): phase "create" is `tofu init`, `plan -out` and `apply` of the
// plan file in a fresh directory; phase "noop" is `plan -detailed-exitcode` in that directory
// afterwards (exit 0: no changes); phase "update" is `plan -out` and `apply` of the plan file
// there (after the configuration changed); phase "destroy" is `plan -destroy -out` and `apply`
// of the plan file; phase "refresh" is `plan -refresh-only -detailed-exitcode` there (what a
// drift check by hand is; exit 0: nothing changed outside). Arguments: $1 the phase, $2 the
// working directory.
const ByHandScript = `set -euo pipefail
cd "$2"
case "$1" in
create)
  tofu init -input=false -no-color >/dev/null
  tofu plan -input=false -no-color -out=plan.bin >/dev/null
  tofu apply -input=false -no-color plan.bin >/dev/null ;;
noop)
  tofu plan -input=false -no-color -detailed-exitcode >/dev/null ;;
update)
  tofu plan -input=false -no-color -out=plan.bin >/dev/null
  tofu apply -input=false -no-color plan.bin >/dev/null ;;
destroy)
  tofu plan -destroy -input=false -no-color -out=plan.bin >/dev/null
  tofu apply -input=false -no-color plan.bin >/dev/null ;;
refresh)
  tofu plan -refresh-only -input=false -no-color -detailed-exitcode >/dev/null ;;
esac
`

// ByHand runs [ByHandScript]'s phase ("create", "noop", "update", "destroy" or "refresh") with bash in ws (which
// holds the configuration, e.g. main.tf.json), with cache as TF_PLUGIN_CACHE_DIR and env
// ("NAME=value", e.g. a provider's credentials) added to the environment, and returns its
// wall time: from starting bash to its exit. A failing script fails tb with its output.
func (tt Tools) ByHand(tb testing.TB, phase, ws, cache string, env ...string) time.Duration {
	tb.Helper()
	cmd := exec.CommandContext(tb.Context(), "bash", "-c", ByHandScript, "byhand", phase, ws)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(tt.Bin)+":"+os.Getenv("PATH"),
		"TF_CLI_CONFIG_FILE="+tt.CLIConfig, "TF_PLUGIN_CACHE_DIR="+cache, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	cmd.Env = append(cmd.Env, env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("script %s: %v\n%s", phase, err, out)
	}
	return time.Since(start)
}

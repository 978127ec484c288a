package tofu

import (
	"fmt"
	"os"
	"strconv"
)

// DefaultMaxMemoryBytes is [Config].MaxMemoryBytes when unset: 4 GiB of data (heap) per CLI
// process. OpenTofu evaluates a tenant's expressions itself, with no budget:
// `setproduct(range(1024), range(1024), range(1024))` asks for hundreds of gigabytes.
const DefaultMaxMemoryBytes = 4 << 30

// The environment of a CLI run started through this process's own executable: the binary to
// run and the RLIMIT_DATA to run it under ([limitedExec]).
const (
	execEnv    = "LAVA_TOFU_EXEC"
	maxDataEnv = "LAVA_TOFU_MAX_DATA"
)

// The executable of every program that runs the engine holds this package, so it can run the
// CLI under a memory limit: started with execEnv set, it sets RLIMIT_DATA before anything else
// of the program runs (a package init) and executes the CLI in its place (same pid). A CLI
// run past the limit ends with Go's "fatal error: runtime: cannot allocate memory", never the
// machine's or the pod's OOM killer choosing among Lava's processes. terraform-exec starts
// its commands itself, so a limit set after the start (prlimit) would come after the
// allocation it is meant to stop.
func init() {
	bin, ok := os.LookupEnv(execEnv)
	if !ok {
		return
	}
	limit, err := strconv.ParseUint(os.Getenv(maxDataEnv), 10, 64)
	_ = os.Unsetenv(execEnv)
	_ = os.Unsetenv(maxDataEnv)
	if err == nil {
		err = limitedExec(bin, limit)
	}
	fmt.Fprintf(os.Stderr, "lava: run %s under a memory limit: %v\n", bin, err)
	os.Exit(126)
}

// cliCommand is the executable to start for a CLI command and the variables to add to its
// environment: e.cfg.Bin itself without a memory limit, else this process's executable with
// execEnv and maxDataEnv.
func (e *Engine) cliCommand() (string, map[string]string) {
	if e.self == "" {
		return e.cfg.Bin, nil
	}
	return e.self, map[string]string{execEnv: e.cfg.Bin, maxDataEnv: strconv.FormatInt(e.cfg.MaxMemoryBytes, 10)}
}

// selfForLimit is the executable that runs the CLI under limit bytes: this process's own, ""
// when there is no limit (negative) or the platform has none ([limitSupported]).
func selfForLimit(limit int64) (string, error) {
	if limit < 0 || !limitSupported {
		return "", nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("tofu engine config: the executable that runs the CLI under its memory limit: %w", err)
	}
	return self, nil
}

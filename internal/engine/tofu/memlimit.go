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

// DefaultMaxCPUSeconds is [Config].MaxCPUSeconds when unset: 2 minutes of CPU per CLI process
// (a plan or apply waits on its providers; its own CPU is seconds). OpenTofu's
// `bcrypt("x", 31)` runs for days at apply, holding an applier handler for the whole apply
// timeout.
const DefaultMaxCPUSeconds = 120

// The environment of a CLI run started through this process's own executable: the binary to
// run and the RLIMIT_DATA to run it under ([limitedExec]).
const (
	execEnv    = "LAVA_TOFU_EXEC"
	maxDataEnv = "LAVA_TOFU_MAX_DATA"
	maxCPUEnv  = "LAVA_TOFU_MAX_CPU"
)

// The executable of every program that runs the engine holds this package, so it can run the
// CLI under limits: started with execEnv set, it sets RLIMIT_DATA and RLIMIT_CPU (soft and
// hard: the kernel sends SIGKILL at the limit) before anything else of the program runs (a
// package init) and executes the CLI in its place (same pid). A CLI run past the memory limit
// ends with Go's "fatal error: runtime: cannot allocate memory", never the machine's or the
// pod's OOM killer choosing among Lava's processes; one past the CPU limit is killed.
// terraform-exec starts its commands itself, so a limit set after the start (prlimit) would
// come after the allocation it is meant to stop. 0 is no limit.
func init() {
	bin, ok := os.LookupEnv(execEnv)
	if !ok {
		return
	}
	data, err := strconv.ParseUint(os.Getenv(maxDataEnv), 10, 64)
	cpu, cerr := strconv.ParseUint(os.Getenv(maxCPUEnv), 10, 64)
	for _, k := range []string{execEnv, maxDataEnv, maxCPUEnv} {
		_ = os.Unsetenv(k)
	}
	if err == nil {
		err = cerr
	}
	if err == nil {
		err = limitedExec(bin, data, cpu)
	}
	fmt.Fprintf(os.Stderr, "lava: run %s under its limits: %v\n", bin, err)
	os.Exit(126)
}

// cliCommand is the executable to start for a CLI command and the variables to add to its
// environment: e.cfg.Bin itself without limits, else this process's executable with execEnv,
// maxDataEnv and maxCPUEnv.
func (e *Engine) cliCommand() (string, map[string]string) {
	if e.self == "" {
		return e.cfg.Bin, nil
	}
	return e.self, map[string]string{execEnv: e.cfg.Bin, maxDataEnv: strconv.FormatInt(max(e.cfg.MaxMemoryBytes, 0), 10),
		maxCPUEnv: strconv.FormatInt(max(e.cfg.MaxCPUSeconds, 0), 10)}
}

// selfForLimit is the executable that runs the CLI under its limits (memory bytes, CPU
// seconds): this process's own, "" when there is none (both negative) or the platform has
// none ([limitSupported]).
func selfForLimit(memory, cpu int64) (string, error) {
	if (memory < 0 && cpu < 0) || !limitSupported {
		return "", nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("tofu engine config: the executable that runs the CLI under its memory limit: %w", err)
	}
	return self, nil
}

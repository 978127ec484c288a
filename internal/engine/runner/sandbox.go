package runner

import (
	"fmt"
	"slices"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// DefaultReadRoots are the system directories a runner's providers may read and execute
// from (those missing are skipped): programs, libraries, certificates and name service
// configuration, and the kernel's views of processes and devices.
var DefaultReadRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/proc", "/sys", "/dev"}

// devices are the character devices providers may write to.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// fsConfig restricts every filesystem access right of ABI v3 (reads, writes, executes,
// renames across directories, truncation), connect(2) on TCP ports, and (ABI v6) signals
// and abstract UNIX sockets reaching outside the runner; on an older kernel what it has.
var fsConfig = landlock.Config{
	HandledAccessFS:  landlock.V3.HandledAccessFS,
	HandledAccessNet: landlock.AccessNetSet(llsys.AccessNetConnectTCP),
	Scoped:           landlock.V6.Scoped,
}.BestEffort()

// restrict puts the runner and every process it starts under its Landlock rules: read and
// execute beneath the mirror and the read roots, write beneath its directory and the write
// roots, no TCP connect to the denied ports; and under a seccomp filter refusing Multipath TCP
// sockets, which those rules do not cover.
func restrict(cfg Config) error {
	roots := cfg.ReadRoots
	if roots == nil {
		roots = DefaultReadRoots
	}
	rules := []landlock.Rule{landlock.RODirs(cfg.Mirror), landlock.RWDirs(cfg.Dir)}
	for _, r := range roots {
		rules = append(rules, landlock.RODirs(r).IgnoreIfMissing())
	}
	for _, r := range cfg.WriteRoots {
		rules = append(rules, landlock.RWDirs(r))
	}
	for _, d := range devices {
		rules = append(rules, landlock.RWFiles(d).IgnoreIfMissing())
	}
	// Landlock allows ports, it cannot deny one: every port but the denied ones is allowed.
	for p := 1; p <= 65535; p++ {
		if !slices.Contains(cfg.DenyConnect, uint16(p)) {
			rules = append(rules, landlock.ConnectTCP(uint16(p)))
		}
	}
	// Landlock's TCP rules do not cover Multipath TCP: seccomp refuses MPTCP sockets.
	if err := refuseMPTCP(); err != nil {
		return err
	}
	if err := fsConfig.Restrict(rules...); err != nil {
		return fmt.Errorf("runner: landlock: %w", err)
	}
	return nil
}

// Support is what the kernel offers a runner's sandbox: the Landlock ABI version (0: none)
// and the rules missing from it, as sentences for `lava up` to print at start.
func Support() (abi int, missing []string) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		abi = 0
	}
	return abi, missingAt(abi)
}

// missingAt is what a runner's sandbox lacks on a kernel of Landlock ABI abi.
func missingAt(abi int) []string {
	if abi < 1 {
		return []string{"no Landlock: provider runners can read and write whatever their user can, and connect to NATS"}
	}
	var missing []string
	if abi < 3 {
		missing = append(missing, "Landlock before ABI v3: provider runners can truncate files outside their roots")
	}
	if abi < 4 {
		missing = append(missing, "Landlock before ABI v4 (no network rules): provider runners can connect to NATS")
	}
	if abi < 6 {
		missing = append(missing, "Landlock before ABI v6: provider runners can signal other processes of their user")
	}
	return missing
}

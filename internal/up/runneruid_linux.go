//go:build linux

package up

import (
	"fmt"

	"github.com/prometheus/procfs"
)

// runnerUIDInUse returns an error naming a running process whose real, effective, saved or
// filesystem uid is uid: runners need a uid no other process has, since a process of the same
// uid could write a namespace's files, read a provider's /proc entries and signal it, outside
// every Landlock rule (an attack trial did all of it as nobody, then the default runner user).
// The processes are those of /proc (prometheus/procfs); one that exits while it is read is
// skipped. Errors: /proc cannot be listed.
func runnerUIDInUse(uid int) error {
	procs, err := procfs.AllProcs()
	if err != nil {
		return fmt.Errorf("up: --runner-uid: list processes: %w", err)
	}
	for _, p := range procs {
		st, err := p.NewStatus()
		if err != nil {
			continue
		}
		for _, u := range st.UIDs {
			if u == uint64(uid) {
				return fmt.Errorf("up: --runner-uid %d is the uid of process %d (%s), already running: runners need a uid no other process uses, or that process could reach their files and providers; give --runner-uid an unused uid (default %d)",
					uid, p.PID, st.Name, DefaultRunnerUID)
			}
		}
	}
	return nil
}

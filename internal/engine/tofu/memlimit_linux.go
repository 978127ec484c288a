package tofu

import (
	"os"

	"golang.org/x/sys/unix"
)

// limitSupported: Linux counts every private writable mapping against RLIMIT_DATA (since
// 4.7), so the Go runtime of the CLI and its providers meets it.
const limitSupported = true

// limitedExec sets RLIMIT_DATA to data bytes and RLIMIT_CPU to cpu seconds (0: unchanged)
// and executes bin with this process's arguments and environment; it returns only on failure.
func limitedExec(bin string, data, cpu uint64) error {
	for _, l := range []struct {
		resource int
		value    uint64
	}{{unix.RLIMIT_DATA, data}, {unix.RLIMIT_CPU, cpu}} {
		if l.value == 0 {
			continue
		}
		if err := unix.Setrlimit(l.resource, &unix.Rlimit{Cur: l.value, Max: l.value}); err != nil {
			return err
		}
	}
	return unix.Exec(bin, append([]string{bin}, os.Args[1:]...), os.Environ())
}

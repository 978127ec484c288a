package tofu

import (
	"os"

	"golang.org/x/sys/unix"
)

// limitSupported: Linux counts every private writable mapping against RLIMIT_DATA (since
// 4.7), so the Go runtime of the CLI and its providers meets it.
const limitSupported = true

// limitedExec sets RLIMIT_DATA to limit bytes and executes bin with this process's arguments
// and environment; it returns only on failure.
func limitedExec(bin string, limit uint64) error {
	if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		return err
	}
	return unix.Exec(bin, append([]string{bin}, os.Args[1:]...), os.Environ())
}

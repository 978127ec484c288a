// Package proctest reads what tests need to know about live processes from Linux's /proc
// (proc(5)): the children of the test process and a process's environment, so that a test can
// check what a provider process or a tool it started really received.
package proctest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Children lists the pids whose parent is this process, from each /proc/PID/stat; a process
// that exits while it is read is left out. A /proc that cannot be listed fails tb.
func Children(tb testing.TB) []int {
	tb.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			if fields := strings.Fields(s[i+1:]); len(fields) > 1 && fields[1] == self {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Environ is the environment of process pid, from /proc/PID/environ, as name -> value. The
// error is the read's (the process is gone, or not this user's).
func Environ(pid int) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, kv := range strings.Split(string(raw), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out, nil
}

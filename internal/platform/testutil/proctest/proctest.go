// Package proctest reads what tests need to know about live processes from Linux's /proc
// (proc(5)): the children of the test process and a process's environment, so that a test can
// check what a provider process or a tool it started really received.
package proctest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// Children lists the pids whose parent is this process, from each /proc/PID/stat; a process
// that exits while it is read is left out. A /proc that cannot be listed fails tb.
func Children(tb testing.TB) []int {
	tb.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := stat(pid); err == nil && st.PPID == self {
			out = append(out, pid)
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

// CPUByName sums the CPU time (user plus system, /proc/PID/stat utime and stime) of every
// live process by its command name (comm, at most 15 bytes: "keystone-wsgi-p" for
// keystone-wsgi-public); a process that exits while it is read is left out, and so is the
// time of one that exited before. The difference of two calls is what the processes that
// lived through both spent between them. A /proc that cannot be listed fails tb.
func CPUByName(tb testing.TB) map[string]time.Duration {
	tb.Helper()
	procs, err := procfs.AllProcs()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]time.Duration{}
	for _, p := range procs {
		if st, err := p.Stat(); err == nil {
			out[st.Comm] += time.Duration(st.CPUTime() * float64(time.Second))
		}
	}
	return out
}

// SelfCPU is this process's CPU time (user plus system, getrusage(2) RUSAGE_SELF, all its
// threads). A failing getrusage fails tb.
func SelfCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Running reports whether pid is a live process, from /proc/PID/stat: a zombie awaiting its
// reaper, or no such process, is not.
func Running(pid int) bool {
	st, err := stat(pid)
	return err == nil && st.State != "Z"
}

// stat reads /proc/PID/stat with prometheus/procfs.
func stat(pid int) (procfs.ProcStat, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, err
	}
	return p.Stat()
}

// GoneWithin waits up to d for pid to stop running; it reports whether it did.
func GoneWithin(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for Running(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return !Running(pid)
}

// StartParent runs the test binary again with env (NAME=value entries) added, as the parent
// of a child it starts; the parent's first line on stdout must be "pid=N", the child's pid.
// It returns the parent's command and the child's pid, which cleanup SIGKILLs. A parent that
// cannot start or prints anything else fails tb.
func StartParent(tb testing.TB, env ...string) (parent *exec.Cmd, child int) {
	tb.Helper()
	parent = exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), env...)
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		tb.Fatalf("proctest: the parent printed no pid: %v", err)
	}
	child, err = strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "pid="))
	if err != nil || child <= 0 {
		tb.Fatalf("proctest: the parent printed %q, want pid=N: %v", line, err)
	}
	tb.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	return parent, child
}

// Allocated returns the bytes this process allocated while fn ran (runtime.MemStats
// TotalAlloc, the heap's cumulative allocations): the work of a quadratic path shows in it
// without timing anything. Run it from a test that is not parallel, since every goroutine's
// allocations count.
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

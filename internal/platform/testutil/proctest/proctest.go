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
	var out []int
	if err := eachChild(func(pid int, _ procfs.ProcStat) { out = append(out, pid) }); err != nil {
		tb.Fatal(err)
	}
	return out
}

// eachChild calls fn with the pid and /proc/PID/stat of every process whose parent is this
// process; a process that exits while it is read is left out. The error is the listing's.
func eachChild(fn func(pid int, st procfs.ProcStat)) error {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := stat(pid); err == nil && st.PPID == self {
			fn(pid, st)
		}
	}
	return nil
}

// PeakChildren runs fn and returns the largest number of live children of this process
// named comm (/proc/PID/stat's command name, at most 15 bytes: "terraform-provi" for every
// terraform-provider-*) running at once while fn ran, polled every 5 ms: a child that lives
// less than that can be missed, so the figure is at most the true peak. Zombies are not
// counted.
// A /proc that cannot be listed fails tb.
func PeakChildren(tb testing.TB, comm string, fn func()) int {
	tb.Helper()
	count := func() (int, error) {
		n := 0
		err := eachChild(func(_ int, st procfs.ProcStat) {
			if st.Comm == comm && st.State != "Z" {
				n++
			}
		})
		return n, err
	}
	peak, err := count()
	if err != nil {
		tb.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	var pollErr error
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				n, err := count()
				if err != nil {
					pollErr = err
					return
				}
				peak = max(peak, n)
			}
		}
	}()
	fn()
	close(stop)
	<-done
	if pollErr != nil {
		tb.Fatal(pollErr)
	}
	n, err := count()
	if err != nil {
		tb.Fatal(err)
	}
	return max(peak, n)
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

// TreeCPU is the CPU time (user plus system) of this process, of its children that ended and
// were waited for (getrusage(2) RUSAGE_CHILDREN, their own waited descendants included), and of
// its live children (/proc/PID/stat). The difference of two calls is what this process and its
// children spent between them, when no child that was alive at the first call ended before the
// second (its time before the first call would be counted again). A failing getrusage or /proc
// fails tb.
func TreeCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		tb.Fatal(err)
	}
	total := SelfCPU(tb) + time.Duration(ru.Utime.Nano()+ru.Stime.Nano())
	for _, pid := range Children(tb) {
		if st, err := stat(pid); err == nil {
			total += time.Duration(st.CPUTime() * float64(time.Second))
		}
	}
	return total
}

// ResetPeakRSS resets this process's peak resident set size to its current one (writing 5 to
// /proc/self/clear_refs, proc(5)), so that [PeakRSS] reports the peak from now on. A failed
// write fails tb.
func ResetPeakRSS(tb testing.TB) {
	tb.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Fatal(err)
	}
}

// PeakRSS is this process's peak resident set size in bytes (VmHWM of /proc/self/status) since
// it started or since [ResetPeakRSS]. A failed read fails tb.
func PeakRSS(tb testing.TB) uint64 {
	tb.Helper()
	p, err := procfs.Self()
	if err != nil {
		tb.Fatal(err)
	}
	st, err := p.NewStatus()
	if err != nil {
		tb.Fatal(err)
	}
	return st.VmHWM
}

// DescendantPeakRSS runs fn and returns the largest peak resident set size in bytes (VmHWM of
// /proc/PID/status) of any descendant of this process named comm (e.g. "tofu") while fn ran,
// polled every 10 ms: growth in a process's last 10 ms can be missed, so the figure is at most
// its true peak. Each poll reads every process's stat, which costs CPU beside fn. (getrusage's ru_maxrss is no substitute: a child started with vfork, as
// os/exec does, records the parent's peak as its own when it execs.)
func DescendantPeakRSS(tb testing.TB, comm string, fn func()) uint64 {
	tb.Helper()
	var peak uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, descendantsHWM(comm))
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return peak
}

// descendantsHWM is the largest VmHWM of the live descendants of this process named comm.
func descendantsHWM(comm string) uint64 {
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	var named []procfs.Proc
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue
		}
		parent[p.PID] = st.PPID
		if st.Comm == comm {
			named = append(named, p)
		}
	}
	self := os.Getpid()
	var peak uint64
	for _, p := range named {
		for pid, hops := parent[p.PID], 0; pid > 1 && hops < 16; pid, hops = parent[pid], hops+1 {
			if pid == self {
				if st, err := p.NewStatus(); err == nil {
					peak = max(peak, st.VmHWM)
				}
				break
			}
		}
	}
	return peak
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

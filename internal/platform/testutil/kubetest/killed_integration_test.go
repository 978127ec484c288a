//go:build integration

package kubetest

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// killedHelperEnv makes TestNoChildOutlivesAKilledTest act as the test process that gets
// killed.
const killedHelperEnv = "LAVA_KILLED_TEST_HELPER"

// TestNoChildOutlivesAKilledTest runs this test binary again as a test process that starts
// everything tests start: etcd and kube-apiserver through Start (envtest), a nats-server
// binary (natstest.RunBinary) and etcd and kube-apiserver through hack/tools/kube-testenv.sh
// (the end-to-end harness's way). It then SIGKILLs that process, as `go test -timeout` or an
// impatient CI runner does, and checks that every process it started is gone within 30 s:
// no cleanup ran, so only the parent-death signal (Start, natstest) and kube-testenv.sh's
// watchdog can have stopped them.
func TestNoChildOutlivesAKilledTest(t *testing.T) {
	if dir := os.Getenv(killedHelperEnv); dir != "" {
		startEverything(t, dir)
		return
	}
	state := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoChildOutlivesAKilledTest$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), killedHelperEnv+"="+state)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "READY" {
				ready <- nil
				for sc.Scan() { // keep the pipe drained
				}
				return
			}
		}
		ready <- errors.New("the helper test process ended before it was ready")
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the helper test process did not start everything within 3 minutes")
	}

	// What the helper started: its children, and what kube-testenv.sh recorded (those were
	// re-parented when the script exited).
	pids := children(t, cmd.Process.Pid)
	for _, f := range []string{"etcd.pid", "apiserver.pid", "watchdog.pid"} {
		b, err := os.ReadFile(filepath.Join(state, "kube", f))
		if err != nil {
			t.Fatalf("kube-testenv.sh left no %s: %v", f, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		pids[pid] = "kube-testenv.sh " + strings.TrimSuffix(f, ".pid")
	}
	if len(pids) < 6 { // envtest etcd and kube-apiserver, nats-server, and the three above
		t.Fatalf("the helper started %v, want at least etcd, kube-apiserver and nats-server besides kube-testenv.sh's", pids)
	}
	for pid, what := range pids {
		if !alive(pid) {
			t.Fatalf("%s (pid %d) is not running before the kill", what, pid)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	deadline := killed.Add(30 * time.Second)
	for {
		var left []string
		for pid, what := range pids {
			if alive(pid) {
				left = append(left, what+" (pid "+strconv.Itoa(pid)+")")
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("30 s after the test process was killed these still run: %s", strings.Join(left, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("all %d processes the killed test started were gone %v after the kill", len(pids), time.Since(killed).Round(100*time.Millisecond))
}

// startEverything is the helper test process: it starts what tests start, prints READY and
// waits to be killed.
func startEverything(t *testing.T, state string) {
	Start(t)
	natstest.RunBinary(t, t.TempDir())
	assets, err := Assets()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join("..", "..", "..", "..", "hack", "tools", "kube-testenv.sh")
	up := exec.Command(script, "up", filepath.Join(state, "kube"), assets)
	up.Env = append(os.Environ(), "KUBE_TESTENV_KCM=0")
	if b, err := up.CombinedOutput(); err != nil {
		t.Fatalf("kube-testenv.sh up: %v\n%s", err, b)
	}
	os.Stdout.WriteString("READY\n")
	time.Sleep(4 * time.Minute) // killed long before
	t.Fatal("the helper test process was not killed")
}

// children returns the processes whose parent is pid, from /proc.
func children(t *testing.T, pid int) map[int]string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			out[p] = s[strings.IndexByte(s, '(')+1 : i]
		}
	}
	return out
}

// alive reports whether pid runs (a zombie waiting for its new parent to reap it does not).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

//go:build integration

package runner_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/embedded"
	"github.com/lava-operator/lava/internal/engine/runner"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// envChild makes the test binary a runner: the host starts it as one.
const envChild = "LAVA_RUNNER_TEST_CHILD"

// envMPTCP makes the test binary connect to the address it holds over Multipath TCP and exit 0
// when it could.
const envMPTCP = "LAVA_RUNNER_TEST_MPTCP"

// envHostThenWait makes the test binary a process that makes a host and waits to be killed.
const envHostThenWait = "LAVA_RUNNER_TEST_HOST_THEN_WAIT"

func TestMain(m *testing.M) {
	if addr := os.Getenv(envMPTCP); addr != "" {
		// The attacker's program of the exec attack: a Multipath TCP connection to addr.
		d := net.Dialer{}
		d.SetMultipathTCP(true)
		c, err := d.Dial("tcp", addr)
		if err != nil {
			os.Exit(1)
		}
		_ = c.Close()
		os.Exit(0)
	}
	if strings.HasPrefix(filepath.Base(os.Args[0]), "terraform-provider-evil") {
		// The attacker's provider of the socket attack: started by a runner in its sandbox.
		fmt.Println(dialProviderSockets(os.Getenv("TMPDIR")))
		time.Sleep(3 * time.Second) // go-plugin reads the line before it sees the exit
		os.Exit(0)
	}
	if os.Getenv(envHostThenWait) == "1" {
		// A host whose process is then killed (TestHost_reclaimsKilledHostsDirectory).
		h, err := runner.NewHost(runner.Options{Mirror: os.Getenv("LAVA_TEST_MIRROR"), UID: -1})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(h.Root())
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	if os.Getenv(envChild) == "1" {
		if err := runner.Main(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// dialProviderSockets is the socket attack: it connects to every provider socket of every
// runner listed in /proc/net/unix but those below own (its own directory), opens an HTTP/2
// connection on it as a gRPC client does, and reports how many it found and how many served
// it (a provider's plaintext gRPC server answers with a SETTINGS frame; one behind TLS does
// not), as one line.
func dialProviderSockets(own string) string {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return "lava-attack: " + err.Error()
	}
	found, served := 0, 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		path := f[len(f)-1]
		if !strings.Contains(path, "/lava-runners-") || !strings.Contains(path, "/provider-") || (own != "" && strings.HasPrefix(path, own)) {
			continue
		}
		found++
		c, err := net.DialTimeout("unix", path, 5*time.Second)
		if err != nil {
			continue
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"))
		head := make([]byte, 9)
		if _, err := io.ReadFull(c, head); err == nil && head[3] == 0x04 {
			served++
		}
		_ = c.Close()
	}
	return fmt.Sprintf("lava-attack: found %d served %d", found, served)
}

// runnerUID is the unprivileged user the tests' runners run as (nobody).
const runnerUID = 65534

// openDir is a new directory other users can reach (t.TempDir's are private to root), mode
// perm, removed after the test.
func openDir(t *testing.T, perm os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp("", "lava-runner-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, perm); err != nil {
		t.Fatal(err)
	}
	return d
}

// sandbox is an embedded engine whose providers run in runners as [runnerUID], next to a
// `lava up`-like state directory that is world-writable and whose secrets are world-readable
// (so only the runner's Landlock rules keep them from the runner's user) and a real NATS server whose port the
// runners may not connect to.
type sandbox struct {
	eng      *embedded.Engine
	host     *runner.Host
	art      *tofutest.ObjectArtifacts
	stateDir string
	seed     string
	signing  string
	root     string
	natsPort int
}

// newSandbox is the sandbox over mirror, its host's options changed by each of opts.
func newSandbox(t *testing.T, mirror string, opts ...func(*runner.Options)) *sandbox {
	t.Helper()
	if os.Getuid() != 0 {
		t.Fatal("the runner tests switch users: run them as root")
	}
	nats, js := tofutest.JetStream(t)
	u, err := url.Parse(nats.URL())
	if err != nil {
		t.Fatal(err)
	}
	natsPort, _ := strconv.Atoi(u.Port())
	s := &sandbox{stateDir: openDir(t, 0o777), root: openDir(t, 0o777), natsPort: natsPort}
	s.seed = filepath.Join(s.stateDir, "nats-credentials", "bootstrap.nk")
	s.signing = filepath.Join(s.stateDir, "signing.key")
	for p, content := range map[string]string{s.seed: "SUAFAKEBOOTSTRAPSEED", s.signing: "fake-signing-seed"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := runner.Options{Exe: exe, Env: []string{envChild + "=1"}, Mirror: mirror,
		UID: runnerUID, GID: runnerUID, WriteRoots: []string{s.root}, DenyConnect: []uint16{uint16(natsPort)},
		Protect: []string{s.stateDir}, Stderr: os.Stderr}
	for _, f := range opts {
		f(&o)
	}
	s.host, err = runner.NewHost(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.host.Close() })
	s.art = tofutest.NewArtifacts(t, js)
	store := state.NewStore(tofutest.StateBucket(t, js), s.art, state.Options{})
	s.eng = embedded.New(embedded.Options{Store: store, Artifacts: s.art, ProviderDir: mirror, ProviderHost: s.host})
	t.Cleanup(func() { _ = s.eng.Close() })
	return s
}

// plan plans doc for key.
func (s *sandbox) plan(t *testing.T, key state.Key, doc string, sources map[string]string) (*engine.PlanRecord, error) {
	t.Helper()
	d, err := s.art.Put(t.Context(), strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s.eng.Plan(t.Context(), engine.PlanRequest{Target: engine.Target{Key: key, RenderedDigest: d, ProviderSources: sources, Holder: "test"}})
}

var testkit = map[string]string{"testkit": "example/testkit"}

// TestHost_applyInRunner plans and applies a file through the testkit provider running in a
// runner as nobody: the file is written under the write root, the plan of the same document
// again is a no-op, and both plans and the apply used one runner and one provider process.
func TestHost_applyInRunner(t *testing.T) {
	s := newSandbox(t, tofutest.TestkitMirror(t, tofutest.Tofu(t)))
	key := state.Key{Namespace: "tenant", Name: "files"}
	file := filepath.Join(s.root, "a.txt")
	doc := fmt.Sprintf(`{"resource":{"testkit_file":{"a":{"filename":%q,"content":"from the runner"}}}}`, file)
	rec, err := s.plan(t, key, doc, testkit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.eng.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "from the runner" {
		t.Errorf("%s = %q", file, b)
	}
	if uid := fileUID(fi); uid != runnerUID {
		t.Errorf("the file is owned by uid %d, want the runner's %d", uid, runnerUID)
	}
	rec, err = s.plan(t, key, doc, testkit)
	if err != nil {
		t.Fatal(err)
	}
	if rec.HasChanges {
		t.Errorf("the second plan is not a no-op: %+v", rec)
	}
	if n := s.host.Spawns(); n != 1 {
		t.Errorf("%d runners started, want 1", n)
	}
	if n := s.eng.Pool().Starts(); n != 1 {
		t.Errorf("%d provider processes started, want 1", n)
	}
}

// TestRunner_otherNamespaceRootAttack: under a file root of one directory per namespace
// (lava up's built-in policy), a runner writes beneath its own namespace's directory only.
// Every runner is the same user, which owns every namespace's directory, and each was given
// the whole root: a provider of namespace alpha (example/testkit here, with no file-access
// check in the engine, standing for any program a provider runs, as in the exec attack)
// replaced a file of namespace beta's objects (found by a nineteenth trial). The write is
// refused and beta's file kept; alpha writes beneath its own directory, which the host made.
func TestRunner_otherNamespaceRootAttack(t *testing.T) {
	s := newSandbox(t, tofutest.TestkitMirror(t, tofutest.Tofu(t)), func(o *runner.Options) {
		o.NamespaceRoot, o.WriteRoots = o.WriteRoots[0], nil
	})
	victim := filepath.Join(s.root, "beta", "kept.txt")
	if err := os.Mkdir(filepath.Dir(victim), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("beta's"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(victim), victim} {
		if err := os.Chown(p, runnerUID, runnerUID); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(name, file string) error {
		doc := fmt.Sprintf(`{"resource":{"testkit_file":{"a":{"filename":%q,"content":"alpha's"}}}}`, file)
		rec, err := s.plan(t, state.Key{Namespace: "alpha", Name: name}, doc, testkit)
		if err != nil {
			return err
		}
		_, err = s.eng.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"})
		return err
	}
	own := filepath.Join(s.root, "alpha", "own.txt")
	if err := apply("own", own); err != nil {
		t.Fatalf("a write beneath alpha's own directory: %v", err)
	}
	if b, _ := os.ReadFile(own); string(b) != "alpha's" {
		t.Errorf("%s = %q, want alpha's", own, b)
	}
	err := apply("steal", victim)
	t.Logf("alpha writing %s: %v", victim, err)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("alpha's write beneath beta's directory: %v; want permission denied", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "beta's" {
		t.Errorf("beta's file is now %q", b)
	}
}

// TestRunner_providerSocketAttack: a provider a runner starts serves only that runner. It
// serves gRPC on a Unix socket in its directory, and every runner, of every namespace, is the
// one runner user, which Landlock does not keep from connecting to a socket; /proc/net/unix
// names each socket. A program run in namespace alpha's runner (here a provider of the
// attacker's, this test binary, standing for what the kubernetes provider's exec runs)
// connected to the provider namespace beta's runner kept warm, configured with beta's
// credentials, and was served plaintext gRPC (found by a nineteenth trial). Providers now
// serve mutual TLS with a certificate only their runner holds: found, not served.
func TestRunner_providerSocketAttack(t *testing.T) {
	tools := tofutest.Tofu(t)
	evil := t.TempDir()
	exe := filepath.Join(evil, "registry.opentofu.org/example/evil/0.1.0/linux_amd64/terraform-provider-evil_v0.1.0")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t, tofutest.MergeMirrors(t, tofutest.TestkitMirror(t, tools), evil))
	victim := fmt.Sprintf(`{"resource":{"testkit_file":{"a":{"filename":%q,"content":"x"}}}}`, filepath.Join(s.root, "beta.txt"))
	if _, err := s.plan(t, state.Key{Namespace: "beta", Name: "files"}, victim, testkit); err != nil {
		t.Fatal(err)
	}
	_, err = s.plan(t, state.Key{Namespace: "alpha", Name: "evil"}, `{"resource":{"evil_thing":{"x":{}}}}`, map[string]string{"evil": "example/evil"})
	t.Logf("alpha's plan: %v", err)
	m := regexp.MustCompile(`lava-attack: found (\d+) served (\d+)`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil || m[1] == "0" {
		t.Fatalf("alpha's plan: %v; want the attacker's report of beta's provider socket", err)
	}
	if m[2] != "0" {
		t.Errorf("beta's provider served alpha's program on %s of the %s sockets it found", m[2], m[1])
	}
}

// TestRunner_importReadsSeed is the import-id attack of docs/security.md, "Provider runners",
// with no file-access check in the engine: an import whose id names lava up's NATS admin seed
// (world-readable here) makes example/testkit read the file in the runner, where Landlock
// refuses it. The plan fails and the seed is in no error and no output.
func TestRunner_importReadsSeed(t *testing.T) {
	s := newSandbox(t, tofutest.TestkitMirror(t, tofutest.Tofu(t)))
	key := state.Key{Namespace: "tenant", Name: "seed"}
	doc := fmt.Sprintf(`{"import":[{"to":"testkit_file.s","id":%q}],`+
		`"resource":{"testkit_file":{"s":{"filename":%q,"content":"x","lifecycle":{"ignore_changes":"all"}}}},`+
		`"output":{"leak":{"value":"${testkit_file.s.content}"}}}`, s.seed, filepath.Join(s.root, "s.txt"))
	rec, err := s.plan(t, key, doc, testkit)
	if err == nil {
		t.Fatalf("the plan importing %s succeeded: %+v", s.seed, rec)
	}
	if strings.Contains(err.Error(), "SUAFAKE") {
		t.Errorf("the error shows the seed: %v", err)
	}
	if !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("the plan failed for another reason than the runner's rules: %v", err)
	}
}

// TestRunner_kubernetesExecAttack is the exec attack of docs/security.md, "Provider
// runners": hashicorp/kubernetes 1.13.4 configured with an exec credential plugin runs a
// tenant's shell command when the plan reads a data source. The command runs in the runner as
// nobody; it reads a world-readable file of the mirror but neither the NATS seed nor the
// signing key of the state directory (both world-readable here), writes under the write root
// only (not in the state directory, not in /tmp), and connects to a TCP port on the loopback
// but not to NATS's.
func TestRunner_kubernetesExecAttack(t *testing.T) {
	s := newSandbox(t, kubernetesMirror(t))
	probe := newExecProbe(t, s)
	doc, err := json.Marshal(map[string]any{
		"terraform": map[string]any{"required_providers": map[string]any{
			"kubernetes": map[string]any{"source": "hashicorp/kubernetes", "version": "1.13.4"}}},
		"provider": map[string]any{"kubernetes": map[string]any{"host": "https://127.0.0.1:1", "insecure": true, "load_config_file": false,
			"exec": []any{map[string]any{"api_version": "client.authentication.k8s.io/v1beta1", "command": "sh", "args": []string{"-c", probe.script}}}}},
		"data": kubernetesConfigMapRead,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.plan(t, state.Key{Namespace: "tenant", Name: "exec"}, string(doc), map[string]string{"kubernetes": "hashicorp/kubernetes"})
	t.Logf("plan: %v", err)
	probe.check(t)
}

// TestRunner_credentialFileChainAttack is the credential chain of docs/security.md, "Provider
// runners": a provider setting that names a file whose content names a command (AWS's
// credential_process in a shared config file; here hashicorp/kubernetes 1.13.4's config_path,
// a kubeconfig whose user has an exec plugin). The tenant's first object writes the file with
// testkit_file under its write root, applied in the runner; its second reads a data source
// with the provider pointed at that file. The command runs in the runner under the same rules
// as the exec attack's.
func TestRunner_credentialFileChainAttack(t *testing.T) {
	s := newSandbox(t, tofutest.MergeMirrors(t, kubernetesMirror(t), tofutest.TestkitMirror(t, tofutest.Tofu(t))))
	probe := newExecProbe(t, s)
	kubeconfig, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "c",
		"clusters": []any{map[string]any{"name": "c", "cluster": map[string]any{"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": true}}},
		"contexts": []any{map[string]any{"name": "c", "context": map[string]any{"cluster": "c", "user": "u"}}},
		"users": []any{map[string]any{"name": "u", "user": map[string]any{"exec": map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "sh", "args": []string{"-c", probe.script}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(s.root, "kubeconfig")
	write, err := json.Marshal(map[string]any{"resource": map[string]any{"testkit_file": map[string]any{"kubeconfig": map[string]any{
		"filename": file, "content": string(kubeconfig)}}}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.plan(t, state.Key{Namespace: "tenant", Name: "writes"}, string(write), testkit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.eng.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the first object did not write the kubeconfig: %v", err)
	}
	read, err := json.Marshal(map[string]any{
		"terraform": map[string]any{"required_providers": map[string]any{
			"kubernetes": map[string]any{"source": "hashicorp/kubernetes", "version": "1.13.4"}}},
		"provider": map[string]any{"kubernetes": map[string]any{"load_config_file": true, "config_path": file}},
		"data":     kubernetesConfigMapRead,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.plan(t, state.Key{Namespace: "tenant", Name: "reads"}, string(read), map[string]string{"kubernetes": "hashicorp/kubernetes"})
	t.Logf("plan: %v", err)
	probe.check(t)
}

// kubernetesConfigMapRead is a data source of hashicorp/kubernetes whose read calls the API
// server, so the provider's credentials (and their exec plugin) are used at plan time.
var kubernetesConfigMapRead = map[string]any{"kubernetes_config_map": map[string]any{"x": map[string]any{
	"metadata": []any{map[string]any{"name": "x", "namespace": "default"}}}}}

// kubernetesMirror is $LAVA_KUBERNETES_MIRROR merged with the test's OpenTofu mirror; the
// test fails when it does not hold hashicorp/kubernetes 1.13.4.
func kubernetesMirror(t *testing.T) string {
	t.Helper()
	tools := tofutest.Tofu(t)
	dir := os.Getenv("LAVA_KUBERNETES_MIRROR")
	if _, err := os.Stat(filepath.Join(dir, "registry.opentofu.org/hashicorp/kubernetes/1.13.4")); dir == "" || err != nil {
		t.Fatalf("$LAVA_KUBERNETES_MIRROR (%q) does not hold hashicorp/kubernetes 1.13.4: run `make tools-kubernetes-providers`", dir)
	}
	return tofutest.MergeMirrors(t, tools.Mirror, dir)
}

// execProbe is a tenant's shell command that tries what a provider's command must not do in a
// runner and writes each result ("ok" or "denied") to a file of its name under the write root.
type execProbe struct {
	s      *sandbox
	script string
	tmp    string
}

// newExecProbe writes the probe's MPTCP client (this test binary) under s's write root and
// listens on another loopback port for the probe to reach.
func newExecProbe(t *testing.T, s *sandbox) *execProbe {
	t.Helper()
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	// The tenant's own program, written under its root: this binary, connecting over MPTCP.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.root, "mptcp"), self, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(os.TempDir(), fmt.Sprintf("lava-runner-attack-%d", os.Getpid()))
	t.Cleanup(func() { _ = os.Remove(tmp) })
	script := fmt.Sprintf(`R=%[1]s
r() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo ok > $R/$n; else echo denied > $R/$n; fi; }
id -u > $R/uid
r readSeed cat %[2]s
r readSigning cat %[3]s
r writeState sh -c 'echo x > %[4]s/planted'
r writeTmp sh -c 'echo x > %[5]s'
r writeRoot sh -c 'echo x > %[1]s/written'
r connectNATS bash -c 'echo > /dev/tcp/127.0.0.1/%[6]d'
r connectOther bash -c 'echo > /dev/tcp/127.0.0.1/%[7]d'
r connectNATSMPTCP env %[8]s=127.0.0.1:%[6]d %[1]s/mptcp
r connectOtherMPTCP env %[8]s=127.0.0.1:%[7]d %[1]s/mptcp
echo '{}'`, s.root, s.seed, s.signing, s.stateDir, tmp, s.natsPort, other.Addr().(*net.TCPAddr).Port, envMPTCP)
	return &execProbe{s: s, script: script, tmp: tmp}
}

// check fails t unless the probe ran as the runner user, read no secret, wrote under the
// write root only and reached the other port but not NATS's.
func (p *execProbe) check(t *testing.T) {
	t.Helper()
	want := map[string]string{"uid": strconv.Itoa(runnerUID), "readSeed": "denied", "readSigning": "denied", "writeState": "denied",
		"writeTmp": "denied", "writeRoot": "ok", "connectNATS": "denied", "connectOther": "ok",
		"connectNATSMPTCP": "denied", "connectOtherMPTCP": "ok"}
	for name, w := range want {
		b, err := os.ReadFile(filepath.Join(p.s.root, name))
		if err != nil {
			t.Errorf("%s: the command left no result (did it run?): %v", name, err)
			continue
		}
		if got := strings.TrimSpace(string(b)); got != w {
			t.Errorf("%s = %s, want %s", name, got, w)
		}
	}
	if _, err := os.Stat(filepath.Join(p.s.stateDir, "planted")); err == nil {
		t.Error("the command wrote into the state directory")
	}
	if _, err := os.Stat(p.tmp); err == nil {
		t.Errorf("the command wrote %s", p.tmp)
	}
}

// TestHost_runnerPerNamespace: the providers of two namespaces run in two runners, each kept
// warm: a second plan in either namespace starts no runner and no provider process.
func TestHost_runnerPerNamespace(t *testing.T) {
	s := newSandbox(t, tofutest.TestkitMirror(t, tofutest.Tofu(t)))
	for round := range 2 {
		for _, ns := range []string{"alpha", "beta"} {
			doc := fmt.Sprintf(`{"resource":{"testkit_file":{"a":{"filename":%q,"content":"x"}}}}`, filepath.Join(s.root, ns+".txt"))
			if _, err := s.plan(t, state.Key{Namespace: ns, Name: "files"}, doc, testkit); err != nil {
				t.Fatalf("round %d, %s: %v", round, ns, err)
			}
		}
	}
	if n := s.host.Spawns(); n != 2 {
		t.Errorf("%d runners started, want one per namespace (2)", n)
	}
	if n := s.eng.Pool().Starts(); n != 2 {
		t.Errorf("%d provider processes started, want 2", n)
	}
}

// TestHost_reclaimsKilledHostsDirectory: a host's directory (a copy of the provider mirror)
// outlives a process killed by SIGKILL; it is kept while the process lives and removed by the
// next host's start (ReclaimStale) once it is gone. A directory without a lock file is removed
// only when old, another name, a symbolic link or a directory in use is left alone.
func TestHost_reclaimsKilledHostsDirectory(t *testing.T) {
	tmp, mirror := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(mirror, "terraform-provider-x"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envHostThenWait+"=1", "TMPDIR="+tmp, "LAVA_TEST_MIRROR="+mirror)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	killed := strings.TrimSpace(line)
	if filepath.Dir(killed) != tmp {
		t.Fatalf("the host's directory %q is not in %s", killed, tmp)
	}
	fresh := filepath.Join(tmp, "lava-runners-fresh")
	old := filepath.Join(tmp, "lava-runners-old")
	other := filepath.Join(tmp, "other-dir")
	for _, d := range []string{fresh, old, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	hour := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, hour, hour); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "lava-runners-link")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	live, err := runner.NewHost(runner.Options{Mirror: mirror, UID: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	if n := runner.ReclaimStale(tmp, time.Now()); n != 1 {
		t.Errorf("with the host process alive: %d directories removed, want 1 (the old one without a lock)", n)
	}
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	if !exists(killed) || exists(old) || !exists(fresh) || !exists(link) || !exists(other) {
		t.Errorf("alive: host %v, old %v, fresh %v, link %v, other %v; want all but the old one", exists(killed), exists(old), exists(fresh), exists(link), exists(other))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !exists(killed) {
		t.Fatal("the killed host's directory went with it: nothing to reclaim")
	}
	if n := runner.ReclaimStale(tmp, time.Now()); n != 1 || exists(killed) {
		t.Errorf("after SIGKILL: %d directories removed, the killed host's still there: %v", n, exists(killed))
	}
	if !exists(fresh) || !exists(link) || !exists(other) || !exists(filepath.Join(live.Root(), "mirror", "terraform-provider-x")) {
		t.Error("a directory that is not stale was removed")
	}
}

// TestRunner_mirrorWriteAttack is the mirror-write attack of docs/security.md, "Provider
// runners": a provider in a runner writes an executable where the engines look for providers
// (found by an attack trial without runners: an executable planted in the mirror through
// testkit's file resource then ran for another tenant). Here the mirror's directories are
// world-writable, so only the runner's rules refuse the write, into the mirror as into the
// host's view of it that runners start providers from; nothing is planted in either.
func TestRunner_mirrorWriteAttack(t *testing.T) {
	testkitMirror := tofutest.TestkitMirror(t, tofutest.Tofu(t))
	mirror := openDir(t, 0o777)
	err := filepath.WalkDir(testkitMirror, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(testkitMirror, p)
		if err := os.MkdirAll(filepath.Dir(filepath.Join(mirror, rel)), 0o777); err != nil {
			return err
		}
		return os.Symlink(p, filepath.Join(mirror, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(mirror, "registry.opentofu.org", "example", "evil", "0.1.0", "linux_amd64")
	if err := os.MkdirAll(planted, 0o777); err != nil {
		t.Fatal(err)
	}
	for d := planted; d != mirror; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	s := newSandbox(t, mirror)
	for i, target := range []string{
		filepath.Join(planted, "terraform-provider-evil_v0.1.0"),
		filepath.Join(s.host.Root(), "mirror", "registry.opentofu.org", "example", "terraform-provider-evil_v0.1.0"),
	} {
		doc := fmt.Sprintf(`{"resource":{"testkit_file":{"p":{"filename":%q,"content":"#!/bin/sh\nid > /tmp/pwned\n"}}}}`, target)
		rec, err := s.plan(t, state.Key{Namespace: "tenant", Name: fmt.Sprintf("plant-%d", i)}, doc, testkit)
		if err == nil {
			_, err = s.eng.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"})
		}
		t.Logf("writing %s: %v", target, err)
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("a provider in a runner writing %s: %v; want permission denied", target, err)
		}
		if _, serr := os.Lstat(target); serr == nil {
			t.Errorf("%s was planted", target)
		}
	}
}

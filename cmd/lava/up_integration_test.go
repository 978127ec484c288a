//go:build integration

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/api/meta"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/natsauth"
	"github.com/lava-operator/lava/internal/up"
)

// upExamples copies the manifests of examples/ (what `make up` reads), or with sub those of
// examples/sub, into a temporary directory with /tmp/lava-demo/demo replaced by out, so the
// test writes its files where no other run does.
func upExamples(t *testing.T, out, sub string) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join("../../examples", sub, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in examples/%s: %v", sub, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "/tmp/lava-demo/demo", out))
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rootsPolicy writes a policy document whose only setting is fileWriteRoots roots (the
// directories a test's file-writing resources write under) and returns its path for --policy.
func rootsPolicy(t *testing.T, roots ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte("cluster: {fileWriteRoots: ["+strings.Join(roots, ", ")+"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// upOnce runs `lava up --once` in-process and fails the test unless it exits 0. Without
// --policy or --file-root in extra, the built-in policy's file root is a directory of the test.
func upOnce(t *testing.T, manifests, stateDir string, extra ...string) string {
	t.Helper()
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	if !slices.Contains(extra, "--policy") && !slices.Contains(extra, "--file-root") {
		extra = append(extra, "--file-root", filepath.Join(t.TempDir(), "files"))
	}
	code, stdout, stderr := runLava(t, "", append([]string{"up", "--once", "-f", manifests, "--state-dir", stateDir,
		"--providers", filepath.Join(tofuDir, "providers"), "--timeout", "4m", "--interval", "200ms"}, extra...)...)
	if code != exitOK {
		t.Fatalf("lava up --once: exit %d\nstdout:\n%s\nstderr:\n%s\nlog:\n%s", code, stdout, stderr, readFile(t, filepath.Join(stateDir, up.FileLog)))
	}
	return stdout
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, _ := os.ReadFile(p)
	return string(b)
}

// object reads the object file lava up keeps for ns/name; ok is false when there is none.
func object(t *testing.T, stateDir, ns, name string) (v1alpha1.LavaArchitecture, bool) {
	t.Helper()
	var o v1alpha1.LavaArchitecture
	b, err := os.ReadFile(filepath.Join(stateDir, up.DirStatus, ns, name+".yaml"))
	if os.IsNotExist(err) {
		return o, false
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(b, &o); err != nil {
		t.Fatalf("%s/%s: %v", ns, name, err)
	}
	return o, true
}

var appliedLine = regexp.MustCompile(`msg=applied service=applier resource=(\S+) generation=(\d+) .*state_serial=(\d+)`)

// stateSerials is the newest state serial the applier logged per resource, and how many
// applies it logged.
func stateSerials(t *testing.T, stateDir string) (map[string]int, int) {
	t.Helper()
	out := map[string]int{}
	n := 0
	for _, m := range appliedLine.FindAllStringSubmatch(readFile(t, filepath.Join(stateDir, up.FileLog)), -1) {
		s, _ := strconv.Atoi(m[3])
		out[m[1]] = max(out[m[1]], s)
		n++
	}
	return out, n
}

// TestUp_examples: `lava up --once -f examples/` (make up) with the real embedded engine and
// provider mirror applies every example, none Failed, updates in place on a binding change,
// destroys a removed manifest, and re-applies nothing after a restart.
func TestUp_examples(t *testing.T) {
	out := t.TempDir()
	manifests := upExamples(t, out, "")
	stateDir := filepath.Join(t.TempDir(), "state")

	pol := rootsPolicy(t, out)
	stdout := upOnce(t, manifests, stateDir, "--policy", pol)
	if !strings.Contains(stdout, "RESOURCE") || !strings.Contains(stdout, "resources settled") {
		t.Errorf("stdout lacks the final table and summary:\n%s", stdout)
	}
	applied := []string{"demo/greetings", "demo/testkit-files", "demo/tofu-greetings", "demo/release-notes", "demo/team-roster"}
	if got := objectKeys(t, stateDir); !slices.Equal(got, slices.Sorted(slices.Values(applied))) {
		t.Errorf("resources %v, want %v", got, applied)
	}
	if want := fmt.Sprintf("%d resources settled: %d Applied\n", len(applied), len(applied)); !strings.HasSuffix(stdout, want) {
		t.Errorf("stdout does not end with %q:\n%s", want, stdout)
	}
	for _, key := range applied {
		ns, name, _ := strings.Cut(key, "/")
		o, ok := object(t, stateDir, ns, name)
		if !ok || o.Status.Phase != v1alpha1.PhaseApplied || o.Status.ObservedGeneration != 1 || o.Generation != 1 {
			t.Errorf("%s: phase %q observedGeneration %d generation %d (exists %v), want Applied at generation 1",
				key, o.Status.Phase, o.Status.ObservedGeneration, o.Generation, ok)
		}
	}
	for _, f := range []string{"hello-ana.txt", "hello-bo.txt", "kit.txt", "kit-readme.txt", "hello-from-tofu.txt"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("applied file: %v", err)
		}
	}
	serials, applies := stateSerials(t, stateDir)
	if applies != len(applied) {
		t.Errorf("%d applies logged, want %d", applies, len(applied))
	}
	greetings, _ := object(t, stateDir, "demo", "greetings")

	t.Run("restart applies nothing again", func(t *testing.T) {
		upOnce(t, manifests, stateDir, "--policy", pol)
		if _, n := stateSerials(t, stateDir); n != applies {
			t.Errorf("%d applies logged after a restart, want still %d", n, applies)
		}
		after, _ := object(t, stateDir, "demo", "greetings")
		if after.UID != greetings.UID || after.Generation != 1 || after.Status.Plan == nil || greetings.Status.Plan == nil ||
			after.Status.Plan.ID != greetings.Status.Plan.ID || !after.Status.LastAppliedAt.Equal(greetings.Status.LastAppliedAt) {
			t.Errorf("greetings changed across a restart: uid %s→%s, generation %d, plan %+v→%+v",
				greetings.UID, after.UID, after.Generation, greetings.Status.Plan, after.Status.Plan)
		}
	})

	t.Run("binding change updates in place", func(t *testing.T) {
		p := filepath.Join(manifests, "notes.yaml")
		b := strings.Replace(readFile(t, p), "version: 0.1.0", "version: 0.2.0", 1)
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		upOnce(t, manifests, stateDir, "--policy", pol)
		o, _ := object(t, stateDir, "demo", "release-notes")
		if o.Generation != 2 || o.Status.ObservedGeneration != 2 || o.Status.Phase != v1alpha1.PhaseApplied {
			t.Fatalf("release-notes: generation %d observedGeneration %d phase %s, want Applied at generation 2",
				o.Generation, o.Status.ObservedGeneration, o.Status.Phase)
		}
		if p := o.Status.Plan; p == nil || p.Add != 0 || p.Change != 1 || p.Destroy != 0 {
			t.Errorf("release-notes plan %+v, want 0 to add, 1 to change, 0 to destroy", p)
		}
		now, _ := stateSerials(t, stateDir)
		if now["demo/release-notes"] <= serials["demo/release-notes"] {
			t.Errorf("release-notes state serial %d after the update, want more than %d", now["demo/release-notes"], serials["demo/release-notes"])
		}
		if roster, _ := object(t, stateDir, "demo", "team-roster"); roster.Generation != 1 {
			t.Errorf("team-roster (same file, unchanged) is at generation %d, want 1", roster.Generation)
		}
	})

	t.Run("removed manifest is destroyed", func(t *testing.T) {
		if err := os.Remove(filepath.Join(manifests, "testkit.yaml")); err != nil {
			t.Fatal(err)
		}
		upOnce(t, manifests, stateDir, "--policy", pol)
		if _, ok := object(t, stateDir, "demo", "testkit-files"); ok {
			t.Error("testkit-files still has an object file after its manifest was removed")
		}
		for _, f := range []string{"kit.txt", "kit-readme.txt"} {
			if _, err := os.Stat(filepath.Join(out, f)); !os.IsNotExist(err) {
				t.Errorf("%s: %v, want it destroyed", f, err)
			}
		}
		if _, err := os.Stat(filepath.Join(out, "hello-ana.txt")); err != nil {
			t.Errorf("another resource's file went too: %v", err)
		}
	})
}

// TestUp_cloudExamples: `lava up --once -f examples/cloud/` on a machine whose provider mirror
// has neither hashicorp/aws nor integrations/github fails every example the documented way
// (examples/README.md): Failed with reason ProviderUnavailable naming the provider, and
// nothing applied.
func TestUp_cloudExamples(t *testing.T) {
	manifests := upExamples(t, t.TempDir(), "cloud")
	stateDir := filepath.Join(t.TempDir(), "state")
	stdout := upOnce(t, manifests, stateDir)
	want := map[string]string{
		"github/org-repos": "integrations/github", "infra/app-subnets": "hashicorp/aws", "infra/preview-network": "hashicorp/aws",
		"infra/prod-vpc": "hashicorp/aws", "web/shop-dns": "hashicorp/aws",
	}
	if got := objectKeys(t, stateDir); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Errorf("resources %v, want those of %v", got, want)
	}
	for key, provider := range want {
		ns, name, _ := strings.Cut(key, "/")
		o, _ := object(t, stateDir, ns, name)
		c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady)
		if o.Status.Phase != v1alpha1.PhaseFailed || c == nil || c.Reason != v1alpha1.ReasonProviderUnavailable || !strings.Contains(c.Message, provider) {
			t.Errorf("%s: phase %q Ready %+v, want Failed with reason ProviderUnavailable naming %s", key, o.Status.Phase, c, provider)
		}
	}
	if w := fmt.Sprintf("%d resources settled: %d Failed\n", len(want), len(want)); !strings.HasSuffix(stdout, w) {
		t.Errorf("stdout does not end with %q:\n%s", w, stdout)
	}
	if _, n := stateSerials(t, stateDir); n != 0 {
		t.Errorf("%d applies logged, want none", n)
	}
}

// objectKeys is the sorted namespace/name of every object file lava up keeps in stateDir.
func objectKeys(t *testing.T, stateDir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(stateDir, up.DirStatus, "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range files {
		keys = append(keys, filepath.Base(filepath.Dir(f))+"/"+strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	slices.Sort(keys)
	return keys
}

// TestUp_liveChangeAndInterrupt runs `lava up` without --once: a manifest edited while it runs
// is re-read and applied as a new generation, and cancelling the context (Ctrl-C) stops it
// cleanly with exit code 0.
func TestUp_liveChangeAndInterrupt(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	manifests := t.TempDir()
	stateDir := filepath.Join(t.TempDir(), "state")
	b, err := os.ReadFile("../../examples/notes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(manifests, "notes.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"up", "-f", manifests, "--state-dir", stateDir, "--providers", filepath.Join(tofuDir, "providers"),
			"--interval", "200ms"}, strings.NewReader(""), &syncWriter{w: &stdout}, &syncWriter{w: &stderr})
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				cancel()
				<-done
				t.Fatalf("timed out waiting for %s\nlog:\n%s", what, readFile(t, filepath.Join(stateDir, up.FileLog)))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	appliedAt := func(gen int64) func() bool {
		return func() bool {
			o, ok := object(t, stateDir, "demo", "release-notes")
			return ok && o.Generation == gen && o.Status.ObservedGeneration == gen && o.Status.Phase == v1alpha1.PhaseApplied
		}
	}
	waitFor("release-notes Applied at generation 1", appliedAt(1))
	checkUpAuthorization(t, stateDir)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "version: 0.1.0", "version: 0.3.0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("release-notes Applied at generation 2", appliedAt(2))
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after cancel, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("lava up did not stop within a minute of cancellation")
	}
}

// checkUpAuthorization: lava up's server refuses an anonymous client, every identity's seed is
// private (0600), and the subscriber identity reads anomalies but not the artifact store.
func checkUpAuthorization(t *testing.T, stateDir string) {
	t.Helper()
	url := strings.TrimSpace(readFile(t, filepath.Join(stateDir, up.FileNATSURL)))
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Error("lava up's NATS accepted an anonymous client")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("anonymous client: %v, want an authorization violation", err)
	}
	creds := filepath.Join(stateDir, up.DirNATSCredentials)
	for _, id := range bus.Identities() {
		st, err := os.Stat(filepath.Join(creds, natsauth.SeedFileName(id)))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s's seed: %v, mode %v; want 0600", id, err, st.Mode().Perm())
		}
	}
	nc, js, err := bus.Connect(bus.ConnectOptions{URL: url, Identity: bus.IdentitySubscriber,
		NKeyFile: filepath.Join(creds, natsauth.SeedFileName(bus.IdentitySubscriber))})
	if err != nil {
		t.Fatalf("subscriber: %v", err)
	}
	defer nc.Close()
	if _, err := nc.SubscribeSync(bus.PrefixAnomaly + ">"); err != nil {
		t.Error(err)
	}
	if err := nc.Flush(); err != nil || nc.LastError() != nil {
		t.Errorf("subscriber's anomaly subscription: %v %v", err, nc.LastError())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := js.ObjectStore(ctx, bus.ObjectStoreArtifacts); err == nil {
		t.Error("the subscriber bound lava-artifacts on lava up's server")
	}

	// The RPCs on loopback answer only the state directory's token.
	token := strings.TrimSpace(readFile(t, filepath.Join(stateDir, up.FileRPCToken)))
	if st, err := os.Stat(filepath.Join(stateDir, up.FileRPCToken)); err != nil || st.Mode().Perm() != 0o600 || token == "" {
		t.Fatalf("rpc token: %v %v", err, st)
	}
	receipts := lavav1connect.NewReceiptServiceClient(http.DefaultClient, "http://"+strings.TrimSpace(readFile(t, filepath.Join(stateDir, up.FileReceiptsAddr))))
	render := lavav1connect.NewRenderServiceClient(http.DefaultClient, "http://"+strings.TrimSpace(readFile(t, filepath.Join(stateDir, up.FileRenderAddr))))
	plans := lavav1connect.NewPlanServiceClient(http.DefaultClient, "http://"+strings.TrimSpace(readFile(t, filepath.Join(stateDir, up.FilePlanAddr))))
	for _, tok := range []string{"", "wrong-" + token} {
		preq := connect.NewRequest(&lavav1.PreviewRequest{Namespace: "demo", Name: "release-notes",
			Spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Name{Name: "aws-vpc-network"}}}})
		if tok != "" {
			preq.Header().Set("Authorization", "Bearer "+tok)
		}
		if _, err := plans.Preview(t.Context(), preq); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("PlanService with token %q: %v, want Unauthenticated", tok, err)
		}
		req := connect.NewRequest(&lavav1.GetChainRequest{Namespace: "demo", Name: "release-notes"})
		rreq := connect.NewRequest(&lavav1.RenderRequest{Source: &lavav1.RenderRequest_Name{Name: "aws-vpc-network"}, Namespace: "demo"})
		if tok != "" {
			req.Header().Set("Authorization", "Bearer "+tok)
			rreq.Header().Set("Authorization", "Bearer "+tok)
		}
		if _, err := receipts.GetChain(t.Context(), req); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("ReceiptService with token %q: %v, want Unauthenticated", tok, err)
		}
		if _, err := render.Render(t.Context(), rreq); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("RenderService with token %q: %v, want Unauthenticated", tok, err)
		}
	}
	req := connect.NewRequest(&lavav1.GetChainRequest{Namespace: "demo", Name: "release-notes"})
	req.Header().Set("Authorization", "Bearer "+token)
	if res, err := receipts.GetChain(t.Context(), req); err != nil || len(res.Msg.GetReceipts()) == 0 {
		t.Errorf("ReceiptService with lava up's token: %v (receipts %d)", err, len(res.Msg.GetReceipts()))
	}
}

// syncWriter serializes writes to w (the display and the command write from different
// goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestUp_mirrorBuiltLater: a resource that failed because its provider was missing is planned
// again when lava up restarts with a provider mirror that has it (and only then), as for a
// newcomer who ran lava up before `make tools-tofu` finished.
func TestUp_mirrorBuiltLater(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	out := t.TempDir()
	manifests := t.TempDir()
	b := strings.ReplaceAll(readFile(t, "../../examples/local-files.yaml"), "/tmp/lava-demo/demo", out)
	if err := os.WriteFile(filepath.Join(manifests, "local-files.yaml"), []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	pol := rootsPolicy(t, out)
	upWith := func(providers string) v1alpha1.LavaArchitecture {
		t.Helper()
		code, stdout, stderr := runLava(t, "", "up", "--once", "-f", manifests, "--state-dir", stateDir, "--providers", providers,
			"--timeout", "2m", "--interval", "200ms", "--policy", pol)
		if code != exitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		o, _ := object(t, stateDir, "demo", "greetings")
		return o
	}
	empty := t.TempDir()
	if o := upWith(empty); o.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("without a mirror: phase %s, want Failed", o.Status.Phase)
	}
	if o := upWith(empty); o.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("without a mirror, again: phase %s, want Failed", o.Status.Phase)
	}
	_, before := stateSerials(t, stateDir)
	failures := strings.Count(readFile(t, filepath.Join(stateDir, up.FileLog)), `msg="stage failed"`)
	if before != 0 || failures != 1 {
		t.Errorf("%d applies and %d failures logged, want 0 and 1 (a restart in the same environment plans nothing)", before, failures)
	}
	mirror := filepath.Join(tofuDir, "providers")
	if o := upWith(mirror); o.Status.Phase != v1alpha1.PhaseApplied || o.Generation != 1 {
		t.Fatalf("with the mirror: phase %s generation %d, want Applied at generation 1", o.Status.Phase, o.Generation)
	}
	if _, err := os.Stat(filepath.Join(out, "hello-ana.txt")); err != nil {
		t.Error(err)
	}
	upWith(mirror)
	if _, n := stateSerials(t, stateDir); n != 1 {
		t.Errorf("%d applies logged, want 1", n)
	}
}

// upRunning starts `lava up -f manifests` (not --once) in the background with providers from
// the mirror providers and a policy whose file root is out; cancel stops it, and done then
// delivers its exit code. stdout and stderr are only read once done has.
func upRunning(t *testing.T, manifests, stateDir, providers, out string) (stdout, stderr *bytes.Buffer, cancel context.CancelFunc, done <-chan int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	exit := make(chan int, 1)
	pol := rootsPolicy(t, out)
	go func() {
		exit <- run(ctx, []string{"up", "-f", manifests, "--state-dir", stateDir, "--providers", providers,
			"--interval", "200ms", "--policy", pol}, strings.NewReader(""), &syncWriter{w: stdout}, &syncWriter{w: stderr})
	}()
	return stdout, stderr, cancel, exit
}

// TestUp_toolsBuiltWhileRunning: a resource that failed because its engine's binary was not
// there yet is planned again, in the same lava up, once it appears; as under make up, which
// starts lava up while OpenTofu builds in the background. It failed once, and nothing else
// was planned again. (A provider added to the mirror waits for a restart, as the engines pin
// the mirror when they open: TestUp_mirrorBuiltLater.)
func TestUp_toolsBuiltWhileRunning(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	out, manifests, tools := t.TempDir(), t.TempDir(), t.TempDir()
	for _, f := range []string{"local-files.yaml", "tofu-files.yaml"} {
		b := strings.ReplaceAll(readFile(t, "../../examples/"+f), "/tmp/lava-demo/demo", out)
		if err := os.WriteFile(filepath.Join(manifests, f), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The layout of make tools-providers before the background build of OpenTofu is done.
	mirror := filepath.Join(tools, "providers")
	if err := os.CopyFS(mirror, os.DirFS(filepath.Join(tofuDir, "providers"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(tools, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	_, _, cancel, done := upRunning(t, manifests, stateDir, mirror, out)
	defer func() {
		cancel()
		<-done
	}()
	wait := func(name string, ok func(v1alpha1.LavaArchitecture) bool) v1alpha1.LavaArchitecture {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if o, found := object(t, stateDir, "demo", name); found && ok(o) {
				return o
			}
			if time.Now().After(deadline) {
				o, _ := object(t, stateDir, "demo", name)
				t.Fatalf("%s: timed out in phase %s %v\nlog:\n%s", name, o.Status.Phase, o.Status.Conditions, readFile(t, filepath.Join(stateDir, up.FileLog)))
			}
		}
	}
	applied := func(o v1alpha1.LavaArchitecture) bool { return o.Status.Phase == v1alpha1.PhaseApplied }
	wait("greetings", applied)
	o := wait("tofu-greetings", func(o v1alpha1.LavaArchitecture) bool { return o.Status.Phase == v1alpha1.PhaseFailed })
	bin := filepath.Join(tools, "bin", "tofu")
	if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonEngineUnavailable ||
		!strings.Contains(c.Message, bin+" is not there") {
		t.Fatalf("Ready condition %+v: want EngineUnavailable naming %s", c, bin)
	}
	time.Sleep(time.Second) // five scans in an unchanged environment: nothing is planned again

	// OpenTofu appears (the build script renames it into place; a link is as atomic).
	if err := os.Symlink(filepath.Join(tofuDir, "bin", "tofu"), bin); err != nil {
		t.Fatal(err)
	}
	wait("tofu-greetings", applied)
	if _, err := os.Stat(filepath.Join(out, "hello-from-tofu.txt")); err != nil {
		t.Error(err)
	}
	log := readFile(t, filepath.Join(stateDir, up.FileLog))
	if n := strings.Count(log, `msg="stage failed"`); n != 1 {
		t.Errorf("%d failures logged, want 1\nlog:\n%s", n, log)
	}
	if m, n := stateSerials(t, stateDir); n != 2 {
		t.Errorf("%d applies logged (%v), want 2: greetings once, tofu-greetings once", n, m)
	}
}

// TestUp_interruptDuringApply: Ctrl-C while an apply runs waits for it ("stopping: waiting for
// 1 in-flight operation") and the final table shows what the apply ended with, not the phase
// before it.
func TestUp_interruptDuringApply(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	out := t.TempDir()
	manifests := t.TempDir()
	b := strings.ReplaceAll(readFile(t, "../../examples/testkit.yaml"), "/tmp/lava-demo/demo", out)
	b = strings.Replace(b, `(:delay-ms "2000")`, `(:delay-ms "4000")`, 1)
	if err := os.WriteFile(filepath.Join(manifests, "testkit.yaml"), []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	stdout, stderr, cancel, done := upRunning(t, manifests, stateDir, filepath.Join(tofuDir, "providers"), out)
	defer cancel()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		o, ok := object(t, stateDir, "demo", "testkit-files")
		if ok && o.Status.Phase == v1alpha1.PhasePlanned {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("timed out waiting for the apply to start\nlog:\n%s", readFile(t, filepath.Join(stateDir, up.FileLog)))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	var code int
	select {
	case code = <-done:
	case <-time.After(time.Minute):
		t.Fatal("lava up did not stop within a minute of cancellation")
	}
	if code != exitOK {
		t.Errorf("exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
	so := stdout.String()
	if !strings.Contains(so, "lava up: stopping: waiting for 1 in-flight operation\n") {
		t.Errorf("no stopping line:\n%s", so)
	}
	final := so[strings.LastIndex(so, "\nRESOURCE ")+1:]
	if !regexp.MustCompile(`(?m)^demo/testkit-files\s+Applied\s`).MatchString(final) {
		t.Errorf("final table does not show the finished apply:\n%s\nlog:\n%s", final, readFile(t, filepath.Join(stateDir, up.FileLog)))
	}
	if o, _ := object(t, stateDir, "demo", "testkit-files"); o.Status.Phase != v1alpha1.PhaseApplied {
		t.Errorf("status file: phase %s, want Applied", o.Status.Phase)
	}
}

// TestUp_inlineErrorPosition: lava up's status message for an error inside an inline source
// points into the manifest file, at the position lava validate reports.
func TestUp_inlineErrorPosition(t *testing.T) {
	manifests := t.TempDir()
	p := filepath.Join(manifests, "broken.yaml")
	data := "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: broken, namespace: demo}\nspec:\n  source:\n" +
		"    inline: |\n      (deflava-architecture broken\n        :resources ((terraform-data \"d\" :input \"{who}\")))\n"
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, verr := runLava(t, "", "validate", p)
	want := p + ":8:49: "
	if !strings.HasPrefix(verr, want+"error: interpolation: unknown var") {
		t.Fatalf("validate: %q, want it to start with %q", verr, want)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	upOnce(t, manifests, stateDir)
	o, _ := object(t, stateDir, "demo", "broken")
	c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || !strings.Contains(c.Message, want+"interpolation: unknown var") {
		t.Fatalf("Ready condition %+v, want a message with %q", c, want)
	}
}

// TestUp_longName: an object with a 253-character name (the longest a Kubernetes name may be)
// is Applied by `lava up --once` in file mode, and its status file is written: the status
// file's temporary name must stay within the 255-byte file name limit (NAME.yaml.tmp would pass
// it), or lava up never settles.
func TestUp_longName(t *testing.T) {
	label := strings.Repeat("a", 63)
	name := label + "." + label + "." + label + "." + strings.Repeat("b", 61) // 253 characters
	if len(name) != 253 {
		t.Fatalf("name has %d characters", len(name))
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, "long.yaml")
	body := "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata:\n  name: " + name + "\n  namespace: demo\nspec:\n  source:\n    inline: |\n      (deflava-architecture long\n        :resources ((terraform-data \"d\" :input \"x\")))\n  engine: embedded\n"
	if err := os.WriteFile(manifest, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	upOnce(t, manifest, stateDir)
	files, err := os.ReadDir(filepath.Join(stateDir, up.DirStatus, "demo"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range files {
		var o v1alpha1.LavaArchitecture
		b, err := os.ReadFile(filepath.Join(stateDir, up.DirStatus, "demo", f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := sigsyaml.Unmarshal(b, &o); err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		if o.Name == name {
			found = true
			if o.Status.Phase != v1alpha1.PhaseApplied {
				t.Errorf("phase %q, want Applied", o.Status.Phase)
			}
		}
	}
	if !found {
		t.Errorf("no status file holds the object %s (files %v)", name, files)
	}
}

//go:build integration

package up_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/up"
)

// notesSource is the architecture in the git repository at version v.
func notesSource(v string) string {
	return `(deflava-architecture release-notes
  :inputs ((:version "` + v + `"))
  :resources ((terraform-data "release" :input "{version}")))
`
}

// TestUp_fluxGitRepository runs GitOps end to end: a git repository served on loopback by git's
// own http-backend, Flux's real source-controller (a process against the test API server)
// producing its artifact, and `lava up --kubeconfig` (the watcher, synth, the embedded engine):
// a LavaArchitecture with spec.sourceRef reaches Applied with the artifact's revision in
// status; a pushed commit is a new render and plan with the new revision; a missing source,
// a source without an artifact and a path that is not in the artifact are clear conditions.
func TestUp_fluxGitRepository(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed to serve the repository (git http-backend): %v", err)
	}
	env := kubetest.Start(t)
	scDir := env.InstallFluxCRDs(t)
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.Kubeconfig(t)
	ns := env.Namespace(t)
	repo := newGitRepo(t, gitBin)
	commit1 := repo.commit(t, map[string]string{"infra/notes.tlisp": notesSource("1.0.0"), "README.md": "infra\n"})
	startSourceController(t, filepath.Join(scDir, "source-controller"), kubeconfig, ns)

	ctx, cancel := context.WithCancel(t.Context())
	stateDir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		_, err := up.Run(ctx, up.Options{Kubeconfig: kubeconfig, Namespaces: []string{ns}, StateDir: stateDir, Stdout: io.Discard})
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("lava up: %v", err)
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(stateDir, up.FileLog))
			t.Logf("lava up log (tail):\n%s", tail(string(log), 60))
		}
	})

	gitRepository := func(name, url string) *sourcev1.GitRepository {
		gr := &sourcev1.GitRepository{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: sourcev1.GitRepositorySpec{URL: url, Interval: metav1.Duration{Duration: time.Hour},
				Timeout: &metav1.Duration{Duration: 20 * time.Second}, Reference: &sourcev1.GitRepositoryRef{Branch: "main"}},
		}
		if err := c.Create(t.Context(), gr); err != nil {
			t.Fatal(err)
		}
		return gr
	}
	lava := func(name, source, path string) *v1alpha1.LavaArchitecture {
		a := &v1alpha1.LavaArchitecture{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.LavaArchitectureSpec{SourceRef: &v1alpha1.SourceReference{Kind: v1alpha1.SourceRefGitRepository, Name: source},
				Path: path, Engine: v1alpha1.EngineEmbedded},
		}
		if err := c.Create(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	gr := gitRepository("infra", repo.url)
	obj := lava("notes", "infra", "infra/notes.tlisp")

	rev1 := "main@sha1:" + commit1
	st := waitStatus(t, c, obj, "Applied with "+rev1, func(s v1alpha1.LavaArchitectureStatus) bool {
		return s.Phase == v1alpha1.PhaseApplied && s.Render != nil && s.Render.SourceRevision == rev1 && s.LastAppliedRevision == rev1
	})
	if st.Render.SourceKind != v1alpha1.SourceKindSourceRef {
		t.Errorf("status.render.sourceKind = %q, want %q", st.Render.SourceKind, v1alpha1.SourceKindSourceRef)
	}
	cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDependenciesReady)
	if cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("DependenciesReady = %+v, want True once the source has an artifact", cond)
	}
	if st.Plan == nil || st.Plan.ID == "" || st.Plan.Add != 1 {
		t.Fatalf("status.plan = %+v, want a plan adding terraform_data.release", st.Plan)
	}
	plan1 := st.Plan.ID

	// A new commit: source-controller (asked at once, as `flux reconcile source git` does)
	// publishes a new artifact, and the watcher's source watch starts a new pass.
	commit2 := repo.commit(t, map[string]string{"infra/notes.tlisp": notesSource("2.0.0")})
	requestReconcile(t, c, gr)
	rev2 := "main@sha1:" + commit2
	st = waitStatus(t, c, obj, "Applied with "+rev2, func(s v1alpha1.LavaArchitectureStatus) bool {
		return s.Phase == v1alpha1.PhaseApplied && s.Render != nil && s.Render.SourceRevision == rev2 && s.LastAppliedRevision == rev2
	})
	if st.Plan == nil || st.Plan.ID == plan1 || st.Plan.Add+st.Plan.Change == 0 {
		t.Errorf("status.plan after the new revision = %+v, want a new plan (was %s) changing the resource", st.Plan, plan1)
	}

	// A source that does not exist holds the object with a clear condition.
	missing := lava("missing", "no-such-repo", "infra/notes.tlisp")
	waitCondition(t, c, missing, v1alpha1.ReasonSourceNotFound, "GitRepository "+ns+"/no-such-repo not found")
	// A source whose fetch fails has no artifact: SourceNotReady with source-controller's message.
	gitRepository("broken", repo.server.URL+"/no-such.git")
	waiting := lava("waiting", "broken", "infra/notes.tlisp")
	waitCondition(t, c, waiting, v1alpha1.ReasonSourceNotReady, "has no artifact yet")
	// A path that is not in the artifact fails synthesis, naming the path and the revision.
	wrongPath := lava("wrong-path", "infra", "infra/none.tlisp")
	st = waitStatus(t, c, wrongPath, "Failed SourceFetchFailed", func(s v1alpha1.LavaArchitectureStatus) bool {
		c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
		return s.Phase == v1alpha1.PhaseFailed && c != nil && c.Reason == v1alpha1.ReasonSourceFetchFailed
	})
	if msg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, `"infra/none.tlisp" is not a file in the artifact`) || !strings.Contains(msg, rev2) {
		t.Errorf("Ready message %q, want the path and revision %s", msg, rev2)
	}
}

// waitStatus polls obj's status until ok holds (2 minutes) and returns it.
func waitStatus(t *testing.T, c client.Client, obj *v1alpha1.LavaArchitecture, what string, ok func(v1alpha1.LavaArchitectureStatus) bool) v1alpha1.LavaArchitectureStatus {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	got := &v1alpha1.LavaArchitecture{}
	for {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		if ok(got.Status) {
			return got.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s in time; status: phase %s render %+v conditions %+v", obj.Name, what, got.Status.Phase, got.Status.Render, got.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitCondition waits until obj's DependenciesReady and Ready are False with reason, the message
// containing msg, and kstatus reads it as waiting (Reconciling True).
func waitCondition(t *testing.T, c client.Client, obj *v1alpha1.LavaArchitecture, reason, msg string) {
	t.Helper()
	waitStatus(t, c, obj, "held with "+reason, func(s v1alpha1.LavaArchitectureStatus) bool {
		for _, typ := range []string{v1alpha1.ConditionDependenciesReady, v1alpha1.ConditionReady} {
			c := meta.FindStatusCondition(s.Conditions, typ)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, msg) {
				return false
			}
		}
		return meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReconciling)
	})
}

// requestReconcile sets Flux's reconcile.fluxcd.io/requestedAt annotation on a source.
func requestReconcile(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[fluxmeta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
	o.SetAnnotations(ann)
	if err := c.Patch(t.Context(), o, patch); err != nil {
		t.Fatal(err)
	}
}

// gitRepo is a bare repository served over smart HTTP by `git http-backend` (git's own
// server, run as CGI by net/http/cgi) on loopback, and a work tree that pushes to it.
type gitRepo struct {
	git, bare, work string
	env             []string
	server          *httptest.Server
	url             string
}

func newGitRepo(t *testing.T, gitBin string) *gitRepo {
	t.Helper()
	root := t.TempDir()
	home := t.TempDir()
	r := &gitRepo{git: gitBin, bare: filepath.Join(root, "infra.git"), work: t.TempDir(),
		env: []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=Lava Test", "GIT_AUTHOR_EMAIL=test@lava.invalid",
			"GIT_COMMITTER_NAME=Lava Test", "GIT_COMMITTER_EMAIL=test@lava.invalid", "PATH=" + os.Getenv("PATH")}}
	r.run(t, "", "init", "--quiet", "--bare", "--initial-branch=main", r.bare)
	r.run(t, r.work, "init", "--quiet", "--initial-branch=main", ".")
	r.server = httptest.NewServer(&cgi.Handler{Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1"}})
	t.Cleanup(r.server.Close)
	r.url = r.server.URL + "/infra.git"
	return r
}

func (r *gitRepo) run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(r.git, args...)
	cmd.Dir, cmd.Env = dir, r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (path to content) in the work tree, commits, pushes main to the bare
// repository and returns the commit id.
func (r *gitRepo) commit(t *testing.T, files map[string]string) string {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(r.work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.run(t, r.work, "add", "--all")
	r.run(t, r.work, "commit", "--quiet", "-m", "update")
	r.run(t, r.work, "push", "--quiet", r.bare, "main")
	return r.run(t, r.work, "rev-parse", "HEAD")
}

// startSourceController runs Flux's source-controller against the test API server, serving
// its artifacts on a loopback port it advertises, until the test ends.
func startSourceController(t *testing.T, bin, kubeconfig, ns string) {
	t.Helper()
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("source-controller binary %s missing or not executable: run `make tools-source-controller` (%v)", bin, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs syncBuffer
	cmd := exec.Command(bin, "--storage-path="+t.TempDir(), "--storage-addr="+addr, "--storage-adv-addr="+addr,
		"--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0", "--enable-leader-election=false",
		"--watch-all-namespaces=true", "--concurrent=2", "--log-level=info")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE="+ns, "HOME="+t.TempDir())
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start source-controller: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
		if t.Failed() {
			t.Logf("source-controller log (tail):\n%s", tail(logs.String(), 40))
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a process's concurrent stdout and stderr writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

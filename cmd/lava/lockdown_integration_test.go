//go:build integration

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/up"
)

// TestUp_kubeconfigLockdown is attack 6 of the attack trial (docs/security.md,
// "Kubernetes RBAC") against `lava up --kubeconfig` with its default flags, on a real API
// server with RBAC: the kubeconfig is a cluster admin's, lava up watches the tenant's namespace
// and a victim's, and the tenant is a user allowed nothing but LavaArchitectures in its own
// namespace (its objects are created as that user).
//
//   - steal-secret and steal-secret-sa bind a Secret of the tenant's namespace the tenant cannot
//     read (naming no ServiceAccount, and naming one without Secret access); steal-config binds
//     a ConfigMap it cannot read into a resource's name and an output, where the value would
//     show in status.plan.resources and status.outputs. Each ends Failed (ServiceAccountRequired,
//     RBACForbidden naming the ServiceAccount) before anything is rendered, no outputs Secret is
//     written, and neither value is in any status, Event or lava up's log.
//   - steal-source names, with spec.sourceRef, a GitRepository of the victim's namespace whose
//     artifact outputs the victim's key: DependenciesReady False, CrossNamespaceRefRefused,
//     nothing rendered, the key in no status (before: the key was in the attacker's outputs).
//   - probe and probe-missing depend on an Applied object of the victim's namespace and on one
//     that does not exist: both are refused alike, their statuses differ only by the name, and
//     neither tells the victim's UID or phase.
//
// Before the lockdown (lava up had none of these flags and acted with the kubeconfig's
// identity, cross-namespace references allowed) steal-* were Applied with the values and the
// key in status, probe was satisfied and probe-missing said "(not found)". The subtest
// "impersonation refused at start" is the developer's side: a kubeconfig whose user may not
// impersonate ServiceAccounts is told so at start, with the flags that change it.
func TestUp_kubeconfigLockdown(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	const (
		secretValue = "db-pw-unreadable-4c1f7e"
		configValue = "cm-internal-9b2d51"
		victimKey   = "victim-key-51ad0e77"
	)
	env := kubetest.Start(t)
	env.InstallFluxCRDs(t)
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns, other := env.Namespace(t), env.Namespace(t)
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Data: map[string][]byte{"pw": []byte(secretValue)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "internal"}, Data: map[string]string{"v": configValue}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"lavaarchitectures"}, Verbs: []string{"*"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "tenant"}}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	victim := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "secret-project"}}
	victim.Spec.Source.Inline = "(deflava-architecture secret-project :resources ((terraform-data \"d\" :input \"x\")))\n"
	if err := admin.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	victimRepo(t, admin, other, "victim-repo", map[string]string{"infra/key.tlisp": "(deflava-architecture key\n  :resources ((terraform-data \"k\" :input \"x\"))\n  :outputs (:key \"" + victimKey + "\"))\n"})

	tcfg := rest.CopyConfig(env.Config)
	tcfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant"}
	tenant, err := client.New(tcfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The tenant may read neither the Secret nor the ConfigMap itself.
	if err := tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("tenant reads Secret db: %v, want Forbidden", err)
	}
	if err := tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: "internal"}, &corev1.ConfigMap{}); !apierrors.IsForbidden(err) {
		t.Fatalf("tenant reads ConfigMap internal: %v, want Forbidden", err)
	}
	secretRef := []v1alpha1.BindingsSource{{SecretRef: &v1alpha1.ObjectKeyReference{Name: "db"}}}
	const secretSource = "(deflava-architecture steal\n  :inputs ((:pw \"\"))\n  :resources ((terraform-data \"d\" :input \"{pw}\"))\n  :outputs (:pw \"{pw}\"))\n"
	attacks := []*v1alpha1.LavaArchitecture{
		lockdownArch(ns, "steal-secret", func(s *v1alpha1.LavaArchitectureSpec) { s.Source.Inline, s.BindingsFrom = secretSource, secretRef }),
		lockdownArch(ns, "steal-secret-sa", func(s *v1alpha1.LavaArchitectureSpec) {
			s.Source.Inline, s.BindingsFrom, s.ServiceAccountName = secretSource, secretRef, "app"
		}),
		lockdownArch(ns, "steal-config", func(s *v1alpha1.LavaArchitectureSpec) {
			s.Source.Inline = "(deflava-architecture steal\n  :inputs ((:v \"\"))\n" +
				"  :resources ((terraform-data \"{v}\" :input \"k\"))\n  :outputs (:v \"{v}\"))\n"
			s.BindingsFrom = []v1alpha1.BindingsSource{{ConfigMapRef: &v1alpha1.ObjectKeyReference{Name: "internal"}}}
		}),
		lockdownArch(ns, "steal-source", func(s *v1alpha1.LavaArchitectureSpec) {
			s.Source, s.Path = v1alpha1.Source{}, "infra/key.tlisp"
			s.SourceRef = &v1alpha1.SourceReference{Kind: v1alpha1.SourceRefGitRepository, Name: "victim-repo", Namespace: other}
		}),
		lockdownArch(ns, "probe", func(s *v1alpha1.LavaArchitectureSpec) {
			s.DependsOn = []v1alpha1.Dependency{{Name: "secret-project", Namespace: other}}
		}),
		lockdownArch(ns, "probe-missing", func(s *v1alpha1.LavaArchitectureSpec) {
			s.DependsOn = []v1alpha1.Dependency{{Name: "nothing-here", Namespace: other}}
		}),
	}
	for _, a := range attacks {
		if err := tenant.Create(ctx, a); err != nil {
			t.Fatalf("tenant creates %s: %v", a.Name, err)
		}
	}

	t.Run("impersonation refused at start", func(t *testing.T) {
		// A developer's kubeconfig whose user may not impersonate ServiceAccounts.
		dev := kubeconfigAs(t, env, "dev")
		// Bounded: without the check, this lava up started and, its watcher unable to list
		// anything, did not stop.
		code, _, stderr := startUp(t, "up", "--once", "--kubeconfig", dev, "--namespaces", ns, "--state-dir", t.TempDir(),
			"--providers", filepath.Join(tofuDir, "providers"), "--timeout", "30s").wait(time.Minute)
		want := `user "dev" may not impersonate ServiceAccounts in namespace "` + ns + `"`
		if code != exitInvalid || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--impersonate=false") {
			t.Errorf("exit %d, stderr:\n%s\nwant exit %d naming %q and --impersonate=false", code, stderr, exitInvalid, want)
		}
	})

	t.Run("a user that may not list stops at --timeout", func(t *testing.T) {
		// A kubeconfig whose user may do nothing: lava up --once must end by --timeout with
		// an error that says why, not wait for a list that is refused for ever.
		nobody := kubeconfigAs(t, env, "nobody")
		start := time.Now()
		code, _, stderr := startUp(t, "up", "--once", "--kubeconfig", nobody, "--namespaces", ns, "--state-dir", t.TempDir(),
			"--impersonate=false", "--providers", filepath.Join(tofuDir, "providers"), "--timeout", "15s").wait(time.Minute)
		took := time.Since(start)
		if code == 0 || took > 45*time.Second || !strings.Contains(stderr, `user "nobody" may not list lavaarchitectures.lava.pleme.io in namespace "`+ns+`"`) {
			t.Errorf("exit %d after %v, stderr:\n%s\nwant a non-zero exit within the timeout and its slack, naming the refused list", code, took.Round(time.Second), lastLines(stderr, 20))
		}
	})

	stateDir := filepath.Join(t.TempDir(), "state")
	lava := startUp(t, "up", "--kubeconfig", env.Kubeconfig(t), "--namespaces", ns+","+other, "--state-dir", stateDir,
		"--providers", filepath.Join(tofuDir, "providers"))
	failedWith := func(reason, msg string) func(*v1alpha1.LavaArchitecture) error {
		return func(o *v1alpha1.LavaArchitecture) error {
			if o.Status.Phase != v1alpha1.PhaseFailed {
				return fmt.Errorf("phase %q", o.Status.Phase)
			}
			for _, c := range o.Status.Conditions {
				if c.Reason == reason && strings.Contains(c.Message, msg) {
					return nil
				}
			}
			return fmt.Errorf("no condition with reason %s and a message with %q: %+v", reason, msg, o.Status.Conditions)
		}
	}
	refused := func(msg string) func(*v1alpha1.LavaArchitecture) error {
		return func(o *v1alpha1.LavaArchitecture) error {
			for _, c := range o.Status.Conditions {
				if c.Type == v1alpha1.ConditionDependenciesReady && c.Status == metav1.ConditionFalse &&
					c.Reason == v1alpha1.ReasonCrossNamespaceRefRefused && strings.Contains(c.Message, msg) {
					return nil
				}
			}
			return fmt.Errorf("phase %q, no DependenciesReady False CrossNamespaceRefRefused with %q: %+v", o.Status.Phase, msg, o.Status.Conditions)
		}
	}
	want := map[string]func(*v1alpha1.LavaArchitecture) error{
		"steal-secret":    failedWith(v1alpha1.ReasonServiceAccountRequired, "spec.serviceAccountName"),
		"steal-secret-sa": failedWith(v1alpha1.ReasonRBACForbidden, "ServiceAccount "+ns+"/app may not get Secret \"db\""),
		"steal-config":    failedWith(v1alpha1.ReasonServiceAccountRequired, "spec.serviceAccountName"),
		"steal-source":    refused("spec.sourceRef names GitRepository " + other + "/victim-repo in another namespace"),
		"probe":           refused("spec.dependsOn names " + other + "/secret-project in another namespace"),
		"probe-missing":   refused("spec.dependsOn names " + other + "/nothing-here in another namespace"),
	}
	// The victim's object is Applied first, so that a probe had a phase to learn.
	deadline := time.Now().Add(3 * time.Minute)
	waitObject(t, admin, client.ObjectKeyFromObject(victim), deadline, func(o *v1alpha1.LavaArchitecture) error {
		if o.Status.Phase != v1alpha1.PhaseApplied {
			return fmt.Errorf("phase %q", o.Status.Phase)
		}
		return nil
	})
	got := map[string]*v1alpha1.LavaArchitecture{}
	for name, check := range want {
		got[name] = waitObject(t, tenant, client.ObjectKey{Namespace: ns, Name: name}, deadline, check)
	}
	// Refused references stay refused: the watcher has nothing more to say about them.
	time.Sleep(2 * time.Second)
	_, stdout, stderr := lava.stop()
	if t.Failed() {
		t.Logf("lava up stdout:\n%s\nstderr:\n%s\nlog (tail):\n%s", stdout, stderr, lastLines(readFile(t, filepath.Join(stateDir, up.FileLog)), 30))
	}

	for name, o := range got {
		if err := tenant.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		if o.Status.Render != nil || o.Status.Plan != nil || len(o.Status.Outputs) > 0 || o.Status.OutputsSecret != "" {
			t.Errorf("%s: render %+v, plan %+v, outputs %v, outputsSecret %q; want nothing rendered, planned or output", name,
				o.Status.Render, o.Status.Plan, o.Status.Outputs, o.Status.OutputsSecret)
		}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-lava-outputs"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: outputs Secret: %v, want none", name, err)
		}
	}
	// The two probes answer alike: the same status but for the target's name; nothing of the
	// victim's object (its UID, its phase) is in either.
	norm := func(o *v1alpha1.LavaArchitecture, target string) string {
		st := o.Status.DeepCopy()
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		b, _ := json.Marshal(st)
		return strings.ReplaceAll(string(b), target, "TARGET")
	}
	if a, b := norm(got["probe"], "secret-project"), norm(got["probe-missing"], "nothing-here"); a != b {
		t.Errorf("the probes' statuses differ beyond the name:\n%s\n%s", a, b)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
		t.Fatal(err)
	}
	probe, _ := json.Marshal(got["probe"].Status)
	for _, s := range []string{string(victim.UID), string(v1alpha1.PhaseApplied), "not found"} {
		if bytes.Contains(probe, []byte(s)) {
			t.Errorf("probe's status tells %q about the victim's object:\n%s", s, probe)
		}
	}

	// Everything the tenant reads (its objects, its namespace's Events) and lava up's log.
	places := map[string][]byte{"log": []byte(readFile(t, filepath.Join(stateDir, up.FileLog))), "stdout": []byte(stdout)}
	for name, o := range got {
		places["object "+name], _ = json.Marshal(o)
	}
	evs := &corev1.EventList{}
	if err := admin.List(ctx, evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	places["events"], _ = json.Marshal(evs)
	for _, v := range []string{secretValue, configValue, victimKey} {
		for _, f := range engine.Forms(v) {
			for where, b := range places {
				if bytes.Contains(b, []byte(f)) {
					t.Errorf("%q (as %q) is in %s", v, f, where)
				}
			}
		}
	}
}

// secretsRole creates the ServiceAccount ns/sa and a Role, bound to it, with verbs on the
// namespace's Secrets.
func secretsRole(t *testing.T, c client.Client, ns, sa string, verbs []string) {
	t.Helper()
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-secrets"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: verbs}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-secrets"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa + "-secrets"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}},
	} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// lockdownArch is a LavaArchitecture ns/name with an inline source (replaced by edit when it sets one).
func lockdownArch(ns, name string, edit func(*v1alpha1.LavaArchitectureSpec)) *v1alpha1.LavaArchitecture {
	a := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	a.Spec.Source.Inline = "(deflava-architecture " + name + " :resources ((terraform-data \"d\" :input \"x\")))\n"
	edit(&a.Spec)
	return a
}

// victimRepo creates the GitRepository ns/name with a ready artifact holding files (a tar.gz
// served on loopback, its digest in status, as source-controller would publish it).
func victimRepo(t *testing.T, c client.Client, ns, name string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for p, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	body := buf.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srv.Close)
	sum := sha256.Sum256(body)
	gr := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sourcev1.GitRepositorySpec{URL: "https://git.example/victim.git", Interval: metav1.Duration{Duration: time.Hour}}}
	if err := c.Create(t.Context(), gr); err != nil {
		t.Fatal(err)
	}
	size := int64(len(body))
	gr.Status.Artifact = &fluxmeta.Artifact{Path: "gitrepository/" + ns + "/" + name + "/a.tar.gz", URL: srv.URL + "/a.tar.gz",
		Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567", Digest: "sha256:" + hex.EncodeToString(sum[:]),
		LastUpdateTime: metav1.Now(), Size: &size}
	gr.Status.Conditions = []metav1.Condition{{Type: fluxmeta.ReadyCondition, Status: metav1.ConditionTrue, Reason: fluxmeta.SucceededReason,
		Message: "stored artifact", LastTransitionTime: metav1.Now(), ObservedGeneration: gr.Generation}}
	if err := c.Status().Update(t.Context(), gr); err != nil {
		t.Fatal(err)
	}
}

// upRun is a lava command running in-process ([startUp]).
type upRun struct {
	t              *testing.T
	cancel         context.CancelFunc
	done           chan int
	stdout, stderr bytes.Buffer
	code           int
	ended          bool
	abandoned      bool // it did not stop: its output is still being written
}

// kubeconfigAs writes a copy of env's kubeconfig whose user acts as user (impersonated) and
// returns its path.
func kubeconfigAs(t *testing.T, env *kubetest.Env, user string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(env.Kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = user
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// startUp runs lava with args in-process until the test ends, [upRun.stop] or [upRun.wait].
func startUp(t *testing.T, args ...string) *upRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	r := &upRun{t: t, cancel: cancel, done: make(chan int, 1)}
	go func() { r.done <- run(ctx, args, strings.NewReader(""), &r.stdout, &r.stderr) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// wait waits at most d for the command to exit by itself, then stops it, and returns its exit
// code and output.
func (r *upRun) wait(d time.Duration) (int, string, string) {
	r.t.Helper()
	if !r.ended {
		select {
		case r.code = <-r.done:
			r.ended = true
		case <-time.After(d):
			r.t.Errorf("lava did not exit within %s", d)
		}
	}
	return r.stop()
}

// stop cancels the command, waits a minute at most for it to exit, and returns its exit code
// and output.
func (r *upRun) stop() (int, string, string) {
	r.t.Helper()
	r.cancel()
	if !r.ended {
		r.ended = true
		select {
		case r.code = <-r.done:
		case <-time.After(time.Minute):
			r.t.Error("lava did not stop within a minute")
			r.abandoned = true
		}
	}
	if r.abandoned {
		return -1, "", ""
	}
	return r.code, r.stdout.String(), r.stderr.String()
}

// waitObject polls key through c until check passes or deadline and returns the object.
func waitObject(t *testing.T, c client.Client, key client.ObjectKey, deadline time.Time, check func(*v1alpha1.LavaArchitecture) error) *v1alpha1.LavaArchitecture {
	t.Helper()
	for {
		o := &v1alpha1.LavaArchitecture{}
		err := c.Get(t.Context(), key, o)
		if err == nil {
			err = check(o)
		}
		if err == nil {
			return o
		}
		if time.Now().After(deadline) || errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v", key, err)
			return o
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

//go:build integration

package pipeline

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
)

// kstatusObject is one LavaArchitecture on a real API server whose status is what Reduce
// returns, read back for kstatus (status.Compute) and kubectl wait as those tools read it.
type kstatusObject struct {
	t     *testing.T
	env   *kubetest.Env
	key   client.ObjectKey
	st    v1alpha1.LavaArchitectureStatus
	clock int
}

// gen is the object's metadata.generation.
func (o *kstatusObject) gen() int64 {
	o.t.Helper()
	var cur v1alpha1.LavaArchitecture
	if err := o.env.Client.Get(o.t.Context(), o.key, &cur); err != nil {
		o.t.Fatal(err)
	}
	return cur.Generation
}

// edit changes the spec (a new generation).
func (o *kstatusObject) edit(f func(*v1alpha1.LavaArchitectureSpec)) {
	o.t.Helper()
	var cur v1alpha1.LavaArchitecture
	if err := o.env.Client.Get(o.t.Context(), o.key, &cur); err != nil {
		o.t.Fatal(err)
	}
	f(&cur.Spec)
	if err := o.env.Client.Update(o.t.Context(), &cur); err != nil {
		o.t.Fatalf("update spec: %v", err)
	}
}

// fold reduces ev (its generation set to the object's current one unless given) and writes
// the status subresource.
func (o *kstatusObject) fold(ev Event) {
	o.t.Helper()
	if ev.Generation == 0 {
		ev.Generation = o.gen()
	}
	o.clock++
	ev.Time = at(o.clock)
	var err error
	if o.st, _, err = Reduce(o.st, ev); err != nil {
		o.t.Fatalf("Reduce(%s): %v", ev.Type, err)
	}
	var cur v1alpha1.LavaArchitecture
	if err := o.env.Client.Get(o.t.Context(), o.key, &cur); err != nil {
		o.t.Fatal(err)
	}
	cur.Status = o.st
	if err := o.env.Client.Status().Update(o.t.Context(), &cur); err != nil {
		o.t.Fatalf("%s: status update: %v", ev.Type, err)
	}
}

// want checks kstatus's verdict on the object as the API server returns it.
func (o *kstatusObject) want(step string, want status.Status) {
	o.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("LavaArchitecture"))
	if err := o.env.Client.Get(o.t.Context(), o.key, u); err != nil {
		o.t.Fatal(err)
	}
	res, err := status.Compute(u)
	if err != nil {
		o.t.Fatalf("%s: kstatus: %v", step, err)
	}
	if res.Status != want {
		st, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status")
		o.t.Errorf("%s: kstatus %s (%s), want %s; generation %d, status %v", step, res.Status, res.Message, want, u.GetGeneration(), st)
	}
}

// TestKstatus_everyPhase folds a lifecycle into a real object and checks kstatus
// (sigs.k8s.io/cli-utils) at each step: InProgress while reconciling and right after a spec
// edit, Current when applied, Failed for a terminal failure and a dependency cycle, InProgress
// while waiting on a dependency, Current while suspended (the suspended generation is
// observed), and `kubectl wait --for=condition=Ready` returns once it is applied and times out
// while it is not.
func TestKstatus_everyPhase(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	obj := &v1alpha1.LavaArchitecture{
		ObjectMeta: metav1.ObjectMeta{Name: "kstatus", Namespace: ns, Finalizers: []string{v1alpha1.Finalizer}},
		Spec:       v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}},
	}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	o := &kstatusObject{t: t, env: env, key: client.ObjectKeyFromObject(obj)}
	kubeconfig := writeKubeconfig(t, env.Config)

	o.fold(Event{Type: EventObserved, Force: true})
	o.want("Pending", status.InProgressStatus)
	o.fold(sample(EventSynthesized, 0, 0))
	o.want("Synthesized", status.InProgressStatus)
	o.fold(sample(EventPlanned, 0, 0))
	o.want("Planned", status.InProgressStatus)
	if out, err := kubectlWait(t, kubeconfig, ns, "2s"); err == nil {
		t.Errorf("kubectl wait --for=condition=Ready returned while the plan is being applied:\n%s", out)
	}
	o.fold(sample(EventApplied, 0, 0))
	o.want("Applied", status.CurrentStatus)
	if out, err := kubectlWait(t, kubeconfig, ns, "30s"); err != nil {
		t.Errorf("kubectl wait --for=condition=Ready on an applied object: %v\n%s", err, out)
	}
	// Drift the policy leaves alone waits for a person (Failed); correcting it is progress;
	// a clean scan after the re-apply is Current again.
	o.fold(sample(EventDrifted, 0, 0))
	o.want("Drifted", status.FailedStatus)
	o.fold(sample(EventReconverging, 0, 0))
	o.want("Reconverging", status.InProgressStatus)
	o.fold(sample(EventPlanned, 0, 0))
	o.fold(sample(EventApplied, 0, 0))
	o.fold(sample(EventDriftClean, 0, 0))
	o.want("re-applied, clean", status.CurrentStatus)

	// A spec edit: InProgress until the watcher observes the new generation, and after.
	o.edit(func(s *v1alpha1.LavaArchitectureSpec) { s.Engine = v1alpha1.EngineTofu })
	o.want("edited, not yet observed", status.InProgressStatus)
	if out, err := kubectlWait(t, kubeconfig, ns, "2s"); err == nil {
		t.Errorf("kubectl wait --for=condition=Ready returned for a generation not yet reconciled:\n%s", out)
	}
	o.fold(Event{Type: EventObserved, Force: true})
	o.want("edited, observed", status.InProgressStatus)
	// A retryable failure is still progress; a terminal one is Failed.
	retry := sample(EventFailed, 0, 0)
	o.fold(retry)
	o.want("retryable failure", status.InProgressStatus)
	terminal := sample(EventFailed, 0, 0)
	terminal.Terminal, terminal.Reason = true, v1alpha1.ReasonRetriesExhausted
	o.fold(terminal)
	o.want("terminal failure", status.FailedStatus)

	// Suspend: the new generation (spec.suspend) is observed and held, never InProgress
	// forever; suspension does not hide a terminal failure.
	o.edit(func(s *v1alpha1.LavaArchitectureSpec) { s.Suspend = true })
	o.want("suspend set, not yet folded", status.InProgressStatus)
	o.fold(Event{Type: EventSuspended})
	o.want("suspended after a terminal failure", status.FailedStatus)
	if o.st.ObservedGeneration != o.gen() {
		t.Errorf("suspended: observedGeneration %d, generation %d", o.st.ObservedGeneration, o.gen())
	}
	// Resume: a new pass; applied again, Ready again.
	resume := func(step string) {
		t.Helper()
		o.edit(func(s *v1alpha1.LavaArchitectureSpec) { s.Suspend = false })
		o.fold(Event{Type: EventResumed})
		o.want(step+", not yet observed", status.InProgressStatus)
		o.fold(Event{Type: EventObserved, Force: true})
		o.fold(sample(EventSynthesized, 0, 0))
		o.fold(sample(EventPlanned, 0, 0))
		o.want(step+", planned", status.InProgressStatus)
		o.fold(sample(EventApplied, 0, 0))
		o.want(step+", applied", status.CurrentStatus)
		if out, err := kubectlWait(t, kubeconfig, ns, "30s"); err != nil {
			t.Errorf("kubectl wait --for=condition=Ready after %s: %v\n%s", step, err, out)
		}
	}
	resume("resumed after the failure")
	// Suspending an applied object: Current while suspended.
	o.edit(func(s *v1alpha1.LavaArchitectureSpec) { s.Suspend = true })
	o.fold(Event{Type: EventSuspended})
	o.want("suspended after apply", status.CurrentStatus)
	resume("resumed after apply")

	// Waiting on a dependency: the held generation is observed and InProgress; a cycle is
	// Failed; the release runs the pass to Current.
	o.edit(func(s *v1alpha1.LavaArchitectureSpec) {
		s.DependsOn = []v1alpha1.Dependency{{Name: "network"}}
	})
	o.fold(Event{Type: EventDependenciesBlocked, Reason: v1alpha1.ReasonDependencyNotReady, Message: "waiting for network (Applied)"})
	o.want("waiting on a dependency", status.InProgressStatus)
	if o.st.ObservedGeneration != o.gen() || o.st.Phase != Pending {
		t.Errorf("waiting on a dependency: observedGeneration %d (generation %d), phase %s; want the generation, Pending", o.st.ObservedGeneration, o.gen(), o.st.Phase)
	}
	o.fold(Event{Type: EventDependenciesBlocked, Reason: v1alpha1.ReasonDependencyCycle, Message: "dependency cycle: kstatus -> network -> kstatus"})
	o.want("dependency cycle", status.FailedStatus)
	o.fold(Event{Type: EventDependenciesSatisfied})
	o.fold(Event{Type: EventObserved, Force: true})
	o.want("released", status.InProgressStatus)
	o.fold(sample(EventSynthesized, 0, 0))
	o.fold(sample(EventAwaitingApproval, 0, 0))
	o.want("awaiting approval", status.InProgressStatus)
	o.fold(sample(EventApplied, 0, 0))
	o.want("applied after the dependency", status.CurrentStatus)
}

// writeKubeconfig writes a kubeconfig for cfg (envtest's client certificate) and returns its path.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// kubectlWait runs the kubectl of $KUBEBUILDER_ASSETS:
// `kubectl wait --for=condition=Ready lava/kstatus -n NS --timeout=TIMEOUT`.
func kubectlWait(t *testing.T, kubeconfig, ns, timeout string) (string, error) {
	t.Helper()
	assets, err := kubetest.Assets()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(assets, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kubectl not in %s (make tools-kube): %v", assets, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig", kubeconfig, "wait", "--for=condition=Ready",
		"lava/kstatus", "-n", ns, "--timeout="+timeout)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

//go:build integration

package watcher_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/testing/protocmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// maxReconcilesPerGeneration bounds the reconciles of one generation: status writes must not
// retrigger the controller.
const maxReconcilesPerGeneration = 3

// TestWatcher runs the watcher against a real kube-apiserver and etcd (envtest) and a real
// in-process NATS JetStream server. Each subtest has its own namespace and its own watcher.
func TestWatcher(t *testing.T) {
	e := newEnv(t)
	t.Run("seed lifecycle", e.testSeedLifecycle)
	t.Run("restart publishes nothing for an unchanged generation", e.testRestart)
	t.Run("only the leader works; the standby takes over", e.testLeaderElection)
	t.Run("a phase event ahead of its predecessor is retried", e.testOutOfOrder)
	t.Run("a phase event ahead of a dead watcher's predecessor waits for it", e.testOutOfOrderPastDrop)
	t.Run("a generation's events published in reverse fold without a nak", e.testReverseBurst)
	t.Run("an outcome older than a folded event of its generation is dropped", e.testSupersededOutcome)
	t.Run("a producer's destroy waits for its consumers", e.testDestroyOrder)
	t.Run("under lockdown another namespace's object holds no deletion", e.testDestroyOrderLockdown)
	t.Run("dependencies hold back until their phase", e.testDependencies)
	t.Run("two-resource cycle reported on both", e.testCycle)
	t.Run("lockdown refuses cross-namespace references", e.testLockdown)
	t.Run("suspend publishes the held generation", e.testSuspend)
	t.Run("remediation policy and forced passes", e.testPolicy)
	t.Run("live bindings: a changed or missing source", e.testLiveBindings)
	t.Run("outputs between objects", e.testOutputsBinding)
	t.Run("bound Secrets are not read without WatchSecrets", e.testSecretsNotWatched)
	t.Run("bound Secrets read as the object's identity and rechecked", e.testSecretsRead)
	t.Run("one namespace's Secret rechecks do not hold another's reconciles", e.testSecretReadBudget)
	t.Run("service entry point serves metrics and health", e.testRun)
	t.Run("a burst is one status write; clean scans write nothing", e.testWrites)
	t.Run("status discipline under label and annotation churn", e.testStatusDiscipline)
	t.Run("an identity that may not list is refused at start; a stop before the caches synced ends", e.testAccess)
}

func (e *env) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.kube.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
}

// patch applies mutate to the object with a JSON merge patch of the difference (an Update of
// the typed object would also rewrite spec.driftInterval "5m" as "5m0s", a new generation).
func (e *env) patch(t *testing.T, ns, name string, mutate func(*v1alpha1.LavaArchitecture)) {
	t.Helper()
	cur := e.get(t, ns, name)
	orig := cur.DeepCopy()
	mutate(cur)
	if err := e.kube.Client.Patch(t.Context(), cur, client.MergeFrom(orig)); err != nil {
		t.Fatalf("patch %s/%s: %v", ns, name, err)
	}
}

func newArch(ns, name string, mutate func(*v1alpha1.LavaArchitectureSpec)) *v1alpha1.LavaArchitecture {
	a := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
	if mutate != nil {
		mutate(&a.Spec)
	}
	return a
}

// testSeedLifecycle: the seed manifest is admitted, gets the finalizer and exactly one
// ResourceObserved; phase events drive the status; status writes do not retrigger the
// controller; a concurrent update causes a conflict that is retried; a new generation is
// observed once; delete publishes DeletionRequested and Destroyed removes the object.
func (e *env) testSeedLifecycle(t *testing.T) {
	const ns, name = "infra", "prod-vpc"
	// examples/cloud/prod-vpc.yaml is the repository's copy of the seed case.
	raw, err := os.ReadFile("../../../examples/cloud/prod-vpc.yaml")
	if err != nil {
		t.Fatalf("read the seed case: %v", err)
	}
	obj := &v1alpha1.LavaArchitecture{}
	if err := yaml.UnmarshalStrict(raw, obj); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, e.kube.Client, ns)
	w := e.startWatcher(t, ns, "seed")
	e.create(t, obj)

	// Finalizer, exactly one ResourceObserved, phase Pending.
	e.waitStatus(t, ns, name, func(o *v1alpha1.LavaArchitecture) error {
		if !controllerutil.ContainsFinalizer(o, v1alpha1.Finalizer) {
			return fmt.Errorf("finalizers %v", o.Finalizers)
		}
		return all(phaseIs(v1alpha1.PhasePending, 1), conditionIs(v1alpha1.ConditionReconciling, metav1.ConditionTrue, ""))(o)
	})
	subject := bus.ResourceSubject(ns, name, bus.EventObserved)
	e.waitCount(t, bus.StreamResources, subject, 1)
	obj = e.get(t, ns, name)
	ro := e.observed(t, ns, name)[0]
	wantID := eventid.ID(string(obj.UID), 1, "lava.v1.ResourceObserved", "generation:1")
	want := &lavav1.ResourceObserved{
		Spec: &lavav1.ArchitectureSpec{
			Source:         &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: obj.Spec.Source.Inline}},
			Bindings:       map[string]string{"name": "prod", "cidr": "10.42.0.0/16"},
			Gate:           "aws-vpc-network",
			Engine:         lavav1.Engine_ENGINE_EMBEDDED,
			DriftInterval:  ro.GetSpec().GetDriftInterval(),
			DeletionPolicy: lavav1.DeletionPolicy_DELETION_POLICY_DESTROY,
			ApprovePlan:    "auto",
		},
		Remediation: &lavav1.RemediationPolicy{
			Cosmetic: lavav1.RemediationAction_REMEDIATION_ACTION_ALERT, Functional: lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT,
			Critical: lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL, Origin: lavav1.PolicyOrigin_POLICY_ORIGIN_DEFAULT,
		},
		Dependencies: &lavav1.DependencyState{Ready: true},
	}
	if diff := cmp.Diff(want, ro, protocmp.Transform(), protocmp.IgnoreFields(&lavav1.ResourceObserved{}, "envelope")); diff != "" {
		t.Errorf("ResourceObserved (-want +got):\n%s", diff)
	}
	if got := ro.GetSpec().GetDriftInterval().AsDuration(); got != 5*time.Minute {
		t.Errorf("drift interval %s, want 5m", got)
	}
	env := ro.GetEnvelope()
	if env.GetEventId() != wantID || env.GetCorrelationId() != wantID || env.GetTrigger() != "generation:1" ||
		env.GetGeneration() != 1 || env.GetSource() != "watcher" || env.GetResource().GetUid() != string(obj.UID) {
		t.Errorf("envelope %v, want event id %s, trigger generation:1", env, wantID)
	}

	// Phase events, published by hand as synth and the applier would.
	s := e.stageFor(obj, ro)
	s.synthesized(t)
	e.waitStatus(t, ns, name, all(phaseIs(v1alpha1.PhaseSynthesized, 1), conditionIs(v1alpha1.ConditionSynthesized, metav1.ConditionTrue, v1alpha1.ReasonSynthesisSucceeded)))
	s.planned(t)
	e.waitStatus(t, ns, name, all(phaseIs(v1alpha1.PhasePlanned, 1), conditionIs(v1alpha1.ConditionPlanned, metav1.ConditionTrue, v1alpha1.ReasonPlanSucceeded)))
	appliedID := s.applied(t)
	obj = e.waitStatus(t, ns, name, all(phaseIs(v1alpha1.PhaseApplied, 1),
		conditionIs(v1alpha1.ConditionApplied, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded),
		conditionIs(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded),
		conditionIs(v1alpha1.ConditionReconciling, metav1.ConditionFalse, ""),
		conditionIs(v1alpha1.ConditionStalled, metav1.ConditionFalse, "")))
	if r := obj.Status.Render; r == nil || r.ArchitectureName != "demo-vpc" || r.ResourceCount != 1 || r.SourceKind != v1alpha1.SourceKindInline {
		t.Errorf("status.render %+v", r)
	}
	if p := obj.Status.Plan; p == nil || p.ID != strings.Repeat("e", 64) || p.Add != 1 {
		t.Errorf("status.plan %+v", p)
	}
	if got := string(obj.Status.Outputs["vpc_id"].Raw); got != `"vpc-1"` || obj.Status.LastAppliedAt == nil {
		t.Errorf("outputs %q lastAppliedAt %v", got, obj.Status.LastAppliedAt)
	}

	// One PhaseChanged per accepted transition: Pending, Synthesized, Planned, Applied.
	pcSubject := bus.PhaseSubject(ns, name, bus.EventPhaseChanged)
	e.waitCount(t, bus.StreamPhases, pcSubject, 4)
	pcs := messages(t, e, bus.StreamPhases, pcSubject, func() *lavav1.PhaseChanged { return &lavav1.PhaseChanged{} })
	var path []string
	for _, pc := range pcs {
		path = append(path, pc.GetFrom().String()+">"+pc.GetTo().String())
	}
	wantPath := []string{"PHASE_UNSPECIFIED>PHASE_PENDING", "PHASE_PENDING>PHASE_SYNTHESIZED", "PHASE_SYNTHESIZED>PHASE_PLANNED", "PHASE_PLANNED>PHASE_APPLIED"}
	if diff := cmp.Diff(wantPath, path); diff != "" {
		t.Errorf("PhaseChanged transitions (-want +got):\n%s", diff)
	}
	last := pcs[len(pcs)-1]
	if last.GetCauseEventId() != appliedID ||
		last.GetEnvelope().GetEventId() != eventid.ID(string(obj.UID), 1, "lava.v1.PhaseChanged", eventid.CauseTrigger(appliedID)) ||
		last.GetEnvelope().GetCorrelationId() != wantID || last.GetPlanId() != strings.Repeat("e", 64) {
		t.Errorf("last PhaseChanged %v", last)
	}

	// The same fact again (a new id, the same content and time) changes nothing: no patch, no
	// PhaseChanged.
	patches := w.metric(t, "lava_watcher_status_patches_total", nil)
	s.applied(t)
	eventually(t, 10*time.Second, func() error {
		if n := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "unchanged"}); n < 1 {
			return fmt.Errorf("unchanged phase events %v", n)
		}
		return nil
	})
	if got := w.metric(t, "lava_watcher_status_patches_total", nil); got != patches {
		t.Errorf("an unchanged event patched the status: %v patches, want %v", got, patches)
	}
	if n := e.count(t, bus.StreamPhases, pcSubject); n != 4 {
		t.Errorf("%d PhaseChanged after an unchanged event, want 4", n)
	}

	// A Kubernetes Event for the transition a user acts on (Applied), none for the hops
	// between (Events only for Applied, Failed, Drifted and awaiting approval:
	// docs/design/0007-status-writes.md).
	eventually(t, 10*time.Second, func() error {
		if got := e.eventReasons(t, ns, name); !slices.Contains(got, "Applied") {
			return fmt.Errorf("events %v: no Applied", got)
		}
		return nil
	})
	for _, r := range e.eventReasons(t, ns, name) {
		if r == "Observed" || r == "Synthesized" || r == "Planned" {
			t.Errorf("a Kubernetes Event for the hop %s; want Events only for transitions a user acts on", r)
		}
	}

	// Status writes do not retrigger the controller.
	gen1 := w.reconciles(t)
	t.Logf("reconciles for generation 1 (create, finalizer, 4 status patches): %v", gen1)
	if gen1 < 1 || gen1 > maxReconcilesPerGeneration {
		t.Errorf("%v reconciles for one generation, want 1..%d", gen1, maxReconcilesPerGeneration)
	}

	// A concurrent update (labels: no new generation) makes the next status patch conflict; it
	// is retried from a fresh read.
	conflicts := w.metric(t, "lava_watcher_status_patch_conflicts_total", nil)
	e.patch(t, ns, name, func(o *v1alpha1.LavaArchitecture) { o.Labels = map[string]string{"team": "net"} })
	s.drifted(t)
	e.waitStatus(t, ns, name, all(phaseIs(v1alpha1.PhaseDrifted, 1), conditionIs(v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected)))
	if got := w.metric(t, "lava_watcher_status_patch_conflicts_total", nil); got <= conflicts {
		t.Errorf("conflicts %v, want more than %v", got, conflicts)
	}

	// A new generation is observed exactly once.
	e.patch(t, ns, name, func(o *v1alpha1.LavaArchitecture) { o.Spec.Bindings["cidr"] = "10.43.0.0/16" })
	e.waitCount(t, bus.StreamResources, subject, 2)
	e.waitStatus(t, ns, name, phaseIs(v1alpha1.PhasePending, 2))
	ros := e.observed(t, ns, name)
	if g := ros[1].GetEnvelope(); g.GetGeneration() != 2 || g.GetTrigger() != "generation:2" || ros[1].GetSpec().GetBindings()["cidr"] != "10.43.0.0/16" {
		t.Errorf("second ResourceObserved envelope %v bindings %v", g, ros[1].GetSpec().GetBindings())
	}
	total := w.reconciles(t)
	t.Logf("reconciles after generation 2: %v", total)
	if total > 2*maxReconcilesPerGeneration {
		t.Errorf("%v reconciles for two generations, want at most %d", total, 2*maxReconcilesPerGeneration)
	}
	if n := e.observedCount(t, ns, name); n != 2 {
		t.Errorf("%d ResourceObserved, want 2", n)
	}

	// Delete: DeletionRequested, Finalizing; Destroyed removes the finalizer and the object.
	if err := e.kube.Client.Delete(t.Context(), e.get(t, ns, name)); err != nil {
		t.Fatal(err)
	}
	drSubject := bus.ResourceSubject(ns, name, bus.EventDeletionRequested)
	e.waitCount(t, bus.StreamResources, drSubject, 1)
	dr := messages(t, e, bus.StreamResources, drSubject, func() *lavav1.DeletionRequested { return &lavav1.DeletionRequested{} })[0]
	if dr.GetDeletionPolicy() != lavav1.DeletionPolicy_DELETION_POLICY_DESTROY || dr.GetEngine() != lavav1.Engine_ENGINE_EMBEDDED {
		t.Errorf("DeletionRequested %v", dr)
	}
	e.waitStatus(t, ns, name, func(o *v1alpha1.LavaArchitecture) error {
		return phaseIs(v1alpha1.PhaseFinalizing, dr.GetEnvelope().GetGeneration())(o)
	})
	ds := &stage{e: e, ref: dr.GetEnvelope().GetResource(), gen: dr.GetEnvelope().GetGeneration(),
		corr: dr.GetEnvelope().GetEventId(), prev: dr.GetEnvelope().GetEventId(), at: time.Now()}
	ds.destroyed(t)
	eventually(t, 30*time.Second, func() error {
		err := e.kube.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, &v1alpha1.LavaArchitecture{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("object still there (get: %v)", err)
		}
		return nil
	})
	// The counter moves after the release's write returns, which may be after the test saw the
	// object gone, so it is polled.
	eventually(t, 10*time.Second, func() error {
		if n := w.metric(t, "lava_watcher_finalizers_removed_total", nil); n != 1 {
			return fmt.Errorf("finalizers removed %v, want 1", n)
		}
		return nil
	})

	// The watcher's metric names pass promlint.
	problems, err := testutil.GatherAndLint(w.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// testRestart: a watcher restarted (manager stopped, a new one started) does not publish
// ResourceObserved again for an unchanged generation, and the new one folds phase events.
func (e *env) testRestart(t *testing.T) {
	ns := e.kube.Namespace(t)
	first := e.startWatcher(t, ns, "first")
	e.create(t, newArch(ns, "r", nil))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "r", bus.EventObserved), 1)
	e.waitStatus(t, ns, "r", phaseIs(v1alpha1.PhasePending, 1))
	first.stop()

	second := e.startWatcher(t, ns, "second")
	eventually(t, 30*time.Second, func() error {
		if n := second.reconciles(t); n < 1 {
			return fmt.Errorf("the new watcher has not reconciled yet")
		}
		return nil
	})
	obj := e.get(t, ns, "r")
	s := e.stageFor(obj, e.observed(t, ns, "r")[0])
	s.synthesized(t)
	e.waitStatus(t, ns, "r", phaseIs(v1alpha1.PhaseSynthesized, 1))
	if n := e.observedCount(t, ns, "r"); n != 1 {
		t.Errorf("%d ResourceObserved after a restart, want 1", n)
	}
	if n := second.metric(t, "lava_watcher_published_total", map[string]string{"event": "resource_observed"}); n != 0 {
		t.Errorf("the restarted watcher published %v ResourceObserved, want 0", n)
	}
}

// testDependencies: B (dependsOn A) is held back until A reaches Applied; C (a
// LavaArchitectureDependency from C to A, requirePhase Planned) until A reaches Planned.
func (e *env) testDependencies(t *testing.T) {
	ns := e.kube.Namespace(t)
	e.create(t, newArch(ns, "a", nil))
	e.create(t, newArch(ns, "b", func(s *v1alpha1.LavaArchitectureSpec) {
		s.DependsOn = []v1alpha1.Dependency{{Name: "a"}}
	}))
	e.create(t, &v1alpha1.LavaArchitectureDependency{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-on-a"},
		Spec: v1alpha1.LavaArchitectureDependencySpec{From: v1alpha1.ArchitectureReference{Name: "c"},
			To: v1alpha1.ArchitectureReference{Name: "a"}, RequirePhase: v1alpha1.PhasePlanned}})
	e.create(t, newArch(ns, "c", nil))
	// The watcher starts after every object exists: its controller starts reconciling only
	// when the caches of all its watches have synced, so C's first reconcile sees the edge. A
	// watcher already running could see C before the edge (separate watches) and rightly
	// observe it at once (docs/dialect.md, LavaArchitectureDependency).
	e.startWatcher(t, ns, "deps")

	waiting := func(target, phase string) func(*v1alpha1.LavaArchitecture) error {
		return func(o *v1alpha1.LavaArchitecture) error {
			if err := conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyNotReady)(o); err != nil {
				return err
			}
			c := metaCondition(o, v1alpha1.ConditionDependenciesReady)
			if want := fmt.Sprintf("waiting for %s/%s to reach %s", ns, target, phase); c.Message != want {
				return fmt.Errorf("message %q, want %q", c.Message, want)
			}
			return nil
		}
	}
	e.waitStatus(t, ns, "b", waiting("a", "Applied"))
	e.waitStatus(t, ns, "c", waiting("a", "Planned"))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "a", bus.EventObserved), 1)
	held := func(names ...string) func() error {
		return func() error {
			for _, n := range names {
				if c := e.observedCount(t, ns, n); c != 0 {
					return fmt.Errorf("%s published %d ResourceObserved while held back", n, c)
				}
			}
			return nil
		}
	}
	consistently(t, 500*time.Millisecond, held("b", "c"))

	a := e.get(t, ns, "a")
	s := e.stageFor(a, e.observed(t, ns, "a")[0])
	s.synthesized(t)
	e.waitStatus(t, ns, "a", phaseIs(v1alpha1.PhaseSynthesized, 1))
	consistently(t, 500*time.Millisecond, held("b", "c"))

	s.planned(t)
	e.waitStatus(t, ns, "a", phaseIs(v1alpha1.PhasePlanned, 1))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "c", bus.EventObserved), 1)
	e.waitStatus(t, ns, "c", conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesSatisfied))
	consistently(t, 500*time.Millisecond, held("b"))

	s.applied(t)
	e.waitStatus(t, ns, "a", phaseIs(v1alpha1.PhaseApplied, 1))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "b", bus.EventObserved), 1)
	e.waitStatus(t, ns, "b", all(phaseIs(v1alpha1.PhasePending, 1),
		conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesSatisfied)))
	deps := e.observed(t, ns, "b")[0].GetDependencies()
	want := &lavav1.DependencyState{Ready: true, Dependencies: []*lavav1.Dependency{{
		Target: &lavav1.ResourceRef{Namespace: ns, Name: "a", Uid: string(a.UID)}, Kind: lavav1.DependencyKind_DEPENDENCY_KIND_BLOCKS_ON,
		RequiredPhase: lavav1.Phase_PHASE_APPLIED, ObservedPhase: lavav1.Phase_PHASE_APPLIED, Satisfied: true,
	}}}
	if diff := cmp.Diff(want, deps, protocmp.Transform()); diff != "" {
		t.Errorf("B's dependency state (-want +got):\n%s", diff)
	}
	if n := e.observedCount(t, ns, "c"); n != 1 {
		t.Errorf("C published %d ResourceObserved, want 1", n)
	}
}

func metaCondition(o *v1alpha1.LavaArchitecture, typ string) metav1.Condition {
	for _, c := range o.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// testLockdown is the attack of docs/security.md "Kubernetes RBAC" (lockdown): with
// NoCrossNamespaceRefs a dependsOn naming another namespace, a spec.sourceRef to a Flux source
// in another namespace and a LavaArchitectureDependency linking to one leave DependenciesReady
// False with reason CrossNamespaceRefRefused naming the reference, and nothing is published for
// those objects; a LavaArchitectureDependency that lives in another namespace (from and to in
// ns) is ignored, so another namespace's tenant cannot hold an object of ns with it (it did);
// a same-namespace dependency still works.
func (e *env) testLockdown(t *testing.T) {
	ns := e.kube.Namespace(t)
	other := e.kube.Namespace(t)
	// The watcher sees both namespaces, so an edge object in the other one is not merely out of
	// its sight.
	e.startWatcher(t, ns, "lockdown", func(o *watcher.Config) { o.NoCrossNamespaceRefs, o.Namespaces = true, []string{ns, other} })
	e.create(t, newArch(ns, "reach", func(s *v1alpha1.LavaArchitectureSpec) {
		s.DependsOn = []v1alpha1.Dependency{{Name: "victim", Namespace: other}}
	}))
	e.create(t, newArch(ns, "source-reach", func(s *v1alpha1.LavaArchitectureSpec) {
		s.Source, s.Path = v1alpha1.Source{}, "infra/vpc.tlisp"
		s.SourceRef = &v1alpha1.SourceReference{Kind: v1alpha1.SourceRefGitRepository, Name: "victim", Namespace: other}
	}))
	// This API server has no Flux CRDs: a same-namespace sourceRef is held, naming why.
	e.create(t, newArch(ns, "no-flux", func(s *v1alpha1.LavaArchitectureSpec) {
		s.Source, s.Path = v1alpha1.Source{}, "infra/vpc.tlisp"
		s.SourceRef = &v1alpha1.SourceReference{Kind: v1alpha1.SourceRefOCIRepository, Name: "infra"}
	}))
	e.create(t, newArch(ns, "edge", nil))
	e.create(t, &v1alpha1.LavaArchitectureDependency{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge-to-other"},
		Spec: v1alpha1.LavaArchitectureDependencySpec{From: v1alpha1.ArchitectureReference{Name: "edge"},
			To: v1alpha1.ArchitectureReference{Name: "victim", Namespace: other}}})
	// A tenant of the other namespace ties an object of ns to another object of ns with an edge
	// object of its own (only the edge object crosses), to hold it: ignored.
	e.create(t, &v1alpha1.LavaArchitectureDependency{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "from-other"},
		Spec: v1alpha1.LavaArchitectureDependencySpec{From: v1alpha1.ArchitectureReference{Name: "held", Namespace: ns},
			To: v1alpha1.ArchitectureReference{Name: "local", Namespace: ns}}})
	e.create(t, newArch(ns, "held", nil))
	e.create(t, newArch(ns, "local", func(s *v1alpha1.LavaArchitectureSpec) {
		s.DependsOn = []v1alpha1.Dependency{{Name: "edge"}}
	}))
	refused := func(what string) func(*v1alpha1.LavaArchitecture) error {
		return func(o *v1alpha1.LavaArchitecture) error {
			if err := conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonCrossNamespaceRefRefused)(o); err != nil {
				return err
			}
			if c := metaCondition(o, v1alpha1.ConditionDependenciesReady); !strings.Contains(c.Message, what) {
				return fmt.Errorf("message %q lacks %q", c.Message, what)
			}
			return nil
		}
	}
	e.waitStatus(t, ns, "reach", refused("spec.dependsOn names "+other+"/victim in another namespace"))
	e.waitStatus(t, ns, "edge", refused("LavaArchitectureDependency "+ns+"/edge-to-other links "+ns+"/edge to "+other+"/victim across namespaces"))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "held", bus.EventObserved), 1)
	if c := metaCondition(e.waitStatus(t, ns, "held", func(*v1alpha1.LavaArchitecture) error { return nil }), v1alpha1.ConditionDependenciesReady); c.Status == metav1.ConditionFalse {
		t.Errorf("held: DependenciesReady %s %s %q: another namespace's edge object held it", c.Status, c.Reason, c.Message)
	}
	e.waitStatus(t, ns, "local", conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyNotReady))
	e.waitStatus(t, ns, "source-reach", refused("spec.sourceRef names GitRepository "+other+"/victim in another namespace"))
	e.waitStatus(t, ns, "no-flux", func(o *v1alpha1.LavaArchitecture) error {
		if err := conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonSourceNotFound)(o); err != nil {
			return err
		}
		if c := metaCondition(o, v1alpha1.ConditionDependenciesReady); !strings.Contains(c.Message, "served no OCIRepository (source.toolkit.fluxcd.io/v1)") {
			return fmt.Errorf("message %q does not say Flux's OCIRepository is not served", c.Message)
		}
		return nil
	})
	for _, name := range []string{"reach", "edge", "source-reach", "no-flux"} {
		if n := e.observedCount(t, ns, name); n != 0 {
			t.Errorf("%s: %d ResourceObserved published, want 0", name, n)
		}
	}
}

// testCycle: x dependsOn y and y dependsOn x: both report the cycle and publish nothing.
func (e *env) testCycle(t *testing.T) {
	ns := e.kube.Namespace(t)
	e.startWatcher(t, ns, "cycle")
	e.create(t, newArch(ns, "x", func(s *v1alpha1.LavaArchitectureSpec) { s.DependsOn = []v1alpha1.Dependency{{Name: "y"}} }))
	e.create(t, newArch(ns, "y", func(s *v1alpha1.LavaArchitectureSpec) { s.DependsOn = []v1alpha1.Dependency{{Name: "x"}} }))
	for _, c := range [][2]string{{"x", "y"}, {"y", "x"}} {
		msg := fmt.Sprintf("dependency cycle: %[1]s/%[2]s -> %[1]s/%[3]s -> %[1]s/%[2]s", ns, c[0], c[1])
		e.waitStatus(t, ns, c[0], func(o *v1alpha1.LavaArchitecture) error {
			if err := conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyCycle)(o); err != nil {
				return err
			}
			if got := metaCondition(o, v1alpha1.ConditionDependenciesReady).Message; got != msg {
				return fmt.Errorf("message %q, want %q", got, msg)
			}
			return nil
		})
	}
	consistently(t, 500*time.Millisecond, func() error {
		for _, n := range []string{"x", "y"} {
			if c := e.observedCount(t, ns, n); c != 0 {
				return fmt.Errorf("%s published %d ResourceObserved in a cycle", n, c)
			}
		}
		return nil
	})
}

// testSuspend: a suspended resource gets the finalizer and Suspended, its generation is
// observed (status.observedGeneration, kstatus) and published once with spec.suspend true (so
// drift and viggy stop; synth starts no pass); resuming publishes the next generation with
// spec.suspend false and starts a pass.
func (e *env) testSuspend(t *testing.T) {
	ns := e.kube.Namespace(t)
	e.startWatcher(t, ns, "suspend")
	e.create(t, newArch(ns, "s", func(s *v1alpha1.LavaArchitectureSpec) { s.Suspend = true }))
	e.waitStatus(t, ns, "s", func(o *v1alpha1.LavaArchitecture) error {
		if !controllerutil.ContainsFinalizer(o, v1alpha1.Finalizer) {
			return fmt.Errorf("no finalizer")
		}
		if o.Status.ObservedGeneration != o.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", o.Status.ObservedGeneration, o.Generation)
		}
		return all(conditionIs(v1alpha1.ConditionSuspended, metav1.ConditionTrue, v1alpha1.ReasonSuspended),
			conditionIs(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonSuspended))(o)
	})
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "s", bus.EventObserved), 1)
	consistently(t, 500*time.Millisecond, func() error {
		if c := e.observedCount(t, ns, "s"); c != 1 {
			return fmt.Errorf("suspended resource published %d ResourceObserved, want 1", c)
		}
		return nil
	})
	if ro := e.observed(t, ns, "s"); !ro[0].GetSpec().GetSuspend() || ro[0].GetEnvelope().GetGeneration() != 1 {
		t.Fatalf("suspended generation published as %v", ro[0])
	}
	if o := e.get(t, ns, "s"); o.Status.Phase != "" && o.Status.Phase != v1alpha1.PhasePending {
		t.Errorf("suspended at creation: phase %s", o.Status.Phase)
	}
	e.patch(t, ns, "s", func(o *v1alpha1.LavaArchitecture) { o.Spec.Suspend = false })
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "s", bus.EventObserved), 2)
	if ro := e.observed(t, ns, "s"); ro[1].GetSpec().GetSuspend() || ro[1].GetEnvelope().GetGeneration() != 2 {
		t.Fatalf("resumed generation published as %v", ro[1])
	}
	e.waitStatus(t, ns, "s", all(phaseIs(v1alpha1.PhasePending, 2), conditionIs(v1alpha1.ConditionSuspended, metav1.ConditionFalse, v1alpha1.ReasonResumed),
		conditionIs(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing)))
}

// testPolicy: the referenced RemediationPolicy travels in ResourceObserved; editing it
// re-publishes (trigger policy:<resourceVersion>); the reconcile-requested-at annotation
// forces a pass once per value; a missing policy holds the resource until it exists.
func (e *env) testPolicy(t *testing.T) {
	ns := e.kube.Namespace(t)
	e.startWatcher(t, ns, "policy")
	pol := &v1alpha1.RemediationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "careful"},
		Spec: v1alpha1.RemediationPolicySpec{DriftRemediation: v1alpha1.DriftRemediation{
			Cosmetic: v1alpha1.RemediationNoOp, Functional: v1alpha1.RemediationAlert, Critical: v1alpha1.RemediationRequireApproval}}}
	e.create(t, pol)
	e.create(t, newArch(ns, "p", func(s *v1alpha1.LavaArchitectureSpec) {
		s.RemediationPolicyRef = &v1alpha1.LocalObjectReference{Name: "careful"}
	}))
	subject := bus.ResourceSubject(ns, "p", bus.EventObserved)
	e.waitCount(t, bus.StreamResources, subject, 1)
	ro := e.observed(t, ns, "p")[0]
	want := &lavav1.RemediationPolicy{Cosmetic: lavav1.RemediationAction_REMEDIATION_ACTION_NO_OP,
		Functional: lavav1.RemediationAction_REMEDIATION_ACTION_ALERT, Critical: lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL,
		Origin: lavav1.PolicyOrigin_POLICY_ORIGIN_REFERENCE, PolicyName: "careful", PolicyResourceVersion: pol.ResourceVersion}
	if diff := cmp.Diff(want, ro.GetRemediation(), protocmp.Transform()); diff != "" {
		t.Errorf("effective policy (-want +got):\n%s", diff)
	}
	if got := ro.GetEnvelope().GetTrigger(); got != "policy:"+pol.ResourceVersion {
		t.Errorf("trigger %q", got)
	}

	// Editing the policy re-publishes with the new resourceVersion.
	pol.Spec.Functional = v1alpha1.RemediationAutoCorrect
	if err := e.kube.Client.Update(t.Context(), pol); err != nil {
		t.Fatal(err)
	}
	e.waitCount(t, bus.StreamResources, subject, 2)
	ro = e.observed(t, ns, "p")[1]
	if ro.GetRemediation().GetFunctional() != lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT ||
		ro.GetRemediation().GetPolicyResourceVersion() != pol.ResourceVersion ||
		ro.GetEnvelope().GetTrigger() != "policy:"+pol.ResourceVersion || ro.GetEnvelope().GetGeneration() != 1 {
		t.Errorf("re-published ResourceObserved: remediation %v envelope %v", ro.GetRemediation(), ro.GetEnvelope())
	}

	// The annotation forces one pass per value; other metadata changes force nothing.
	e.patch(t, ns, "p", func(o *v1alpha1.LavaArchitecture) {
		o.Annotations = map[string]string{v1alpha1.ReconcileRequestedAnnotation: "2026-11-30T00:00:00Z"}
	})
	e.waitCount(t, bus.StreamResources, subject, 3)
	if got := e.observed(t, ns, "p")[2].GetEnvelope().GetTrigger(); got != "reconcile:2026-11-30T00:00:00Z;policy:"+pol.ResourceVersion {
		t.Errorf("forced trigger %q", got)
	}
	e.patch(t, ns, "p", func(o *v1alpha1.LavaArchitecture) { o.Labels = map[string]string{"x": "y"} })
	consistently(t, 500*time.Millisecond, func() error {
		if n := e.observedCount(t, ns, "p"); n != 3 {
			return fmt.Errorf("%d ResourceObserved after a label change, want 3", n)
		}
		return nil
	})

	// A missing policy holds the resource until it is created.
	e.create(t, newArch(ns, "q", func(s *v1alpha1.LavaArchitectureSpec) {
		s.RemediationPolicyRef = &v1alpha1.LocalObjectReference{Name: "later"}
	}))
	eventually(t, 10*time.Second, func() error {
		if !slices.Contains(e.eventReasons(t, ns, "q"), "RemediationPolicyNotFound") {
			return fmt.Errorf("no RemediationPolicyNotFound event")
		}
		return nil
	})
	if n := e.observedCount(t, ns, "q"); n != 0 {
		t.Errorf("%d ResourceObserved without its policy", n)
	}
	e.create(t, &v1alpha1.RemediationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"}})
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "q", bus.EventObserved), 1)
}

// testLeaderElection: a second replica is elected only when the first one stops; until then it
// neither reconciles nor folds phase events, and afterwards it does both.
func (e *env) testLeaderElection(t *testing.T) {
	ns := e.kube.Namespace(t)
	leader := e.startWatcher(t, ns, "leader")
	standby := e.startReplica(t, ns, "standby")
	e.create(t, newArch(ns, "l", nil))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "l", bus.EventObserved), 1)
	obj := e.get(t, ns, "l")
	s := e.stageFor(obj, e.observed(t, ns, "l")[0])
	s.synthesized(t)
	e.waitStatus(t, ns, "l", phaseIs(v1alpha1.PhaseSynthesized, 1))
	select {
	case <-standby.elected:
		t.Fatal("two replicas elected at once")
	default:
	}
	if n := standby.reconciles(t) + standby.metric(t, "lava_watcher_phase_events_total", nil); n != 0 {
		t.Errorf("the standby reconciled or consumed %v times", n)
	}

	leader.stop()
	select {
	case <-standby.elected:
	case <-time.After(60 * time.Second):
		t.Fatal("the standby was not elected after the leader stopped")
	}
	s.planned(t)
	e.waitStatus(t, ns, "l", phaseIs(v1alpha1.PhasePlanned, 1))
	// The counter moves after the fold's status write returns (see the finalizer count above).
	eventually(t, 10*time.Second, func() error {
		if n := standby.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "folded"}); n != 1 {
			return fmt.Errorf("the new leader folded %v events, want 1", n)
		}
		return nil
	})
	if n := e.observedCount(t, ns, "l"); n != 1 {
		t.Errorf("%d ResourceObserved after the failover, want 1", n)
	}
}

// testOutOfOrderPastDrop: a Planned whose Synthesized comes only after the Planned's third
// delivery (as when a watcher died holding the Synthesized unacknowledged: the server
// redelivers it after the consumer's ack wait) is still naked, not dropped, and folded once
// the Synthesized is; a Synthesized that comes back after that (a redelivery the status has
// passed) is dropped at once. Dropping on the third delivery left an object Planned for good
// (TestChaos_killEveryServiceTwiceAndRestartNATS in test/e2e). The consumer's ack wait and
// BackOff are cut to 2s, 4s, 8s, 16s so the third delivery comes within seconds.
func (e *env) testOutOfOrderPastDrop(t *testing.T) {
	ns := e.kube.Namespace(t)
	w := e.startWatcher(t, ns, "order-late")
	c, err := e.js.Consumer(t.Context(), bus.StreamPhases, "watcher-"+ns)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	cfg.AckWait, cfg.BackOff = 2*time.Second, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
	if _, err := e.js.UpdateConsumer(t.Context(), bus.StreamPhases, cfg); err != nil {
		t.Fatal(err)
	}
	e.create(t, newArch(ns, "o", nil))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "o", bus.EventObserved), 1)
	e.waitStatus(t, ns, "o", phaseIs(v1alpha1.PhasePending, 1))
	obj := e.get(t, ns, "o")
	ro := e.observed(t, ns, "o")[0]
	early := e.stageFor(obj, ro)
	early.planned(t)
	illegal := func() float64 {
		return w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "illegal"})
	}
	eventually(t, 60*time.Second, func() error {
		if n := illegal(); n != 0 {
			t.Fatalf("the early Planned was dropped as illegal (%v events) before its Synthesized came", n)
		}
		if n := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "error"}); n < 3 {
			return fmt.Errorf("the early Planned was naked %v times, want 3", n)
		}
		return nil
	})
	synth := e.stageFor(obj, ro)
	synth.synthesized(t)
	e.waitStatus(t, ns, "o", all(phaseIs(v1alpha1.PhasePlanned, 1), conditionIs(v1alpha1.ConditionSynthesized, metav1.ConditionTrue, "")))
	if n := illegal(); n != 0 {
		t.Errorf("%v events dropped as illegal, want 0", n)
	}
	// A Synthesized the status has passed (published again under a new id, as a producer's
	// retry would) is dropped on its first delivery, not retried.
	again := e.stageFor(obj, ro)
	again.prev = "a-retry"
	again.synthesized(t)
	eventually(t, 10*time.Second, func() error {
		if n := illegal(); n != 1 {
			return fmt.Errorf("%v events dropped as illegal, want 1", n)
		}
		return nil
	})
	if n := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "error"}); n != 3 {
		t.Errorf("%v naks, want the 3 of the early Planned (the passed Synthesized is not retried)", n)
	}
}

// testReverseBurst: a generation's Applied, Planned and Synthesized published in that order
// reach concurrent handlers at once; the two ahead of their predecessors wait for it in the
// watcher (aheadWait) instead of being naked, which the server would redeliver only after its
// BackOff (32 s from a message's second nak; the outputs-between-objects subtest once timed out
// on that).
func (e *env) testReverseBurst(t *testing.T) {
	ns := e.kube.Namespace(t)
	w := e.startWatcher(t, ns, "order-burst")
	e.create(t, newArch(ns, "o", nil))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "o", bus.EventObserved), 1)
	e.waitStatus(t, ns, "o", phaseIs(v1alpha1.PhasePending, 1))
	s := e.stageFor(e.get(t, ns, "o"), e.observed(t, ns, "o")[0])
	var held []bus.Event
	s.held = &held
	s.synthesized(t)
	s.planned(t)
	s.applied(t)
	for _, ev := range slices.Backward(held) {
		if _, err := e.pub.PublishEvent(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	e.waitStatus(t, ns, "o", phaseIs(v1alpha1.PhaseApplied, 1))
	t.Logf("Applied %v after the reversed burst", time.Since(start).Round(time.Millisecond))
	if n := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "error"}); n != 0 {
		t.Errorf("%v phase events naked, want 0 (the early ones wait for their predecessors in the watcher)", n)
	}
	if n := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "illegal"}); n != 0 {
		t.Errorf("%v phase events dropped as illegal, want 0", n)
	}
}

// testOutOfOrder: Planned published before Synthesized is naked (an illegal transition that
// may only have overtaken its predecessor) and folded after it.
func (e *env) testOutOfOrder(t *testing.T) {
	ns := e.kube.Namespace(t)
	w := e.startWatcher(t, ns, "order")
	e.create(t, newArch(ns, "o", nil))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "o", bus.EventObserved), 1)
	e.waitStatus(t, ns, "o", phaseIs(v1alpha1.PhasePending, 1))
	obj := e.get(t, ns, "o")
	ro := e.observed(t, ns, "o")[0]
	early := e.stageFor(obj, ro)
	early.planned(t)
	eventually(t, 10*time.Second, func() error {
		if n := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "error"}); n < 1 {
			return fmt.Errorf("the early Planned was not naked yet")
		}
		return nil
	})
	e.stageFor(obj, ro).synthesized(t)
	e.waitStatus(t, ns, "o", all(phaseIs(v1alpha1.PhasePlanned, 1), conditionIs(v1alpha1.ConditionSynthesized, metav1.ConditionTrue, "")))
	if n := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "illegal"}); n != 0 {
		t.Errorf("%v events dropped as illegal, want 0", n)
	}

	// A terminal apply failure stalls (kstatus Stalled); a receipt moves status.receipt
	// without a PhaseChanged (ReceiptAppended on its phase subject, docs/events.md).
	s := e.stageFor(obj, ro)
	s.prev = early.prev
	failed := &lavav1.Failed{Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Message: "provider aws not installed", Attempt: 1}
	s.publish(t, bus.ServiceApplier, failed, func(env *lavav1.Envelope) { failed.Envelope = env })
	e.waitStatus(t, ns, "o", all(phaseIs(v1alpha1.PhaseFailed, 1),
		conditionIs(v1alpha1.ConditionStalled, metav1.ConditionTrue, "ApplyFailed"),
		conditionIs(v1alpha1.ConditionApplied, metav1.ConditionFalse, "ApplyFailed"),
		conditionIs(v1alpha1.ConditionReady, metav1.ConditionFalse, "ApplyFailed")))
	pcs := e.phaseChangedCount(t, ns, "o")
	receipt := &lavav1.ReceiptAppended{Sequence: 3, ContentHash: []byte{0xde, 0xad}, Kind: "lava.outcome"}
	receipt.Envelope = &lavav1.Envelope{EventId: eventid.ID(string(obj.UID), 1, eventid.Type(receipt), eventid.CauseTrigger("x")),
		Source: bus.ServiceAttest, Resource: s.ref, Generation: 1, Trigger: eventid.CauseTrigger("x")}
	// The receipt head never causes a write of its own (docs/design/0007-status-writes.md): it
	// rides on the next one.
	folded := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "folded"})
	// The patch that made Failed visible is counted after the API server answered it: take
	// the counter once it holds still.
	patches := w.metric(t, "lava_watcher_status_patches_total", nil)
	eventually(t, 10*time.Second, func() error {
		time.Sleep(300 * time.Millisecond)
		if n := w.metric(t, "lava_watcher_status_patches_total", nil); n != patches {
			patches = n
			return fmt.Errorf("status patches still being counted (%v)", n)
		}
		return nil
	})
	if _, err := e.pub.Publish(t.Context(), bus.PhaseSubject(ns, "o", "receipt_appended"), receipt); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if n := w.metric(t, "lava_watcher_phase_events_total", map[string]string{"result": "folded"}); n <= folded {
			return fmt.Errorf("receipt not folded yet (%v folded)", n)
		}
		return nil
	})
	if got := w.metric(t, "lava_watcher_status_patches_total", nil); got != patches {
		t.Errorf("a receipt alone patched the status: %v patches, want %v", got, patches)
	}
	if r := e.get(t, ns, "o").Status.Receipt; r != nil {
		t.Errorf("status.receipt %+v written on its own", r)
	}
	retry := &lavav1.Failed{Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Message: "provider aws crashed", Attempt: 2}
	s.publish(t, bus.ServiceApplier, retry, func(env *lavav1.Envelope) { retry.Envelope = env })
	e.waitStatus(t, ns, "o", func(o *v1alpha1.LavaArchitecture) error {
		if r := o.Status.Receipt; r == nil || r.Sequence != 3 || r.Hash != "dead" {
			return fmt.Errorf("status.receipt %+v", r)
		}
		return conditionIs(v1alpha1.ConditionReady, metav1.ConditionFalse, "ApplyFailed")(o)
	})
	if n := e.phaseChangedCount(t, ns, "o"); n != pcs+1 {
		t.Errorf("PhaseChanged after a receipt and a failure: %d, want %d (none for the receipt)", n, pcs+1)
	}
}

// testSupersededOutcome: several handlers fold an object's phase events at once, so a Failed
// of a plan can reach the Core after the Applied of its retry (later in LAVA_PHASES). The
// stream's order decides: the older Failed is dropped and the object stays Applied; a Failed
// later in the stream still folds, and an event that does not come from the stream (sequence
// 0) is folded as before.
func (e *env) testSupersededOutcome(t *testing.T) {
	ns := e.kube.Namespace(t)
	e.create(t, newArch(ns, "late", nil))
	obj := e.get(t, ns, "late")
	core, err := watcher.NewCore(watcher.CoreConfig{Store: watcher.NewAPIStore(e.kube.Client, e.kube.Client, nil), Publisher: e.pub})
	if err != nil {
		t.Fatal(err)
	}
	ref := &lavav1.ResourceRef{Namespace: ns, Name: "late", Uid: string(obj.UID)}
	var held []bus.Event
	s := &stage{e: e, ref: ref, gen: obj.Generation, corr: "c", prev: "c", at: time.Now().Truncate(time.Second), held: &held}
	failed := func(msg string) {
		ev := &lavav1.Failed{Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Message: msg, Retryable: true}
		s.publish(t, bus.ServiceApplier, ev, func(env *lavav1.Envelope) { ev.Envelope = env })
	}
	s.synthesized(t)
	s.planned(t)
	failed("first try")
	s.applied(t)
	failed("a later failure")
	handle := func(i int, seq uint64) {
		t.Helper()
		ev := held[i]
		m := &bus.Message{Subject: bus.PhaseSubject(ns, "late", "x"), Event: ev, Envelope: ev.GetEnvelope(), NumDelivered: 1,
			Published: s.at, StreamSeq: seq}
		if err := core.HandlePhase(t.Context(), m); err != nil {
			t.Fatalf("event %d (%T, stream sequence %d): %v", i, ev, seq, err)
		}
	}
	handle(0, 1)
	handle(1, 2)
	handle(3, 4) // the Applied overtook the Failed before it
	handle(2, 3)
	got := e.get(t, ns, "late")
	if err := phaseIs(v1alpha1.PhaseApplied, obj.Generation)(got); err != nil {
		t.Fatalf("after the older Failed: %v (conditions %v)", err, got.Status.Conditions)
	}
	handle(4, 5)
	got = e.get(t, ns, "late")
	if err := phaseIs(v1alpha1.PhaseFailed, obj.Generation)(got); err != nil {
		t.Fatalf("after the later Failed: %v", err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "a later failure") {
		t.Errorf("Ready %+v, want the later failure's message", c)
	}
}

// testDestroyOrder: a producer and its consumer (spec.dependsOn) deleted together are
// destroyed consumer first: the producer's DeletionRequested waits, with DeletionBlocked True
// naming the consumer, until the consumer's Destroyed removed it, then goes out with
// DeletionBlocked False (ConsumersDestroyed). A producer whose consumer stays waits the
// deletion wait, then proceeds and says so (DeletionWaitExpired).
func (e *env) testDestroyOrder(t *testing.T) {
	ns := e.kube.Namespace(t)
	e.startWatcher(t, ns, "destroy-order", func(c *watcher.Config) { c.DeletionWait = 4 * time.Second })
	dependsOn := func(name string) func(*v1alpha1.LavaArchitectureSpec) {
		return func(s *v1alpha1.LavaArchitectureSpec) { s.DependsOn = []v1alpha1.Dependency{{Name: name}} }
	}
	e.create(t, newArch(ns, "producer", nil))
	e.create(t, newArch(ns, "consumer", dependsOn("producer")))
	e.create(t, newArch(ns, "lone", nil))
	e.create(t, newArch(ns, "stays", dependsOn("lone")))
	for _, name := range []string{"producer", "consumer", "lone", "stays"} {
		e.waitStatus(t, ns, name, func(o *v1alpha1.LavaArchitecture) error {
			if !controllerutil.ContainsFinalizer(o, v1alpha1.Finalizer) {
				return fmt.Errorf("no finalizer yet")
			}
			return nil
		})
	}
	deletion := func(name string) string { return bus.ResourceSubject(ns, name, bus.EventDeletionRequested) }
	blocked := func(reason string, status metav1.ConditionStatus, names ...string) func(*v1alpha1.LavaArchitecture) error {
		return func(o *v1alpha1.LavaArchitecture) error {
			c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionDeletionBlocked)
			if c == nil || c.Status != status || c.Reason != reason {
				return fmt.Errorf("DeletionBlocked %+v, want %s %s", c, status, reason)
			}
			for _, n := range names {
				if !strings.Contains(c.Message, ns+"/"+n) {
					return fmt.Errorf("DeletionBlocked message %q does not name %s", c.Message, n)
				}
			}
			return nil
		}
	}

	// Deleted together, the producer first: it waits for the consumer.
	for _, name := range []string{"producer", "consumer"} {
		if err := e.kube.Client.Delete(t.Context(), e.get(t, ns, name)); err != nil {
			t.Fatal(err)
		}
	}
	e.waitCount(t, bus.StreamResources, deletion("consumer"), 1)
	e.waitStatus(t, ns, "producer", blocked(v1alpha1.ReasonConsumersExist, metav1.ConditionTrue, "consumer"))
	if n := e.count(t, bus.StreamResources, deletion("producer")); n != 0 {
		t.Fatalf("%d DeletionRequested for the producer while its consumer exists", n)
	}
	dr := messages(t, e, bus.StreamResources, deletion("consumer"), func() *lavav1.DeletionRequested { return &lavav1.DeletionRequested{} })[0]
	ds := &stage{e: e, ref: dr.GetEnvelope().GetResource(), gen: dr.GetEnvelope().GetGeneration(),
		corr: dr.GetEnvelope().GetEventId(), prev: dr.GetEnvelope().GetEventId(), at: time.Now()}
	ds.destroyed(t)
	e.waitCount(t, bus.StreamResources, deletion("producer"), 1)
	if err := e.kube.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "consumer"}, &v1alpha1.LavaArchitecture{}); !apierrors.IsNotFound(err) {
		t.Errorf("the producer's DeletionRequested went out while the consumer exists (get: %v)", err)
	}
	e.waitStatus(t, ns, "producer", all(blocked(v1alpha1.ReasonConsumersDestroyed, metav1.ConditionFalse),
		func(o *v1alpha1.LavaArchitecture) error { return phaseIs(v1alpha1.PhaseFinalizing, o.Generation)(o) }))

	// A consumer that is not deleted: the producer waits the deletion wait, then proceeds.
	start := time.Now()
	if err := e.kube.Client.Delete(t.Context(), e.get(t, ns, "lone")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, ns, "lone", blocked(v1alpha1.ReasonConsumersExist, metav1.ConditionTrue, "stays"))
	e.waitCount(t, bus.StreamResources, deletion("lone"), 1)
	if waited := time.Since(start); waited < 3*time.Second {
		t.Errorf("DeletionRequested after %s, want the deletion wait (4s, from the deletionTimestamp's second)", waited)
	}
	e.waitStatus(t, ns, "lone", blocked(v1alpha1.ReasonDeletionWaitExpired, metav1.ConditionFalse, "stays"))
}

// testDestroyOrderLockdown: under lockdown (NoCrossNamespaceRefs) an object of another
// namespace whose dependsOn names this one (refused as a dependency) does not hold its
// deletion, and its name never appears in this object's status: a tenant held every deletion
// of another namespace for the deletion wait and had its own object named there (found by a
// ninth trial).
func (e *env) testDestroyOrderLockdown(t *testing.T) {
	victim, attacker := e.kube.Namespace(t), e.kube.Namespace(t)
	e.startWatcher(t, victim, "destroy-lockdown", func(c *watcher.Config) {
		c.NoCrossNamespaceRefs, c.Namespaces, c.DeletionWait = true, []string{victim, attacker}, time.Minute
	})
	e.create(t, newArch(victim, "db", nil))
	e.create(t, newArch(attacker, "x", func(s *v1alpha1.LavaArchitectureSpec) {
		s.DependsOn = []v1alpha1.Dependency{{Name: "db", Namespace: victim}}
	}))
	e.waitStatus(t, attacker, "x", conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonCrossNamespaceRefRefused))
	e.waitStatus(t, victim, "db", func(o *v1alpha1.LavaArchitecture) error {
		if !controllerutil.ContainsFinalizer(o, v1alpha1.Finalizer) {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	if err := e.kube.Client.Delete(t.Context(), e.get(t, victim, "db")); err != nil {
		t.Fatal(err)
	}
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(victim, "db", bus.EventDeletionRequested), 1)
	got := e.get(t, victim, "db")
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDeletionBlocked); c != nil {
		t.Errorf("DeletionBlocked %+v: another namespace's object held the deletion", c)
	}
}

//go:build integration

package watcher_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// testLiveBindings: a change of a bound ConfigMap's or Secret's data publishes a new
// ResourceObserved (its trigger carries the bindings digest, never a Secret value); a
// metadata-only change publishes nothing; a deleted source is DependenciesReady False
// BindingSourceNotFound with nothing published, and its return publishes again.
func (e *env) testLiveBindings(t *testing.T) {
	ns := e.kube.Namespace(t)
	e.startWatcher(t, ns, "bindings", func(c *watcher.Config) {
		c.BindingsKey, c.WatchSecrets = []byte(strings.Repeat("k", 32)), true
	})
	const secretValue = "hunter2-very-secret-value"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "net"}, Data: map[string]string{"cidr": "10.0.0.0/16"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"token": []byte(secretValue)}}
	e.create(t, cm)
	e.create(t, sec)
	e.create(t, newArch(ns, "app", func(s *v1alpha1.LavaArchitectureSpec) {
		s.BindingsFrom = []v1alpha1.BindingsSource{{ConfigMapRef: &v1alpha1.ObjectKeyReference{Name: "net"}},
			{SecretRef: &v1alpha1.ObjectKeyReference{Name: "creds"}}}
	}))
	subject := bus.ResourceSubject(ns, "app", bus.EventObserved)
	e.waitCount(t, bus.StreamResources, subject, 1)
	triggers := func() []string {
		var out []string
		for _, ro := range e.observed(t, ns, "app") {
			out = append(out, ro.GetEnvelope().GetTrigger())
		}
		return out
	}
	first := triggers()[0]
	if !strings.HasPrefix(first, "bindings:") {
		t.Fatalf("first trigger %q, want bindings:<digest>", first)
	}
	mirror := e.observed(t, ns, "app")[0].GetSpec().GetBindingsFrom()
	if len(mirror) != 2 || mirror[0].GetConfigMapRef().GetName() != "net" || mirror[1].GetSecretRef().GetName() != "creds" {
		t.Errorf("bindingsFrom mirror %v", mirror)
	}

	// A label (metadata only) changes nothing rendered: no new ResourceObserved.
	e.update(t, cm, func() { cm.Labels = map[string]string{"team": "net"} })
	consistently(t, time.Second, func() error {
		if n := e.observedCount(t, ns, "app"); n != 1 {
			return fmt.Errorf("%d ResourceObserved after a label change, want 1", n)
		}
		return nil
	})

	// New ConfigMap data: a new ResourceObserved, same generation, new trigger.
	e.update(t, cm, func() { cm.Data["cidr"] = "10.1.0.0/16" })
	e.waitCount(t, bus.StreamResources, subject, 2)
	// New Secret data: another one.
	e.update(t, sec, func() { sec.Data["token"] = []byte(secretValue + "-rotated") })
	e.waitCount(t, bus.StreamResources, subject, 3)
	got := triggers()
	if len(slices.Compact(slices.Clone(got))) != 3 {
		t.Errorf("triggers %q, want three different ones", got)
	}
	for _, ro := range e.observed(t, ns, "app") {
		if ro.GetEnvelope().GetGeneration() != 1 {
			t.Errorf("generation %d, want 1 (the spec did not change)", ro.GetEnvelope().GetGeneration())
		}
		if b, _ := protojson.Marshal(ro); strings.Contains(string(b), "hunter2") {
			t.Errorf("a Secret value is in a ResourceObserved: %s", b)
		}
	}

	// The ConfigMap goes: a clear condition, nothing published.
	if err := e.kube.Client.Delete(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`spec.bindingsFrom[0]: ConfigMap "net" not found in namespace %q`, ns)
	e.waitStatus(t, ns, "app", func(o *v1alpha1.LavaArchitecture) error {
		if err := conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonBindingSourceNotFound)(o); err != nil {
			return err
		}
		if c := metaCondition(o, v1alpha1.ConditionDependenciesReady); c.Message != want {
			return fmt.Errorf("message %q, want %q", c.Message, want)
		}
		return nil
	})
	consistently(t, 500*time.Millisecond, func() error {
		if n := e.observedCount(t, ns, "app"); n != 3 {
			return fmt.Errorf("%d ResourceObserved while a source is missing, want 3", n)
		}
		return nil
	})
	for _, c := range e.get(t, ns, "app").Status.Conditions {
		if strings.Contains(c.Message, "hunter2") {
			t.Errorf("condition %s carries a Secret value", c.Type)
		}
	}

	// It comes back with other data: satisfied again, and a new render.
	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "net"}, Data: map[string]string{"cidr": "10.2.0.0/16"}})
	e.waitStatus(t, ns, "app", conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesSatisfied))
	e.waitCount(t, bus.StreamResources, subject, 4)
}

// testOutputsBinding: bindingsFrom outputsRef implies dependsOn the producer reaching
// Applied; the consumer is observed once the producer is Applied, and again when the
// producer's outputs change.
func (e *env) testOutputsBinding(t *testing.T) {
	ns := e.kube.Namespace(t)
	e.startWatcher(t, ns, "outputs")
	e.create(t, newArch(ns, "network", nil))
	e.create(t, newArch(ns, "app", func(s *v1alpha1.LavaArchitectureSpec) {
		s.BindingsFrom = []v1alpha1.BindingsSource{{OutputsRef: &v1alpha1.ObjectKeyReference{Name: "network", Key: "vpc_id"}}}
	}))
	e.waitStatus(t, ns, "app", conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyNotReady))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "network", bus.EventObserved), 1)
	consistently(t, 500*time.Millisecond, func() error {
		if n := e.observedCount(t, ns, "app"); n != 0 {
			return fmt.Errorf("app published %d ResourceObserved before network is Applied", n)
		}
		return nil
	})

	network := e.get(t, ns, "network")
	s := e.stageFor(network, e.observed(t, ns, "network")[0])
	s.synthesized(t)
	s.planned(t)
	s.applied(t) // outputs vpc_id "vpc-1"
	e.waitStatus(t, ns, "network", phaseIs(v1alpha1.PhaseApplied, 1))
	appSubject := bus.ResourceSubject(ns, "app", bus.EventObserved)
	e.waitCount(t, bus.StreamResources, appSubject, 1)
	ro := e.observed(t, ns, "app")[0]
	if ref := ro.GetSpec().GetBindingsFrom()[0].GetOutputsRef(); ref.GetName() != "network" || ref.GetKey() != "vpc_id" {
		t.Errorf("outputsRef mirror %v", ref)
	}
	if d := ro.GetDependencies().GetDependencies(); len(d) != 1 || d[0].GetTarget().GetName() != "network" ||
		d[0].GetRequiredPhase() != lavav1.Phase_PHASE_APPLIED || !d[0].GetSatisfied() {
		t.Errorf("implied dependency %v", d)
	}

	// The producer's next generation applies with another output: the consumer is observed
	// again once the producer is Applied.
	e.patch(t, ns, "network", func(o *v1alpha1.LavaArchitecture) { o.Spec.Gate = "aws-vpc" })
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "network", bus.EventObserved), 2)
	s = e.stageFor(network, e.observed(t, ns, "network")[1])
	s.synthesized(t)
	s.planned(t)
	ap := &lavav1.Applied{PlanId: strings.Repeat("f", 64), Outputs: map[string]string{"vpc_id": `"vpc-2"`},
		StateSerial: 2, StateLineage: "lineage", Summary: &lavav1.ChangeSummary{Change: 1}, Engine: lavav1.Engine_ENGINE_EMBEDDED}
	s.publish(t, bus.ServiceApplier, ap, func(env *lavav1.Envelope) { ap.Envelope = env })
	e.waitStatus(t, ns, "network", func(o *v1alpha1.LavaArchitecture) error {
		if v := string(o.Status.Outputs["vpc_id"].Raw); v != `"vpc-2"` {
			return fmt.Errorf("network outputs vpc_id %s (phase %s, observedGeneration %d, conditions %v)", v, o.Status.Phase, o.Status.ObservedGeneration, o.Status.Conditions)
		}
		return nil
	})
	e.waitCount(t, bus.StreamResources, appSubject, 2)
}

// testSecretsNotWatched: without WatchSecrets and ReadSecrets the watcher reads no
// Secret: an object binding a missing Secret is observed (synth reports it when it renders), and
// a Secret's change publishes nothing, while its ConfigMap stays live.
func (e *env) testSecretsNotWatched(t *testing.T) {
	ns := e.kube.Namespace(t)
	e.startWatcher(t, ns, "nosecrets")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "net"}, Data: map[string]string{"cidr": "10.0.0.0/16"}}
	e.create(t, cm)
	e.create(t, newArch(ns, "app", func(s *v1alpha1.LavaArchitectureSpec) {
		s.BindingsFrom = []v1alpha1.BindingsSource{{ConfigMapRef: &v1alpha1.ObjectKeyReference{Name: "net"}},
			{SecretRef: &v1alpha1.ObjectKeyReference{Name: "not-yet"}}}
	}))
	subject := bus.ResourceSubject(ns, "app", bus.EventObserved)
	e.waitCount(t, bus.StreamResources, subject, 1)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-yet"}, Data: map[string][]byte{"k": []byte("v")}})
	consistently(t, time.Second, func() error {
		if n := e.observedCount(t, ns, "app"); n != 1 {
			return fmt.Errorf("%d ResourceObserved after a Secret appeared with WatchSecrets off, want 1", n)
		}
		return nil
	})
	e.update(t, cm, func() { cm.Data["cidr"] = "10.9.0.0/16" })
	e.waitCount(t, bus.StreamResources, subject, 2)
}

// testSecretsRead: with ReadSecrets (the service's default) and no Secret watch, a bound Secret
// is read with get as the object's ServiceAccount at every reconcile, and the object is
// reconciled again every SecretRecheck: a rotated Secret publishes a new ResourceObserved (its
// trigger a keyed digest, never the value), an unchanged one publishes nothing, a missing one
// holds the object until it appears; a Secret the ServiceAccount may not read holds nothing and
// its changes stay unseen (synth reports it when it renders).
func (e *env) testSecretsRead(t *testing.T) {
	ns := e.kube.Namespace(t)
	ids, err := identity.NewForConfig(e.kube.Config, e.kube.Scheme, identity.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	e.create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"}})
	e.create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blind"}})
	e.create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-secrets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}})
	e.create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-secrets"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}}})
	run := e.startWatcher(t, ns, "readsecrets", func(c *watcher.Config) {
		c.BindingsKey, c.ReadSecrets, c.Identities, c.SecretRecheck = []byte(strings.Repeat("k", 32)), true, ids, 500*time.Millisecond
	})
	const secretValue = "hunter2-read-not-watched"
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"token": []byte(secretValue)}}
	e.create(t, sec)
	bind := func(sa, secret string) func(*v1alpha1.LavaArchitectureSpec) {
		return func(s *v1alpha1.LavaArchitectureSpec) {
			s.ServiceAccountName = sa
			s.BindingsFrom = []v1alpha1.BindingsSource{{SecretRef: &v1alpha1.ObjectKeyReference{Name: secret}}}
		}
	}
	e.create(t, newArch(ns, "app", bind("reader", "creds")))
	e.create(t, newArch(ns, "blind", bind("blind", "creds")))
	e.create(t, newArch(ns, "later", bind("reader", "not-yet")))
	subject := bus.ResourceSubject(ns, "app", bus.EventObserved)
	e.waitCount(t, bus.StreamResources, subject, 1)
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "blind", bus.EventObserved), 1)
	want := fmt.Sprintf(`spec.bindingsFrom[0]: Secret "not-yet" not found in namespace %q`, ns)
	e.waitStatus(t, ns, "later", func(o *v1alpha1.LavaArchitecture) error {
		if err := conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonBindingSourceNotFound)(o); err != nil {
			return err
		}
		if c := metaCondition(o, v1alpha1.ConditionDependenciesReady); c.Message != want {
			return fmt.Errorf("message %q, want %q", c.Message, want)
		}
		return nil
	})

	// Rechecks of an unchanged Secret publish nothing.
	before := run.reconciles(t)
	consistently(t, 2*time.Second, func() error {
		if n := e.observedCount(t, ns, "app"); n != 1 {
			return fmt.Errorf("%d ResourceObserved for an unchanged Secret, want 1", n)
		}
		return nil
	})
	if after := run.reconciles(t); after-before < 3 {
		t.Errorf("%v reconciles in 2s with a 500ms recheck, want at least 3", after-before)
	}

	// A rotation is seen by the recheck alone (no Secret watch): a new ResourceObserved for
	// app, none for blind, whose ServiceAccount may not read it.
	e.update(t, sec, func() { sec.Data["token"] = []byte(secretValue + "-rotated") })
	e.waitCount(t, bus.StreamResources, subject, 2)
	consistently(t, 1500*time.Millisecond, func() error {
		if n := e.observedCount(t, ns, "blind"); n != 1 {
			return fmt.Errorf("%d ResourceObserved for an object whose ServiceAccount may not read its Secret, want 1", n)
		}
		return nil
	})
	for _, name := range []string{"app", "blind"} {
		for _, ro := range e.observed(t, ns, name) {
			if tr := ro.GetEnvelope().GetTrigger(); !strings.HasPrefix(tr, "bindings:") {
				t.Errorf("%s: trigger %q, want bindings:<digest>", name, tr)
			}
			if b, _ := protojson.Marshal(ro); strings.Contains(string(b), "hunter2") {
				t.Errorf("a Secret value is in a ResourceObserved: %s", b)
			}
		}
	}

	// The missing Secret appears: found by the recheck, the held object is observed.
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-yet"}, Data: map[string][]byte{"k": []byte("v")}})
	e.waitStatus(t, ns, "later", conditionIs(v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesSatisfied))
	e.waitCount(t, bus.StreamResources, bus.ResourceSubject(ns, "later", bus.EventObserved), 1)
}

// update applies mutate to obj (a ConfigMap or Secret) and updates it.
func (e *env) update(t *testing.T, obj client.Object, mutate func()) {
	t.Helper()
	if err := e.kube.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	mutate()
	if err := e.kube.Client.Update(t.Context(), obj); err != nil {
		t.Fatalf("update %s: %v", obj.GetName(), err)
	}
}

// testSecretReadBudget: one namespace's objects, each binding 32 Secrets and rechecked
// often (spec.driftInterval's floor is 30 s; here SecretRecheck is 300 ms), read them through
// the rate limiter of the namespace's impersonated client, 50 requests a second: every
// reconcile worker waited in it, and another namespace's new object waited behind them (over
// 10 s here, minutes at a thousand objects). Now a namespace's reads have a budget, and a
// reconcile over it is put off without holding a worker: the other namespace's object is
// observed at once, and the attacker's own objects are still observed.
func (e *env) testSecretReadBudget(t *testing.T) {
	attacker, victim := e.kube.Namespace(t), e.kube.Namespace(t)
	// The client rate limit Run sets on the watcher's configuration, which each impersonated
	// client gets a limiter of.
	rc := svc.KubeAPI{}.Apply(rest.CopyConfig(e.kube.Config))
	ids, err := identity.NewForConfig(rc, e.kube.Scheme, identity.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	e.create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "reader"}})
	e.create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "read-secrets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}})
	e.create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-secrets"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: attacker, Name: "reader"}}})
	var refs []v1alpha1.BindingsSource
	for i := range 32 {
		name := fmt.Sprintf("s%d", i)
		e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: name}, Data: map[string][]byte{"k": []byte("v")}})
		refs = append(refs, v1alpha1.BindingsSource{SecretRef: &v1alpha1.ObjectKeyReference{Name: name}})
	}
	e.startWatcher(t, attacker, "budget", func(c *watcher.Config) {
		c.Namespaces = []string{attacker, victim}
		c.BindingsKey, c.ReadSecrets, c.Identities, c.SecretRecheck = []byte(strings.Repeat("k", 32)), true, ids, 300*time.Millisecond
	})
	const objects = 48
	for i := range objects {
		e.create(t, newArch(attacker, fmt.Sprintf("a%d", i), func(s *v1alpha1.LavaArchitectureSpec) {
			s.ServiceAccountName, s.BindingsFrom = "reader", refs
		}))
	}
	observedAll := func(within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for i := range objects {
			for e.observedCount(t, attacker, fmt.Sprintf("a%d", i)) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("attacker object a%d not observed in %v", i, within)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	observedAll(2 * time.Minute)
	time.Sleep(2 * time.Second) // the rechecks under way
	start := time.Now()
	e.create(t, newArch(victim, "victim", nil))
	deadline := time.Now().Add(60 * time.Second)
	for e.observedCount(t, victim, "victim") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the other namespace's object was not observed in 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("another namespace's new object was observed after %v while one namespace rechecked %d objects of 32 Secrets, want within 5 s", took, objects)
	} else {
		t.Logf("observed after %v", took)
	}
}

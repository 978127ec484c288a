//go:build integration

package synth_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/service/synth"
)

// TestSynth_impersonation is the attack of docs/security.md "Kubernetes RBAC" on a real API
// server with RBAC: a tenant names in bindingsFrom a Secret its ServiceAccount may not read.
// synth reads as that ServiceAccount (impersonated), so the object is Failed with reason
// RBACForbidden naming the ServiceAccount, and the value is in no event and no log line; a
// Secret the ServiceAccount may read is bound; an object without a ServiceAccount, where the
// admin allows no default, is refused.
func TestSynth_impersonation(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	const forbidden, allowed = "forbidden-value-7a1c93", "allowed-value-55e0b2"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-bindings"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"allowed"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-bindings"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant-bindings"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forbidden"}, Data: map[string][]byte{"v": []byte(forbidden)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allowed"}, Data: map[string][]byte{"v": []byte(allowed)}},
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := identity.NewForConfig(env.Config, env.Scheme, identity.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessConfig(t, func(c *synth.Config) { c.Kube = env.Client; c.Identities = ids })
	// arch creates the LavaArchitecture an event is about and returns its UID: synth reads
	// bindingsFrom only for an object the API server has (confirmObject).
	arch := func(name string) string {
		t.Helper()
		o := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		return string(o.UID)
	}
	spec := func(sa, secret string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{ServiceAccountName: sa,
			Source:       inline(`(deflava-architecture b :inputs ((:v "")) :resources ((terraform-data "d" :input "{v}")))`),
			BindingsFrom: []*lavav1.BindingsFromRef{{Ref: &lavav1.BindingsFromRef_SecretRef{SecretRef: &lavav1.ObjectKeyRef{Name: secret}}}}}
	}

	h.observe(ns, "steal", arch("steal"), 1, spec("tenant", "forbidden"))
	syn, failed := h.outcome(ns, "steal", 1)
	if syn != nil || failed.GetReason() != v1alpha1.ReasonRBACForbidden ||
		!strings.Contains(failed.GetMessage(), "ServiceAccount "+ns+"/tenant may not get Secret \"forbidden\"") {
		t.Errorf("forbidden Secret: Synthesized %v, Failed %s %q; want Failed RBACForbidden naming the ServiceAccount", syn != nil, failed.GetReason(), failed.GetMessage())
	}

	h.observe(ns, "own", arch("own"), 1, spec("tenant", "allowed"))
	if syn, failed := h.outcome(ns, "own", 1); syn == nil {
		t.Errorf("allowed Secret: Failed %s %q, want Synthesized", failed.GetReason(), failed.GetMessage())
	}

	h.observe(ns, "anonymous", arch("anonymous"), 1, spec("", "allowed"))
	if _, failed := h.outcome(ns, "anonymous", 1); failed.GetReason() != v1alpha1.ReasonServiceAccountRequired {
		t.Errorf("no ServiceAccount: Failed %s %q, want ServiceAccountRequired", failed.GetReason(), failed.GetMessage())
	}
	if where := h.leaks(forbidden); len(where) > 0 {
		t.Errorf("the forbidden Secret's value leaked into %v", where)
	}
}

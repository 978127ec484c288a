//go:build integration

package applier_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/service/applier"
)

// TestApplier_outputsSecretNotOwned is the attack of docs/security.md "Kubernetes RBAC": an
// object named so that its outputs Secret name is another Secret's (one not owned at all, one
// owned by another LavaArchitecture) is refused before anything is planned, Failed with reason
// OutputsSecretNotOwned; the Secret keeps its data and nothing is applied.
func TestApplier_outputsSecretNotOwned(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	h := newHarness(t)
	h.startApplier(applierOpts{kube: env.Client})
	owners := map[string][]metav1.OwnerReference{
		"victim": nil,
		"reused": {{APIVersion: "lava.pleme.io/v1alpha1", Kind: "LavaArchitecture", Name: "reused", UID: "uid-of-another-object"}},
	}
	for name, refs := range owners { // not subtests: await reports on the harness's test
		func() {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: applier.OutputsSecretName(name), OwnerReferences: refs},
				Data: map[string][]byte{"app-password": []byte("keep-me")}}
			if err := env.Client.Create(t.Context(), sec); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(t.TempDir(), "applied.txt")
			rendered := `{"resource":{"local_file":{"f":{"filename":"` + marker + `","content":"x"}}},
			  "output":{"token":{"value":"new","sensitive":true}}}`
			h.publishSynthesized(ns, name, 1, rendered, lavav1.Engine_ENGINE_EMBEDDED)
			f := await(h, ns, name, time.Minute, gen[*lavav1.Failed](1))
			if f.GetReason() != v1alpha1.ReasonOutputsSecretNotOwned || f.GetStage() != lavav1.Stage_STAGE_PLAN ||
				!strings.Contains(f.GetMessage(), "is not owned by LavaArchitecture "+name) {
				t.Errorf("%s: Failed %s at %s: %q; want OutputsSecretNotOwned at PLAN", name, f.GetReason(), f.GetStage(), f.GetMessage())
			}
			got := &corev1.Secret{}
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(sec), got); err != nil {
				t.Fatal(err)
			}
			if len(got.Data) != 1 || string(got.Data["app-password"]) != "keep-me" {
				t.Errorf("%s: the Secret was overwritten: %v", name, got.Data)
			}
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Errorf("%s: the architecture was applied: %v", name, err)
			}
		}()
	}
}

// TestApplier_impersonation: the outputs Secret is read and written as the object's
// ServiceAccount (impersonated), so a ServiceAccount without access to Secrets gets Failed
// with reason RBACForbidden before anything is planned (nothing applied), and one with access
// gets its outputs Secret, owned by the object.
func TestApplier_impersonation(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nobody"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "writer"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "outputs"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "outputs"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "outputs"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "writer", Namespace: ns}}},
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := identity.NewForConfig(env.Config, env.Scheme, identity.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.startApplier(applierOpts{kube: env.Client, identities: ids})
	dir := t.TempDir()
	spec := func(name, sa string) *lavav1.ArchitectureSpec { // synth renders it
		return &lavav1.ArchitectureSpec{ServiceAccountName: sa, Engine: lavav1.Engine_ENGINE_EMBEDDED, ApprovePlan: "auto",
			Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: `(deflava-architecture x
  :resources ((local-file "f" :filename "` + filepath.Join(dir, name) + `" :content "x"))
  :outputs (:token (sensitive "tok-` + name + `")))`}}}
	}

	h.observe(ns, "denied", 1, spec("denied", "nobody"))
	f := await(h, ns, "denied", time.Minute, gen[*lavav1.Failed](1))
	if f.GetReason() != v1alpha1.ReasonRBACForbidden || f.GetStage() != lavav1.Stage_STAGE_PLAN ||
		!strings.Contains(f.GetMessage(), "ServiceAccount "+ns+"/nobody may not get Secret "+ns+"/denied-lava-outputs") {
		t.Errorf("Failed %s at %s: %q; want RBACForbidden at PLAN naming the ServiceAccount", f.GetReason(), f.GetStage(), f.GetMessage())
	}
	if _, err := os.Stat(filepath.Join(dir, "denied")); !os.IsNotExist(err) {
		t.Errorf("the denied object was applied: %v", err)
	}

	h.observe(ns, "allowed", 1, spec("allowed", "writer"))
	applied := await(h, ns, "allowed", time.Minute, gen[*lavav1.Applied](1))
	sec := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: applied.GetOutputsSecret()}, sec); err != nil {
		t.Fatalf("outputs Secret %q: %v", applied.GetOutputsSecret(), err)
	}
	if string(sec.Data["token"]) != "tok-allowed" || len(sec.OwnerReferences) != 1 {
		t.Errorf("outputs Secret data %v owners %v", sec.Data, sec.OwnerReferences)
	}
}

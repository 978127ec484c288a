//go:build integration

package applier_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
)

// TestApplier_providerCredentials is the attack of docs/security.md "Engines" through the
// applier on a real kube-apiserver with RBAC: an object whose spec.providerEnvFrom names a
// Secret its ServiceAccount may not read fails before planning (RBACForbidden, the message
// naming RBAC, the ServiceAccount and the Secret) and the Secret's value is in no event and no
// log; a Secret that does not exist is a retryable PlanFailed naming it; an object whose
// ServiceAccount may read its Secret is applied by providers that run with
// that Secret's variable, its ServiceAccount's token (TokenRequest, the configured audience;
// TokenReview says whose) and AWS_ROLE_ARN from its annotation, and without the applier's own
// canary variable.
func TestApplier_providerCredentials(t *testing.T) {
	const canary = "applier-own-canary-b07d"
	t.Setenv("LAVA_TEST_APPLIER_CANARY", canary)
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	const denied, region = "never-read-value-0f3a", "provider-region-6b2e"
	const roleARN = "arn:aws:iam::111122223333:role/tenant"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant",
			Annotations: map[string]string{identity.AnnotationAWSRoleARN: roleARN}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-env"}, Data: map[string][]byte{"CLOUD_REGION": []byte(region)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-yours"}, Data: map[string][]byte{"CLOUD_REGION": []byte(denied)}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""},
			Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"provider-env", "nope", "ok-lava-outputs", "denied-lava-outputs", "missing-lava-outputs"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}},
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := identity.NewForConfig(env.Config, env.Scheme, identity.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const audience = "sts.amazonaws.com"
	h := newHarness(t)
	h.startApplier(applierOpts{kube: env.Client, identities: ids,
		credentials: &identity.Credentials{Tokens: cs, CredentialOptions: identity.CredentialOptions{Audience: audience}}})
	dir := t.TempDir()
	spec := func(name, secret string) *lavav1.ArchitectureSpec { // synth renders it
		return &lavav1.ArchitectureSpec{ServiceAccountName: "tenant", Engine: lavav1.Engine_ENGINE_EMBEDDED, ApprovePlan: "auto",
			ProviderEnvFrom: []*lavav1.ObjectKeyRef{{Name: secret}},
			Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: `(deflava-architecture x
  :resources ((local-file "f" :filename "` + filepath.Join(dir, name) + `" :content "x")))`}}}
	}

	h.observe(ns, "denied", 1, spec("denied", "not-yours"))
	f := await(h, ns, "denied", time.Minute, gen[*lavav1.Failed](1))
	if f.GetReason() != v1alpha1.ReasonRBACForbidden || f.GetStage() != lavav1.Stage_STAGE_PLAN ||
		!strings.Contains(f.GetMessage(), "RBAC: ServiceAccount "+ns+`/tenant may not get secrets "not-yours"`) {
		t.Errorf("Failed %s at %s: %q; want RBACForbidden at PLAN naming RBAC, the ServiceAccount and the Secret", f.GetReason(), f.GetStage(), f.GetMessage())
	}
	if _, err := os.Stat(filepath.Join(dir, "denied")); !os.IsNotExist(err) {
		t.Errorf("the denied object was applied: %v", err)
	}

	// A Secret that does not exist (and that the ServiceAccount may read): Failed, retryable,
	// naming it; nothing applied.
	h.observe(ns, "missing", 1, spec("missing", "nope"))
	f = await(h, ns, "missing", time.Minute, gen[*lavav1.Failed](1))
	if f.GetReason() != v1alpha1.ReasonPlanFailed || !f.GetRetryable() || !strings.Contains(f.GetMessage(), "secret "+ns+"/nope does not exist") {
		t.Errorf("missing Secret: Failed %s retryable=%v: %q", f.GetReason(), f.GetRetryable(), f.GetMessage())
	}

	h.observe(ns, "ok", 1, spec("ok", "provider-env"))
	await(h, ns, "ok", time.Minute, gen[*lavav1.Applied](1))
	if where := h.leaks(denied); len(where) > 0 {
		t.Errorf("the unreadable Secret's value appears in %v", where)
	}
	if where := h.leaks(region); len(where) > 0 {
		t.Errorf("the provider Secret's value appears in %v", where)
	}
	// The warm provider process the apply used: a child of this process with the object's
	// variable.
	var provEnv map[string]string
	for _, pid := range proctest.Children(t) {
		e, _ := proctest.Environ(pid)
		if e["CLOUD_REGION"] == region {
			provEnv = e
		}
	}
	if provEnv == nil {
		t.Fatal("no provider process runs with the object's providerEnvFrom variable")
	}
	for k, v := range provEnv {
		if strings.Contains(v, canary) {
			t.Errorf("the applier's own %s reached the provider", k)
		}
	}
	if provEnv["AWS_ROLE_ARN"] != roleARN {
		t.Errorf("provider AWS_ROLE_ARN %q, want %q", provEnv["AWS_ROLE_ARN"], roleARN)
	}
	token, err := os.ReadFile(provEnv["AWS_WEB_IDENTITY_TOKEN_FILE"])
	if err != nil {
		t.Fatalf("the provider's token file: %v", err)
	}
	rev, err := cs.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: string(token), Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rev.Status.Authenticated || rev.Status.User.Username != identity.Username(ns, "tenant") {
		t.Errorf("TokenReview of the provider's token: %+v, want %s", rev.Status, identity.Username(ns, "tenant"))
	}
	if where := h.leaks(string(token)); len(where) > 0 {
		t.Errorf("the provider token appears in %v", where)
	}
}

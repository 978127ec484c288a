//go:build integration

package drift_test

import (
	"encoding/json"
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

	"github.com/lava-operator/lava/internal/engine/engines"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
	"github.com/lava-operator/lava/internal/service/drift"
)

// TestDrift_providerCredentials (docs/security.md, "Engines"): a drift scan's providers run
// with the resource's own credentials, built as the applier builds them
// (identity.Resolver.For): its ServiceAccount's token (TokenReview names that ServiceAccount)
// with AWS_ROLE_ARN from its annotation, and the variables of spec.providerEnvFrom, read as
// that ServiceAccount; drift's own environment never reaches them. A resource naming a Secret
// its ServiceAccount may not read is not scanned, and the Secret's value appears nowhere.
func TestDrift_providerCredentials(t *testing.T) {
	const canary = "drift-own-canary-3e9a"
	t.Setenv("LAVA_TEST_DRIFT_CANARY", canary)
	t.Setenv("AWS_ACCESS_KEY_ID", canary)
	kube := kubetest.Start(t)
	ctx := t.Context()
	ns := kube.Namespace(t)
	const denied, region = "never-read-value-91c4", "provider-region-5d27"
	const roleARN = "arn:aws:iam::111122223333:role/tenant-drift"
	const audience = "sts.amazonaws.com"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant",
			Annotations: map[string]string{identity.AnnotationAWSRoleARN: roleARN}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-env"}, Data: map[string][]byte{"CLOUD_REGION": []byte(region)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-yours"}, Data: map[string][]byte{"CLOUD_REGION": []byte(denied)}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""},
			Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"provider-env"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}},
	} {
		if err := kube.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := identity.NewForConfig(kube.Config, kube.Scheme, identity.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	tools := tofutest.Tofu(t)
	w := newWorldWith(t, engines.Options{ProviderDir: tools.Mirror, WorkDir: t.TempDir()})
	s, err := drift.New(ctx, drift.Config{JS: w.js, Engines: w.engines, Holder: "replica-creds", Tick: 20 * time.Millisecond,
		MinInterval: time.Millisecond, RetryDelay: time.Hour, Kube: kube.Client, Identities: ids,
		Credentials: &identity.Credentials{Tokens: cs, CredentialOptions: identity.CredentialOptions{Audience: audience}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"ok", "denied"} {
		secret := map[string]string{"ok": "provider-env", "denied": "not-yours"}[name]
		doc, _ := json.Marshal(map[string]any{"resource": map[string]any{"local_file": map[string]any{"f": map[string]any{
			"filename": filepath.Join(dir, name), "content": "x"}}}})
		applied := w.apply(ns, name, doc)
		obs := observed(ns, name, 200*time.Millisecond)
		obs.Spec.ServiceAccountName = "tenant"
		obs.Spec.ProviderEnvFrom = []*lavav1.ObjectKeyRef{{Name: secret}}
		handle(t, s, obs)
		handle(t, s, applied)
	}
	for _, name := range []string{"ok", "denied"} {
		e := w.entry(ns, name)
		if e.ServiceAccountName != "tenant" || len(e.ProviderEnvFrom) != 1 {
			t.Fatalf("schedule entry %s: serviceAccountName %q, providerEnvFrom %v", name, e.ServiceAccountName, e.ProviderEnvFrom)
		}
	}
	run(t, s)
	waitFor(t, 2*time.Minute, "a scan of ok", func() bool { return len(w.scans(ns, "ok")) > 0 })
	waitFor(t, time.Minute, "a failed scan of denied", func() bool { return w.entry(ns, "denied").Failures > 0 })
	if n := len(w.scans(ns, "denied")); n != 0 {
		t.Errorf("%d DriftScanned for the resource whose providerEnvFrom its ServiceAccount may not read, want 0", n)
	}

	// The warm provider process the scan used: a child of this process with the resource's
	// role (the apply before ran without credentials).
	var provEnv map[string]string
	for _, pid := range proctest.Children(t) {
		if e, _ := proctest.Environ(pid); e["AWS_ROLE_ARN"] == roleARN {
			provEnv = e
		}
	}
	if provEnv == nil {
		t.Fatal("no provider process runs with the resource's AWS_ROLE_ARN")
	}
	for k, v := range provEnv {
		if strings.Contains(v, canary) || k == "LAVA_TEST_DRIFT_CANARY" {
			t.Errorf("drift's own %s reached the provider", k)
		}
	}
	if provEnv["CLOUD_REGION"] != region {
		t.Errorf("provider CLOUD_REGION %q, want the providerEnvFrom Secret's value", provEnv["CLOUD_REGION"])
	}
	token, err := os.ReadFile(provEnv["AWS_WEB_IDENTITY_TOKEN_FILE"])
	if err != nil {
		t.Fatalf("the provider's token file: %v", err)
	}
	rev, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: string(token), Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rev.Status.Authenticated || rev.Status.User.Username != identity.Username(ns, "tenant") {
		t.Errorf("TokenReview of the provider's token: %+v, want %s", rev.Status, identity.Username(ns, "tenant"))
	}
	for _, v := range []string{denied, region, string(token)} {
		for _, name := range []string{"ok", "denied"} {
			for _, ev := range w.scans(ns, name) {
				if b, _ := json.Marshal(ev); strings.Contains(string(b), v) {
					t.Errorf("a DriftScanned of %s holds a credential value", name)
				}
			}
			if b, _ := json.Marshal(w.entry(ns, name)); strings.Contains(string(b), v) {
				t.Errorf("the schedule entry of %s holds a credential value", name)
			}
		}
	}
}

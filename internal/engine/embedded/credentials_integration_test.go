//go:build integration

package embedded

import (
	"encoding/json"
	"errors"
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
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/platform/testutil/proctest"
)

// TestEngine_providerCredentials is the attack of docs/security.md "Engines" on provider
// credentials, on a real kube-apiserver: an object's providers get its ServiceAccount's
// identity and nothing of the applier's. The credentials are built as the applier builds them
// (identity.Credentials.For: TokenRequest with the admin's audience, the ServiceAccount's
// workload-identity annotations, spec.providerEnvFrom read as the impersonated ServiceAccount).
// The running testkit provider's /proc environment then holds AWS_ROLE_ARN and
// AWS_WEB_IDENTITY_TOKEN_FILE (a 0600 file in its private directory whose token the API server's
// TokenReview authenticates as the object's ServiceAccount with the audience), the GCP
// external_account file and the Azure variables pointing at the same token, and the Secret's
// variable, but not the applier's own canary variable. Another object's credentials never get
// that process. A Secret the ServiceAccount may not read fails with an RBAC error that names
// it and carries no value.
func TestEngine_providerCredentials(t *testing.T) {
	const canary = "applier-own-canary-8c1e"
	t.Setenv("LAVA_TEST_APPLIER_CANARY", canary)
	t.Setenv("AWS_ACCESS_KEY_ID", canary)
	kube := kubetest.Start(t)
	ctx := t.Context()
	ns := kube.Namespace(t)
	const audience = "sts.amazonaws.com"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant", Annotations: map[string]string{
		identity.AnnotationAWSRoleARN:    "arn:aws:iam::111122223333:role/tenant",
		identity.AnnotationGCPAccount:    "tenant@project.iam.gserviceaccount.com",
		identity.AnnotationAzureClientID: "00000000-0000-0000-0000-00000000c1d0",
	}}}
	const envValue = "provider-env-value-41af"
	objs := []client.Object{sa,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-env"}, Data: map[string][]byte{"CLOUD_REGION": []byte(envValue)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-yours"}, Data: map[string][]byte{"OTHER": []byte("never-read-7d3b")}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-env"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"provider-env"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-env"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "provider-env"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}},
	}
	for _, o := range objs {
		if err := kube.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := identity.NewForConfig(kube.Config, clientgoscheme.Scheme, identity.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	tenant, who, err := ids.For(ns, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	cr := &identity.Credentials{Tokens: cs, CredentialOptions: identity.CredentialOptions{Audience: audience, Expiry: 10 * time.Minute,
		GCPAudience: "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k", AzureTenantID: "tenant-id-1"}}

	// A Secret the ServiceAccount may not read: RBAC, named, no value.
	_, err = cr.For(ctx, tenant, who, ns, "tenant", []identity.SecretKeyRef{{Name: "not-yours"}})
	if !errors.Is(err, identity.ErrProviderEnvForbidden) || !strings.Contains(err.Error(), "RBAC") ||
		!strings.Contains(err.Error(), `"not-yours"`) || strings.Contains(err.Error(), "never-read-7d3b") {
		t.Fatalf("unreadable Secret: %v, want an RBAC refusal naming it", err)
	}

	creds, err := cr.For(ctx, tenant, who, ns, "tenant", []identity.SecretKeyRef{{Name: "provider-env"}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{"k": map[string]any{
		"filename": filepath.Join(dir, "k.txt"), "content": "kit"}}}})
	tgt := e.target(doc)
	tgt.Credentials = creds
	if _, err := e.eng.Plan(ctx, engine.PlanRequest{Target: tgt}); err != nil {
		t.Fatal(err)
	}
	procs := warm(e)
	if len(procs) != 1 {
		t.Fatalf("%d warm provider processes, want 1", len(procs))
	}
	pr := procs[0]
	env, err := proctest.Environ(pr.pid())
	if err != nil {
		t.Fatalf("read the provider's environment: %v", err)
	}
	for k, v := range env {
		if strings.Contains(v, canary) || k == "LAVA_TEST_APPLIER_CANARY" || k == "AWS_ACCESS_KEY_ID" {
			t.Errorf("the applier's own %s reached the provider", k)
		}
	}
	if env["AWS_ROLE_ARN"] != sa.Annotations[identity.AnnotationAWSRoleARN] || env["CLOUD_REGION"] != envValue ||
		env["AZURE_CLIENT_ID"] != sa.Annotations[identity.AnnotationAzureClientID] || env["AZURE_TENANT_ID"] != "tenant-id-1" {
		t.Errorf("provider environment %v lacks the object's variables", env)
	}
	tokenFile := env["AWS_WEB_IDENTITY_TOKEN_FILE"]
	if filepath.Dir(tokenFile) != pr.dir || env["AZURE_FEDERATED_TOKEN_FILE"] != tokenFile {
		t.Fatalf("token file %q (azure %q), want one in the provider's private directory %q", tokenFile, env["AZURE_FEDERATED_TOKEN_FILE"], pr.dir)
	}
	for _, f := range []string{tokenFile, env["GOOGLE_APPLICATION_CREDENTIALS"], pr.dir} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := os.FileMode(0o600); st.IsDir() {
			if st.Mode().Perm() != 0o700 {
				t.Errorf("%s has mode %v, want 0700", f, st.Mode().Perm())
			}
		} else if st.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", f, st.Mode().Perm(), want)
		}
	}
	var gcp struct {
		Type, Audience string
		Impersonation  string                `json:"service_account_impersonation_url"`
		Source         struct{ File string } `json:"credential_source"`
	}
	b, err := os.ReadFile(env["GOOGLE_APPLICATION_CREDENTIALS"])
	if err != nil || json.Unmarshal(b, &gcp) != nil {
		t.Fatalf("GCP credentials file: %v %s", err, b)
	}
	if gcp.Type != "external_account" || gcp.Source.File != tokenFile || gcp.Audience != cr.GCPAudience ||
		!strings.Contains(gcp.Impersonation, sa.Annotations[identity.AnnotationGCPAccount]) {
		t.Errorf("GCP credentials %+v", gcp)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: string(token), Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rev.Status.Authenticated || rev.Status.User.Username != identity.Username(ns, "tenant") {
		t.Errorf("TokenReview of the provider's token: %+v, want %s", rev.Status, identity.Username(ns, "tenant"))
	}

	// Another object's credentials get a process of their own.
	other := *creds
	other.Identity, other.Env = "ServiceAccount "+ns+"/other", map[string]string{"CLOUD_REGION": "elsewhere"}
	tgt2 := e.target(doc)
	tgt2.Key.Name = "other"
	tgt2.Credentials = &other
	if _, err := e.eng.Plan(ctx, engine.PlanRequest{Target: tgt2}); err != nil {
		t.Fatal(err)
	}
	if after := warm(e); len(after) != 2 {
		t.Errorf("%d warm provider processes after a second identity, want 2 (never one shared across credentials)", len(after))
	}
}

// warm lists the pool's running provider processes.
func warm(e *env) []*process {
	p := e.eng.Pool()
	p.mu.Lock()
	defer p.mu.Unlock()
	var procs []*process
	for _, en := range p.entries {
		if en.proc != nil {
			procs = append(procs, en.proc)
		}
	}
	return procs
}

//go:build integration

package applier_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/pipeline/synthesis"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/rpcauth"
	"github.com/lava-operator/lava/internal/platform/testutil/conntest"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/applier"
)

// TestPlanService_preview serves PlanService behind TokenReview and SubjectAccessReview on a
// real kube-apiserver, on an applier of the real pipeline, for an object that binds a Secret
// its ServiceAccount may read: no token is Unauthenticated; a caller without create on
// lavaarchitectures in the namespace (get only, or create elsewhere) is PermissionDenied; an
// allowed caller gets a plan of both engines whose id is the one the pipeline applies when
// spec.approvePlan names it (the render's artifact keyed with synth's bindings key, as synth
// keys it), and the Secret's value is nowhere in the answer; a spec.sourceRef is
// InvalidArgument; a binding the identity may not read is answered with RBACForbidden and no
// plan.
func TestPlanService_preview(t *testing.T) {
	env := kubetest.Start(t)
	ns, other := env.Namespace(t), env.Namespace(t)
	const secretValue = "preview-secret-value-5d1c"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "version"}, Data: map[string][]byte{"version": []byte(secretValue)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-yours"}, Data: map[string][]byte{"version": []byte("x")}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""},
			Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"version", "p-embedded-lava-outputs", "p-tofu-lava-outputs", "lock-embedded-lava-outputs", "lock-tofu-lava-outputs"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}},
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	creator := env.ServiceAccountToken(t, ns, "creator", "create", "update")
	createOnly := env.ServiceAccountToken(t, ns, "create-only", "create")
	reader := env.ServiceAccountToken(t, ns, "reader", "get", "list")
	ids, err := identity.NewForConfig(env.Config, env.Scheme, identity.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, env.Client)
	r := h.startApplier(applierOpts{kube: env.Client, identities: ids})
	kube := rpcauth.Kube{Client: cs}
	guard := rpcauth.Guard{Authn: kube, Authz: kube, Verbs: map[string]string{lavav1connect.PlanServicePreviewProcedure: applier.PreviewVerb}}
	mux := http.NewServeMux()
	mux.Handle(applier.NewPlanHandler(r.svc, synthesis.Renderer{Kube: env.Client, Identities: ids, BindingsKey: h.bindingsKey, Policy: h.policy}, applier.PreviewLimits{}, guard.HandlerOptions()...))
	url := "http://" + conntest.Listen(t, func(ctx context.Context, ln net.Listener) error { return guard.Serve(ctx, ln, mux) })
	client := lavav1connect.NewPlanServiceClient(http.DefaultClient, url)

	spec := func(eng lavav1.Engine, secret string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{ServiceAccountName: "tenant", Engine: eng, ApprovePlan: "auto",
			BindingsFrom: []*lavav1.BindingsFromRef{{Ref: &lavav1.BindingsFromRef_SecretRef{SecretRef: &lavav1.ObjectKeyRef{Name: secret}}}},
			Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: `(deflava-architecture x :inputs ((:version "0"))
  :resources ((terraform-data "release" :input "{version}")))`}}}
	}
	preview := func(token, namespace, name string, s *lavav1.ArchitectureSpec) (*lavav1.PreviewResponse, error) {
		req := connect.NewRequest(&lavav1.PreviewRequest{Namespace: namespace, Name: name, Spec: s})
		if token != "" {
			req.Header().Set("Authorization", "Bearer "+token)
		}
		res, err := client.Preview(t.Context(), req)
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	for _, tt := range []struct {
		name, token, namespace string
		want                   connect.Code
	}{
		{"no token", "", ns, connect.CodeUnauthenticated},
		{"get only", reader, ns, connect.CodePermissionDenied},
		{"create only", createOnly, ns, connect.CodePermissionDenied},
		{"another namespace", creator, other, connect.CodePermissionDenied},
	} {
		if _, err := preview(tt.token, tt.namespace, "p", spec(lavav1.Engine_ENGINE_EMBEDDED, "version")); connect.CodeOf(err) != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	flux := spec(lavav1.Engine_ENGINE_EMBEDDED, "version")
	flux.Source = &lavav1.Source{Kind: &lavav1.Source_Flux{Flux: &lavav1.FluxSource{Kind: "GitRepository", Name: "repo", Path: "main.tlisp"}}}
	if _, err := preview(creator, ns, "p", flux); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("a spec.sourceRef: %v, want InvalidArgument", err)
	}
	if res, err := preview(creator, ns, "p", spec(lavav1.Engine_ENGINE_EMBEDDED, "not-yours")); err != nil || res.GetReason() != "RBACForbidden" || res.GetPlanId() != "" ||
		!strings.Contains(res.GetMessage(), `Secret "not-yours"`) {
		t.Errorf("a Secret the identity may not read: %v %v, want reason RBACForbidden and no plan", res, err)
	}

	// A preview stores nothing in the shared artifact store, neither the render nor the review
	// body (previews in a loop filled it: the flood of the nineteenth trial).
	storeSize := func() uint64 { return natstest.ObjectStoreBytes(t, h.js, bus.ObjectStoreArtifacts) }
	before := storeSize()
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		// A provider's first use is not recorded in the object's dependency lock by a preview.
		name := "lock-" + strings.ToLower(strings.TrimPrefix(eng.String(), "ENGINE_"))
		s := spec(eng, "version")
		s.Source = &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: `(deflava-architecture x :inputs ((:version "0"))
  :resources ((local-file "f" :filename "` + filepath.Join(t.TempDir(), "f") + `" :content "{version}")))`}}
		if res, err := preview(creator, ns, name, s); err != nil || !engine.IsPlanID(res.GetPlanId()) {
			t.Fatalf("%s: %v %v", name, res, err)
		}
		if lock, _, err := providers.ReadLock(t.Context(), r.store, state.Key{Namespace: ns, Name: name}); err != nil || len(lock) != 0 {
			t.Errorf("%s: the preview recorded the provider lock %v (%v)", name, lock, err)
		}
	}
	if after := storeSize(); after != before {
		t.Errorf("previews stored %d bytes in lava-artifacts, want none", after-before)
	}

	// One namespace, and one caller, holds at most one of the applier's two preview slots:
	// while one of its previews runs (held inside its slots), another of it is refused
	// ResourceExhausted, so is the same caller's in another namespace it may preview, and
	// another caller's preview of another namespace runs in the second slot (the nineteenth
	// trial held both slots from one namespace, the twenty-first from one caller's two).
	if err := env.Client.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "tenant"}}); err != nil {
		t.Fatal(err)
	}
	otherCreator := env.ServiceAccountToken(t, other, "creator", "create", "update")
	// creator may preview in other too from now on: one caller with two namespaces.
	if _, err := cs.RbacV1().RoleBindings(other).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "creator-of-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "creator"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "creator", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":creator", ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: other, Verb: "update", Group: v1alpha1.GroupVersion.Group, Resource: "lavaarchitectures"}}}, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creator is not allowed to update lavaarchitectures in %s: %v %v", other, sar, err)
		}
	}
	inline := func() *lavav1.ArchitectureSpec {
		s := spec(lavav1.Engine_ENGINE_EMBEDDED, "version")
		s.BindingsFrom, s.Bindings = nil, map[string]string{"version": "1"}
		return s
	}
	entered, release := make(chan struct{}), make(chan struct{})
	restore := applier.SetPreviewHook(func(_, name string) {
		if name == "held" {
			close(entered)
			<-release
		}
	})
	held := make(chan error, 1)
	go func() { _, err := preview(creator, ns, "held", inline()); held <- err }()
	<-entered
	_, second := preview(creator, ns, "second", inline())
	_, sameUser := preview(creator, other, "same-user", inline())
	_, others := preview(otherCreator, other, "others", inline())
	close(release)
	first := <-held
	restore()
	if first != nil || connect.CodeOf(second) != connect.CodeResourceExhausted || others != nil {
		t.Errorf("while a preview of %s runs: another of %s: %v (want ResourceExhausted), one of %s: %v (want a plan); the first: %v",
			ns, ns, second, other, others, first)
	}
	if connect.CodeOf(sameUser) != connect.CodeResourceExhausted || !strings.Contains(sameUser.Error(), ns+":creator runs its maximum") {
		t.Errorf("while creator's preview of %s runs, its preview of %s: %v, want ResourceExhausted naming the caller", ns, other, sameUser)
	}
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		name := "p-" + strings.ToLower(strings.TrimPrefix(eng.String(), "ENGINE_"))
		res, err := preview(creator, ns, name, spec(eng, "version"))
		if err != nil || res.GetReason() != "" || !engine.IsPlanID(res.GetPlanId()) || res.GetVerdict() != "allow" {
			t.Fatalf("%s: %v %v", name, res, err)
		}
		b, _ := json.Marshal(res)
		if strings.Contains(string(b), secretValue) || strings.Contains(string(res.GetReviewBody()), secretValue) {
			t.Errorf("%s: the bound Secret's value is in the preview: %s", name, b)
		}
		var rec engine.PlanRecord
		if err := json.Unmarshal(res.GetPlanRecord(), &rec); err != nil || rec.PlanID != res.GetPlanId() || rec.Summary != (engine.Summary{Add: 1}) {
			t.Errorf("%s: plan record %+v %v", name, rec, err)
		}
		// synth reads bindingsFrom only for an object the API server has.
		obj := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Name: "aws-vpc-network"}}}
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		s := spec(eng, "version")
		s.ApprovePlan = res.GetPlanId()
		h.observeUID(ns, name, string(obj.UID), 1, s)
		if !strings.Contains(h.logs.String(), `"msg":"speculative plan requested"`) || !strings.Contains(h.logs.String(), `"caller":"system:serviceaccount:`+ns+`:creator"`) {
			t.Errorf("%s: no log line names the preview and its caller", name)
		}
		applied := await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](1))
		if applied.GetPlanId() != res.GetPlanId() {
			t.Errorf("%s: applied plan %s, want the previewed %s\n%s", name, applied.GetPlanId(), res.GetPlanId(), h.describe(ns, name))
		}
		// A preview that binds nothing still shows the live state, which holds the value the
		// live object bound (tofu's terraform_data output carries it unmarked): redacted.
		plain := spec(eng, "version")
		plain.BindingsFrom, plain.Bindings = nil, map[string]string{"version": "plain"}
		res, err = preview(creator, ns, name, plain)
		if err != nil || !engine.IsPlanID(res.GetPlanId()) {
			t.Fatalf("%s, binding nothing: %v %v", name, res, err)
		}
		if b, _ := json.Marshal(res); strings.Contains(string(b), secretValue) || strings.Contains(string(res.GetReviewBody()), secretValue) {
			t.Errorf("%s: a preview binding nothing shows the live object's Secret value: %s", name, res.GetReviewBody())
		}
	}
}

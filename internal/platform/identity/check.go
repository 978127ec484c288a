package identity

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ErrImpersonationRefused: the identity Lava acts with may not impersonate ServiceAccounts
// where it watches objects, so every object that needs an identity would fail.
var ErrImpersonationRefused = errors.New("may not impersonate ServiceAccounts")

// CheckImpersonation asks the API server, with SelfSubjectAccessReviews, whether cfg's identity
// may impersonate ServiceAccounts in each of namespaces (in every namespace when namespaces is
// empty), as [Clients] will. A refusal is an error wrapping [ErrImpersonationRefused] naming
// the user (as a SelfSubjectReview tells it) and the namespace; another error is the API's.
// `lava up --kubeconfig` calls it at start, so a developer whose kubeconfig lacks the
// `impersonate` verb learns it once, not per object.
func CheckImpersonation(ctx context.Context, cfg *rest.Config, namespaces []string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	scopes := namespaces
	if len(scopes) == 0 {
		scopes = []string{""} // a namespaced resource in "" asks for every namespace
	}
	for _, ns := range scopes {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: "impersonate", Resource: "serviceaccounts"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("identity: ask whether this identity may impersonate ServiceAccounts: %w", err)
		}
		if r.Status.Allowed {
			continue
		}
		where := "in namespace " + strconv.Quote(ns)
		if ns == "" {
			where = "in every namespace"
		}
		return fmt.Errorf("%s %w %s (Kubernetes RBAC: it needs the verb impersonate on serviceaccounts)", user(ctx, cs), ErrImpersonationRefused, where)
	}
	return nil
}

// user names the identity cs acts as ("user \"NAME\""), or "identity" when the API server
// does not say (SelfSubjectReview, authentication.k8s.io/v1, Kubernetes 1.28 and later).
func user(ctx context.Context, cs kubernetes.Interface) string {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || r.Status.UserInfo.Username == "" {
		return "identity"
	}
	return "user " + strconv.Quote(r.Status.UserInfo.Username)
}

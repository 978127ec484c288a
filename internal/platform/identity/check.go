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

// ErrAccessRefused: the identity Lava acts with may not do what a service needs (list or
// watch a resource it watches), so the service cannot run.
var ErrAccessRefused = errors.New("access refused")

// CheckImpersonation asks the API server, with SelfSubjectAccessReviews, whether cfg's identity
// may impersonate ServiceAccounts in each of namespaces (in every namespace when namespaces is
// empty), as [Clients] will. A refusal is an error wrapping [ErrImpersonationRefused] naming
// the user (as a SelfSubjectReview tells it) and the namespace; another error is the API's.
// `lava up --kubeconfig` calls it at start, so a developer whose kubeconfig lacks the
// `impersonate` verb learns it once, not per object.
func CheckImpersonation(ctx context.Context, cfg *rest.Config, namespaces []string) error {
	scopes := namespaces
	if len(scopes) == 0 {
		scopes = []string{""} // a namespaced resource in "" asks for every namespace
	}
	var attrs []authorizationv1.ResourceAttributes
	for _, ns := range scopes {
		attrs = append(attrs, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "impersonate", Resource: "serviceaccounts"})
	}
	cs, refused, err := firstRefused(ctx, cfg, attrs)
	if err != nil || refused == nil {
		return err
	}
	return fmt.Errorf("%s %w %s (Kubernetes RBAC: it needs the verb impersonate on serviceaccounts)", user(ctx, cs), ErrImpersonationRefused, where(refused.Namespace))
}

// CheckAccess asks the API server, with one SelfSubjectAccessReview each, whether cfg's
// identity may do each of attrs (on a namespaced resource, a Namespace of "" asks for every
// namespace). The first refusal is an error wrapping [ErrAccessRefused] that names the user,
// the verb, the resource (resource.group) and the namespace; another error is the API's. A
// service calls it before it starts its informers: an informer whose list is refused retries
// for ever, and controller-runtime's manager waits for it without end.
func CheckAccess(ctx context.Context, cfg *rest.Config, attrs []authorizationv1.ResourceAttributes) error {
	cs, refused, err := firstRefused(ctx, cfg, attrs)
	if err != nil || refused == nil {
		return err
	}
	res := refused.Resource
	if refused.Group != "" {
		res += "." + refused.Group
	}
	return fmt.Errorf("%s may not %s %s %s (%w by Kubernetes RBAC)", user(ctx, cs), refused.Verb, res, where(refused.Namespace), ErrAccessRefused)
}

// firstRefused returns the first of attrs the API server refuses to cfg's identity (nil when
// it allows them all), with the clientset it asked through.
func firstRefused(ctx context.Context, cfg *rest.Config, attrs []authorizationv1.ResourceAttributes) (kubernetes.Interface, *authorizationv1.ResourceAttributes, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("identity: %w", err)
	}
	for i := range attrs {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs[i]},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("identity: ask whether this identity may %s %s: %w", attrs[i].Verb, attrs[i].Resource, err)
		}
		if !r.Status.Allowed {
			return cs, &attrs[i], nil
		}
	}
	return cs, nil, nil
}

// where is `in namespace "NS"`, or "in every namespace" for "".
func where(ns string) string {
	if ns == "" {
		return "in every namespace"
	}
	return "in namespace " + strconv.Quote(ns)
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

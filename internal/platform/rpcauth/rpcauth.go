// Package rpcauth guards Lava's connect services (RenderService, ReceiptService): callers
// authenticate with a Kubernetes bearer token, checked by the API server (TokenReview), and are
// authorized per namespace by the API server (SubjectAccessReview on lavaarchitectures in the
// request's namespace); requests are bounded in size and the HTTP server in time. `lava up`
// uses a static token from a file in its state directory instead of the API server. It writes
// no authentication of its own beyond comparing that local token.
package rpcauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// MaxRequestBytes bounds a request message (connect.WithReadMaxBytes): a larger one is
// refused with ResourceExhausted after reading at most this many bytes of it.
const MaxRequestBytes = 4 << 20

// User is an authenticated caller, as the API server reported it.
type User struct {
	Name, UID string
	Groups    []string
	Extra     map[string][]string
}

// Authenticator turns a bearer token into a User; ok is false for a token it rejects. err is a
// failure to decide (the API server unreachable).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (u User, ok bool, err error)
}

// Authorizer decides whether u may verb lavaarchitectures in namespace.
type Authorizer interface {
	Authorize(ctx context.Context, u User, verb, namespace string) (ok bool, err error)
}

// Kube authenticates with TokenReview and authorizes with SubjectAccessReview through Client
// (the service's own identity needs create on tokenreviews and subjectaccessreviews: the
// system:auth-delegator ClusterRole).
type Kube struct {
	Client kubernetes.Interface
	// Audiences, if set, are the token audiences the service accepts.
	Audiences []string
}

// Authenticate asks the API server to review token.
func (k Kube) Authenticate(ctx context.Context, token string) (User, bool, error) {
	tr, err := k.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: k.Audiences}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, false, fmt.Errorf("rpcauth: token review: %w", err)
	}
	if !tr.Status.Authenticated {
		return User{}, false, nil
	}
	u := tr.Status.User
	extra := map[string][]string{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	return User{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}, true, nil
}

// Authorize asks the API server whether u may verb lava.pleme.io lavaarchitectures in
// namespace.
func (k Kube) Authorize(ctx context.Context, u User, verb, namespace string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	sar, err := k.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: v1alpha1.Group, Resource: "lavaarchitectures"},
		}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("rpcauth: subject access review: %w", err)
	}
	return sar.Status.Allowed, nil
}

// Static is the local authentication of `lava up`: one token (its token file's content); the
// holder is the user "lava-up" and may do everything.
type Static struct{ Token string }

// LoadStatic reads the token file path (surrounding space trimmed; it must not be empty).
func LoadStatic(path string) (Static, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Static{}, fmt.Errorf("rpcauth: token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return Static{}, fmt.Errorf("rpcauth: token file %s is empty", path)
	}
	return Static{Token: tok}, nil
}

// Authenticate compares token with the static token in constant time.
func (s Static) Authenticate(_ context.Context, token string) (User, bool, error) {
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.Token)) != 1 {
		return User{}, false, nil
	}
	return User{Name: "lava-up"}, true, nil
}

// Authorize allows the static token's holder everything.
func (Static) Authorize(context.Context, User, string, string) (bool, error) { return true, nil }

// Guard is the authentication and authorization of one connect service.
type Guard struct {
	Authn Authenticator
	Authz Authorizer
	// Verbs maps a procedure ("/lava.v1.RenderService/Render") to the verb the caller needs on
	// lavaarchitectures in the request's namespace; a procedure not listed is refused.
	Verbs map[string]string
}

// namespaced is a request message naming its namespace.
type namespaced interface{ GetNamespace() string }

// HandlerOptions are the connect handler options of a guarded service: the interceptor
// (Unauthenticated without a valid bearer token, PermissionDenied when the API server does not
// allow the verb in the request's namespace, InvalidArgument without a namespace,
// Unavailable when the API server cannot decide) and the request size limit
// ([MaxRequestBytes]).
func (g Guard) HandlerOptions() []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithInterceptors(g.interceptor()), connect.WithReadMaxBytes(MaxRequestBytes)}
}

func (g Guard) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			tok, ok := strings.CutPrefix(req.Header().Get("Authorization"), "Bearer ")
			if !ok || strings.TrimSpace(tok) == "" {
				return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("a bearer token is required (Authorization: Bearer <Kubernetes token>)"))
			}
			u, ok, err := g.Authn.Authenticate(ctx, strings.TrimSpace(tok))
			if err != nil {
				return nil, connect.NewError(connect.CodeUnavailable, errors.New("cannot check the token now"))
			}
			if !ok {
				return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("the token is not valid"))
			}
			verb, known := g.Verbs[req.Spec().Procedure]
			if !known {
				return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s is not allowed", req.Spec().Procedure))
			}
			m, isNS := req.Any().(namespaced)
			if !isNS || m.GetNamespace() == "" {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("namespace is required"))
			}
			allowed, err := g.Authz.Authorize(ctx, u, verb, m.GetNamespace())
			if err != nil {
				return nil, connect.NewError(connect.CodeUnavailable, errors.New("cannot check the permission now"))
			}
			if !allowed {
				return nil, connect.NewError(connect.CodePermissionDenied,
					fmt.Errorf("%s may not %s lavaarchitectures in namespace %q", u.Name, verb, m.GetNamespace()))
			}
			return next(ctx, req)
		}
	}
}

// Server timeouts of a connect service.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	shutdownTimeout   = 10 * time.Second
)

// Serve serves h on ln over HTTP/1.1 and cleartext HTTP/2 (gRPC clients) with bounded header
// size and read, write and idle timeouts, until ctx is done; then it shuts down within 10s.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("rpcauth: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("rpcauth: shutdown %s: %w", ln.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("rpcauth: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// ErrNoAuthenticator: neither a token file nor Kubernetes access is configured, so callers
// cannot be authenticated; the service then does not serve its RPCs.
var ErrNoAuthenticator = errors.New("rpcauth: no way to authenticate callers (give --rpc-token-file or Kubernetes access)")

// New returns the guard of a service: [Static] from tokenFile when set (`lava up`), else
// [Kube] through kube; [ErrNoAuthenticator] when both are empty.
func New(kube *rest.Config, tokenFile string, verbs map[string]string) (Guard, error) {
	if tokenFile != "" {
		s, err := LoadStatic(tokenFile)
		if err != nil {
			return Guard{}, err
		}
		return Guard{Authn: s, Authz: s, Verbs: verbs}, nil
	}
	if kube == nil {
		return Guard{}, ErrNoAuthenticator
	}
	cs, err := kubernetes.NewForConfig(kube)
	if err != nil {
		return Guard{}, fmt.Errorf("rpcauth: kubernetes client: %w", err)
	}
	k := Kube{Client: cs}
	return Guard{Authn: k, Authz: k, Verbs: verbs}, nil
}

// Package rpcauth guards Lava's connect services (RenderService, ReceiptService). Before any
// request body is read ([Guard.Handler], HTTP middleware in front of connect), a request's
// declared size is checked, the caller authenticates with a Kubernetes bearer token, checked
// by the API server (TokenReview), and the requests in flight are bounded in total, per
// remote IP address and per user, refused (Unavailable, ResourceExhausted) rather than queued.
// Then, where the request's namespace is known (a connect interceptor,
// [Guard.HandlerOptions]), the API server authorizes it (SubjectAccessReview on
// lavaarchitectures in that namespace). The body is bounded in bytes, and the server
// ([Guard.Serve]) in connections and time (internal/platform/httpserver); [Limits] holds the
// bounds and their --rpc-* flags. `lava up` uses a static token from a file in its state
// directory instead of the API server. The package writes no authentication of its own beyond
// comparing that local token.
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

	"connectrpc.com/connect"
	"github.com/spf13/pflag"
	"golang.org/x/sync/semaphore"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/httpserver"
)

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

// The default limits of a guarded service beyond its server's (httpserver.Limits); the
// --rpc-* flags ([Limits.Register]) default to them.
const (
	// DefaultMaxRequestBytes bounds a request message (bytes).
	DefaultMaxRequestBytes = 4 << 20
	// DefaultMaxInFlight is the requests the service handles at once, from every caller.
	DefaultMaxInFlight = 32
	// DefaultMaxInFlightPerClient is the requests one remote IP address, and one authenticated
	// user, has in flight at once.
	DefaultMaxInFlightPerClient = 8
)

// envelopePrefix is the bytes the gRPC and gRPC-Web framing adds before a message: a request
// body may be that much longer than its message.
const envelopePrefix = 5

// Limits bounds a guarded service. A zero field takes its default ([Limits.WithDefaults]).
type Limits struct {
	// Server bounds connections, time and header size (--rpc-max-connections,
	// --rpc-max-connections-per-client, --rpc-read-header-timeout, --rpc-read-timeout,
	// --rpc-write-timeout, --rpc-idle-timeout, --rpc-max-header-bytes; internal/platform/httpserver).
	Server httpserver.Limits
	// MaxRequestBytes bounds a request message, in bytes (--rpc-max-request-bytes, default
	// [DefaultMaxRequestBytes]): a larger Content-Length is refused before the body is read, a
	// longer body after reading at most this many bytes (plus the 5-byte gRPC prefix).
	MaxRequestBytes int
	// MaxInFlight is the requests handled at once (--rpc-max-in-flight, default
	// [DefaultMaxInFlight]): one more is refused with Unavailable (HTTP 503), never queued.
	// The request bodies a service holds in memory are bounded by MaxInFlight times
	// MaxRequestBytes (times about two while connect decodes).
	MaxInFlight int
	// MaxInFlightPerClient is the requests one remote IP address (behind a proxy: the proxy),
	// and one authenticated user, has in flight at once (--rpc-max-in-flight-per-client,
	// default [DefaultMaxInFlightPerClient]): one more is refused with ResourceExhausted (HTTP
	// 429).
	MaxInFlightPerClient int
}

// WithDefaults returns l with every zero (or negative) field, and those of l.Server, set to
// its default.
func (l Limits) WithDefaults() Limits {
	l.Server = l.Server.WithDefaults()
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	if l.MaxInFlightPerClient <= 0 {
		l.MaxInFlightPerClient = DefaultMaxInFlightPerClient
	}
	return l
}

// Register defines the --rpc-* flags of l on fs (see the fields), with their defaults.
func (l *Limits) Register(fs *pflag.FlagSet) {
	fs.IntVar(&l.MaxRequestBytes, "rpc-max-request-bytes", DefaultMaxRequestBytes, "largest RPC request message, in bytes")
	fs.IntVar(&l.MaxInFlight, "rpc-max-in-flight", DefaultMaxInFlight, "RPC requests handled at once; more are refused (Unavailable)")
	fs.IntVar(&l.MaxInFlightPerClient, "rpc-max-in-flight-per-client", DefaultMaxInFlightPerClient, "RPC requests one remote IP address, and one user, has in flight at once; more are refused (ResourceExhausted)")
	l.Server.Register(fs, "rpc-", "RPC")
}

// Guard is the authentication, authorization and limits of one connect service. Serve the
// service's handlers, built with [Guard.HandlerOptions], with [Guard.Serve] (or behind
// [Guard.Handler]).
type Guard struct {
	Authn Authenticator
	Authz Authorizer
	// Verbs maps a procedure ("/lava.v1.RenderService/Render") to the verb the caller needs on
	// lavaarchitectures in the request's namespace; a procedure not listed is refused.
	Verbs map[string]string
	// Limits bounds the service (zero fields: the defaults).
	Limits Limits
}

// namespaced is a request message naming its namespace.
type namespaced interface{ GetNamespace() string }

// userKey is the context key of the [User] that [Guard.Handler] authenticated.
type userKey struct{}

// UserFrom returns the caller that [Guard.Handler] authenticated for the request of ctx; ok
// is false outside a guarded request.
func UserFrom(ctx context.Context) (u User, ok bool) {
	u, ok = ctx.Value(userKey{}).(User)
	return u, ok
}

// HandlerOptions are the connect handler options of a guarded service: the authorization
// interceptor (PermissionDenied when the API server does not allow the verb in the request's
// namespace, InvalidArgument without a namespace, Unavailable when the API server cannot
// decide, Unauthenticated for a request that did not pass [Guard.Handler]) and the message
// size limit (Limits.MaxRequestBytes, ResourceExhausted beyond it).
func (g Guard) HandlerOptions() []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithInterceptors(g.interceptor()), connect.WithReadMaxBytes(g.Limits.WithDefaults().MaxRequestBytes)}
}

// Handler returns next behind the checks that run before anything reads a request's body, in
// this order, each answered as a connect error in the request's protocol (connect, gRPC,
// gRPC-Web; connect's JSON otherwise) without reading the body (an HTTP/1.1 connection is
// then closed):
//   - a Content-Length above Limits.MaxRequestBytes (plus the gRPC prefix): ResourceExhausted;
//   - no bearer token (Authorization: Bearer <Kubernetes token>): Unauthenticated;
//   - the remote IP address has Limits.MaxInFlightPerClient requests in flight:
//     ResourceExhausted; the service has Limits.MaxInFlight: Unavailable;
//   - the Authenticator rejects the token: Unauthenticated (it cannot decide: Unavailable);
//   - the user has Limits.MaxInFlightPerClient requests in flight: ResourceExhausted.
//
// next then runs with the body bounded (http.MaxBytesReader) and the [User] in the request's
// context ([UserFrom]), where the interceptor of [Guard.HandlerOptions] authorizes it.
func (g Guard) Handler(next http.Handler) http.Handler {
	l := g.Limits.WithDefaults()
	ew := connect.NewErrorWriter()
	all := semaphore.NewWeighted(int64(l.MaxInFlight))
	perAddr, perUser := httpserver.NewCounter(l.MaxInFlightPerClient), httpserver.NewCounter(l.MaxInFlightPerClient)
	maxBody := int64(l.MaxRequestBytes) + envelopePrefix
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(code connect.Code, format string, a ...any) {
			if r.ProtoMajor == 1 {
				// net/http would otherwise read (and discard) up to 256 KiB of an unread
				// body before answering, waiting for a body that may never come
				w.Header().Set("Connection", "close")
			}
			_ = ew.Write(w, r, connect.NewError(code, fmt.Errorf(format, a...)))
		}
		if r.ContentLength > maxBody {
			refuse(connect.CodeResourceExhausted, "the request body is %d bytes, above the limit of %d", r.ContentLength, maxBody)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if tok = strings.TrimSpace(tok); !ok || tok == "" {
			refuse(connect.CodeUnauthenticated, "a bearer token is required (Authorization: Bearer <Kubernetes token>)")
			return
		}
		addr := httpserver.ClientKey(r.RemoteAddr)
		if !perAddr.Acquire(addr) {
			refuse(connect.CodeResourceExhausted, "%d requests in flight from this address, the limit", l.MaxInFlightPerClient)
			return
		}
		defer perAddr.Release(addr)
		if !all.TryAcquire(1) {
			refuse(connect.CodeUnavailable, "the server has its maximum of %d requests in flight; retry later", l.MaxInFlight)
			return
		}
		defer all.Release(1)
		u, ok, err := g.Authn.Authenticate(r.Context(), tok)
		if err != nil {
			refuse(connect.CodeUnavailable, "cannot check the token now")
			return
		}
		if !ok {
			refuse(connect.CodeUnauthenticated, "the token is not valid")
			return
		}
		if !perUser.Acquire(u.Name) {
			refuse(connect.CodeResourceExhausted, "%d requests in flight for %s, the limit", l.MaxInFlightPerClient, u.Name)
			return
		}
		defer perUser.Release(u.Name)
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

func (g Guard) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			u, ok := UserFrom(ctx)
			if !ok { // served without Guard.Handler: fail closed
				return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("the request was not authenticated"))
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

// Serve serves h (the service's connect handlers, built with [Guard.HandlerOptions]) behind
// [Guard.Handler] on ln, over HTTP/1.1 and cleartext HTTP/2 (gRPC clients), with the server
// limits of Limits.Server (connections in total and per client, timeouts, header size), until
// ctx is done; then it shuts down within httpserver.ShutdownTimeout. It returns nil after a
// clean shutdown.
func (g Guard) Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	l := g.Limits.WithDefaults()
	srv := l.Server.Server(g.Handler(h))
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return httpserver.Run(ctx, l.Server.Listener(ln), srv)
}

// ErrNoAuthenticator: neither a token file nor Kubernetes access is configured, so callers
// cannot be authenticated; the service then does not serve its RPCs.
var ErrNoAuthenticator = errors.New("rpcauth: no way to authenticate callers (give --rpc-token-file or Kubernetes access)")

// New returns the guard of a service with limits: [Static] from tokenFile when set (`lava
// up`), else [Kube] through kube; [ErrNoAuthenticator] when both are empty.
func New(kube *rest.Config, tokenFile string, verbs map[string]string, limits Limits) (Guard, error) {
	if tokenFile != "" {
		s, err := LoadStatic(tokenFile)
		if err != nil {
			return Guard{}, err
		}
		return Guard{Authn: s, Authz: s, Verbs: verbs, Limits: limits}, nil
	}
	if kube == nil {
		return Guard{}, ErrNoAuthenticator
	}
	cs, err := kubernetes.NewForConfig(kube)
	if err != nil {
		return Guard{}, fmt.Errorf("rpcauth: kubernetes client: %w", err)
	}
	k := Kube{Client: cs}
	return Guard{Authn: k, Authz: k, Verbs: verbs, Limits: limits}, nil
}

// Package identity gives synth, the applier and drift the Kubernetes identity to act as for one
// LavaArchitecture: its ServiceAccount, impersonated (the Kubernetes user
// "system:serviceaccount:NAMESPACE:NAME"), as Flux's controllers do for a tenant's objects
// (RFC-0001 multi-tenancy), so the tenant's own RBAC decides which ConfigMaps and Secrets an
// object may read or write (docs/security.md, "Kubernetes RBAC").
package identity

import (
	"errors"
	"fmt"
	"sync"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ErrNoServiceAccount: the object names no ServiceAccount, the installation has no default
// one, and the admin does not allow Lava's own identity.
var ErrNoServiceAccount = errors.New("no ServiceAccount to impersonate")

// Policy is the admin's choice (flags --default-service-account and --allow-own-identity of
// synth and the applier; chart values tenancy.*).
type Policy struct {
	// DefaultServiceAccount is impersonated, in the object's namespace, for an object without
	// spec.serviceAccountName ("" for none).
	DefaultServiceAccount string
	// AllowOwnIdentity lets an object with neither act with Lava's own identity (the
	// behaviour before impersonation; a single-tenant install).
	AllowOwnIdentity bool
}

// Username is the Kubernetes user name of a ServiceAccount, "system:serviceaccount:NS:NAME"
// (the form the API server authenticates ServiceAccount tokens as, Kubernetes "Authenticating":
// Service account tokens).
func Username(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// Clients hands out a client per identity. Safe for concurrent use.
type Clients struct {
	cfg    *rest.Config
	own    client.Client
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	policy Policy

	mu    sync.Mutex
	cache map[string]client.Client
}

// maxCached bounds the impersonating clients kept (one per namespace and ServiceAccount).
const maxCached = 512

// New returns Clients impersonating from cfg (Lava's own credentials, which need the
// `impersonate` verb on serviceaccounts) and own, the client of Lava's own identity. scheme and
// mapper are shared by every client (no discovery per identity).
func New(cfg *rest.Config, own client.Client, scheme *runtime.Scheme, mapper meta.RESTMapper, p Policy) *Clients {
	return &Clients{cfg: cfg, own: own, scheme: scheme, mapper: mapper, policy: p, cache: map[string]client.Client{}}
}

// NewForConfig is [New] with the client of Lava's own identity built from cfg, the RESTMapper
// discovered once from the API server and scheme.
func NewForConfig(cfg *rest.Config, scheme *runtime.Scheme, p Policy) (*Clients, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	own, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	return New(cfg, own, scheme, mapper, p), nil
}

// For returns the client to act with for an object in namespace whose spec.serviceAccountName
// is sa, and who it is ("ServiceAccount NS/NAME" or "Lava's own identity") for messages. Without
// sa it is the policy's default ServiceAccount, else Lava's own identity when allowed, else an
// error wrapping [ErrNoServiceAccount].
func (c *Clients) For(namespace, sa string) (client.Client, string, error) {
	if sa == "" {
		sa = c.policy.DefaultServiceAccount
	}
	if sa == "" {
		if c.policy.AllowOwnIdentity {
			return c.own, "Lava's own identity", nil
		}
		return nil, "", fmt.Errorf("%w: set spec.serviceAccountName (this installation has no --default-service-account and does not allow Lava's own identity)", ErrNoServiceAccount)
	}
	who := "ServiceAccount " + namespace + "/" + sa
	key := namespace + "/" + sa
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.cache[key]; ok {
		return cl, who, nil
	}
	cfg := rest.CopyConfig(c.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: Username(namespace, sa)}
	cl, err := client.New(cfg, client.Options{Scheme: c.scheme, Mapper: c.mapper})
	if err != nil {
		return nil, "", fmt.Errorf("identity: client for %s: %w", who, err)
	}
	if len(c.cache) >= maxCached {
		clear(c.cache)
	}
	c.cache[key] = cl
	return cl, who, nil
}

// ServiceAccount is the ServiceAccount an object whose spec.serviceAccountName is sa acts as:
// sa, else the policy's default; "" when it acts with Lava's own identity or has none.
func (c *Clients) ServiceAccount(sa string) string {
	if sa == "" {
		return c.policy.DefaultServiceAccount
	}
	return sa
}

// Options are the flags of synth, the applier, drift and `lava up --kubeconfig` that choose who
// they act as for an object (chart values tenancy.*; docs/security.md, "Kubernetes RBAC";
// docs/design/0026-lava-up-lockdown.md). [Options.Register] declares them and their defaults,
// once, for all four: impersonation is on by default.
type Options struct {
	// Impersonate turns impersonation on (--impersonate, default true); off, every object acts
	// with the service's own identity, which is then every tenant's: for a cluster with a
	// single tenant only. The zero Options (a caller that sets fields itself) has it off.
	Impersonate bool
	Policy
}

// DefaultImpersonate is the default of --impersonate: on, as the chart's tenancy.impersonate.
const DefaultImpersonate = true

// Register adds --impersonate, --default-service-account and --allow-own-identity to fs.
func (o *Options) Register(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Impersonate, "impersonate", DefaultImpersonate, "act as each object's ServiceAccount (spec.serviceAccountName, else --default-service-account) for its ConfigMaps and Secrets; --impersonate=false acts with this process's own identity for every object (a cluster with a single tenant only)")
	fs.StringVar(&o.DefaultServiceAccount, "default-service-account", "", "with --impersonate: ServiceAccount, in the object's namespace, for objects that name none")
	fs.BoolVar(&o.AllowOwnIdentity, "allow-own-identity", false, "with --impersonate: let objects that name no ServiceAccount, without a default, act with the service's own identity")
}

// Clients returns the impersonating Clients for cfg (Lava's own credentials), or nil when
// Impersonate is off or cfg is nil.
func (o Options) Clients(cfg *rest.Config) (*Clients, error) {
	if !o.Impersonate || cfg == nil {
		return nil, nil
	}
	return NewForConfig(cfg, clientgoscheme.Scheme, o.Policy)
}

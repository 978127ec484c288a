package identity

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/platform/credentials"
)

// The ServiceAccount annotations of the cloud workload-identity integrations, read as the
// clouds' own webhooks read them (EKS "IAM roles for service accounts", GKE "Workload Identity
// Federation", Azure "Workload Identity").
const (
	AnnotationAWSRoleARN    = "eks.amazonaws.com/role-arn"
	AnnotationGCPAccount    = "iam.gke.io/gcp-service-account"
	AnnotationAzureClientID = "azure.workload.identity/client-id"
	AnnotationAzureTenantID = "azure.workload.identity/tenant-id"
	minTokenExpiry          = 10 * time.Minute
	defaultTokenExpiry      = time.Hour
)

// ErrProviderEnvForbidden: the object's identity may not read a Secret of spec.providerEnvFrom,
// or Lava may not read its ServiceAccount or request its token.
var ErrProviderEnvForbidden = errors.New("forbidden")

// ErrProviderEnvInvalid: a Secret or key of spec.providerEnvFrom, or the object's
// ServiceAccount, does not exist, or a key is not a variable name Lava lets it set.
var ErrProviderEnvInvalid = errors.New("invalid provider credentials")

// CredentialOptions are the provider credential flags of the applier and drift (chart
// values providerCredentials.*).
type CredentialOptions struct {
	// Audience is the audience of the ServiceAccount tokens Lava requests for providers
	// (--provider-token-audience; e.g. "sts.amazonaws.com"); "" requests none.
	Audience string
	// Expiry is the tokens' lifetime (--provider-token-expiry; at least 10m, the API server's
	// minimum).
	Expiry time.Duration
	// GCPAudience is the GCP workload identity pool provider (--gcp-workload-identity-provider).
	GCPAudience string
	// AzureTenantID is the Entra tenant for ServiceAccounts without the tenant-id annotation
	// (--azure-tenant-id).
	AzureTenantID string
}

// Register adds the credential flags to fs.
func (o *CredentialOptions) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Audience, "provider-token-audience", "", "audience of the ServiceAccount token each object's providers get (workload identity); empty: no token")
	fs.DurationVar(&o.Expiry, "provider-token-expiry", defaultTokenExpiry, "lifetime of the providers' ServiceAccount tokens (at least 10m)")
	fs.StringVar(&o.GCPAudience, "gcp-workload-identity-provider", "", "GCP workload identity pool provider (//iam.googleapis.com/projects/N/locations/global/workloadIdentityPools/P/providers/X) for ServiceAccounts annotated "+AnnotationGCPAccount)
	fs.StringVar(&o.AzureTenantID, "azure-tenant-id", "", "Azure tenant for ServiceAccounts annotated "+AnnotationAzureClientID+" without "+AnnotationAzureTenantID)
}

// New returns the Credentials for cfg (Lava's own credentials), or nil when cfg is nil or no
// token audience is configured (then objects get only spec.providerEnvFrom).
func (o CredentialOptions) New(cfg *rest.Config) (*Credentials, error) {
	if cfg == nil || o.Audience == "" {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	return &Credentials{Tokens: cs, CredentialOptions: o}, nil
}

// Credentials builds [credentials.Provider] for objects. The ServiceAccount's annotations are
// read and its token requested with Lava's own identity (`get serviceaccounts` and `create
// serviceaccounts/token` in the watched namespaces; TokenRequest); the Secrets of
// providerEnvFrom are read with the object's identity ([Clients.For]), so the tenant's RBAC
// decides.
type Credentials struct {
	// Tokens is Lava's own clientset (CreateToken).
	Tokens kubernetes.Interface
	CredentialOptions
}

// SecretKeyRef names a Secret of the object's namespace and optionally one key of it (all keys
// when empty), as spec.providerEnvFrom does.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
}

// For returns the credentials of an object in namespace acting as who (from [Clients.For])
// with kube, whose ServiceAccount is sa ("" when it acts with Lava's own identity: no token),
// and whose spec.providerEnvFrom is envFrom. A Secret the identity may not read is an error wrapping [ErrProviderEnvForbidden] that names the identity, verb and
// object, never a value; a key that is missing or not a variable name is an error too.
func (cr *Credentials) For(ctx context.Context, kube client.Reader, who, namespace, sa string, envFrom []SecretKeyRef) (*credentials.Provider, error) {
	pc := &credentials.Provider{Identity: who, Env: map[string]string{}}
	for _, ref := range envFrom {
		sec := &corev1.Secret{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sec); err != nil {
			if apierrors.IsForbidden(err) {
				return nil, fmt.Errorf("spec.providerEnvFrom: %w: RBAC: %s may not get secrets %q in namespace %s", ErrProviderEnvForbidden, who, ref.Name, namespace)
			}
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("spec.providerEnvFrom: %w: secret %s/%s does not exist", ErrProviderEnvInvalid, namespace, ref.Name)
			}
			return nil, fmt.Errorf("spec.providerEnvFrom: secret %s/%s: %w", namespace, ref.Name, err)
		}
		keys := slices.Sorted(maps.Keys(sec.Data))
		if ref.Key != "" {
			if _, ok := sec.Data[ref.Key]; !ok {
				return nil, fmt.Errorf("spec.providerEnvFrom: %w: secret %s/%s has no key %q", ErrProviderEnvInvalid, namespace, ref.Name, ref.Key)
			}
			keys = []string{ref.Key}
		}
		for _, k := range keys {
			if !credentials.ValidName(k) {
				return nil, fmt.Errorf("spec.providerEnvFrom: %w: secret %s/%s: key %q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", ErrProviderEnvInvalid, namespace, ref.Name, k)
			}
			if credentials.Reserved(k) {
				return nil, fmt.Errorf("spec.providerEnvFrom: %w: secret %s/%s: key %q is reserved (set by Lava: PATH, HOME, TMPDIR, TF_*, the plugin protocol's and the workload-identity variables; a loader path: LD_*, GCONV_PATH, LOCPATH, ...; or a file or cluster the policy cannot hold to its roots: *_FILE, *_PATH, *_DIR, KUBECONFIG, HELM_*, KUBERNETES_SERVICE_*)", ErrProviderEnvInvalid, namespace, ref.Name, k)
			}
			pc.Env[k] = string(sec.Data[k])
		}
	}
	if sa == "" || cr == nil || cr.Audience == "" || cr.Tokens == nil {
		return pc, nil
	}
	acct, err := cr.Tokens.CoreV1().ServiceAccounts(namespace).Get(ctx, sa, metav1.GetOptions{})
	if err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("provider credentials: %w: serviceaccount %s/%s does not exist", ErrProviderEnvInvalid, namespace, sa)
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("provider credentials: %w: RBAC: Lava may not get serviceaccounts %q in namespace %s (the chart grants it with providerCredentials.tokenAudience)", ErrProviderEnvForbidden, sa, namespace)
		}
		return nil, fmt.Errorf("provider credentials: serviceaccount %s/%s: %w", namespace, sa, err)
	}
	expiry := max(cr.Expiry, minTokenExpiry)
	secs := int64(expiry / time.Second)
	tr, err := cr.Tokens.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{cr.Audience}, ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("provider credentials: %w: RBAC: Lava may not create serviceaccounts/token for %s", ErrProviderEnvForbidden, who)
		}
		return nil, fmt.Errorf("provider credentials: token for %s: %w", who, err)
	}
	pc.Token = tr.Status.Token
	pc.AWSRoleARN = acct.Annotations[AnnotationAWSRoleARN]
	pc.GCPServiceAccount, pc.GCPAudience = acct.Annotations[AnnotationGCPAccount], cr.GCPAudience
	pc.AzureClientID, pc.AzureTenantID = acct.Annotations[AnnotationAzureClientID], acct.Annotations[AnnotationAzureTenantID]
	if pc.AzureTenantID == "" {
		pc.AzureTenantID = cr.AzureTenantID
	}
	return pc, nil
}

// Resolver gives a service (the applier, drift) the Kubernetes access and the provider
// credentials of one object, the same way for every service that runs its providers.
type Resolver struct {
	// Own is the service's own client (nil: no Kubernetes access).
	Own client.Client
	// Service names the service in messages ("the applier", "drift").
	Service string
	// Identities, when set, impersonates the object's ServiceAccount (nil: Own for every object).
	Identities *Clients
	// Credentials, when set, requests the object's ServiceAccount token ([Credentials.For]).
	Credentials *Credentials
}

// Access returns the client to act with for an object in namespace whose
// spec.serviceAccountName is sa, and who it is for messages: the impersonated ServiceAccount
// ([Clients.For]) when Identities is set, else Own (nil without Kubernetes access). The
// error wraps [ErrNoServiceAccount].
func (r Resolver) Access(namespace, sa string) (client.Client, string, error) {
	if r.Identities == nil {
		return r.Own, r.Service, nil
	}
	return r.Identities.For(namespace, sa)
}

// For returns the provider credentials of an object in namespace whose spec.serviceAccountName
// is sa and whose spec.providerEnvFrom is envFrom (nil when it has none and no token audience
// is configured): [Credentials.For] with the client of [Resolver.Access]. The error wraps
// [ErrNoServiceAccount] (also for providerEnvFrom without Kubernetes access),
// [ErrProviderEnvForbidden] or [ErrProviderEnvInvalid], or is transient.
func (r Resolver) For(ctx context.Context, namespace, sa string, envFrom []SecretKeyRef) (*credentials.Provider, error) {
	if len(envFrom) == 0 && r.Credentials == nil {
		return nil, nil
	}
	kube, who, err := r.Access(namespace, sa)
	if err != nil {
		return nil, err
	}
	if kube == nil {
		if len(envFrom) > 0 {
			return nil, fmt.Errorf("%w: spec.providerEnvFrom needs Kubernetes access, and %s has none (--no-kube)", ErrNoServiceAccount, r.Service)
		}
		return nil, nil
	}
	acct := ""
	if r.Identities != nil {
		acct = r.Identities.ServiceAccount(sa)
	}
	return r.Credentials.For(ctx, kube, who, namespace, acct, envFrom)
}

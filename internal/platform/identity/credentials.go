package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The ServiceAccount annotations of the cloud workload-identity integrations, read as the
// clouds' own webhooks read them (EKS "IAM roles for service accounts", GKE "Workload Identity
// Federation", Azure "Workload Identity").
const (
	AnnotationAWSRoleARN     = "eks.amazonaws.com/role-arn"
	AnnotationGCPAccount     = "iam.gke.io/gcp-service-account"
	AnnotationAzureClientID  = "azure.workload.identity/client-id"
	AnnotationAzureTenantID  = "azure.workload.identity/tenant-id"
	tokenFileName            = "lava-provider-token"
	gcpCredentialsFileName   = "lava-gcp-credentials.json"
	minTokenExpiry           = 10 * time.Minute
	defaultTokenExpiry       = time.Hour
	gcpSubjectTokenTypeJWT   = "urn:ietf:params:oauth:token-type:jwt"
	gcpSTSTokenURL           = "https://sts.googleapis.com/v1/token"
	gcpImpersonationURLStart = "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/"
)

// ErrProviderEnvForbidden: the object's identity may not read a Secret of spec.providerEnvFrom.
var ErrProviderEnvForbidden = errors.New("forbidden")

// ProviderCredentials are the credentials one object's providers run with, and nothing else of
// the applier's (docs/security.md, "Engines"): a projected token of the object's ServiceAccount
// with the workload-identity variables its annotations call for, and the variables of the
// Secrets of spec.providerEnvFrom. The engines write them into a provider's (or tofu's) private
// working directory ([ProviderCredentials.Environ]). Never logged: the type has no String.
type ProviderCredentials struct {
	// Identity is who they are ("ServiceAccount NS/NAME"), for messages.
	Identity string
	// Token is a ServiceAccount token (a JWT from the TokenRequest API) for the audience the
	// admin configured; "" for none.
	Token string
	// AWSRoleARN, GCPServiceAccount and AzureClientID come from the ServiceAccount's
	// annotations; each turns on its cloud's variables (only with a Token).
	AWSRoleARN, GCPServiceAccount, AzureClientID, AzureTenantID string
	// GCPAudience is the workload identity pool provider
	// ("//iam.googleapis.com/projects/N/locations/global/workloadIdentityPools/P/providers/X").
	GCPAudience string
	// Env are the variables of spec.providerEnvFrom, name to value.
	Env map[string]string
}

// Empty reports whether c carries nothing (nil included).
func (c *ProviderCredentials) Empty() bool {
	return c == nil || (c.Token == "" && len(c.Env) == 0)
}

// Key is a digest of everything in c but the token itself (which is renewed), so a provider
// process started with c can be reused for the same identity only: "" for empty credentials.
func (c *ProviderCredentials) Key() string {
	if c.Empty() {
		return ""
	}
	h := sha256.New()
	for _, s := range []string{c.Identity, c.AWSRoleARN, c.GCPServiceAccount, c.GCPAudience, c.AzureClientID, c.AzureTenantID, fmt.Sprint(c.Token != "")} {
		h.Write([]byte(s + "\x00"))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		h.Write([]byte(k + "=" + c.Env[k] + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Secrets are the secret values of c (the token and every variable's value), for redaction.
func (c *ProviderCredentials) Secrets() []string {
	if c.Empty() {
		return nil
	}
	var out []string
	if c.Token != "" {
		out = append(out, c.Token)
	}
	for _, v := range c.Env {
		out = append(out, v)
	}
	return out
}

// Environ writes c's files into dir (a private directory of one process or operation: the
// token file and, for GCP, the external_account credentials file, each mode 0600) and returns
// the variables ("NAME=value") that point the providers' SDKs at them: AWS_ROLE_ARN and
// AWS_WEB_IDENTITY_TOKEN_FILE; GOOGLE_APPLICATION_CREDENTIALS; AZURE_CLIENT_ID,
// AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE and AZURE_AUTHORITY_HOST unset (the SDK's
// default); then spec.providerEnvFrom's variables (which may not override those). Nil c: none.
func (c *ProviderCredentials) Environ(dir string) ([]string, error) {
	if c.Empty() {
		return nil, nil
	}
	vars := map[string]string{}
	for k, v := range c.Env {
		vars[k] = v
	}
	if c.Token != "" {
		tokenFile, err := c.Refresh(dir)
		if err != nil {
			return nil, err
		}
		if c.AWSRoleARN != "" {
			vars["AWS_ROLE_ARN"], vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = c.AWSRoleARN, tokenFile
		}
		if c.GCPServiceAccount != "" && c.GCPAudience != "" {
			doc, err := json.MarshalIndent(map[string]any{
				"type":                              "external_account",
				"audience":                          c.GCPAudience,
				"subject_token_type":                gcpSubjectTokenTypeJWT,
				"token_url":                         gcpSTSTokenURL,
				"service_account_impersonation_url": gcpImpersonationURLStart + c.GCPServiceAccount + ":generateAccessToken",
				"credential_source":                 map[string]string{"file": tokenFile},
			}, "", "  ")
			if err != nil {
				return nil, err
			}
			path := filepath.Join(dir, gcpCredentialsFileName)
			if err := writePrivate(path, doc); err != nil {
				return nil, err
			}
			vars["GOOGLE_APPLICATION_CREDENTIALS"] = path
		}
		if c.AzureClientID != "" && c.AzureTenantID != "" {
			vars["AZURE_CLIENT_ID"], vars["AZURE_TENANT_ID"], vars["AZURE_FEDERATED_TOKEN_FILE"] = c.AzureClientID, c.AzureTenantID, tokenFile
		}
	}
	out := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

// Refresh writes c's token into dir's token file (atomically, mode 0600) and returns the
// file's path, so a running provider reads the newest token when its SDK renews.
func (c *ProviderCredentials) Refresh(dir string) (string, error) {
	path := filepath.Join(dir, tokenFileName)
	if c.Empty() || c.Token == "" {
		return path, nil
	}
	return path, writePrivate(path, []byte(c.Token))
}

// writePrivate writes b to path through a temporary file in the same directory, mode 0600.
func writePrivate(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".lava-tmp-")
	if err != nil {
		return fmt.Errorf("identity: credentials file: %w", err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return fmt.Errorf("identity: credentials file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("identity: credentials file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("identity: credentials file: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("identity: credentials file: %w", err)
	}
	return nil
}

// CredentialOptions are the applier's and drift's flags for provider credentials (chart
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

// Credentials builds [ProviderCredentials] for objects. The ServiceAccount's annotations are
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
type SecretKeyRef struct{ Name, Key string }

// For returns the credentials of an object in namespace acting as who (from [Clients.For])
// with kube, whose ServiceAccount is sa ("" when it acts with Lava's own identity: no token),
// and whose spec.providerEnvFrom is envFrom. A Secret the identity may not read is an error wrapping [ErrProviderEnvForbidden] that names the identity, verb and
// object, never a value; a key that is missing or not a variable name is an error too.
func (cr *Credentials) For(ctx context.Context, kube client.Reader, who, namespace, sa string, envFrom []SecretKeyRef) (*ProviderCredentials, error) {
	pc := &ProviderCredentials{Identity: who, Env: map[string]string{}}
	for _, ref := range envFrom {
		sec := &corev1.Secret{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sec); err != nil {
			if apierrors.IsForbidden(err) {
				return nil, fmt.Errorf("spec.providerEnvFrom: %w: RBAC: %s may not get secrets %q in namespace %s", ErrProviderEnvForbidden, who, ref.Name, namespace)
			}
			return nil, fmt.Errorf("spec.providerEnvFrom: secret %s/%s: %w", namespace, ref.Name, err)
		}
		keys := slices.Sorted(maps.Keys(sec.Data))
		if ref.Key != "" {
			if _, ok := sec.Data[ref.Key]; !ok {
				return nil, fmt.Errorf("spec.providerEnvFrom: secret %s/%s has no key %q", namespace, ref.Name, ref.Key)
			}
			keys = []string{ref.Key}
		}
		for _, k := range keys {
			if !envName(k) {
				return nil, fmt.Errorf("spec.providerEnvFrom: secret %s/%s: key %q is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", namespace, ref.Name, k)
			}
			if reservedEnv(k) {
				return nil, fmt.Errorf("spec.providerEnvFrom: secret %s/%s: key %q is set by Lava (PATH, HOME, TMPDIR, TF_*, the plugin protocol's and the workload-identity variables)", namespace, ref.Name, k)
			}
			pc.Env[k] = string(sec.Data[k])
		}
	}
	if sa == "" || cr == nil || cr.Audience == "" || cr.Tokens == nil {
		return pc, nil
	}
	acct, err := cr.Tokens.CoreV1().ServiceAccounts(namespace).Get(ctx, sa, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("provider credentials: serviceaccount %s/%s: %w", namespace, sa, err)
	}
	expiry := max(cr.Expiry, minTokenExpiry)
	secs := int64(expiry / time.Second)
	tr, err := cr.Tokens.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{cr.Audience}, ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
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

// envName reports whether k is a portable environment variable name.
func envName(k string) bool {
	if k == "" || strings.ContainsAny(k[:1], "0123456789") {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// reservedEnv reports whether k is a variable Lava itself sets for providers and tofu, which
// spec.providerEnvFrom may not set: PATH, HOME, TMPDIR, TF_* (tofu's CLI configuration and
// state backend, go-plugin's TF_PLUGIN_MAGIC_COOKIE), PLUGIN_* (go-plugin's protocol) and the
// workload-identity variables of [ProviderCredentials.Environ].
func reservedEnv(k string) bool {
	u := strings.ToUpper(k)
	switch u {
	case "PATH", "HOME", "TMPDIR", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
		"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE":
		return true
	}
	return strings.HasPrefix(u, "TF_") || strings.HasPrefix(u, "PLUGIN_")
}

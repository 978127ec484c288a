// Package credentials holds the provider credentials of one object (docs/security.md,
// "Engines"): what its providers and tofu get instead of the applier's own environment, and how
// they are written into a process's private directory. internal/platform/identity builds them
// from the object's ServiceAccount and Secrets; the engines pass them on.
package credentials

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const (
	tokenFileName            = "lava-provider-token"
	gcpCredentialsFileName   = "lava-gcp-credentials.json"
	gcpSubjectTokenTypeJWT   = "urn:ietf:params:oauth:token-type:jwt"
	gcpSTSTokenURL           = "https://sts.googleapis.com/v1/token"
	gcpImpersonationURLStart = "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/"
)

// Provider holds the credentials one object's providers run with, and nothing else of the
// applier's (docs/security.md, "Engines"): a projected token of the object's ServiceAccount
// with the workload-identity variables its annotations call for, and the variables of the
// Secrets of spec.providerEnvFrom. The engines write them into a provider's (or tofu's) private
// working directory ([Provider.Environ]). Never logged: the type has no String.
type Provider struct {
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
func (c *Provider) Empty() bool {
	return c == nil || (c.Token == "" && len(c.Env) == 0)
}

// Key is a digest of everything in c but the token itself (which is renewed), so a provider
// process started with c can be reused for the same identity only: "" for empty credentials.
// It is a pool key in memory only, never logged or published (it covers secret values).
func (c *Provider) Key() string {
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
func (c *Provider) Secrets() []string {
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
func (c *Provider) Environ(dir string) ([]string, error) {
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
func (c *Provider) Refresh(dir string) (string, error) {
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

// ValidName reports whether k is a portable environment variable name.
func ValidName(k string) bool {
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

// Reserved reports whether k is a variable spec.providerEnvFrom may not set: those Lava itself
// sets for providers and tofu (PATH, HOME, TMPDIR, TF_* for tofu's CLI configuration and state
// backend and go-plugin's TF_PLUGIN_MAGIC_COOKIE, PLUGIN_* for go-plugin's protocol, the
// workload-identity variables of [Provider.Environ]), and those that make a dynamically linked
// program load or read code and data from a path (the dynamic loader's LD_*, and glibc's list
// of variables it drops for set-user-ID programs: GCONV_PATH, LOCPATH, NLSPATH, ...): a path a
// tenant's resource wrote under a file root would otherwise run in the applier's pod. Also the
// Go runtime's settings (GOGC, GOMEMLIMIT, GODEBUG, ...: tofu and nearly every provider are Go
// programs, and GOGC=off makes a warm provider process keep everything it ever allocated) and
// LAVA_* (the tofu engine's own, such as the limits it runs the CLI under). And the variables
// that point a provider at a file or at a cluster the tenant policy cannot hold to its file
// roots: a name that says it names a file (ending in _FILE, _FILES, _PATH, _PATHS, _DIR, _DIRS,
// _DIRECTORY, as the policy's name rule reads attributes: AWS_CONFIG_FILE, KUBE_CONFIG_PATH),
// KUBECONFIG, HELM_* (helm's cache, plugin and configuration paths), and
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (which make a Kubernetes client use the
// pod's own ServiceAccount token): a provider told so read the kubeconfig of lava up and wrote
// its chart cache over Lava's keys (found by a twenty-second trial).
func Reserved(k string) bool {
	u := strings.ToUpper(k)
	switch u {
	case "PATH", "HOME", "TMPDIR", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
		"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE",
		"GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE", "NIS_PATH", "NLSPATH",
		"RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR",
		"GOGC", "GOMEMLIMIT", "GODEBUG", "GOMAXPROCS", "GOTRACEBACK", "GORACE", "GOCOVERDIR",
		"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT":
		return true
	}
	for _, suffix := range []string{"_FILE", "_FILES", "_PATH", "_PATHS", "_DIR", "_DIRS", "_DIRECTORY"} {
		if strings.HasSuffix(u, suffix) {
			return true
		}
	}
	return strings.HasPrefix(u, "TF_") || strings.HasPrefix(u, "PLUGIN_") || strings.HasPrefix(u, "LD_") || strings.HasPrefix(u, "LAVA_") ||
		strings.HasPrefix(u, "HELM_")
}

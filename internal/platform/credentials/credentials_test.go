package credentials

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestProvider_environ: the files are written 0600 into the given directory, the
// variables name them, a cloud's variables appear only with its annotation, and the pool key
// separates identities and environments but not renewed tokens.
func TestProvider_environ(t *testing.T) {
	dir := t.TempDir()
	c := &Provider{Identity: "ServiceAccount ns/a", Token: "tok-1", AWSRoleARN: "arn:aws:iam::1:role/a",
		GCPServiceAccount: "a@p.iam.gserviceaccount.com", GCPAudience: "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k",
		Env: map[string]string{"CLOUD_REGION": "r1"}}
	env, err := c.Environ(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, tokenFileName)
	gcp := filepath.Join(dir, gcpCredentialsFileName)
	want := []string{"AWS_ROLE_ARN=arn:aws:iam::1:role/a", "AWS_WEB_IDENTITY_TOKEN_FILE=" + tok, "CLOUD_REGION=r1", "GOOGLE_APPLICATION_CREDENTIALS=" + gcp}
	if !slices.Equal(env, want) {
		t.Errorf("Environ = %q, want %q (no Azure variables without its annotation)", env, want)
	}
	for _, f := range []string{tok, gcp} {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, st.Mode())
		}
	}
	var doc map[string]any
	b, _ := os.ReadFile(gcp)
	if err := json.Unmarshal(b, &doc); err != nil || doc["type"] != "external_account" ||
		doc["credential_source"].(map[string]any)["file"] != tok {
		t.Errorf("GCP credentials %s (%v)", b, err)
	}
	renewed := *c
	renewed.Token = "tok-2"
	if _, err := renewed.Refresh(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(tok); string(b) != "tok-2" {
		t.Errorf("token file after Refresh = %q", b)
	}
	other := *c
	other.Env = map[string]string{"CLOUD_REGION": "r2"}
	if renewed.Key() != c.Key() || other.Key() == c.Key() || (&Provider{}).Key() != "" {
		t.Error("Key must ignore the token and separate environments; empty credentials have no key")
	}
	if env, err := (*Provider)(nil).Environ(dir); env != nil || err != nil {
		t.Errorf("nil credentials: %v, %v", env, err)
	}
}

// TestReserved: providerEnvFrom may not set what Lava sets for providers and tofu.
func TestReserved(t *testing.T) {
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "TF_HTTP_PASSWORD", "tf_cli_config_file", "TF_PLUGIN_MAGIC_COOKIE", "PLUGIN_PROTOCOL_VERSIONS",
		"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_FEDERATED_TOKEN_FILE",
		// The dynamic loader's and glibc's path variables, which load code from a path.
		"LD_PRELOAD", "ld_library_path", "LD_AUDIT", "GCONV_PATH", "LOCPATH", "NLSPATH",
		// The Go runtime's settings (GOGC=off: a warm provider keeps all it allocated), and the
		// tofu engine's own limits.
		"GOGC", "gomemlimit", "GODEBUG", "GOMAXPROCS", "GOTRACEBACK", "LAVA_TOFU_MAX_DATA", "LAVA_TOFU_EXEC",
		// What points a provider at a file or a cluster outside the file roots (the
		// twenty-second trial's kubeconfig and chart cache).
		"KUBECONFIG", "KUBE_CONFIG_PATH", "kube_config_paths", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
		"HELM_REPOSITORY_CACHE", "helm_plugins", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "SSL_CERT_DIR"} {
		if !Reserved(k) {
			t.Errorf("%s is not reserved", k)
		}
	}
	for _, k := range []string{"AWS_REGION", "CLOUD_REGION", "GITHUB_TOKEN", "GOOGLE_PROJECT", "GOVC_URL"} {
		if Reserved(k) {
			t.Errorf("%s is reserved", k)
		}
	}
	for k, ok := range map[string]bool{"A_1": true, "_x": true, "1A": false, "A-B": false, "": false, "A=B": false, strings.Repeat("x", 3): true} {
		if ValidName(k) != ok {
			t.Errorf("ValidName(%q) = %v", k, !ok)
		}
	}
}

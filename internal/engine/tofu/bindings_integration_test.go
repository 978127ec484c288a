//go:build integration

package tofu_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/platform/credentials"
)

// TestEngine_bindingIsData is the attack of docs/security.md "Rendering" through real OpenTofu:
// a binding holding ${file("/etc/hostname")} is applied as that literal text (the file written,
// the state and the output hold it). Without the escaping tofu evaluates the call and the
// applier's /etc/hostname lands in the state.
func TestEngine_bindingIsData(t *testing.T) {
	const attack = `${file("/etc/hostname")}`
	dir := t.TempDir()
	src := `(deflava-architecture data
  :inputs ((:v "") (:dir "") (:w "") (:dollar "$"))
  :resources ((terraform-data "seed" :input "{v}")
              (terraform-data "joined" :input "{dollar}{w}")
              (local-file "out" :filename "{dir}/out.txt" :content "{v}"))
  :outputs (:seed (ref terraform-data "seed" output) :joined (ref terraform-data "joined" output)))
`
	out, ds := render.Synthesize(render.Input{SourceKind: render.SourceInline, SourceText: []byte(src),
		Bindings: tlisp.Bindings{Scalars: map[string]string{"v": attack, "dir": dir, "w": "{path.cwd}"}}})
	if out == nil {
		t.Fatalf("synthesize: %v", ds)
	}
	h := newHarness(t, harnessOpts{})
	h.apply(h.plan(string(out.JSON)))
	if got := fileContent(t, filepath.Join(dir, "out.txt")); got != attack {
		t.Errorf("file content %q, want the literal binding %q", got, attack)
	}
	o, err := h.eng.Outputs(t.Context(), h.key)
	if err != nil {
		t.Fatal(err)
	}
	var seed string
	if err := json.Unmarshal(o.Values["seed"], &seed); err != nil || seed != attack {
		t.Errorf("output seed %s (%v), want the literal binding %q", o.Values["seed"], err, attack)
	}
	// A "$" right before a binding that starts with "{" (here an input's default) stays literal
	// text, or "${path.cwd}" would be evaluated with the source's own "$".
	var joined string
	if err := json.Unmarshal(o.Values["joined"], &joined); err != nil || joined != "${path.cwd}" {
		t.Errorf("output joined %s (%v), want the literal text ${path.cwd}", o.Values["joined"], err)
	}
}

// TestEngine_scrubbedEnvironment is the attack of docs/security.md "Engines" on the applier's
// own environment through real OpenTofu: tofu (and every provider and provisioner it starts)
// runs with PATH, the operation's private HOME/TMPDIR and the TF_* variables Lava sets, never
// the applier's own variables. A local-exec provisioner (refused by the policy gate in synth;
// here the engine is driven directly) dumps the environment it got.
func TestEngine_scrubbedEnvironment(t *testing.T) {
	const secret = "applier-own-credential-81be"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("LAVA_TEST_OWN_TOKEN", secret)
	dir := t.TempDir()
	dump := filepath.Join(dir, "env.txt")
	h := newHarness(t, harnessOpts{})
	h.apply(h.plan(`{"resource":{"terraform_data":{"probe":{"input":"x",
	  "provisioner":{"local-exec":{"command":"env > ` + dump + `"}}}}}}`))
	env := fileContent(t, dump)
	if strings.Contains(env, secret) || strings.Contains(env, "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("tofu's environment holds the applier's own variables:\n%s", env)
	}
	if !strings.Contains(env, "PATH=") {
		t.Errorf("tofu's environment has no PATH:\n%s", env)
	}
}

// TestEngine_providerCredentials: tofu (and what it starts) gets the object's provider
// credentials and still nothing of the applier's: a local-exec run by real OpenTofu during the
// apply sees AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE naming a mode-0600 file in the
// operation's private workspace that holds the token, the providerEnvFrom variable, and not the
// applier's canary. The token is redacted from engine errors like any secret.
func TestEngine_providerCredentials(t *testing.T) {
	const canary = "applier-own-canary-19fa"
	t.Setenv("LAVA_TEST_APPLIER_CANARY", canary)
	dir := t.TempDir()
	dump := filepath.Join(dir, "env.txt")
	h := newHarness(t, harnessOpts{})
	creds := &credentials.Provider{Identity: "ServiceAccount ns/tenant", Token: "header.payload-5e0c.signature",
		AWSRoleARN: "arn:aws:iam::111122223333:role/tenant", Env: map[string]string{"CLOUD_REGION": "region-77"}}
	tgt := h.target(`{"resource":{"terraform_data":{"probe":{"input":"x",
	  "provisioner":{"local-exec":{"command":"env > ` + dump + `; echo token=$(cat \"$AWS_WEB_IDENTITY_TOKEN_FILE\") >> ` + dump +
		`; echo mode=$(stat -c %a \"$AWS_WEB_IDENTITY_TOKEN_FILE\") >> ` + dump + `"}}}}}}`)
	tgt.Credentials = creds
	p, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: tgt, BindingsDigest: "b0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "test-replica", Credentials: creds}); err != nil {
		t.Fatal(err)
	}
	env := fileContent(t, dump)
	if strings.Contains(env, canary) {
		t.Errorf("tofu's environment holds the applier's canary:\n%s", env)
	}
	for _, want := range []string{"AWS_ROLE_ARN=" + creds.AWSRoleARN, "CLOUD_REGION=region-77", "token=" + creds.Token, "mode=600", "AWS_WEB_IDENTITY_TOKEN_FILE=/"} {
		if !strings.Contains(env, want) {
			t.Errorf("tofu's environment lacks %q:\n%s", want, env)
		}
	}
	for _, line := range strings.Split(env, "\n") {
		if f, ok := strings.CutPrefix(line, "AWS_WEB_IDENTITY_TOKEN_FILE="); ok {
			if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the token file %s outlived the operation's workspace (%v)", f, err)
			}
		}
	}
}

// TestEngine_backendPasswordPerOperation is the rule of docs/security.md "Engines" on the state
// backend's password through real OpenTofu: with per-operation passwords (state.Tokens, as the
// applier runs), the password tofu and what it starts see (a local-exec dumps TF_HTTP_PASSWORD
// and TF_HTTP_ADDRESS) is one of its own operation: the backend refuses it once the operation
// has ended, it never opens another resource's state, and the next operation gets another one.
func TestEngine_backendPasswordPerOperation(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, harnessOpts{tokens: state.NewTokens()})
	dump := func(n int) string {
		return `{"resource":{"terraform_data":{"probe":{"triggers_replace":"` + strconv.Itoa(n) + `",
	  "provisioner":{"local-exec":{"command":"echo \"$TF_HTTP_ADDRESS $TF_HTTP_USERNAME $TF_HTTP_PASSWORD\" > ` + filepath.Join(dir, strconv.Itoa(n)) + `"}}}}}}`
	}
	// seen applies the n-th configuration (a replacement, so its local-exec runs while the operation holds its
	// password, and tofu itself reads and writes the state with it) and returns what tofu saw.
	seen := func(n int) (addr, user, password string) {
		t.Helper()
		h.apply(h.plan(dump(n)))
		f := strings.Fields(fileContent(t, filepath.Join(dir, strconv.Itoa(n))))
		if len(f) != 3 || f[2] == "" || f[2] == "backend-pw" {
			t.Fatalf("tofu saw %q, want an address, a user and an issued password", f)
		}
		return f[0], f[1], f[2]
	}
	get := func(addr, user, password string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	addr, user, first := seen(1)
	if code := get(addr, user, first); code != http.StatusUnauthorized {
		t.Errorf("the first operation's password after it ended: HTTP %d, want 401", code)
	}
	other := strings.Replace(addr, "/"+h.key.Name, "/another", 1)
	if other == addr {
		t.Fatalf("address %s does not name %s", addr, h.key.Name)
	}
	if code := get(other, user, first); code != http.StatusUnauthorized {
		t.Errorf("the first operation's password on another resource: HTTP %d, want 401", code)
	}
	_, _, second := seen(2)
	if second == first {
		t.Errorf("two operations got the same password %q", first)
	}
}

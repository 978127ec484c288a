//go:build integration

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/up"
)

// fileWriteAttacks are the file-write attacks of docs/security.md ("Engines", file
// writes): a tenant's local_file over lava up's signing.pub (embedded engine), an executable
// planted into the provider mirror (tofu engine; a second manifest naming evil/pwn would have
// run it) and into the engines' work directory, a templated filename that leaves its
// directory, and a literal ".." under the demo directory. STATE, MIRROR and OUT are replaced
// by the test's directories.
const fileWriteAttacks = `apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: pub, namespace: tenant}
spec:
  source:
    inline: |
      (deflava-architecture pub
        :resources ((local-file "k" :filename "STATE/signing.pub" :content "attacker-key")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: plant, namespace: tenant}
spec:
  engine: tofu
  source:
    inline: |
      (deflava-architecture plant
        :resources ((local-file "p" :filename "MIRROR/registry.opentofu.org/evil/pwn/1.0.0/linux_amd64/terraform-provider-pwn_v1.0.0"
                       :content "#!/bin/sh\ntouch OUT/pwned\n" :file-permission "0755")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: plant-work, namespace: tenant}
spec:
  source:
    inline: |
      (deflava-architecture plant-work
        :resources ((local-file "p" :filename "STATE/work/terraform-provider-pwn" :content "#!/bin/sh\n" :file-permission "0755")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: escape, namespace: tenant}
spec:
  engine: tofu
  source:
    inline: |
      (deflava-architecture escape
        :resources ((local-file "e" :filename "${path.module}/../escaped.txt" :content "out")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: dotdot, namespace: tenant}
spec:
  source:
    inline: |
      (deflava-architecture dotdot
        :resources ((local-file "d" :filename "DEMO/../lava-demo-escaped-OUTBASE.txt" :content "out")))
`

// TestUp_fileWriteAttacks runs the writes of fileWriteAttacks through lava up with its
// built-in policy (namespace tenant: fileWriteRoots [up.DemoDir/tenant]): each ends Failed
// with reason PolicyRejected at the manifest's line:col, signing.pub keeps lava up's key,
// nothing is planted in the mirror or the work directory, no escaped file exists; a second run
// with a manifest naming the planted provider finds none, and the planted program never ran.
// lava validate reports the same positions.
func TestUp_fileWriteAttacks(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	// A private copy of the mirror's hashicorp/local: the attack must not reach the shared one.
	mirror := t.TempDir()
	local := filepath.Join("registry.opentofu.org", "hashicorp", "local")
	if err := os.CopyFS(filepath.Join(mirror, local), os.DirFS(filepath.Join(tofuDir, "providers", local))); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	stateDir := filepath.Join(t.TempDir(), "state")
	manifests := t.TempDir()
	p := filepath.Join(manifests, "attacks.yaml")
	doc := strings.NewReplacer("STATE", stateDir, "MIRROR", mirror, "OUTBASE", filepath.Base(out), "OUT", out, "DEMO", up.DemoDir).Replace(fileWriteAttacks)
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	escaped := filepath.Join(filepath.Dir(up.DemoDir), "lava-demo-escaped-"+filepath.Base(out)+".txt")
	t.Cleanup(func() { os.Remove(escaped) })
	want := map[string]string{
		"pub":        p + ":8:21: policy: resource local_file.k attribute filename: the path \"" + stateDir + "/signing.pub\" is outside the allowed directories (fileWriteRoots: " + up.DemoDir + "/tenant)",
		"plant":      p + ":18:21: policy: resource local_file.p attribute filename: the path \"" + mirror + "/registry.opentofu.org/evil/pwn",
		"plant-work": p + ":28:21: policy: resource local_file.p attribute filename: the path \"" + stateDir + "/work/terraform-provider-pwn\" is outside",
		"escape":     p + ":38:21: policy: resource local_file.e attribute filename: the path \"${path.module}/../escaped.txt\" is a template",
		"dotdot":     p + ":47:21: policy: resource local_file.d attribute filename: the path \"" + up.DemoDir + "/../lava-demo-escaped-",
	}
	_, _, verr := runLava(t, "", "validate", p)
	for name, w := range want {
		if !strings.Contains(verr, strings.Replace(w, ": policy:", ": error: policy:", 1)) {
			t.Errorf("validate lacks %s's %q:\n%s", name, w, verr)
		}
	}

	code, stdout, stderr := runLava(t, "", "up", "--once", "-f", manifests, "--state-dir", stateDir,
		"--providers", mirror, "--tofu-bin", filepath.Join(tofuDir, "bin", "tofu"), "--timeout", "4m", "--interval", "200ms")
	if code != exitOK {
		t.Fatalf("lava up --once: exit %d\nstdout:\n%s\nstderr:\n%s\nlog:\n%s", code, stdout, stderr, readFile(t, filepath.Join(stateDir, up.FileLog)))
	}
	for name, w := range want {
		o, _ := object(t, stateDir, "tenant", name)
		c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionSynthesized)
		if o.Status.Phase != v1alpha1.PhaseFailed || c == nil || c.Reason != v1alpha1.ReasonPolicyRejected || !strings.Contains(c.Message, w) {
			t.Errorf("%s: phase %s, Synthesized %+v; want Failed, PolicyRejected, a message with %q", name, o.Status.Phase, c, w)
		}
	}
	if pub := readFile(t, filepath.Join(stateDir, up.FilePublicKey)); strings.Contains(pub, "attacker-key") {
		t.Errorf("signing.pub was replaced: %q", pub)
	}
	for _, f := range []string{filepath.Join(mirror, "registry.opentofu.org", "evil"), filepath.Join(stateDir, up.DirWork, "terraform-provider-pwn"),
		filepath.Join(out, "pwned"), escaped} {
		if _, err := os.Lstat(f); !os.IsNotExist(err) {
			t.Errorf("%s was written (%v)", f, err)
		}
	}
	// The second half of the trial: a later manifest names the planted provider. It must not
	// find it (ProviderUnavailable), and the planted program never runs.
	use := `apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: use-pwn, namespace: tenant}
spec:
  source:
    inline: |
      (deflava-architecture use-pwn
        :providers ((pwn :source "evil/pwn"))
        :resources ((pwn-thing "x" :a "b")))
`
	if err := os.WriteFile(filepath.Join(manifests, "use.yaml"), []byte(use), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runLava(t, "", "up", "--once", "-f", manifests, "--state-dir", stateDir,
		"--providers", mirror, "--tofu-bin", filepath.Join(tofuDir, "bin", "tofu"), "--timeout", "4m", "--interval", "200ms")
	if code != exitOK {
		t.Fatalf("lava up --once, second run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if o, _ := object(t, stateDir, "tenant", "use-pwn"); o.Status.Phase != v1alpha1.PhaseFailed {
		t.Errorf("use-pwn: phase %s %+v, want Failed (the provider is not in the mirror)", o.Status.Phase, o.Status.Conditions)
	}
	if _, err := os.Stat(filepath.Join(out, "pwned")); !os.IsNotExist(err) {
		t.Errorf("the planted provider ran: %s/pwned %v", out, err)
	}
	err := filepath.WalkDir(filepath.Join(stateDir, up.DirWork), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "escaped.txt" {
			t.Errorf("the templated filename escaped to %s", p)
		}
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// TestUp_fileWriteRoots: under a policy whose fileWriteRoots holds the test's directory, the
// same kind of write applies through both engines (local_file with embedded and with tofu),
// and a path one level outside the root is still refused; a policy whose root holds the state
// directory stops lava up at start.
func TestUp_fileWriteRoots(t *testing.T) {
	out := t.TempDir()
	manifests := t.TempDir()
	doc := strings.ReplaceAll(`apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: emb, namespace: tenant}
spec:
  engine: embedded
  source:
    inline: |
      (deflava-architecture emb
        :resources ((local-file "f" :filename "OUT/a/embedded.txt" :content "embedded")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: tof, namespace: tenant}
spec:
  engine: tofu
  source:
    inline: |
      (deflava-architecture tof
        :resources ((local-file "f" :filename "OUT/b/tofu.txt" :content "tofu")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: outside, namespace: tenant}
spec:
  source:
    inline: |
      (deflava-architecture outside
        :resources ((local-file "f" :filename "OUT-sibling.txt" :content "no")))
`, "OUT", out)
	if err := os.WriteFile(filepath.Join(manifests, "files.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("cluster: {fileWriteRoots: ["+out+"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	upOnce(t, manifests, stateDir, "--policy", pol)
	for name, f := range map[string][2]string{"emb": {"a/embedded.txt", "embedded"}, "tof": {"b/tofu.txt", "tofu"}} {
		if o, _ := object(t, stateDir, "tenant", name); o.Status.Phase != v1alpha1.PhaseApplied {
			t.Errorf("%s: phase %s %+v, want Applied", name, o.Status.Phase, o.Status.Conditions)
		}
		if got := readFile(t, filepath.Join(out, f[0])); got != f[1] {
			t.Errorf("%s = %q, want %q", f[0], got, f[1])
		}
	}
	o, _ := object(t, stateDir, "tenant", "outside")
	if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionSynthesized); o.Status.Phase != v1alpha1.PhaseFailed || c == nil ||
		c.Reason != v1alpha1.ReasonPolicyRejected || !strings.Contains(c.Message, "is outside the allowed directories (fileWriteRoots: "+out+")") {
		t.Errorf("outside: phase %s, Synthesized %+v; want Failed, PolicyRejected", o.Status.Phase, c)
	}
	if _, err := os.Stat(out + "-sibling.txt"); !os.IsNotExist(err) {
		t.Errorf("the write outside the root happened (%v)", err)
	}
	// A root that holds the state directory (its keys and seeds) is refused at start
	// (docs/design/0022-file-access-from-schemas.md).
	wide := t.TempDir()
	if err := os.WriteFile(pol, []byte("cluster: {fileWriteRoots: ["+wide+"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runLava(t, "", "up", "--once", "-f", manifests, "--state-dir", filepath.Join(wide, "state"), "--policy", pol)
	if code == 0 || !strings.Contains(stderr, "cluster.fileWriteRoots: "+wide+" overlaps "+filepath.Join(wide, "state")) {
		t.Errorf("lava up with a root over its state directory: exit %d, stderr %q", code, stderr)
	}
}

// expressionAttacks are reads of lava up's signing key into status.outputs or a condition, each
// of which applies through the tofu engine unless the rules of docs/security.md ("Engines":
// static addresses, the rendered-JSON walk, templatestring denied) refuse it: a reference's
// attribute that closes its ${} before a file() call, templatestring re-evaluating an escaped
// literal and a binding, a call in an import's index. STATE is replaced by the test's state
// directory.
const expressionAttacks = `apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: ref, namespace: tenant}
spec:
  engine: tofu
  source:
    inline: |
      (deflava-architecture ref
        :resources ((terraform-data "x" :input "a"))
        :outputs (:leak (ref terraform-data "x" "id}${file(\"STATE/signing.key\")")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: tstring, namespace: tenant}
spec:
  engine: tofu
  bindings:
    payload: '${file("STATE/signing.key")}'
  source:
    inline: |
      (deflava-architecture tstring
        :inputs ((:payload ""))
        :locals (:t "$${file(\"STATE/signing.key\")}" :b "{payload}")
        :resources ((terraform-data "leak" :input "${templatestring(local.t, {})}")
                    (terraform-data "leakb" :input "${templatestring(local.b, {})}"))
        :outputs (:leak (ref terraform-data "leak" output)))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: impto, namespace: tenant}
spec:
  engine: tofu
  source:
    inline: |
      (deflava-architecture impto
        :resources ((terraform-data "a" :input "x" :for-each (:k "v"))
                    (import "terraform_data.a[file(\"STATE/signing.key\")]" "whatever")))
`

// TestUp_expressionAttacks runs expressionAttacks through lava up on the tofu engine: each
// object ends Failed before any plan (PolicyRejected, at the manifest's line:col), and the signing key's text is in no status file and not in lava up's log.
func TestUp_expressionAttacks(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	manifests := t.TempDir()
	p := filepath.Join(manifests, "attacks.yaml")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(expressionAttacks, "STATE", stateDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ref":     p + ":10:19: policy: output leak reference",
		"tstring": p + ":24:21: policy:",
		"impto":   p + ":35:7: policy: import address",
	}
	code, stdout, stderr := runLava(t, "", "up", "--once", "-f", manifests, "--state-dir", stateDir,
		"--providers", filepath.Join(tofuDir, "providers"), "--tofu-bin", filepath.Join(tofuDir, "bin", "tofu"), "--timeout", "4m", "--interval", "200ms")
	if code != exitOK {
		t.Fatalf("lava up --once: exit %d\nstdout:\n%s\nstderr:\n%s\nlog:\n%s", code, stdout, stderr, readFile(t, filepath.Join(stateDir, up.FileLog)))
	}
	for name, w := range want {
		o, _ := object(t, stateDir, "tenant", name)
		c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionSynthesized)
		if o.Status.Phase != v1alpha1.PhaseFailed || c == nil || c.Reason != v1alpha1.ReasonPolicyRejected || !strings.Contains(c.Message, w) || o.Status.Outputs != nil {
			t.Errorf("%s: phase %s, Synthesized %+v, outputs %v; want Failed before any plan, PolicyRejected, a message with %q", name, o.Status.Phase, c, o.Status.Outputs, w)
		}
	}
	o, _ := object(t, stateDir, "tenant", "tstring")
	if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionSynthesized); c == nil || !strings.Contains(c.Message, "templatestring is not allowed") {
		t.Errorf("tstring: Synthesized %+v; want a message naming templatestring", c)
	}
	key := strings.TrimSpace(readFile(t, filepath.Join(stateDir, up.FileSigningKey)))
	if len(key) < 16 {
		t.Fatalf("signing.key holds %d characters; the leak check needs the key", len(key))
	}
	var files []string
	_ = filepath.WalkDir(filepath.Join(stateDir, up.DirStatus), func(f string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, f)
		}
		return nil
	})
	files = append(files, filepath.Join(stateDir, up.FileLog))
	for _, f := range files {
		if strings.Contains(readFile(t, f), key) {
			t.Errorf("%s holds the signing key", f)
		}
	}
}

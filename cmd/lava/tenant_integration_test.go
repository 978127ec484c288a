//go:build integration

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/up"
)

// tenantManifests are what a tenant with nothing but the right to create a LavaArchitecture
// tries (docs/security.md, "Rendering" and "Engines"). DIR is the test's output directory.
const tenantManifests = `apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: exec, namespace: tenant}
spec:
  engine: tofu
  source:
    inline: |
      (deflava-architecture exec
        :resources ((terraform-data "run" :input "x"
                      :provisioner (:local-exec (:command "touch DIR/marker")))))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: read-file, namespace: tenant}
spec:
  source:
    inline: |
      (deflava-architecture read-file
        :resources ((terraform-data "leak" :input "${file(\"/etc/hostname\")}")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: dotdot, namespace: tenant}
spec:
  source:
    inline: |
      (deflava-architecture dotdot
        :providers ((evil :source "../../tmp/evil"))
        :resources ((evil-thing "x" :a "b")))
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: binding, namespace: tenant}
spec:
  engine: tofu
  bindings: {v: '${file("/etc/hostname")}', dir: DIR}
  source:
    inline: |
      (deflava-architecture binding
        :inputs ((:v "") (:dir ""))
        :resources ((local-file "out" :filename "{dir}/binding.txt" :content "{v}")))
`

// TestUp_tenantAttacks runs the attacks through lava up (real synth, applier, tofu and the
// embedded engine): the provisioner, the filesystem function and the ".." provider source end
// Failed with reason PolicyRejected at the manifest's line:col and nothing of them runs (the
// provisioner's marker file is absent); the binding is applied as its literal text. lava
// validate reports the same positions.
func TestUp_tenantAttacks(t *testing.T) {
	out := t.TempDir()
	manifests := t.TempDir()
	p := filepath.Join(manifests, "tenant.yaml")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(tenantManifests, "DIR", out)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"exec":      p + ":9:21: policy: resource terraform_data.run: a provisioner block is not allowed",
		"read-file": p + ":19:21: policy: resource terraform_data.leak attribute input: the function file is not allowed",
		"dotdot":    p + ":28:21: policy: provider evil: provider source \"../../tmp/evil\" is not a registry address",
	}
	pol := rootsPolicy(t, out) // the binding manifest writes under out
	_, _, verr := runLava(t, "", "validate", "--policy", pol, p)
	for name, w := range want {
		if !strings.Contains(verr, strings.Replace(w, ": policy:", ": error: policy:", 1)) {
			t.Errorf("validate lacks %s's %q:\n%s", name, w, verr)
		}
	}

	stateDir := filepath.Join(t.TempDir(), "state")
	upOnce(t, manifests, stateDir, "--policy", pol)
	for name, w := range want {
		o, _ := object(t, stateDir, "tenant", name)
		c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionSynthesized)
		if o.Status.Phase != v1alpha1.PhaseFailed || c == nil || c.Reason != v1alpha1.ReasonPolicyRejected || !strings.Contains(c.Message, w) {
			t.Errorf("%s: phase %s, Synthesized %+v; want Failed, PolicyRejected, a message with %q", name, o.Status.Phase, c, w)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "marker")); !os.IsNotExist(err) {
		t.Errorf("the local-exec provisioner ran: marker file %v", err)
	}
	o, _ := object(t, stateDir, "tenant", "binding")
	if o.Status.Phase != v1alpha1.PhaseApplied {
		t.Errorf("binding: phase %s %+v, want Applied", o.Status.Phase, o.Status.Conditions)
	}
	if got := readFile(t, filepath.Join(out, "binding.txt")); got != `${file("/etc/hostname")}` {
		t.Errorf("binding.txt = %q, want the literal binding", got)
	}
}

// TestUp_secretOutputNeverLeaks is the attack of docs/security.md "Rendering" (sensitive
// values) on a real API server: outputs that show a Secret binding, directly or through a
// resource, reach only the outputs Secret. Values a source derives from the binding with
// Terraform's own functions (`tonumber(strrev(...))` and, on tofu, `cidrsubnet(upper(...))`,
// whose errors print the derived value, which must stay out of the Failed condition, a for_each
// over `upper(...)`, which must stay out of status.plan.resources, and a for expression whose
// duplicate key HCL's error quotes), on the embedded and the tofu engine, fail without
// showing it: synth hands the engines the value marked sensitive, and both engines hide the
// detail of a failed function call and of an error over sensitive values. The value and both derived values, in
// any of the forms text carries them in (engine.Forms: as is, JSON-escaped, base64, line by
// line), are in no status, Event, log line, stream message (phases, commands, anomalies,
// receipts) of the run.
func TestUp_secretOutputNeverLeaks(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run `make tools-tofu` and the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	const value = "S3cr3t-db-\"pw\"-7f3a9c"
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Data: map[string][]byte{"pw": []byte(value)}}); err != nil {
		t.Fatal(err)
	}
	// lava up impersonates the objects' ServiceAccount (--default-service-account app), which
	// may read the Secret and write the outputs Secrets.
	secretsRole(t, env.Client, ns, "app", []string{"get", "create", "update"})
	obj := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leak"}}
	obj.Spec.Source.Inline = `(deflava-architecture leak
  :inputs ((:pw ""))
  :resources ((terraform-data "holder" :input "{pw}"))
  :outputs (:direct "{pw}" :derived (ref terraform-data "holder" output) :plain "visible"))
`
	obj.Spec.BindingsFrom = []v1alpha1.BindingsSource{{SecretRef: &v1alpha1.ObjectKeyReference{Name: "db"}}}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	// The derived-value attacks, each on both engines: name -> what the Failed message says.
	attacks := map[string]struct{ source, want string }{
		"strrev": {`(terraform-data "n" :input "${tonumber(strrev(local.pw))}")`, "sensitive"},
		"keyed":  {`(terraform-data "k" :for_each "${toset([upper(local.pw)])}" :input "k")`, "for_each"},
		// OpenTofu's cidrsubnet quotes the address it refuses.
		"cidr": {`(terraform-data "c" :input "${cidrsubnet(upper(local.pw), 8, 1)}")`, "sensitive"},
		// HCL's own error quotes the duplicate key (no function fails, so only hiding every
		// error's detail over sensitive values keeps it out).
		"dupkey": {`(terraform-data "d" :input "${ {for c in [\"a\", \"b\"] : upper(local.pw) => c} }")`, "Duplicate object key"},
		// The same error at apply time (the collection is unknown at plan): tofu's apply output
		// is human text, whose tail shows the key.
		"dupapply": {`(terraform-data "a" :input ("a" "b")) (terraform-data "d" :input "${ {for c in terraform_data.a.output : upper(local.pw) => c} }")`, "Duplicate object key"},
	}
	for name, a := range attacks {
		for _, eng := range []v1alpha1.Engine{v1alpha1.EngineEmbedded, v1alpha1.EngineTofu} {
			o := &v1alpha1.LavaArchitecture{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + string(eng)}}
			o.Spec.Engine = eng
			o.Spec.Source.Inline = "(deflava-architecture " + name + "\n  :inputs ((:pw \"\"))\n  :locals (:pw \"{pw}\")\n  :resources (" + a.source + "))\n"
			o.Spec.BindingsFrom = obj.Spec.BindingsFrom
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := runLava(t, "", "up", "--once", "--kubeconfig", writeUpKubeconfig(t, env.Config), "--namespaces", ns,
		"--state-dir", stateDir, "--providers", filepath.Join(tofuDir, "providers"), "--timeout", "3m", "--default-service-account", "app")
	if code != exitOK {
		t.Fatalf("lava up: exit %d\nstdout:\n%s\nstderr:\n%s\nlog:\n%s", code, stdout, stderr, readFile(t, filepath.Join(stateDir, up.FileLog)))
	}
	got := &v1alpha1.LavaArchitecture{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1alpha1.PhaseApplied || got.Status.OutputsSecret == "" {
		t.Fatalf("phase %s, outputsSecret %q; want Applied with an outputs Secret", got.Status.Phase, got.Status.OutputsSecret)
	}
	if _, ok := got.Status.Outputs["plain"]; !ok || len(got.Status.Outputs) != 1 {
		t.Errorf("status.outputs %v, want only plain", got.Status.Outputs)
	}
	sec := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: got.Status.OutputsSecret}, sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["direct"]) != value || string(sec.Data["derived"]) != value {
		t.Errorf("outputs Secret %v, want direct and derived holding the value", sec.Data)
	}
	attacked := map[string][]byte{}
	for name, a := range attacks {
		for _, eng := range []v1alpha1.Engine{v1alpha1.EngineEmbedded, v1alpha1.EngineTofu} {
			o := &v1alpha1.LavaArchitecture{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-" + string(eng)}, o); err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, c := range o.Status.Conditions {
				msgs = append(msgs, c.Type+": "+c.Message)
			}
			if msg := strings.Join(msgs, "; "); o.Status.Phase != v1alpha1.PhaseFailed || !strings.Contains(msg, a.want) {
				t.Errorf("%s on %s: phase %s, conditions %q; want Failed with a message naming %q", name, eng, o.Status.Phase, msg, a.want)
			}
			attacked[o.Name], _ = json.Marshal(o.Status)
		}
	}

	// Everything a reader of status, Events, logs and streams sees.
	places := map[string][]byte{"log": []byte(readFile(t, filepath.Join(stateDir, up.FileLog))), "stdout": []byte(stdout)}
	st, _ := json.Marshal(got.Status)
	places["status"] = st
	for name, b := range attacked {
		places["status of "+name] = b
	}
	evs := &corev1.EventList{}
	if err := env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 {
		t.Error("no Events: the check below would pass vacuously")
	}
	places["events"], _ = json.Marshal(evs)
	streams := 0
	err := filepath.WalkDir(filepath.Join(stateDir, up.DirNATS), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		for _, s := range []string{"LAVA_PHASES", "LAVA_COMMANDS", "LAVA_ANOMALIES", "LAVA_RECEIPTS"} {
			if strings.Contains(p, string(filepath.Separator)+s+string(filepath.Separator)) {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				places[p] = b
				streams++
			}
		}
		return nil
	})
	if err != nil || streams == 0 {
		t.Fatalf("read the stream files: %v (%d files)", err, streams)
	}
	// Control: the plain output is in the phase stream's files (the Applied event), so the
	// stream files are read in a form in which a leaked value would show.
	control := false
	for where, b := range places {
		control = control || strings.Contains(where, "LAVA_PHASES") && bytes.Contains(b, []byte("visible"))
	}
	if !control {
		t.Error("the plain output \"visible\" is in no LAVA_PHASES file: the check below would pass vacuously")
	}
	var forms []string
	for _, v := range []string{value, reverse(value), strings.ToUpper(value)} {
		forms = append(forms, engine.Forms(v)...)
	}
	for where, b := range places {
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("the secret or a value derived from it (as %q) is in %s", f, where)
			}
		}
	}
}

// reverse is Terraform's strrev for the ASCII test value.
func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}

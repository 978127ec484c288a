//go:build integration

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lava-operator/lava/api/v1alpha1"
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
	_, _, verr := runLava(t, "", "validate", p)
	for name, w := range want {
		if !strings.Contains(verr, strings.Replace(w, ": policy:", ": error: policy:", 1)) {
			t.Errorf("validate lacks %s's %q:\n%s", name, w, verr)
		}
	}

	stateDir := filepath.Join(t.TempDir(), "state")
	upOnce(t, manifests, stateDir)
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

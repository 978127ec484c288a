//go:build integration

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/up"
)

// TestApprove_workflow is the "approve a plan" workflow on a real API server with the real
// pipeline (`lava up --kubeconfig`): a manual object ends awaiting approval with its planned
// actions per address in status.plan; `lava approve` with another id is refused and changes
// nothing; `lava approve NS/NAME ID` sets spec.approvePlan, and the next run applies exactly
// that plan.
func TestApprove_workflow(t *testing.T) {
	tofuDir := os.Getenv("LAVA_TOFU_DIR")
	if tofuDir == "" {
		t.Fatal("LAVA_TOFU_DIR is not set: run the tests through make (or export LAVA_TOFU_DIR=~/.cache/lava/tools/tofu-v1.12.6)")
	}
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	kubeconfig := writeUpKubeconfig(t, env.Config)
	obj := &v1alpha1.LavaArchitecture{}
	obj.Namespace, obj.Name = ns, "gated"
	obj.Spec.Source.Inline = `(deflava-architecture gated :inputs ((:v "x"))
  :resources ((terraform-data "a" :input "{v}") (terraform-data "b" :input "{v}")))`
	obj.Spec.Bindings = map[string]string{"v": "1"}
	obj.Spec.ApprovePlan = v1alpha1.ApprovePlanManual
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	upOnce := func() {
		t.Helper()
		code, stdout, stderr := runLava(t, "", "up", "--once", "--kubeconfig", kubeconfig, "--namespaces", ns, "--state-dir", stateDir,
			"--providers", filepath.Join(tofuDir, "providers"), "--timeout", "3m")
		if code != exitOK {
			t.Fatalf("lava up --once: exit %d\nstdout:\n%s\nstderr:\n%s\nlog:\n%s", code, stdout, stderr, readFile(t, filepath.Join(stateDir, up.FileLog)))
		}
	}
	get := func() *v1alpha1.LavaArchitecture {
		t.Helper()
		got := &v1alpha1.LavaArchitecture{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	upOnce()
	held := get()
	if !meta.IsStatusConditionTrue(held.Status.Conditions, v1alpha1.ConditionAwaitingApproval) || held.Status.Plan == nil {
		t.Fatalf("status %+v, want a plan awaiting approval", held.Status)
	}
	id := held.Status.Plan.ID
	want := []v1alpha1.PlannedResource{{Address: "terraform_data.a", Action: "create"}, {Address: "terraform_data.b", Action: "create"}}
	if got := held.Status.Plan.Resources; len(got) != 2 || got[0] != want[0] || got[1] != want[1] || held.Status.Plan.ResourcesOmitted != 0 {
		t.Errorf("status.plan.resources %+v (omitted %d), want %+v", got, held.Status.Plan.ResourcesOmitted, want)
	}

	key := ns + "/gated"
	other := strings.Repeat("ab", 32)
	code, _, stderr := runLava(t, "", "approve", key, other, "--kubeconfig", kubeconfig)
	if code != exitInvalid || !strings.Contains(stderr, "plan "+other+" is superseded") || !strings.Contains(stderr, "holds plan "+id) {
		t.Errorf("approve of another id: exit %d, stderr %s", code, stderr)
	}
	if got := get(); got.Spec.ApprovePlan != v1alpha1.ApprovePlanManual {
		t.Fatalf("a refused approval changed spec.approvePlan to %q", got.Spec.ApprovePlan)
	}
	code, stdout, stderr := runLava(t, "", "approve", key, id, "--kubeconfig", kubeconfig)
	if code != exitOK || !strings.Contains(stdout, "approved plan "+id) {
		t.Fatalf("approve: exit %d, stdout %s, stderr %s", code, stdout, stderr)
	}
	if got := get(); got.Spec.ApprovePlan != id {
		t.Fatalf("spec.approvePlan = %q, want %s", got.Spec.ApprovePlan, id)
	}

	upOnce()
	applied := get()
	if applied.Status.Phase != v1alpha1.PhaseApplied || applied.Status.Plan == nil || applied.Status.Plan.ID != id ||
		len(applied.Status.Plan.Resources) != 2 {
		t.Fatalf("after the approval: phase %s plan %+v, want Applied with plan %s and its actions", applied.Status.Phase, applied.Status.Plan, id)
	}
	if meta.IsStatusConditionTrue(applied.Status.Conditions, v1alpha1.ConditionAwaitingApproval) {
		t.Error("AwaitingApproval still True after the apply")
	}
	code, _, stderr = runLava(t, "", "approve", key, "--kubeconfig", kubeconfig)
	if code != exitInvalid || !strings.Contains(stderr, "no plan awaits approval") {
		t.Errorf("approve with nothing pending: exit %d, stderr %s", code, stderr)
	}
}

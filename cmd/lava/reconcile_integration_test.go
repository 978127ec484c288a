//go:build integration

package main

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
)

// TestReconcile_setsAnnotation: on a real API server, `lava reconcile NS/NAME` sets the
// reconcile annotation the watcher's forced pass reads (TestWatcher/remediation_policy_and_forced_passes)
// to a new time on every call, keeps the other annotations, and refuses an object that does
// not exist with exit 1.
func TestReconcile_setsAnnotation(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	kubeconfig := writeUpKubeconfig(t, env.Config)
	obj := &v1alpha1.LavaArchitecture{}
	obj.Namespace, obj.Name = ns, "net"
	obj.Annotations = map[string]string{"team": "infra"}
	obj.Spec.Source.Name = "greeting"
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	requested := func() string {
		t.Helper()
		code, stdout, stderr := runLava(t, "", "reconcile", ns+"/net", "--kubeconfig", kubeconfig)
		if code != exitOK || !strings.Contains(stdout, "requested a reconcile of "+ns+"/net") {
			t.Fatalf("lava reconcile: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		got := &v1alpha1.LavaArchitecture{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		if got.Annotations["team"] != "infra" {
			t.Errorf("annotations %v: the others must stay", got.Annotations)
		}
		at := got.Annotations[v1alpha1.ReconcileRequestedAnnotation]
		if _, err := time.Parse(time.RFC3339Nano, at); err != nil || !strings.Contains(stdout, at) {
			t.Fatalf("annotation %q (stdout %q): want the time printed", at, stdout)
		}
		return at
	}
	first := requested()
	if second := requested(); second == first {
		t.Errorf("a second request set the same value %q: the watcher would not see it", first)
	}
	code, _, stderr := runLava(t, "", "reconcile", ns+"/missing", "--kubeconfig", kubeconfig)
	if code != exitInvalid || !strings.Contains(stderr, ns+"/missing: not found") {
		t.Errorf("reconcile of a missing object: exit %d, stderr %s", code, stderr)
	}
}

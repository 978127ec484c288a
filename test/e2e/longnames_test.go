//go:build e2e

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/test/e2e/harness"
)

// longSource applies one testkit_file and has a plain and a sensitive output (the sensitive one
// goes to the outputs Secret).
const longSource = `(deflava-architecture long-names
  :inputs ((:dir "/tmp"))
  :providers ((testkit :source "example/testkit"))
  :resources ((testkit-file "kit" :filename "{dir}/kit.txt" :content "kit\n"))
  :outputs (:file (ref testkit-file "kit" filename) :token (sensitive "long-names-token-5e1f")))
`

// TestLongNames_andNamespaceDeletion: a LavaArchitecture with the longest name Kubernetes
// allows (253 characters, dots included) in a namespace with the longest name (63) goes through
// the pipeline (subjects, KV keys, receipts, the outputs Secret, Events); then its namespace is
// deleted with the object in it: kube-controller-manager's namespace controller deletes the
// object, the finalizer's destroy runs (the file is gone) and the namespace goes away.
func TestLongNames_andNamespaceDeletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	env := harness.Start(t, harness.Options{TestkitMirror: true,
		Services: []string{harness.Attest, harness.Viggy, harness.Applier, harness.Synth, harness.Watcher}})
	kc := newClient(t, env.Kubeconfig)
	ns := "ns-" + strings.Repeat("l", 59) + "x"
	name := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 60) + "z"
	if len(ns) != 63 || len(name) != 253 {
		t.Fatalf("namespace %d and name %d characters, want 63 and 253", len(ns), len(name))
	}
	if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	dir := env.Files(t)
	la := &v1alpha1.LavaArchitecture{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.LavaArchitectureSpec{Source: v1alpha1.Source{Inline: longSource},
			Bindings: map[string]string{"dir": dir}, Engine: v1alpha1.EngineEmbedded},
	}
	if err := kc.Create(ctx, la); err != nil {
		t.Fatal(err)
	}
	r := resource{ns, name}
	got := waitPhase(ctx, t, env, kc, r, v1alpha1.PhaseApplied, 4*time.Minute)
	checkFile(t, filepath.Join(dir, "kit.txt"), "kit\n")
	if _, ok := got.Status.Outputs["file"]; !ok {
		t.Errorf("status outputs %v, want file", got.Status.Outputs)
	}
	// The outputs Secret: the one the status names.
	secretName := got.Status.OutputsSecret
	if secretName == "" {
		t.Errorf("status names no outputs Secret; conditions %s", conditions(got))
	} else {
		var sec corev1.Secret
		if err := kc.Get(ctx, types.NamespacedName{Namespace: ns, Name: secretName}, &sec); err != nil {
			t.Errorf("outputs Secret %s: %v", secretName, err)
		} else if string(sec.Data["token"]) != "long-names-token-5e1f" {
			t.Errorf("outputs Secret %s holds keys %v", secretName, keys(sec.Data))
		}
	}
	// An Event about the object (Applied).
	poll(ctx, t, env, time.Minute, func() (bool, string) {
		var evs eventsv1.EventList
		if err := kc.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, e := range evs.Items {
			if e.Regarding.Name == name {
				reasons = append(reasons, e.Reason)
			}
		}
		return len(reasons) > 0, fmt.Sprintf("events about the object: %v", reasons)
	})
	out, err := env.Lava(ctx, "receipts", "verify", r.String(), "--nats-url", env.NATSURL, "--require-signatures", "--public-key", env.PublicKeyFile)
	if err != nil || !strings.Contains(out, ": ok (") {
		t.Errorf("lava receipts verify: %q %v", out, err)
	}

	// The namespace is deleted with the object in it.
	if err := kc.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	poll(ctx, t, env, 4*time.Minute, func() (bool, string) {
		err := kc.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		var left v1alpha1.LavaArchitectureList
		_ = kc.List(ctx, &left, client.InNamespace(ns))
		what := fmt.Sprintf("namespace %s still there (%v); %d LavaArchitectures left", ns, err, len(left.Items))
		for _, l := range left.Items {
			what += fmt.Sprintf("; %s phase %s finalizers %v conditions %s", l.Name[:12]+"...", l.Status.Phase, l.Finalizers, conditions(&l))
		}
		return false, what
	})
	t.Logf("namespace with a LavaArchitecture in it gone %.1fs after its deletion", time.Since(start).Seconds())
	if _, err := os.Stat(filepath.Join(dir, "kit.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kit.txt after the namespace's deletion: %v, want destroyed", err)
	}
	if err := env.Dead(); err != nil {
		t.Errorf("a process died during the run: %v", err)
	}
}

func keys[V any](m map[string]V) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	return k
}

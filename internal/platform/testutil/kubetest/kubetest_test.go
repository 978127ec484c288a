//go:build integration

package kubetest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
)

func TestStart_installsEstablishedCRDs(t *testing.T) {
	env := Start(t)
	if len(env.CRDs) != 3 {
		t.Fatalf("%d CRDs installed, want 3", len(env.CRDs))
	}
	for _, name := range []string{"lavaarchitectures.lava.pleme.io", "remediationpolicies.lava.pleme.io", "lavaarchitecturedependencies.lava.pleme.io"} {
		var c apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &c); err != nil {
			t.Fatalf("get CRD %s: %v", name, err)
		}
		established := false
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			t.Errorf("CRD %s is not established", name)
		}
	}
	ns := env.Namespace(t)
	var got corev1.Namespace
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &got); err != nil {
		t.Fatalf("namespace %s: %v", ns, err)
	}
	var list v1alpha1.LavaArchitectureList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("list LavaArchitectures: %v", err)
	}
	if len(list.Items) != 0 {
		t.Errorf("fresh namespace has %d LavaArchitectures", len(list.Items))
	}
}

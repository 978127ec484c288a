package up

import (
	"context"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/platform/kube"
)

// kubeView lists LavaArchitectures for the display when the watcher runs against a cluster.
type kubeView struct {
	c          client.Client
	namespaces []string
	last       Snapshot
}

func newKubeView(cfg *rest.Config, namespaces []string) (*kubeView, error) {
	scheme, err := kube.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &kubeView{c: c, namespaces: namespaces}, nil
}

// Snapshot lists the LavaArchitectures (of the watched namespaces); on an error it returns the
// last good list.
func (k *kubeView) Snapshot(ctx context.Context) Snapshot {
	var list v1alpha1.LavaArchitectureList
	if err := k.c.List(ctx, &list); err != nil {
		return k.last
	}
	var out []v1alpha1.LavaArchitecture
	for _, o := range list.Items {
		if len(k.namespaces) == 0 || slices.Contains(k.namespaces, o.Namespace) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.LavaArchitecture) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	k.last = Snapshot{Objects: out, Loaded: true}
	return k.last
}

package svc

import (
	"fmt"

	"k8s.io/client-go/rest"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
)

// KubeConfig loads the Kubernetes API configuration of a service that can run without one
// (--no-kube): nil when noKube, else controller-runtime's (the in-cluster configuration, else
// $KUBECONFIG or ~/.kube/config). Error: "kubernetes config (use --no-kube to run without):
// ...".
func KubeConfig(noKube bool) (*rest.Config, error) {
	if noKube {
		return nil, nil
	}
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config (use --no-kube to run without): %w", err)
	}
	return cfg, nil
}

package kube

import (
	"fmt"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// Config loads the API server configuration: the kubeconfig file at path when path is not
// empty (its current context), else controller-runtime's precedence (config.GetConfig:
// $KUBECONFIG, the in-cluster configuration, ~/.kube/config). Errors name the file or say
// that none of those was found.
func Config(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	return cfg, nil
}

// Optional is [Config] for a service that can run without the API server (--no-kube): nil
// when noKube. Error: "kubernetes config (use --no-kube to run without): ...".
func Optional(noKube bool) (*rest.Config, error) {
	if noKube {
		return nil, nil
	}
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes config (use --no-kube to run without): %w", err)
	}
	return cfg, nil
}

// NewScheme is a scheme with client-go's built-in kinds, the lava.pleme.io/v1alpha1 kinds and
// Flux's source.toolkit.fluxcd.io/v1 sources (spec.sourceRef). Each call returns a new scheme.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("kube: scheme: %w", err)
		}
	}
	return s, nil
}

package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/lava-operator/lava/config/crd"
)

// newCRDsCmd builds `lava crds`: every CRD the operator owns, as one YAML stream.
func newCRDsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "crds",
		Short: "Print every CustomResourceDefinition Lava owns",
		Long: `Crds prints the LavaArchitecture, LavaArchitectureDependency and RemediationPolicy
CustomResourceDefinitions (apiextensions.k8s.io/v1, each with its full openAPIV3Schema and CEL
validation rules), separated by "---" lines, ready for kubectl apply.`,
		Example: "  lava crds | kubectl apply --server-side -f -",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs := crd.All()
			if len(docs) == 0 {
				return errors.New("crds: no CRDs embedded in this build")
			}
			_, err := cmd.OutOrStdout().Write(crd.Join(docs))
			return err
		},
	}
}

// newCRDCmd builds `lava crd`: the LavaArchitecture CRD alone.
func newCRDCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "crd",
		Short: "Print the LavaArchitecture CustomResourceDefinition",
		Long: `Crd prints the LavaArchitecture CustomResourceDefinition alone (apiextensions.k8s.io/v1,
with its full openAPIV3Schema). Use lava crds for every CRD Lava owns.`,
		Example: "  lava crd | kubectl apply --server-side -f -",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc := crd.LavaArchitecture()
			if len(doc) == 0 {
				return errors.New("crd: the LavaArchitecture CRD is not embedded in this build")
			}
			_, err := cmd.OutOrStdout().Write(crd.Join([][]byte{doc}))
			return err
		},
	}
}

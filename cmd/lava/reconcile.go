package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine/state"
)

func newReconcileCmd() *cobra.Command {
	var kubeconfig string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "reconcile NAMESPACE/NAME",
		Short: "Request a reconcile of a LavaArchitecture now, as flux reconcile does",
		Long: `Reconcile sets the annotation ` + v1alpha1.ReconcileRequestedAnnotation + ` of NAMESPACE/NAME to
the current time. The watcher then runs a pass for the unchanged generation: it reads the
object's bindings sources again (the ConfigMaps, the Secrets' digest, the outputs it binds) and
publishes a ResourceObserved, so synth renders again and the applier plans; a plan that changes
nothing applies nothing. It prints the value set.`,
		Example: `  lava reconcile infra/prod-vpc`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := state.ParseKey(args[0])
			if err != nil {
				return invalidInput(err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			c, err := kubeClient(kubeconfig)
			if err != nil {
				return err
			}
			at, err := requestReconcile(ctx, c, key, time.Now())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "requested a reconcile of %s (%s=%s)\n", key, v1alpha1.ReconcileRequestedAnnotation, at)
			return err
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// requestReconcile sets the reconcile annotation of key to now (RFC 3339 with nanoseconds, so
// two requests differ) with a merge patch of the annotation alone, and returns the value.
// Errors: the object does not exist (invalid input), the API server's.
func requestReconcile(ctx context.Context, c client.Client, key state.Key, now time.Time) (string, error) {
	obj := &v1alpha1.LavaArchitecture{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return "", invalidInput(fmt.Errorf("%s: not found", key))
		}
		return "", err
	}
	patch := client.MergeFrom(obj.DeepCopy())
	at := now.UTC().Format(time.RFC3339Nano)
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[v1alpha1.ReconcileRequestedAnnotation] = at
	if err := c.Patch(ctx, obj, patch); err != nil {
		return "", fmt.Errorf("%s: request a reconcile: %w", key, err)
	}
	return at, nil
}

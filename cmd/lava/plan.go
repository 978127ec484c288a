package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/readmodel"
)

func newPlanCmd() *cobra.Command {
	var f previewFlags
	var speculative bool
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Plan a manifest before it is applied (--speculative), or review the plan a LavaArchitecture holds for approval (show)",
		Long:  previewLong,
		Example: `  lava plan --speculative -f examples/local-files.yaml
  lava plan --speculative -f prod-vpc.yaml --server http://lava-applier.lava-system:8080 \
    --token-file /var/run/secrets/kubernetes.io/serviceaccount/token --json | jq -r .planId`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !speculative {
				return cmd.Help()
			}
			return f.run(cmd)
		},
	}
	cmd.Flags().BoolVar(&speculative, "speculative", false, "plan -f FILE against the live object's state without applying or writing anything")
	f.register(cmd)
	cmd.AddCommand(newPlanShowCmd())
	return cmd
}

func newPlanShowCmd() *cobra.Command {
	var f stateFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAMESPACE/NAME",
		Short: "Print the plan awaiting approval as `tofu show` does: actions and attribute diffs, sensitive values masked",
		Long: `Show prints the plan NAMESPACE/NAME holds for approval (spec.approvePlan: manual or a plan
id, or under any policy a plan against a lost or regressed state or one a plan rule holds): its
id, engine and the state it was planned against, the plan rules that matched it, then per
resource address the action
and the attribute changes, as ` + "`tofu show`" + ` prints a saved plan. Values the plan marks
sensitive and values of the Secrets the object binds are never in the body ("(sensitive
value)"). With --json it prints the body itself: the JSON plan format of ` + "`tofu show -json`" + `
(resource_changes only). Approve what you reviewed with ` + "`lava approve NAMESPACE/NAME PLAN_ID`" + `.

It reads the applier's record in lava-state and the body in lava-artifacts over NATS (the
connection flags of ` + "`lava state`" + `).`,
		Example: `  lava plan show infra/prod-vpc --nats-url nats://nats.nats:4222
  lava plan show infra/prod-vpc --json | jq '.resource_changes[].address'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0], func(ctx context.Context, key state.Key, js jetstream.JetStream, _ *state.Store) error {
				rec, err := readmodel.Load(ctx, js, key.Namespace, key.Name)
				if err != nil {
					return err
				}
				held := rec.Held
				if held == nil {
					return invalidInput(fmt.Errorf("no plan of %s awaits approval (spec.approvePlan auto applies every plan; the last one is the object's status.plan: `kubectl get lava -n %s %s -o jsonpath='{.status.plan}'` on a cluster, <state-dir>/status/%s/%s.yaml under lava up)",
						key, key.Namespace, key.Name, key.Namespace, key.Name))
				}
				if held.ReviewDigest == "" {
					return fmt.Errorf("plan %s of %s has no review body (planned by an applier older than this CLI): request a reconcile to plan again", held.PlanID, key)
				}
				arts, err := bus.NewArtifacts(ctx, js)
				if err != nil {
					return err
				}
				rc, err := arts.Get(ctx, held.ReviewDigest)
				if err != nil {
					return fmt.Errorf("read the review body of plan %s: %w", held.PlanID, err)
				}
				defer rc.Close()
				body, err := io.ReadAll(io.LimitReader(rc, engine.MaxReviewBytes+1))
				if err != nil {
					return err
				}
				if len(body) > engine.MaxReviewBytes {
					return fmt.Errorf("review body of plan %s exceeds %d bytes", held.PlanID, engine.MaxReviewBytes)
				}
				out := cmd.OutOrStdout()
				if asJSON {
					_, err = fmt.Fprintln(out, string(body))
					return err
				}
				fmt.Fprintf(out, "Plan %s of %s (generation %d), awaiting approval\n", held.PlanID, key, rec.HeldGeneration)
				fmt.Fprintf(out, "Engine %s %s; planned %s against state serial %d, lineage %q, body %s\n\n",
					held.Engine, held.EngineVersion, held.CreatedAt.UTC().Format(time.RFC3339), held.StateSerial, held.StateLineage, orNone(held.StateDigest))
				if err := printPlan(out, held.Policy, body); err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "\nTo apply exactly this plan: lava approve %s %s (on a cluster), or under lava up -f set spec.approvePlan to %s in the manifest\n", key, held.PlanID, held.PlanID)
				return err
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan body (tofu show -json format) instead")
	return cmd
}

// printPlan prints the plan rules that matched a plan ([printVerdict]), then its review body
// (engine.RenderReview). Errors: a body that does not decode, the writer's.
func printPlan(out io.Writer, v *planpolicy.Result, body []byte) error {
	plan, err := engine.ParseReviewBody(body)
	if err != nil {
		return err
	}
	printVerdict(out, v)
	return engine.RenderReview(out, plan)
}

// printVerdict prints the plan rules that matched a held plan, a line each, then a blank
// line; nothing when none did.
func printVerdict(out io.Writer, v *planpolicy.Result) {
	if v == nil || len(v.Matches) == 0 {
		return
	}
	fmt.Fprintf(out, "Plan rules: %s\n", v.Verdict)
	for _, m := range v.Matches {
		fmt.Fprintf(out, "  %s\n", m)
	}
	fmt.Fprintln(out)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// errNothingPending: the object holds no plan for approval.
var errNothingPending = errors.New("no plan awaits approval")

// pendingPlan returns the id of the plan obj holds for approval: status.plan.id while the
// AwaitingApproval condition is True for the current generation's status.
func pendingPlan(obj *v1alpha1.LavaArchitecture) (string, error) {
	c := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionAwaitingApproval)
	if c == nil || c.Status != "True" || obj.Status.Plan == nil || obj.Status.Plan.ID == "" {
		return "", fmt.Errorf("%s/%s: %w (phase %s)", obj.Namespace, obj.Name, errNothingPending, obj.Status.Phase)
	}
	return obj.Status.Plan.ID, nil
}

func newApproveCmd() *cobra.Command {
	var kubeconfig string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "approve NAMESPACE/NAME [PLAN_ID]",
		Short: "Approve the plan a LavaArchitecture holds: set spec.approvePlan to its id",
		Long: `Approve sets spec.approvePlan of NAMESPACE/NAME to the id of the plan it holds for approval
(status.plan.id while the AwaitingApproval condition is True), which the applier then applies
exactly: the recorded plan, never a new one.

Give PLAN_ID (the id ` + "`lava plan show`" + ` printed) to approve only what you reviewed: when the
pending plan is another one (the configuration, the bindings or the state changed since, so the
plan id changed), approve refuses and names the pending id; review that one. The patch carries
the object's resourceVersion, so a change that lands between reading and patching is refused
too. An approval that becomes superseded after the patch is refused by the applier
(PlanSuperseded, docs/design/0003-plan-approval.md).`,
		Example: `  lava plan show infra/prod-vpc
  lava approve infra/prod-vpc 3f2a...   # the id plan show printed`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := state.ParseKey(args[0])
			if err != nil {
				return invalidInput(err)
			}
			want := ""
			if len(args) == 2 {
				want = strings.TrimSpace(args[1])
				if len(want) != 64 || strings.Trim(want, "0123456789abcdef") != "" {
					return invalidInput(fmt.Errorf("plan id %q: want 64 lowercase hex digits", want))
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			c, err := kubeClient(kubeconfig)
			if err != nil {
				return err
			}
			id, err := approve(ctx, c, key, want)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "approved plan %s of %s (spec.approvePlan)\n", id, key)
			return err
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// kubeClient returns a client of the API server kubeconfig names (empty: in-cluster, then
// $KUBECONFIG or ~/.kube/config) with Lava's scheme. Errors: an unavailable configuration.
func kubeClient(kubeconfig string) (client.Client, error) {
	cfg, err := kube.Config(kubeconfig)
	if err != nil {
		return nil, unavailable(fmt.Errorf("%w (this command talks to a cluster: give --kubeconfig; under lava up -f, change the manifest instead, e.g. spec.approvePlan)", err))
	}
	scheme, err := kube.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, unavailable(err)
	}
	return c, nil
}

// approve sets spec.approvePlan of key to its pending plan's id, refusing when want is set
// and is not that id; it returns the id approved.
func approve(ctx context.Context, c client.Client, key state.Key, want string) (string, error) {
	obj := &v1alpha1.LavaArchitecture{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return "", invalidInput(fmt.Errorf("%s: not found", key))
		}
		return "", err
	}
	pending, err := pendingPlan(obj)
	if err != nil {
		if want != "" && obj.Status.Plan != nil && obj.Status.Plan.ID == want {
			return "", invalidInput(fmt.Errorf("plan %s of %s does not await approval (phase %s): nothing to approve", want, key, obj.Status.Phase))
		}
		return "", invalidInput(err)
	}
	if want != "" && want != pending {
		return "", invalidInput(fmt.Errorf("plan %s is superseded: %s now holds plan %s (its configuration, bindings or state changed since); review it with `lava plan show %s` and approve that id",
			want, key, pending, key))
	}
	if obj.Spec.ApprovePlan == pending {
		return pending, nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
	obj.Spec.ApprovePlan = pending
	if err := c.Patch(ctx, obj, patch); err != nil {
		if apierrors.IsConflict(err) {
			return "", fmt.Errorf("%s changed while approving (try again after reviewing it): %w", key, err)
		}
		return "", err
	}
	return pending, nil
}

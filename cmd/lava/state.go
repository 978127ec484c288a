package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/readmodel"
)

// stateFlags are the connection flags of the state subcommands.
type stateFlags struct {
	natsFlags
	timeout time.Duration
}

func (f *stateFlags) register(cmd *cobra.Command) {
	f.natsFlags.register(cmd)
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this long")
}

// run parses the NAMESPACE/NAME argument, connects within --timeout and calls fn with the
// key, the JetStream context and the state store (records in lava-state, bodies in
// lava-artifacts); the connection is closed when fn returns.
func (f *stateFlags) run(cmd *cobra.Command, arg string, fn func(ctx context.Context, key state.Key, js jetstream.JetStream, store *state.Store) error) error {
	key, err := state.ParseKey(arg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	nc, js, err := f.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	kv, err := js.KeyValue(ctx, bus.BucketState)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", bus.BucketState, err)
	}
	art, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		return err
	}
	return fn(ctx, key, js, state.NewStore(kv, art, state.Options{}))
}

func newStateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Inspect a LavaArchitecture's Terraform state record, force its lock off, settle interrupted creates",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newStateShowCmd(), newStateUnlockCmd(), newStateAdoptCmd(), newStateForgetIntentCmd())
	return cmd
}

// stateView is what `lava state show` prints: never a state body or a secret.
type stateView struct {
	Resource string          `json:"resource"`
	State    *state.Record   `json:"state"`
	Applier  *applierSummary `json:"applier,omitempty"`
}

// maskedIdentity replaces the identity of an intent that holds a sensitive value.
var maskedIdentity = json.RawMessage(`"(sensitive value)"`)

// maskIdentities returns rec with the identity of every intent marked sensitive masked, so
// `lava state show` prints no value derived from a Secret.
func maskIdentities(rec state.Record) *state.Record {
	rec.Intents = slices.Clone(rec.Intents)
	for i := range rec.Intents {
		if rec.Intents[i].IdentitySensitive {
			rec.Intents[i].Identity = maskedIdentity
		}
	}
	return &rec
}

type applierSummary struct {
	HeldPlan       string                 `json:"heldPlan,omitempty"`
	HeldGeneration int64                  `json:"heldGeneration,omitempty"`
	AppliedPlans   []string               `json:"appliedPlans,omitempty"`
	Last           *readmodel.LastApplied `json:"lastApplied,omitempty"`
}

func newStateShowCmd() *cobra.Command {
	var f stateFlags
	cmd := &cobra.Command{
		Use:   "show NAMESPACE/NAME",
		Short: "Print the state record (serial, lineage, body digest, lock) and the applier's record as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0], func(ctx context.Context, key state.Key, js jetstream.JetStream, store *state.Store) error {
				view := stateView{Resource: key.String()}
				rec, err := store.Get(ctx, key)
				switch {
				case errors.Is(err, state.ErrNotFound):
				case err != nil:
					return err
				default:
					view.State = maskIdentities(rec)
				}
				ar, err := readmodel.Load(ctx, js, key.Namespace, key.Name)
				if err != nil {
					return err
				}
				if ar.UID != "" {
					view.Applier = &applierSummary{AppliedPlans: ar.Applied, Last: ar.Last, HeldGeneration: ar.HeldGeneration}
					if ar.Held != nil {
						view.Applier.HeldPlan = ar.Held.PlanID
					}
				}
				if view.State == nil && view.Applier == nil {
					return invalidInput(fmt.Errorf("no state for %s", key))
				}
				b, err := json.MarshalIndent(view, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			})
		},
	}
	f.register(cmd)
	return cmd
}

func newStateUnlockCmd() *cobra.Command {
	var f stateFlags
	cmd := &cobra.Command{
		Use:   "unlock NAMESPACE/NAME",
		Short: "Force the state lock of a LavaArchitecture off, whoever holds it",
		Long: `Unlock releases the Terraform state lock of NAMESPACE/NAME whatever its holder, for a lock
that is not tied to a lease (a lock whose holder lost the resource's lease is taken over at
once; other holders' locks expire after --lock-ttl). It prints the lock it
released. Only use it when no apply is running: the state could otherwise be written by two
operations.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0], func(ctx context.Context, key state.Key, _ jetstream.JetStream, store *state.Store) error {
				rec, err := store.Get(ctx, key)
				if err != nil && !errors.Is(err, state.ErrNotFound) {
					return err
				}
				if rec.Lock == nil {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s is not locked\n", key)
					return err
				}
				if err := store.Unlock(ctx, key, "", true); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "unlocked %s (lock %s held by %q for %s since %s)\n", key, rec.Lock.ID,
					rec.Lock.Holder, rec.Lock.Operation, rec.Lock.Created.UTC().Format(time.RFC3339))
				return err
			})
		},
	}
	f.register(cmd)
	return cmd
}

func newStateAdoptCmd() *cobra.Command {
	var f stateFlags
	cmd := &cobra.Command{
		Use:   "adopt NAMESPACE/NAME",
		Short: "Let the object now named NAMESPACE/NAME manage a state its deleted predecessor orphaned",
		Long: `Adopt clears the orphan mark a LavaArchitecture deleted with deletionPolicy: Orphan left on its
state. Until then a new object of the same name fails with reason StateOrphaned instead of
planning against that state. After adopting, the new object plans against the orphaned state and
manages (changes, or destroys on deletion) the infrastructure it records; request a reconcile
(the lava.pleme.io/reconcile-requested-at annotation) to plan now. It prints the uid of the
object that orphaned the state.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0], func(ctx context.Context, key state.Key, _ jetstream.JetStream, store *state.Store) error {
				rec, err := store.Get(ctx, key)
				if err != nil {
					return err
				}
				if rec.OrphanedBy == "" {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s is not orphaned\n", key)
					return err
				}
				if err := store.Adopt(ctx, key); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "adopted %s (serial %d, orphaned by uid %s on %s)\n", key, rec.Serial,
					rec.OrphanedBy, rec.OrphanedAt.UTC().Format(time.RFC3339))
				return err
			})
		},
	}
	f.register(cmd)
	return cmd
}

func newStateForgetIntentCmd() *cobra.Command {
	var f stateFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "forget-intent NAMESPACE/NAME [ADDRESS...]",
		Short: "Settle interrupted creates (reason CreateInterrupted): the objects do not exist, create them again",
		Long: `Forget-intent removes the create intents of the given resource instance addresses (every
intent with --all) from the state record of NAMESPACE/NAME. The embedded engine writes an intent
before each create and removes it with the state save that records the result; an intent left
behind means an apply died in between, so the object may exist. When the provider cannot look it
up by a resource identity, the object fails with reason CreateInterrupted and Lava creates
nothing for that address until an operator settles it.

Before running this, make sure each object does not exist: delete it if the create made it (or
add an import block for it to the architecture, so the next plan adopts it instead). The next
plan then creates whatever is missing. It prints the intents it removed. ` + "`lava state show`" + `
lists the intents under "intents".`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addrs := args[1:]
			if len(addrs) == 0 && !all {
				return errors.New("name the ADDRESSes to forget, or pass --all")
			}
			if len(addrs) > 0 && all {
				return errors.New("--all takes no ADDRESS")
			}
			return f.run(cmd, args[0], func(ctx context.Context, key state.Key, _ jetstream.JetStream, store *state.Store) error {
				rec, err := store.Get(ctx, key)
				if err != nil {
					return err
				}
				var gone []state.Intent
				for _, in := range rec.Intents {
					if all || slices.Contains(addrs, in.Address) {
						gone = append(gone, in)
					}
				}
				for _, a := range addrs {
					if !slices.ContainsFunc(gone, func(in state.Intent) bool { return in.Address == a }) {
						return invalidInput(fmt.Errorf("%s has no create intent for %s", key, a))
					}
				}
				if len(gone) == 0 {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s has no create intents\n", key)
					return err
				}
				if _, err := store.ResolveIntents(ctx, key, "", addrs); err != nil {
					return err
				}
				for _, in := range gone {
					if _, err := fmt.Fprintf(cmd.OutOrStdout(), "forgot the create intent of %s in %s (started %s)\n", in.Address, key,
						in.Started.UTC().Format(time.RFC3339)); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "forget every create intent of NAMESPACE/NAME")
	return cmd
}

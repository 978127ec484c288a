package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
		Short: "Inspect a LavaArchitecture's Terraform state record, force its lock off, settle interrupted creates, restore a lost state, pull or push a state file",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newStateShowCmd(), newStateUnlockCmd(), newStateAdoptCmd(), newStateRestoreCmd(), newStateForgetIntentCmd(),
		newStatePullCmd(), newStatePushCmd())
	return cmd
}

// stateView is what `lava state show` prints: never a state body or a secret.
type stateView struct {
	Resource string          `json:"resource"`
	State    *state.Record   `json:"state"`
	Applier  *applierSummary `json:"applier,omitempty"`
	// Replaced is the record `lava state restore` last replaced, when one did.
	Replaced *state.Forgotten `json:"replaced,omitempty"`
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
				switch rep, err := store.Replaced(ctx, key); {
				case errors.Is(err, state.ErrNotFound):
				case err != nil:
					return err
				default:
					rep.Record = *maskIdentities(rep.Record)
					view.Replaced = &rep
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

func newStateRestoreCmd() *cobra.Command {
	var f stateFlags
	var digest string
	var force bool
	cmd := &cobra.Command{
		Use:   "restore NAMESPACE/NAME",
		Short: "Put back the state the last apply left, after the state was lost or regressed out of band",
		Long: `Restore makes the state body the last apply of NAMESPACE/NAME left (its digest is in the applier's
record: ` + "`lava state show`" + `, lastApplied.stateDigest) the object's current state again: the way back
when the state record was deleted, or replaced by another lineage or an older serial, and the
object holds a plan against that state for approval (condition StateRegressed, anomaly
state_regressed). With --digest it restores another body of the artifact store instead (one
from the bucket's history, ` + "`nats kv history lava-state state.NS.NAME`" + `, or the record an
earlier restore replaced, ` + "`lava state show`" + ` "replaced").

A current state of another body is not lost: its record is kept under "replaced" and its body
in the artifact store. Restore refuses a locked state (an operation is running), and a current
state of the same lineage at a later serial than the one restored (a later Lava operation wrote
it; --force restores anyway). Then request a reconcile (the
lava.pleme.io/reconcile-requested-at annotation): the next plan is made against the restored
state and follows spec.approvePlan as usual. It prints what it restored and what it replaced.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if digest != "" && !bus.ValidDigest(digest) {
				return invalidInput(fmt.Errorf("--digest %q: want 64 lowercase hex digits", digest))
			}
			return f.run(cmd, args[0], func(ctx context.Context, key state.Key, js jetstream.JetStream, store *state.Store) error {
				if digest == "" {
					ar, err := readmodel.Load(ctx, js, key.Namespace, key.Name)
					if err != nil {
						return err
					}
					switch {
					case ar.Last == nil:
						return invalidInput(fmt.Errorf("%s has no apply recorded: there is no state of its own to restore; give one with --digest", key))
					case ar.Last.StateDigest == "":
						return invalidInput(fmt.Errorf("the last apply of %s (plan %s) was recorded without its state body's digest; find the body of serial %d of lineage %s in the history of lava-state (nats kv history lava-state %s) and give its digest with --digest",
							key, ar.Last.PlanID, ar.Last.StateSerial, ar.Last.StateLineage, "state."+bus.ResourceKey(key.Namespace, key.Name)))
					}
					digest = ar.Last.StateDigest
				}
				cur, err := store.Get(ctx, key)
				if err != nil && !errors.Is(err, state.ErrNotFound) {
					return err
				}
				if cur.HasState() && cur.Digest != digest && !force {
					h, err := restoredHeader(ctx, js, digest)
					if err != nil {
						return err
					}
					if h.Lineage == cur.Lineage && cur.Serial > h.Serial {
						return invalidInput(fmt.Errorf("%s holds serial %d of lineage %s, later than the serial %d to restore: a later operation wrote it, so it has not regressed; --force restores anyway",
							key, cur.Serial, cur.Lineage, h.Serial))
					}
				}
				rec, replaced, err := store.Restore(ctx, key, digest)
				if errors.Is(err, state.ErrLocked) {
					return invalidInput(fmt.Errorf("%w: an operation is running on it; restore after it ends (lava state show NS/NAME names the lock)", err))
				}
				if err != nil {
					return err
				}
				return reportReplaced(cmd.OutOrStdout(), key, cur.Digest == digest, rec, replaced,
					fmt.Sprintf("restored %s to serial %d of lineage %s", key, rec.Serial, rec.Lineage),
					" to plan against the restored state")
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&digest, "digest", "", "the artifact digest of the state body to restore (default: the one the last apply left)")
	cmd.Flags().BoolVar(&force, "force", false, "restore even over a later serial of the same lineage")
	return cmd
}

// restoredHeader reads the serial and lineage of the state body stored under digest.
func restoredHeader(ctx context.Context, js jetstream.JetStream, digest string) (state.Header, error) {
	art, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		return state.Header{}, err
	}
	rc, err := art.Get(ctx, digest)
	if err != nil {
		return state.Header{}, fmt.Errorf("state body %s: %w", digest, err)
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, state.DefaultMaxStateBytes+1))
	if err != nil {
		return state.Header{}, fmt.Errorf("state body %s: %w", digest, err)
	}
	return state.ParseHeader(body)
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

// stateFileAccess is who may run `lava state pull` and `lava state push`, in their help.
const stateFileAccess = `A state file holds every attribute of every resource, sensitive ones (passwords, keys, values
bound from Secrets) in clear, as OpenTofu's own state does. Pull and push read and write
lava-state with the NATS credentials they are given (the bootstrap identity's by default, as
every state command): run them only as an operator trusted with that identity and with the
infrastructure's secrets. Nothing from the state is logged; push prints only serials, lineages
and digests.`

func newStatePullCmd() *cobra.Command {
	var f stateFlags
	var out string
	cmd := &cobra.Command{
		Use:   "pull NAMESPACE/NAME",
		Short: "Write the Terraform state of NAMESPACE/NAME as a state file (format version 4) that OpenTofu and Terraform read",
		Long: `Pull writes the current Terraform state of NAMESPACE/NAME, as the object's engine wrote it (both
engines store OpenTofu's state format version 4), to --output (mode 0600, replaced whole) or to
standard output: ` + "`tofu show FILE`" + ` reads it, ` + "`tofu state push`" + ` takes it into another backend, and
` + "`lava state push`" + ` takes it back (a backup of one object's state). The file is the stored body,
byte for byte; its serial and lineage are the record's (` + "`lava state show`" + `).

` + stateFileAccess,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0], func(ctx context.Context, key state.Key, _ jetstream.JetStream, store *state.Store) error {
				rec, body, err := store.Body(ctx, key)
				if errors.Is(err, state.ErrNotFound) {
					return invalidInput(fmt.Errorf("no state for %s", key))
				}
				if err != nil {
					return err
				}
				if out == "" || out == "-" {
					_, err = cmd.OutOrStdout().Write(body)
					return err
				}
				if err := writePrivate(out, body); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote serial %d of lineage %s of %s to %s (%d bytes)\n", rec.Serial, rec.Lineage, key, out, len(body))
				return err
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the state to `FILE` (default: standard output)")
	return cmd
}

// writePrivate writes b to path through a temporary file in the same directory, mode 0600:
// a reader never sees a part of it, and an existing file's mode is not kept.
func writePrivate(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".lava-tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func newStatePushCmd() *cobra.Command {
	var f stateFlags
	var opts state.PushOptions
	cmd := &cobra.Command{
		Use:   "push NAMESPACE/NAME FILE",
		Short: "Make a Terraform state file (format version 4) the state of NAMESPACE/NAME; the next plan waits for approval",
		Long: `Push makes FILE ("-" for standard input), a Terraform state in format version 4 (what
` + "`tofu state pull`" + `, ` + "`terraform state pull`" + ` or ` + "`lava state pull`" + ` write), the current state of NAMESPACE/NAME:
to adopt infrastructure OpenTofu or Terraform manage, or to put back a state pulled as a backup
(docs/operations.md, "Backing up and restoring the state").

The file must continue the current state: the same lineage at a later serial. A file of another
lineage is another state (--force-lineage replaces it), and one of the same lineage at the same
or an earlier serial would roll the state back (--force replaces it). Any file is taken when
NAMESPACE/NAME has no state. Push refuses a locked state (an operation is running). A replaced
state is not lost: its record is kept under "replaced" (` + "`lava state show`" + `) and
` + "`lava state restore --digest`" + ` puts it back.

Lava did not write the pushed state, so the next plan against it is held for approval by its
id whatever spec.approvePlan says, even when it changes nothing (condition StateRegressed,
anomaly state_regressed); request a reconcile (the lava.pleme.io/reconcile-requested-at
annotation), review it with ` + "`lava plan show`" + ` and approve it with ` + "`lava approve`" + `.

` + stateFileAccess,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readStateFile(cmd, args[1])
			if err != nil {
				return err
			}
			if _, err := state.ParseHeader(body); err != nil {
				return invalidInput(fmt.Errorf("%s: %w (want the JSON OpenTofu writes with tofu state pull: version 4, a lineage and a serial)", args[1], err))
			}
			return f.run(cmd, args[0], func(ctx context.Context, key state.Key, _ jetstream.JetStream, store *state.Store) error {
				cur, err := store.Get(ctx, key)
				if err != nil && !errors.Is(err, state.ErrNotFound) {
					return err
				}
				rec, replaced, err := store.Push(ctx, key, body, opts)
				switch {
				case errors.Is(err, state.ErrLocked):
					return invalidInput(fmt.Errorf("%w: an operation is running on it; push after it ends (lava state show NS/NAME names the lock)", err))
				case errors.Is(err, state.ErrConflict):
					return invalidInput(fmt.Errorf("%w (--force-lineage replaces another lineage, --force an older serial)", err))
				case errors.Is(err, state.ErrInvalidState):
					return invalidInput(fmt.Errorf("%s: %w", args[1], err))
				case err != nil:
					return err
				}
				return reportReplaced(cmd.OutOrStdout(), key, cur.HasState() && cur.Digest == rec.Digest, rec, replaced,
					fmt.Sprintf("pushed serial %d of lineage %s to %s", rec.Serial, rec.Lineage, key),
					": its next plan against the pushed state waits for approval (lava plan show, lava approve)")
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&opts.Lineage, "force-lineage", false, "replace a state of another lineage")
	cmd.Flags().BoolVar(&opts.Serial, "force", false, "replace a state of the same lineage at the same or a later serial than the file's")
	return cmd
}

// readStateFile reads a state file to push (name "-": standard input), at most
// state.DefaultMaxStateBytes.
func readStateFile(cmd *cobra.Command, name string) ([]byte, error) {
	var r io.Reader = cmd.InOrStdin()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, invalidInput(err)
		}
		defer f.Close()
		r = f
	}
	body, err := io.ReadAll(io.LimitReader(r, state.DefaultMaxStateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(body) > state.DefaultMaxStateBytes {
		return nil, invalidInput(fmt.Errorf("%s exceeds %d bytes", name, state.DefaultMaxStateBytes))
	}
	return body, nil
}

// reportReplaced prints the outcome of a restore or a push of key to out: that key already
// held rec's state (same), or done (what was written, with rec's body digest), the record it
// replaced (kept, `lava state show` "replaced"), and the reconcile to request, next following
// its key.
func reportReplaced(out io.Writer, key state.Key, same bool, rec state.Record, replaced *state.Record, done, next string) error {
	if same {
		_, err := fmt.Fprintf(out, "%s already holds that state (serial %d of lineage %s)\n", key, rec.Serial, rec.Lineage)
		return err
	}
	if _, err := fmt.Fprintf(out, "%s (body %s)\n", done, rec.Digest); err != nil {
		return err
	}
	if replaced != nil {
		if _, err := fmt.Fprintf(out, "replaced serial %d of lineage %s (body %s), kept as %s's replaced record (lava state show)\n",
			replaced.Serial, replaced.Lineage, replaced.Digest, key); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(out, "request a reconcile of %s%s\n", key, next)
	return err
}

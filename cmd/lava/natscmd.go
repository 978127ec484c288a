package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/natsauth"
)

func newNATSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nats",
		Short: "Set up the NATS bus: identities, the server's authorization, the topology (docs/security.md)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newNATSCredentialsCmd(), newNATSAuthorizationCmd(), newNATSBootstrapCmd())
	return cmd
}

func newNATSCredentialsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "credentials DIR",
		Short: "Create an nkey seed per bus identity in DIR (<identity>.nk, mode 0600; existing ones are kept) and print the public keys",
		Long: `Create an nkey seed per bus identity in DIR (<identity>.nk, mode 0600; existing ones are
kept) and print "identity public-key" lines. The identities are the seven services,
"subscriber" (reads lava.anomaly.> and phase events only) and "bootstrap" (the admin identity
of "lava nats bootstrap" and of the receipts and state commands). Give each service its seed
(the chart: one Secret per service) and the server the public keys ("lava nats authorization").`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			keys, err := natsauth.GenerateDir(args[0])
			if err != nil {
				return err
			}
			for _, id := range bus.Identities() {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", id, keys[id])
			}
			return nil
		},
	}
}

func newNATSAuthorizationCmd() *cobra.Command {
	var (
		replicas    int
		chartValues bool
		chart       natsauth.ChartOptions
	)
	cmd := &cobra.Command{
		Use:   "authorization DIR",
		Short: "Print the nats-server authorization block for the identities in DIR",
		Long: `Print the nats-server configuration block "authorization { users: [...] }" for the
identities whose <identity>.nk files are in DIR (seeds, or public keys "U..." alone, so the
printer needs no secret): one nkey user per identity with publish and subscribe allow lists
generated from the bus topology (internal/platform/bus), and no anonymous user. Include it
in the server's configuration. With --nats-chart-values it prints a values file of the official
NATS Helm chart instead: the same users as config.merge.authorization, and JetStream encryption
at rest (config.jetstream.merge cipher, and key from the variable --js-key-env, which the NATS
container sets from the Secret --js-key-secret); docs/install.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			keys, err := natsauth.PublicKeysDir(args[0], bus.Identities()...)
			if err != nil {
				return invalidInput(err)
			}
			topo := bus.Declare(bus.TopologyOptions{Replicas: replicas})
			var conf string
			if chartValues {
				conf, err = natsauth.ChartValuesYAML(topo, keys, chart)
			} else {
				conf, err = natsauth.Config(topo, keys)
			}
			if err != nil {
				return invalidInput(err)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), conf)
			return err
		},
	}
	cmd.Flags().IntVar(&replicas, "replicas", 1, "JetStream replica count of the topology (does not change the permissions)")
	cmd.Flags().BoolVar(&chartValues, "nats-chart-values", false, "print values of the official NATS Helm chart (authorization and JetStream encryption at rest) instead of the configuration block")
	cmd.Flags().StringVar(&chart.Cipher, "cipher", natsauth.CipherChaCha, "JetStream encryption cipher with --nats-chart-values: chachapoly or aes")
	cmd.Flags().StringVar(&chart.KeyEnv, "js-key-env", natsauth.DefaultKeyEnv, "the NATS container's `VARIABLE` holding the encryption key, with --nats-chart-values")
	cmd.Flags().StringVar(&chart.KeySecret, "js-key-secret", "nats-js-key", "`SECRET` (in the NATS namespace) holding the encryption key, with --nats-chart-values")
	cmd.Flags().StringVar(&chart.KeySecretKey, "js-key-secret-key", "key", "key of the encryption key in --js-key-secret")
	return cmd
}

func newNATSBootstrapCmd() *cobra.Command {
	var (
		f             natsFlags
		replicas      int
		anomalyWindow time.Duration
		timeout       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Create or update every stream, consumer, KV bucket and object store (the admin identity)",
		Long: `Create or update every stream, durable consumer, KV bucket and object store of the bus
topology (internal/platform/bus), idempotently, with the bootstrap (admin) identity. The
services have no JetStream admin rights: they check the topology at start and fail naming
what is missing until this has run (the chart runs it as a Helm hook Job). While no server
answers it tries again every second within --timeout: a new pod's first connections may be
refused until the NetworkPolicy controller has seen its address, and the servers may still be
starting.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			f.wait, f.notUp = timeout, true
			f.onWait = func(err error) { fmt.Fprintf(cmd.ErrOrStderr(), "lava: waiting for a NATS server (%v)\n", err) }
			nc, js, err := f.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			opts := bus.TopologyOptions{Replicas: replicas, AnomalyWindow: anomalyWindow}
			if err := bus.EnsureTopology(ctx, js, opts); err != nil {
				return err
			}
			t := bus.Declare(opts)
			var names []string
			for _, s := range t.Streams {
				names = append(names, "stream "+s.Name)
			}
			for _, c := range t.Consumers {
				names = append(names, "consumer "+c.Config.Durable+" on "+c.Stream)
			}
			for _, kv := range t.KeyValues {
				names = append(names, "kv bucket "+kv.Bucket)
			}
			for _, o := range t.ObjectStores {
				names = append(names, "object store "+o.Bucket)
			}
			slices.Sort(names)
			for _, n := range names {
				fmt.Fprintln(cmd.OutOrStdout(), "ensured", n)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&replicas, "replicas", 1, "JetStream replica count of every stream and bucket (3 on a NATS cluster)")
	cmd.Flags().DurationVar(&anomalyWindow, "anomaly-window", bus.DefaultAnomalyWindow, "the anomaly service's de-duplication window (sets lava-anomaly-windows' TTL)")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long (waiting for a server included)")
	return cmd
}

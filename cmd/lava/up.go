package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/engine/embedded"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/up"
)

// newUpCmd is `lava up`: every Lava service in one process over an embedded NATS JetStream
// server, fed by manifest files (or a cluster with --kubeconfig).
func newUpCmd() *cobra.Command {
	var o up.Options
	cmd := &cobra.Command{
		Use:   "up [-f DIR|FILE]... [--kubeconfig PATH] [--state-dir DIR]",
		Short: "Run Lava locally: embedded NATS, every service, manifests from files",
		Long: `lava up runs the whole pipeline in one process: an embedded NATS JetStream server (its
store under --state-dir) and the synth, applier, drift, viggy, anomaly and attest services.

Without --kubeconfig, LavaArchitecture manifests come from the files and directories given
with -f (a directory's *.yaml, *.yml and *.json files, not its subdirectories; multi-document
YAML; at most 1 MiB per file), checked every --interval and read again when changed: a new
document is created, a changed spec becomes a new generation, a removed document is
destroyed. A resource belongs to the file that created it: a namespace/name defined in two
files is an error of both documents and changes nothing, and a document moved to another file
is destroyed and created again from there. Each resource is written with its status to
<state-dir>/status/<namespace>/<name>.yaml. With --kubeconfig the watcher runs against that
cluster instead and -f is not used.

Without --policy, a resource writes files only below its namespace's own directory,
--file-root/NAMESPACE (default /tmp/lava-demo/NAMESPACE); lava up creates --file-root with
mode 0700 and refuses to start when it is a symbolic link, owned by another user or open to
others.

With --kubeconfig, lava up is locked down as the chart is by default: an object's ConfigMaps
and Secrets are read, and its outputs Secret written, as its ServiceAccount, impersonated
(spec.serviceAccountName, else --default-service-account; ServiceAccountRequired without
either), and references to another namespace are refused unless --allow-cross-namespace-refs.
The kubeconfig's identity needs the verb impersonate on serviceaccounts in the watched
namespaces, checked at start; --impersonate=false acts with it for every object (a cluster
with a single tenant). docs/design/0026-lava-up-lockdown.md.

The state directory (default .lava) also holds the services' logs (lava.log), the NATS URL
(nats.url), the bindings key and the receipt signing key (signing.pub for
'lava receipts verify --public-key'). Running again with the same state directory resumes:
nothing is planned again for an unchanged generation. One lava up at a time uses a state
directory: it holds a lock on <state-dir>/lock, and a second one exits 1 naming the first's pid.

The embedded engine starts providers from --providers (default $LAVA_TOFU_DIR/providers,
else ~/.cache/lava/tools/tofu-v1.12.6/providers: 'make tools-providers'). The tofu engine is
offered with bin/tofu next to it, built or not: a resource of engine tofu fails with
EngineUnavailable while it is missing and is planned again when it appears. A resource whose
provider is missing fails with ProviderUnavailable until its spec changes or lava up starts
again with another mirror (the engines pin the mirror's providers at start). To force a new
pass for an unchanged spec, set the annotation lava.pleme.io/reconcile-requested-at in its
manifest to a new value.

While it runs (and only then: its NATS server stops with it), from another terminal,
'lava receipts verify NS/NAME --public-key .lava/signing.pub' checks a resource's receipt
chain, 'lava receipts show NS/NAME' and 'lava state show NS/NAME' read it (they take the NATS
URL from <state-dir>/nats.url; give --state-dir DIR for another state directory), and
'nats sub "lava.anomaly.>" -s $(cat .lava/nats.url)' shows its anomalies.

With --once, lava up exits when every resource settled (Applied, Failed, Drifted, awaiting
approval or suspended) and every deletion finished, and prints the final table. Exit codes:
0 when everything settled and every manifest file was readable (a Failed resource is a
reported outcome, not an error of lava up), 1 when a manifest file could not be read or
parsed, when --timeout ran out first or a service failed, 2 for a usage error.
Ctrl-C stops every service cleanly and exits 0.`,
		Example: `  lava up -f examples/
  lava up --once -f examples/local-files.yaml --state-dir /tmp/lava-state
  lava up --kubeconfig ~/.kube/config --namespaces dev --default-service-account lava
  lava up --kubeconfig ~/.kube/config --impersonate=false   # a single-tenant dev cluster`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(o.Paths) == 0 && o.Kubeconfig == "" {
				return errors.New("up: give -f DIR|FILE (manifests) or --kubeconfig PATH")
			}
			o.Stdout = cmd.OutOrStdout()
			o.Terminal = up.IsTerminal(o.Stdout)
			res, err := up.Run(cmd.Context(), o)
			if err != nil {
				return invalidInput(err)
			}
			if o.Once {
				fmt.Fprintln(cmd.OutOrStdout(), summary(res))
				if n := len(res.FileErrors); n > 0 {
					return invalidInput(fmt.Errorf("up: %s unreadable (listed above)", plural(n, "manifest file")))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.Paths, "filename", "f", nil, "manifest file or directory (repeatable)")
	kubeFlags(f, &o)
	f.StringVar(&o.StateDir, "state-dir", ".lava", "directory for the NATS store, resource status, keys and logs")
	engineFlags(f, &o)
	f.StringVar(&o.NATSAddr, "nats-addr", "127.0.0.1:0", "address of the embedded NATS server (port 0: a free one, written to <state-dir>/nats.url)")
	f.BoolVar(&o.Once, "once", false, "exit when every resource settled, printing the final table")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "with --once: give up (exit 1) after this long")
	f.DurationVar(&o.Interval, "interval", time.Second, "how often manifests are re-read")
	f.StringVar(&o.LogLevel, "log-level", "info", "services' log level in <state-dir>/lava.log: debug, info, warn or error")
	f.StringVar(&o.PolicyFile, "policy", "", "tenant policy document every render is checked against (default: the built-in policy, each namespace writing files only under --file-root/NAMESPACE)")
	runnerFlags(f, &o)
	f.StringVar(&o.FileRoot, "file-root", "", "without --policy: the directory, created with mode 0700, below which each namespace gets its own file root, DIR/NAMESPACE (default "+up.DemoDir+")")
	return cmd
}

// engineFlags adds lava up's flags for the engines to f: the provider mirror and installer, the
// CLI binaries, the step timeouts the applier declares (engine.Timeouts.RegisterFlags) and the
// embedded engine's provider process budget.
func engineFlags(f *pflag.FlagSet, o *up.Options) {
	f.StringVar(&o.ProviderDir, "providers", "", "provider mirror directory (default $LAVA_TOFU_DIR/providers or ~/.cache/lava/tools/tofu-v1.12.6/providers)")
	o.Install.RegisterFlags(f)
	o.Timeouts.RegisterFlags(f)
	f.StringVar(&o.TofuBin, "tofu-bin", "", "OpenTofu binary for engine tofu (default: bin/tofu next to the mirror, offered before it is built)")
	f.StringVar(&o.TerraformBin, "terraform-bin", "", "Terraform binary for engine terraform (default $LAVA_TERRAFORM_BIN)")
	f.IntVar(&o.MaxProviderProcesses, "max-provider-processes", embedded.DefaultMaxProcesses, "embedded engine: provider processes running at once, the applier's and drift's together, in use or kept warm: an operation waits for its share before its first provider starts, and one using more provider configurations than this fails")
}

// runnerFlags adds lava up's flags for provider runners to f (docs/design/0038-provider-runner.md).
func runnerFlags(f *pflag.FlagSet, o *up.Options) {
	f.BoolVar(&o.ProviderRunner, "provider-runner", false, "run the embedded engine's providers in runner processes (lava runner) under --runner-uid, with Landlock rules: no read of the state directory, writes only below the namespace's directory of the file root, no connection to NATS or the RPC ports (without Landlock: only namespace demo is applied); engines tofu and terraform are then not offered")
	f.IntVar(&o.RunnerUID, "runner-uid", up.DefaultRunnerUID, "with --provider-runner: the unprivileged user runners run as, which no other process may use (lava up refuses to start when one does)")
	f.IntVar(&o.RunnerGID, "runner-gid", up.DefaultRunnerUID, "with --provider-runner: the group runners run as")
}

// kubeFlags adds lava up's flags for --kubeconfig to f: the cluster, its namespaces and rate
// limit, and the services' own lockdown flags, declared once by their owners: synth's, the
// applier's and drift's --impersonate, --default-service-account and --allow-own-identity, the
// watcher's --allow-cross-namespace-refs.
func kubeFlags(f *pflag.FlagSet, o *up.Options) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "run against this cluster (the watcher) instead of files")
	f.StringSliceVar(&o.Namespaces, "namespaces", nil, "with --kubeconfig: namespaces to watch (default all)")
	f.Float32Var(&o.KubeAPI.QPS, "kube-api-qps", svc.DefaultKubeAPIQPS, "with --kubeconfig: Kubernetes API client requests per second (negative: no client-side limit)")
	f.IntVar(&o.KubeAPI.Burst, "kube-api-burst", svc.DefaultKubeAPIBurst, "with --kubeconfig: Kubernetes API client burst above --kube-api-qps")
	o.Identity.Register(f)
	o.Lockdown.Register(f)
}

// summary is the last line of a --once run: how many resources ended in each phase.
func summary(res up.Result) string {
	counts := map[string]int{}
	var order []string
	for _, o := range res.Objects {
		p := string(o.Status.Phase)
		if counts[p] == 0 {
			order = append(order, p)
		}
		counts[p]++
	}
	s := "lava up: " + plural(len(res.Objects), "resource") + " settled"
	for i, p := range order {
		if i == 0 {
			s += ":"
		} else {
			s += ","
		}
		s += fmt.Sprintf(" %d %s", counts[p], p)
	}
	if n := len(res.FileErrors); n > 0 {
		s += "; " + plural(n, "manifest file") + " unreadable"
	}
	return s
}

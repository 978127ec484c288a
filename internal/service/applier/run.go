package applier

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// OpenEngines builds the applier's engines on the state store (internal/engine/engines): a
// state lock older than lockTTL whose holder no longer holds the resource's lease in
// lava-leases ([HolderAlive]) can be taken over. Close the set when done.
func OpenEngines(ctx context.Context, js jetstream.JetStream, o engines.Options, lockTTL time.Duration, log *slog.Logger) (*engines.Set, error) {
	leases, err := js.KeyValue(ctx, bus.BucketLeases)
	if err != nil {
		return nil, fmt.Errorf("applier: bind %s: %w", bus.BucketLeases, err)
	}
	o.State = state.Options{LockTTL: lockTTL, HolderAlive: HolderAlive(leases), Logger: log}
	o.Process = bus.ServiceApplier
	return engines.Open(ctx, js, o, log)
}

// Options is the applier's process configuration: the common service options and the
// applier's own (flags and LAVA_* variables, svc.Command; `lava up` sets them directly).
type Options struct {
	svc.Common
	// Holder names this replica (default: the host name); a random suffix is added per
	// process.
	Holder string
	// Engines configures the engines (State and Process are set by [OpenEngines]).
	Engines engines.Options
	// LockTTL: a state lock older than this whose holder lost its lease can be taken over.
	LockTTL time.Duration
	// Concurrency bounds handlers per consumer.
	Concurrency int
	// CollectInterval and CollectMinAge configure the collection of superseded artifacts
	// (--artifact-collect-interval, --artifact-min-age; Config.CollectInterval, CollectMinAge).
	CollectInterval, CollectMinAge time.Duration
	// NoKube (--no-kube) runs without Kubernetes access; Complete then leaves Kube nil.
	NoKube bool
	// KubeAPI is the Kubernetes API client's rate limit (--kube-api-qps, --kube-api-burst),
	// set on Kube by Complete.
	KubeAPI svc.KubeAPI
	// Kube reaches the Kubernetes API for the outputs Secret (nil: sensitive outputs are not
	// stored).
	Kube *rest.Config
	// Identity chooses who the service acts as for an object's ConfigMaps and Secrets
	// (--impersonate, --default-service-account, --allow-own-identity).
	Identity identity.Options
	// Credentials are the provider credential flags (--provider-token-audience, ...).
	Credentials identity.CredentialOptions
}

// Flags defines the applier's own flags on fs.
func (o *Options) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Holder, "holder", "", "replica name in leases and state locks (default: the host name)")
	fs.StringVar(&o.Engines.ProviderDir, "provider-dir", "/var/lib/lava/providers", "provider mirror directory (OpenTofu filesystem-mirror layout)")
	o.Engines.Policy = &policy.File{}
	fs.StringVar(&o.Engines.Policy.Path, "policy-file", "", "tenant policy document whose fileWriteRoots and fileReadRoots the engines hold provider file paths to (docs/design/0022-file-access-from-schemas.md); empty: the built-in policy (no roots)")
	fs.StringVar(&o.Engines.TofuBin, "tofu-bin", "", "OpenTofu binary; empty disables engine tofu")
	fs.StringVar(&o.Engines.TerraformBin, "terraform-bin", "", "Terraform binary; empty disables engine terraform")
	o.Engines.Install.RegisterFlags(fs)
	fs.StringVar(&o.Engines.CLIConfigFile, "cli-config-file", "", "CLI configuration for tofu/terraform (default: providers only from --provider-dir)")
	fs.StringVar(&o.Engines.WorkDir, "work-dir", "", "directory for per-operation workspaces and the plugin cache (default: a temporary directory)")
	fs.DurationVar(&o.Engines.LockTimeout, "lock-timeout", 0, "how long tofu/terraform retry a held state lock")
	fs.DurationVar(&o.LockTTL, "lock-ttl", state.DefaultLockTTL, "age after which a state lock whose holder is not tied to a lease can be taken over (a lease-tied holder's lock is taken over as soon as its lease is gone)")
	fs.StringVar(&o.Engines.BackendAddr, "backend-addr", "127.0.0.1:0", "loopback address of the Terraform http state backend")
	fs.IntVar(&o.Concurrency, "concurrency", 4, "handlers running at once per consumer")
	fs.DurationVar(&o.CollectInterval, "artifact-collect-interval", DefaultCollectInterval, "how often superseded artifacts are deleted from lava-artifacts")
	fs.DurationVar(&o.CollectMinAge, "artifact-min-age", DefaultCollectMinAge, "artifacts put within this long are kept, referenced or not (events in flight name digests no record holds yet)")
	fs.BoolVar(&o.NoKube, "no-kube", false, "run without Kubernetes access (sensitive outputs are then not stored)")
	o.KubeAPI.Register(fs)
	o.Identity.Register(fs)
	o.Credentials.Register(fs)
}

// Complete loads the Kubernetes configuration unless --no-kube (kube.Optional).
func (o *Options) Complete() error {
	var err error
	o.Kube, err = kube.Optional(o.NoKube)
	o.KubeAPI.Apply(o.Kube)
	return err
}

// Run runs the applier until ctx is cancelled (svc.Start: NATS, topology, metrics and health;
// then the state store and loopback backend, the engines and the consumers). It returns nil
// after a graceful shutdown.
func Run(ctx context.Context, o Options) error {
	base, err := svc.Start(ctx, bus.ServiceApplier, o.Common, svc.Setup{})
	if err != nil {
		return err
	}
	defer base.Close()
	js, log := base.JS, base.Log
	set, err := OpenEngines(ctx, js, o.Engines, o.LockTTL, log)
	if err != nil {
		return err
	}
	defer set.Close()
	holder := o.Holder
	if holder == "" {
		holder, _ = os.Hostname()
	}
	holder += "/" + rand.Text()[:8]
	var kube client.Client
	if o.Kube != nil {
		if kube, err = client.New(o.Kube, client.Options{}); err != nil {
			return fmt.Errorf("kubernetes client: %w", err)
		}
	}
	ids, err := o.Identity.Clients(o.Kube)
	if err != nil {
		return err
	}
	creds, err := o.Credentials.New(o.Kube)
	if err != nil {
		return err
	}
	s, err := New(ctx, Config{JS: js, Store: set.Store, Engines: set.Engines, Holder: holder, Kube: kube, Logger: log,
		Registerer: base.Registry, BusMetrics: base.BusMetrics, Concurrency: o.Concurrency, Identities: ids, Credentials: creds,
		CollectInterval: o.CollectInterval, CollectMinAge: o.CollectMinAge})
	if err != nil {
		return err
	}
	backendURL := ""
	if set.Backend != nil {
		backendURL = set.Backend.URL
	}
	log.Info("applier started", "holder", holder, "engines", len(set.Engines), "state_backend", backendURL)
	return base.Serve(ctx, s.Run)
}

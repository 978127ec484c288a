package drift

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// Options is the drift process configuration: the common service options and drift's own
// (flags and LAVA_* variables, svc.Command; `lava up` sets them directly).
type Options struct {
	svc.Common
	// Holder names this replica (default: the host name); a random suffix is added.
	Holder string
	// Engines configures the engines (internal/engine/engines; scans never lock, so its State
	// stays zero).
	Engines engines.Options
	// CosmeticPrefixes overrides the cosmetic attribute prefixes (nil: "tags.", "labels.").
	CosmeticPrefixes []string
	// DefaultInterval, MinInterval, Jitter, Concurrency, ClaimTTL and ScanTimeout as in
	// [Config].
	DefaultInterval, MinInterval time.Duration
	Jitter                       float64
	Concurrency                  int
	ClaimTTL, ScanTimeout        time.Duration
	// NoLease scans without holding the resource's work lease.
	NoLease bool
	// NoKube (--no-kube) runs without Kubernetes access; Complete then leaves Kube nil (a
	// resource with spec.providerEnvFrom then fails its scans).
	NoKube bool
	// KubeAPI is the Kubernetes API client's rate limit (--kube-api-qps, --kube-api-burst),
	// set on Kube by Complete.
	KubeAPI svc.KubeAPI
	// Kube reaches the Kubernetes API for each resource's provider credentials.
	Kube *rest.Config
	// Identity and Credentials are the applier's flags of the same names (--impersonate,
	// --default-service-account, --allow-own-identity; --provider-token-audience, ...): a scan's
	// providers get the credentials the applier's get.
	Identity    identity.Options
	Credentials identity.CredentialOptions
}

// Flags defines drift's own flags on fs.
func (o *Options) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Holder, "holder", "", "replica name in schedule claims and leases (default: the host name)")
	fs.StringVar(&o.Engines.ProviderDir, "provider-dir", "/var/lib/lava/providers", "provider mirror directory (OpenTofu filesystem-mirror layout)")
	o.Engines.Policy = &policy.File{}
	fs.StringVar(&o.Engines.Policy.Path, "policy-file", "", "tenant policy document whose fileWriteRoots and fileReadRoots the engines hold provider file paths to (docs/design/0022-file-access-from-schemas.md); empty: the built-in policy (no roots)")
	fs.StringVar(&o.Engines.TofuBin, "tofu-bin", "", "OpenTofu binary; empty: resources applied with tofu are not scanned")
	fs.StringVar(&o.Engines.TerraformBin, "terraform-bin", "", "Terraform binary; empty: resources applied with terraform are not scanned")
	o.Engines.Install.RegisterFlags(fs)
	fs.StringVar(&o.Engines.CLIConfigFile, "cli-config-file", "", "CLI configuration for tofu/terraform (default: providers only from --provider-dir)")
	fs.StringVar(&o.Engines.WorkDir, "work-dir", "", "directory for per-scan workspaces (default: a temporary directory)")
	fs.StringSliceVar(&o.CosmeticPrefixes, "cosmetic-prefixes", nil, "attribute prefixes whose updates are cosmetic (default tags.,labels.)")
	fs.DurationVar(&o.DefaultInterval, "default-interval", DefaultInterval, "scan interval of a resource whose spec was not seen")
	fs.DurationVar(&o.MinInterval, "min-interval", DefaultMinInterval, "floor of every scan interval")
	fs.Float64Var(&o.Jitter, "jitter", DefaultJitter, "relative jitter of the next scan time, in [0, 1)")
	fs.IntVar(&o.Concurrency, "concurrency", DefaultConcurrency, "scans (and handlers per consumer) running at once")
	fs.DurationVar(&o.ClaimTTL, "claim-ttl", DefaultClaimTTL, "how long a replica's claim on a due resource lasts")
	fs.DurationVar(&o.ScanTimeout, "scan-timeout", DefaultScanTimeout, "bound of one scan")
	fs.BoolVar(&o.NoLease, "no-lease", false, "scan without holding the resource's work lease (scans may then overlap an apply)")
	fs.BoolVar(&o.NoKube, "no-kube", false, "run without Kubernetes access (resources with spec.providerEnvFrom are then not scanned)")
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

// Run runs the drift service until ctx is cancelled (svc.Start: NATS, topology, metrics and
// health; then the engines, the consumers and the scheduler). It returns nil after a graceful
// shutdown.
func Run(ctx context.Context, o Options) error {
	base, err := svc.Start(ctx, bus.ServiceDrift, o.Common, svc.Setup{})
	if err != nil {
		return err
	}
	defer base.Close()
	js, log := base.JS, base.Log
	o.Engines.Process = bus.ServiceDrift
	set, err := engines.Open(ctx, js, o.Engines, log)
	if err != nil {
		return err
	}
	defer set.Close()
	holder := o.Holder
	if holder == "" {
		holder, _ = os.Hostname()
	}
	holder += "/" + rand.Text()[:8]
	var leases *bus.Leases
	if !o.NoLease {
		if leases, err = bus.NewLeases(ctx, js, holder, base.BusMetrics); err != nil {
			return err
		}
	}
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
	s, err := New(ctx, Config{JS: js, Kube: kube, Identities: ids, Credentials: creds, Engines: set.Engines, Holder: holder, CosmeticPrefixes: o.CosmeticPrefixes,
		DefaultInterval: o.DefaultInterval, MinInterval: o.MinInterval, Jitter: o.Jitter, Concurrency: o.Concurrency,
		ClaimTTL: o.ClaimTTL, ScanTimeout: o.ScanTimeout, Leases: leases, Logger: log, Registerer: base.Registry, BusMetrics: base.BusMetrics})
	if err != nil {
		return err
	}
	log.Info("drift started", "holder", holder, "engines", len(set.Engines))
	return base.Serve(ctx, s.Run)
}

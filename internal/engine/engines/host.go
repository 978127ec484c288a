package engines

import (
	"crypto/rand"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine/embedded"
	"github.com/lava-operator/lava/internal/engine/tofu"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// Host is the configuration every service that runs the engines shares (the applier and
// drift): its replica name, its engines, its Kubernetes access, who it acts as for an object's
// ConfigMaps and Secrets and the credentials each object's providers get. Both services embed
// it in their options and register its one flag set ([Host.Register]), so the flags have one
// declaration, one set of names and defaults; `lava up` sets its fields directly. A service
// opens its engines from Engines and completes them with [Host.Deps].
type Host struct {
	// Holder names this replica (--holder; default: the host name); [Host.Deps] adds a random
	// suffix per process.
	Holder string
	// Engines configures the engines: --provider-dir, --policy-file, --tofu-bin,
	// --terraform-bin, --cli-config-file, --work-dir, --max-provider-processes and the
	// provider installer's flags (providers.Options.RegisterFlags). The service sets Process
	// (and the applier State and its step timeouts, engine.Timeouts.RegisterFlags) before it
	// opens them.
	Engines Options
	// NoKube (--no-kube) runs without Kubernetes access; [Host.Complete] then leaves Kube nil.
	NoKube bool
	// KubeAPI is the Kubernetes API client's rate limit (--kube-api-qps, --kube-api-burst),
	// set on Kube by [Host.Complete].
	KubeAPI svc.KubeAPI
	// Kube reaches the Kubernetes API: the applier's outputs Secret and deletion check, and
	// each object's spec.providerEnvFrom and ServiceAccount for both services (nil: none).
	Kube *rest.Config
	// Identity chooses who the service acts as for an object's ConfigMaps and Secrets
	// (--impersonate, --default-service-account, --allow-own-identity).
	Identity identity.Options
	// Credentials are the providers' ServiceAccount token and workload-identity flags
	// (--provider-token-audience, --provider-token-expiry, --gcp-workload-identity-provider,
	// --azure-tenant-id): a scan's providers get the credentials an apply's get.
	Credentials identity.CredentialOptions
}

// Register defines h's flags on fs, bound to its fields, with their defaults.
func (h *Host) Register(fs *pflag.FlagSet) {
	fs.StringVar(&h.Holder, "holder", "", "replica name in leases, state locks and schedule claims (default: the host name)")
	fs.StringVar(&h.Engines.ProviderDir, "provider-dir", "/var/lib/lava/providers", "provider mirror directory (OpenTofu filesystem-mirror layout)")
	h.Engines.Policy = &policy.File{}
	fs.StringVar(&h.Engines.Policy.Path, "policy-file", "", "tenant policy document whose fileWriteRoots and fileReadRoots the engines hold provider file paths to (docs/design/0022-file-access-from-schemas.md); empty: the built-in policy (no roots)")
	fs.StringVar(&h.Engines.TofuBin, "tofu-bin", "", "OpenTofu binary; empty disables engine tofu")
	fs.StringVar(&h.Engines.TerraformBin, "terraform-bin", "", "Terraform binary; empty disables engine terraform")
	h.Engines.Install.RegisterFlags(fs)
	fs.Int64Var(&h.Engines.CLIMaxMemoryBytes, "cli-max-memory-bytes", tofu.DefaultMaxMemoryBytes, "data (heap) limit of each tofu/terraform process and of each provider it starts, in bytes (RLIMIT_DATA; negative: none): OpenTofu evaluates tenants' expressions with no budget of its own")
	fs.Int64Var(&h.Engines.CLIMaxCPUSeconds, "cli-max-cpu-seconds", tofu.DefaultMaxCPUSeconds, "CPU time limit of each tofu/terraform process and of each provider it starts, in seconds (RLIMIT_CPU, killed at the limit; negative: none)")
	fs.IntVar(&h.Engines.MaxProviderProcesses, "max-provider-processes", embedded.DefaultMaxProcesses, "embedded engine: provider processes running at once across all operations, in use or kept warm (each takes tens to hundreds of MB): an operation waits for its share before its first provider starts, and one using more provider configurations than this fails")
	fs.StringVar(&h.Engines.CLIConfigFile, "cli-config-file", "", "CLI configuration for tofu/terraform (default: providers only from --provider-dir)")
	fs.StringVar(&h.Engines.WorkDir, "work-dir", "", "directory for per-operation workspaces and the plugin cache (default: a temporary directory)")
	fs.BoolVar(&h.NoKube, "no-kube", false, "run without Kubernetes access (resources with spec.providerEnvFrom then fail; the applier stores no sensitive outputs)")
	h.KubeAPI.Register(fs)
	h.Identity.Register(fs)
	h.Credentials.Register(fs)
}

// Complete loads the Kubernetes configuration unless NoKube (kube.Optional) and sets KubeAPI's
// rate limit on it.
func (h *Host) Complete() error {
	var err error
	h.Kube, err = kube.Optional(h.NoKube)
	h.KubeAPI.Apply(h.Kube)
	return err
}

// Deps is what a service that runs the engines works with: its engines and what [Host.Deps]
// built beside them.
type Deps struct {
	// Holder is Host.Holder (or the host name) with a random suffix: unique per process.
	Holder string
	// Set holds the engines and their state store.
	Set *Set
	// Kube is the service's own Kubernetes client (nil without Host.Kube).
	Kube client.Client
	// Identities impersonates each object's ServiceAccount (nil: impersonation off, or no
	// Kubernetes access).
	Identities *identity.Clients
	// Credentials requests each object's provider token (nil: no token audience, or no
	// Kubernetes access).
	Credentials *identity.Credentials
}

// Close stops the engines ([Set.Close]).
func (d *Deps) Close() { d.Set.Close() }

// Deps builds, beside set (the engines the service opened from h.Engines: [Open], the
// applier's with its lock configuration), the holder name, the Kubernetes client, the
// impersonating clients and the provider credentials. Close the Deps when done; after an
// error set is closed.
func (h *Host) Deps(set *Set) (*Deps, error) {
	d, err := h.deps(set)
	if err != nil {
		set.Close()
		return nil, err
	}
	return d, nil
}

// deps is [Host.Deps] without the close on error.
func (h *Host) deps(set *Set) (*Deps, error) {
	d := &Deps{Holder: h.Holder, Set: set}
	if d.Holder == "" {
		d.Holder, _ = os.Hostname()
	}
	d.Holder += "/" + rand.Text()[:8]
	var err error
	if h.Kube != nil {
		if d.Kube, err = client.New(h.Kube, client.Options{}); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	if d.Identities, err = h.Identity.Clients(h.Kube); err != nil {
		return nil, err
	}
	if d.Credentials, err = h.Credentials.New(h.Kube); err != nil {
		return nil, err
	}
	return d, nil
}

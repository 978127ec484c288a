package synth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/lang/bindingskey"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/pipeline/synthesis"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/rpcauth"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/telemetry"
)

// Options is the synth service's process configuration, one type: the common service options
// and synth's own (flags and LAVA_* variables, svc.Command; `lava up` sets them directly).
type Options struct {
	svc.Common
	// Config holds synth's settings bound by its flags (--concurrency); [Run] sets its
	// dependencies and what the other options name (JS, Kube, Identities, BindingsKey, Logger,
	// Registerer, BusMetrics, Artifacts, Policy).
	Config Config
	// BindingsKeyFile holds the installation's bindings key: 32 raw bytes or 64 hex digits.
	// Required.
	BindingsKeyFile string
	// ConnectAddr serves RenderService (":8080"); empty disables it. Callers authenticate with
	// a Kubernetes bearer token and need create on lavaarchitectures in the request's namespace
	// (internal/platform/rpcauth), or present RPCTokenFile's token.
	ConnectAddr string
	// RPCTokenFile, if set, is the one token RenderService accepts instead of Kubernetes
	// tokens (`lava up`).
	RPCTokenFile string
	// RPC bounds RenderService: request size, requests in flight in total and per client,
	// connections and timeouts (the --rpc-* flags, rpcauth.Limits; zero fields: the defaults).
	RPC rpcauth.Limits
	// Listener, if set, serves RenderService instead of listening on ConnectAddr (`lava up`,
	// tests).
	Listener net.Listener
	// NoKube (--no-kube) runs without Kubernetes access; Complete then leaves Kube nil.
	NoKube bool
	// KubeAPI is the Kubernetes API client's rate limit (--kube-api-qps, --kube-api-burst),
	// set on Kube by Complete.
	KubeAPI svc.KubeAPI
	// Kube reaches the Kubernetes API for bindingsFrom (nil: no Kubernetes access).
	Kube *rest.Config
	// Identity chooses who the service acts as for an object's ConfigMaps and Secrets
	// (--impersonate, --default-service-account, --allow-own-identity).
	Identity identity.Options
	// ArtifactCacheDir caches the verified artifacts of Flux sources (spec.sourceRef) by digest
	// (--artifact-cache-dir); "" is a new directory under the system's temporary directory,
	// removed at exit.
	ArtifactCacheDir string
	// MaxArtifactBytes bounds one downloaded artifact (--max-artifact-bytes, default
	// synthesis.DefaultMaxArtifactBytes).
	MaxArtifactBytes int64
	// ArtifactQuota bounds the bytes of renders one namespace stores (--artifact-quota-bytes,
	// --artifact-quota-window; bus.ArtifactQuota).
	ArtifactQuota bus.QuotaFlags
	// PolicyFile is the tenant policy document (--policy-file, LAVA_POLICY_FILE; the chart
	// mounts the lava-policy ConfigMap there); "" is the built-in policy.
	PolicyFile string
	// DefaultPolicy is the policy when PolicyFile is empty (zero: the built-in policy,
	// [policy.Default]); lava up passes its own (internal/up.DefaultPolicy).
	DefaultPolicy policy.Config
}

// Flags defines synth's own flags on fs.
func (o *Options) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.BindingsKeyFile, "bindings-key-file", "", "file with the installation's bindings key (32 bytes or 64 hex digits); required")
	fs.StringVar(&o.ConnectAddr, "connect-addr", ":8080", "RenderService (connect) listen address; empty disables it")
	fs.StringVar(&o.RPCTokenFile, "rpc-token-file", "", "the one bearer token RenderService accepts instead of Kubernetes tokens (optional)")
	svc.RegisterConcurrency(fs, &o.Config.Concurrency, 8)
	svc.RegisterMaxPerNamespace(fs, &o.Config.MaxPerNamespace)
	fs.StringVar(&o.PolicyFile, "policy-file", "", "tenant policy document (docs/design/0010-tenant-policy.md); empty: the built-in policy")
	fs.BoolVar(&o.NoKube, "no-kube", false, "run without Kubernetes access (bindingsFrom then fails)")
	fs.StringVar(&o.ArtifactCacheDir, "artifact-cache-dir", "", "directory caching verified Flux source artifacts by digest; empty: a temporary directory")
	fs.Int64Var(&o.MaxArtifactBytes, "max-artifact-bytes", synthesis.DefaultMaxArtifactBytes, "largest Flux source artifact (tar.gz) synth downloads, in bytes")
	o.ArtifactQuota.Register(fs)
	o.RPC.Register(fs)
	o.KubeAPI.Register(fs)
	o.Identity.Register(fs)
}

// Complete requires --bindings-key-file (a svc.UsageError) and loads the Kubernetes
// configuration unless --no-kube (kube.Optional).
func (o *Options) Complete() error {
	if o.BindingsKeyFile == "" {
		return svc.BadUsage(errors.New("--bindings-key-file (LAVA_BINDINGS_KEY_FILE) is required"))
	}
	var err error
	o.Kube, err = kube.Optional(o.NoKube)
	o.KubeAPI.Apply(o.Kube)
	return err
}

// ReadBindingsKey is [bindingskey.Read] (the watcher reads the same file).
func ReadBindingsKey(path string) ([]byte, error) { return bindingskey.Read(path) }

// Run runs the synth service until ctx is cancelled (svc.Start: NATS, topology, metrics and
// health; then RenderService and the consumers). It returns nil after a graceful shutdown.
func Run(ctx context.Context, o Options) error {
	key, err := ReadBindingsKey(o.BindingsKeyFile)
	if err != nil {
		return err
	}
	if _, err := (&policy.File{Path: o.PolicyFile, Default: o.DefaultPolicy}).Load(); err != nil {
		return err // a broken document fails the start, not only the first render
	}
	base, err := svc.Start(ctx, bus.ServiceSynth, o.Common, svc.Setup{})
	if err != nil {
		return err
	}
	defer base.Close()
	log := base.Log
	var kube client.Reader
	if o.Kube != nil {
		if kube, err = client.New(o.Kube, client.Options{}); err != nil {
			return fmt.Errorf("kubernetes client: %w", err)
		}
	}
	ids, err := o.Identity.Clients(o.Kube)
	if err != nil {
		return err
	}
	cacheDir := o.ArtifactCacheDir
	if cacheDir != "" {
		if err := os.MkdirAll(cacheDir, 0o700); err != nil {
			return fmt.Errorf("artifact cache: %w", err)
		}
	} else {
		if cacheDir, err = os.MkdirTemp("", "lava-synth-artifacts-"); err != nil {
			return fmt.Errorf("artifact cache: %w", err)
		}
		defer os.RemoveAll(cacheDir)
	}
	cfg := o.Config
	cfg.JS, cfg.Kube, cfg.Identities, cfg.BindingsKey = base.JS, kube, ids, key
	cfg.Logger, cfg.Registerer, cfg.BusMetrics = log, base.Registry, base.BusMetrics
	cfg.Policy = &policy.File{Path: o.PolicyFile, Default: o.DefaultPolicy}
	cfg.Artifacts = &synthesis.ArtifactCache{Dir: cacheDir, MaxBytes: o.MaxArtifactBytes}
	cfg.ArtifactQuota = o.ArtifactQuota.Quota()
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	runs := []func(context.Context) error{s.Run}
	if o.ConnectAddr != "" || o.Listener != nil {
		guard, err := rpcauth.New(o.Kube, o.RPCTokenFile, map[string]string{lavav1connect.RenderServiceRenderProcedure: "create"}, o.RPC)
		switch {
		case errors.Is(err, rpcauth.ErrNoAuthenticator):
			log.Warn("synth: RenderService is not served: no Kubernetes access and no --rpc-token-file to authenticate callers")
		case err != nil:
			return err
		default:
			ln := o.Listener
			if ln == nil {
				if ln, err = telemetry.Listen(o.ConnectAddr); err != nil {
					return err
				}
			}
			mux := http.NewServeMux()
			mux.Handle(NewRenderHandler(s.cfg.Policy, guard.HandlerOptions()...))
			runs = append(runs, func(ctx context.Context) error { return guard.Serve(ctx, ln, mux) })
		}
	}
	log.Info("synth started", "nats", o.NATS.URL, "connect", o.ConnectAddr, "kubernetes", o.Kube != nil)
	err = base.Serve(ctx, runs...)
	if ctx.Err() != nil && err == nil {
		log.Info("synth stopped")
	}
	return err
}

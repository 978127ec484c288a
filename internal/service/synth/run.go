package synth

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/telemetry"
)

// Options is the synth service's process configuration (flags and LAVA_* variables, parsed
// by services/synth).
type Options struct {
	// NATSURL and NATSCreds reach JetStream (LAVA_NATS_URL, LAVA_NATS_CREDS: an optional
	// credentials file).
	NATSURL, NATSCreds string
	// BindingsKeyFile holds the installation's bindings key: 32 raw bytes or 64 hex digits.
	BindingsKeyFile string
	// ConnectAddr serves RenderService (":8080"); MetricsAddr /metrics (":9090"); HealthAddr
	// /healthz and /readyz (":9091"). Empty disables one.
	ConnectAddr, MetricsAddr, HealthAddr string
	// LogFormat ("json" or "text") and LogLevel ("debug", "info", "warn", "error").
	LogFormat, LogLevel string
	// Replicas is the JetStream replica count of the topology this process ensures (1 or 3).
	Replicas int
	// Concurrency bounds handlers per consumer.
	Concurrency int
	// Kube reaches the Kubernetes API for bindingsFrom (nil: no Kubernetes access).
	Kube *rest.Config
	// Identity chooses who the service acts as for an object's ConfigMaps and Secrets
	// (--impersonate, --default-service-account, --allow-own-identity).
	Identity identity.Options
	// PolicyFile is the tenant policy document (LAVA_POLICY_FILE; the chart mounts the
	// lava-policy ConfigMap there); "" is the built-in policy.
	PolicyFile string
	// Stderr receives the logs.
	Stderr io.Writer
}

// ReadBindingsKey reads a bindings key file: 32 raw bytes, or 64 hex digits (surrounding
// blank space ignored).
func ReadBindingsKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bindings key: %w", err)
	}
	if len(b) == render.BindingsKeySize {
		return b, nil
	}
	if k, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(k) == render.BindingsKeySize {
		return k, nil
	}
	return nil, fmt.Errorf("bindings key %s: want %d raw bytes or %d hex digits", path, render.BindingsKeySize, 2*render.BindingsKeySize)
}

// RunService runs the synth service until ctx is cancelled: it connects to NATS, ensures the
// topology, serves RenderService, metrics and health, and consumes. It returns nil after a
// graceful shutdown.
func RunService(ctx context.Context, o Options) error {
	log, err := svc.NewLogger(o.Stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	key, err := ReadBindingsKey(o.BindingsKeyFile)
	if err != nil {
		return err
	}
	if _, err := (&policy.File{Path: o.PolicyFile}).Load(); err != nil {
		return err // a broken document fails the start, not only the first render
	}
	base, err := svc.Dial(ctx, o.NATSURL, o.NATSCreds, bus.ServiceSynth, bus.TopologyOptions{Replicas: o.Replicas})
	if err != nil {
		return err
	}
	defer base.Close()
	js := base.JS
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
	s, err := New(ctx, Config{JS: js, Kube: kube, BindingsKey: key, Logger: log, Registerer: base.Registry, BusMetrics: base.BusMetrics,
		Concurrency: o.Concurrency, Policy: &policy.File{Path: o.PolicyFile}, Identities: ids})
	if err != nil {
		return err
	}
	runs := []func(context.Context) error{s.Run}
	if o.ConnectAddr != "" {
		ln, err := telemetry.Listen(o.ConnectAddr)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle(NewRenderHandler())
		runs = append(runs, func(ctx context.Context) error { return telemetry.ServeListener(ctx, ln, mux) })
	}
	log.Info("synth started", "nats", o.NATSURL, "connect", o.ConnectAddr, "kubernetes", o.Kube != nil)
	err = base.Serve(ctx, o.MetricsAddr, o.HealthAddr, runs...)
	if ctx.Err() != nil && err == nil {
		log.Info("synth stopped")
	}
	return err
}

package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lava-operator/lava/internal/platform/httpserver"
)

// NewLogger returns a logger writing to w. format is "json" (the default in a cluster) or
// "text"; level is "debug", "info", "warn" or "error". An unknown format or level is an error.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("telemetry: log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "json", "":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("telemetry: log format %q: want json or text", format)
	}
}

// NewRegistry returns a Prometheus registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Health holds the readiness checks behind /readyz. /healthz answers 200 as long as the process
// serves HTTP. The zero Health is ready with no checks. Safe for concurrent use.
type Health struct {
	mu     sync.Mutex
	checks []namedCheck
}

type namedCheck struct {
	name  string
	check func(context.Context) error
}

// AddReadyCheck adds a check that must return nil for /readyz to answer 200.
func (h *Health) AddReadyCheck(name string, check func(context.Context) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks = append(h.checks, namedCheck{name: name, check: check})
}

// Ready runs every check with ctx and returns the joined failures, each prefixed by its name.
func (h *Health) Ready(ctx context.Context) error {
	h.mu.Lock()
	checks := append([]namedCheck(nil), h.checks...)
	h.mu.Unlock()
	var errs []error
	for _, c := range checks {
		if err := c.check(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// Handler serves /healthz and /readyz. A failing /readyz answers 503 with the failures as text.
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := h.Ready(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// MetricsHandler serves reg, and the gatherers also (controller-runtime's registry, for the
// watcher), in the Prometheus exposition format; the handler's own error counter is on reg.
func MetricsHandler(reg *prometheus.Registry, also ...prometheus.Gatherer) http.Handler {
	var g prometheus.Gatherer = reg
	if len(also) > 0 {
		g = append(prometheus.Gatherers{reg}, also...)
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: reg})
}

// Listen opens a TCP listener on addr (host:port; port 0 picks a free one).
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry: listen %s: %w", addr, err)
	}
	return ln, nil
}

// ServeListener serves h on ln until ctx is done, then shuts down gracefully within 10 seconds.
// The server has the default limits of every Lava listener (internal/platform/httpserver: at
// most 128 connections, 32 per client address, header, read, write and idle timeouts, 64 KiB
// of header). It returns nil after a clean shutdown.
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler) error {
	return httpserver.Serve(ctx, ln, h, httpserver.Limits{})
}

// Serve listens on metricsAddr (serving /metrics from reg and the gatherers also,
// [MetricsHandler]) and healthAddr (serving /healthz and /readyz from h) until ctx is done. An
// empty address disables that listener.
func Serve(ctx context.Context, metricsAddr, healthAddr string, reg *prometheus.Registry, h *Health, also ...prometheus.Gatherer) error {
	type srv struct {
		addr string
		h    http.Handler
	}
	var servers []srv
	if metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", MetricsHandler(reg, also...))
		servers = append(servers, srv{metricsAddr, mux})
	}
	if healthAddr != "" {
		servers = append(servers, srv{healthAddr, h.Handler()})
	}
	var lns []net.Listener
	for _, s := range servers {
		ln, err := Listen(s.addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return err
		}
		lns = append(lns, ln)
	}
	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func() { errc <- ServeListener(ctx, lns[i], s.h) }()
	}
	var errs []error
	for range servers {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

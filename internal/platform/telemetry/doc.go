// Package telemetry sets up what every Lava service exposes the same way: structured logs with
// log/slog, Prometheus metrics on a registry of its own (never the global one) served at
// /metrics, and the /healthz and /readyz probes.
//
// A service's main builds one [*slog.Logger] with [NewLogger], one [*prometheus.Registry] with
// [NewRegistry], and runs [Serve] for the metrics and health listeners (docs/architecture.md section 8:
// metrics on :9090, health on :9091); both listeners have the connection, time and header
// limits of every Lava listener (internal/platform/httpserver). Attribute keys shared by every
// service's logs are in package logattr.
package telemetry
